"""Principal names: one person, one name, however it is typed.

A principal's name is compared in its normal form: Unicode NFKC, then case-folded. ``Ana``,
``ana`` and ``ａｎａ`` (full-width letters) are one principal; a name is unique under that form
wherever names are kept. A name with surrounding white space, control or format characters, or
nothing left after normalising is refused, not repaired: ``"ana "`` is a typing mistake or an
attempt to pass for someone else, and either way the caller must say what was meant.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ._errors import InvalidId
from ._lazy import lazy_module

if TYPE_CHECKING:
    import unicodedata
else:  # imported by the first call that needs it, not by `import interlock`
    unicodedata = lazy_module("unicodedata", globals())

__all__ = ["MAX_PRINCIPAL", "is_principal", "principal_key"]

MAX_PRINCIPAL: Final = 200
"""The longest principal name, in characters (before normalising)."""


def principal_key(name: object, what: str = "principal") -> str:
    """The normal form of a principal's name (NFKC, case-folded), for comparing and keeping.

    Raises:
        InvalidId: ``name`` is not a str, is empty, too long, has white space around it, or
            holds a control, format or line-separator character.
    """
    if not isinstance(name, str):
        raise InvalidId(what, f"must be a str, not {type(name).__name__}")
    if not name or len(name) > MAX_PRINCIPAL:
        raise InvalidId(what, f"must be 1 to {MAX_PRINCIPAL} characters, not {len(name)}")
    if name != name.strip():
        raise InvalidId(what, f"{name!r} has white space around it: give the name without it")
    for ch in name:
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"):
            raise InvalidId(
                what, f"{name!r} holds the character U+{ord(ch):04X}, which a name may not hold"
            )
    key = unicodedata.normalize("NFKC", name).casefold()
    if not key.strip() or key != key.strip():
        raise InvalidId(what, f"{name!r} is white space once normalised: give a real name")
    return key


def is_principal(name: object, key: str) -> bool:
    """Whether ``name`` (a stored name, perhaps one no principal can have) is the principal
    whose normal form is ``key``."""
    try:
        return principal_key(name) == key
    except InvalidId:
        return False
