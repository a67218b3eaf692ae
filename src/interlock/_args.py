"""Checks of what callers pass to the public API, before anything is read or written.

A caller's mistake is a `TypeError` (wrong kind of value) or a `ValueError` (right kind, wrong
value; for an id, the `InvalidId` kind of it) naming the argument, never a database failure or
a poisoned record: an id that is not a string would be stored as text and read back as another
value (an ``actor=42`` hashed as an int and read back as ``'42'`` breaks the audit chain for
good), a lone surrogate cannot be encoded by any backend, and PostgreSQL cannot store a NUL
character in text.

A new thread's id and an actor's name are held to a stricter rule (`check_name`): they are
shown in notifications, mail headers and logs, where a line break or a control character
would end a header, forge a log line or hide text. Ids already stored may predate the rule, so
reading, deciding and continuing go by `check_id` and keep working on them.

The checks live here once, below both the runtime and the stores, so every entry point refuses
the same values with the same words.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, TypeVar

from ._errors import InvalidId
from ._lazy import lazy_module

if TYPE_CHECKING:
    import unicodedata
else:  # imported by the first call that needs it, not by `import interlock`
    unicodedata = lazy_module("unicodedata", globals())

__all__ = [
    "DURABILITIES",
    "MAX_ID",
    "MAX_LIMIT",
    "MAX_TEXT",
    "check_callable",
    "check_choice",
    "check_flag",
    "check_id",
    "check_ids",
    "check_instance",
    "check_keys",
    "check_limit",
    "check_name",
    "check_names",
    "check_options",
    "check_seconds",
    "check_seen",
    "check_text",
    "check_time",
]

MAX_ID: Final = 512
"""The longest id (thread, checkpoint, interrupt id or key, actor, nonce, tool), in characters.

At 4 bytes a character this stays under PostgreSQL's limit for an indexed value (~2,700 bytes).
"""
MAX_TEXT: Final = 65_536
"""The longest free text (a decision's ``reason``), in characters."""
MAX_LIMIT: Final = 1_000_000
"""The largest page a listing returns at once; page on with its cursor for more."""
DURABILITIES: Final = ("sync", "exit")
"""What ``durability=`` accepts: the values of `interlock.graph.Durability` (a test holds them
equal; this layer sits below the graph and cannot import it)."""

UNSAFE_FORMAT: Final = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
"""The bidirectional marks, embeddings, overrides and isolates: in a name they reorder what a
person reads (``invoice\u202egpj.exe``)."""

T = TypeVar("T")


def _kind(value: object) -> str:
    return type(value).__name__


def _string(value: object, name: str, *, max_len: int, ids: bool) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {_kind(value)}")

    def refuse(reason: str) -> ValueError:
        return InvalidId(name, reason) if ids else ValueError(f"{name} {reason}")

    if ids and not value:
        raise refuse("must not be empty")
    if len(value) > max_len:
        raise refuse(f"is {len(value)} characters long; at most {max_len} are allowed")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise refuse(
            f"holds a lone surrogate ({value[exc.start]!r} at position {exc.start}), "
            "which no store can encode; pass valid Unicode text (decode bytes with "
            "errors='replace' if they come from outside)",
        ) from None
    if ids and "\x00" in value:
        raise refuse(
            f"holds a NUL character at position {value.index(chr(0))}, which "
            "PostgreSQL cannot store in text; remove it",
        )
    return value


def check_id(value: object, name: str, *, optional: bool = False) -> None:
    """Refuse anything but a non-empty id of at most `MAX_ID` characters.

    Args:
        value: What the caller passed.
        name: The argument, for the message.
        optional: None is allowed (the argument's default).

    Raises:
        TypeError: Not a str (nor None when ``optional``).
        InvalidId: Empty, too long, or holds a lone surrogate or a NUL character.
    """
    if optional and value is None:
        return
    _string(value, name, max_len=MAX_ID, ids=True)


def check_name(value: object, name: str, *, optional: bool = False) -> None:
    """Refuse what `check_id` refuses, and a character that has no place in a one-line name.

    For a new thread's id and an actor's name, which notifications, mail headers, logs and
    terminals show: control characters (C0 such as NUL, TAB, CR and LF; DEL; C1 such as NEL),
    the line and paragraph separators, and the bidirectional controls (`UNSAFE_FORMAT`).

    Raises:
        TypeError: Not a str (nor None when ``optional``).
        InvalidId: What `check_id` refuses, or such a character.
    """
    if optional and value is None:
        return
    text = _string(value, name, max_len=MAX_ID, ids=True)
    for at, char in enumerate(text):
        if char in UNSAFE_FORMAT or unicodedata.category(char) in ("Cc", "Zl", "Zp"):
            what = unicodedata.name(char, "a control character")
            raise InvalidId(
                name,
                f"holds the character U+{ord(char):04X} ({what}) "
                f"at position {at}: ids and names are shown in notifications, mail headers "
                "and logs, where it would break the line or hide text; use printable "
                "characters only",
            )


def check_text(value: object, name: str) -> None:
    """Refuse free text (or None) that is not a str, too long, or not valid Unicode.

    Raises:
        TypeError: Neither a str nor None.
        ValueError: Longer than `MAX_TEXT` characters, or holds a lone surrogate.
    """
    if value is not None:
        _string(value, name, max_len=MAX_TEXT, ids=False)


def check_ids(value: object, name: str, *, optional: bool = False) -> None:
    """Refuse anything but a mapping whose keys are ids; the values are not looked at.

    Used for ``{interrupt_id_or_key: answer}``.

    Args:
        value: What the caller passed.
        name: The argument, for the message.
        optional: None is allowed.

    Raises:
        TypeError: Not a mapping, or a key is not a str.
        ValueError: A key is empty, too long or not valid Unicode.
    """
    if optional and value is None:
        return
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a mapping such as a dict, not {_kind(value)}")
    for key in value:
        check_id(key, f"{name} key {_shown(key)}")


def check_seen(value: object) -> None:
    """Refuse a ``seen`` that is not ``{interrupt_id: payload_hash}`` (or None).

    Raises:
        TypeError: Not a mapping, or a key or value is not a str.
        ValueError: A key or value is empty, too long or not valid Unicode.
    """
    check_ids(value, "seen", optional=True)
    if isinstance(value, Mapping):
        for key, shown in value.items():
            check_id(shown, f"seen[{_shown(key)}]")


def check_keys(value: object, name: str) -> None:
    """Check the keys of resume targets when they are a mapping; any other value is an answer.

    Raises:
        TypeError: A key is not a str.
        ValueError: A key is empty, too long or not valid Unicode.
    """
    if isinstance(value, Mapping):
        check_ids(value, name)


def check_options(
    *,
    interrupt_before: object,
    interrupt_after: object,
    on_interrupt: object,
    durability: object,
    metadata: object,
    emit: object,
) -> None:
    """Check the options `App.run` and `App.resume` share.

    Raises:
        TypeError: A breakpoint list is not a list of names, a callback is not callable, or
            ``metadata`` is not a mapping with str keys.
        ValueError: ``durability`` is not ``"sync"``, ``"exit"`` or None; a name is empty.
    """
    check_names(interrupt_before, "interrupt_before")
    check_names(interrupt_after, "interrupt_after")
    check_callable(on_interrupt, "on_interrupt")
    check_choice(durability, "durability", DURABILITIES, optional=True)
    check_ids(metadata, "metadata", optional=True)
    check_callable(emit, "emit")


def check_names(value: object, name: str, *, optional: bool = False) -> None:
    """Refuse anything but a list or tuple of non-empty names (node names, stream modes).

    A bare string is refused: iterated, it would be read as one name per character.

    Raises:
        TypeError: Not a list or tuple (or None when ``optional``), or an item is not a str.
        ValueError: An item is empty, too long or not valid Unicode.
    """
    if optional and value is None:
        return
    if isinstance(value, str) or not isinstance(value, list | tuple | frozenset | set):
        hint = f"; write [{value!r}]" if isinstance(value, str) else ""
        raise TypeError(f"{name} must be a list of names, not {_kind(value)}{hint}")
    for item in value:
        check_id(item, f"{name} item")


def check_limit(value: object, name: str, *, least: int = 0) -> None:
    """Refuse a page size that is not an int from ``least`` to `MAX_LIMIT`.

    Raises:
        TypeError: Not an int (a bool is refused too).
        ValueError: Out of range.
    """
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not {_kind(value)}")
    if not least <= value <= MAX_LIMIT:
        raise ValueError(
            f"{name} must be from {least} to {MAX_LIMIT}, not {value}; "
            "page on with the listing's cursor for more"
        )


def check_time(value: object, name: str) -> float | None:
    """Return a Unix time (or None) as a float; refuse anything that is not a real number.

    Infinities are allowed (no bound); NaN is not, since nothing compares with it.

    Raises:
        TypeError: Not an int or float (a bool is refused too).
        ValueError: NaN, or an int too large for a float.
    """
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise TypeError(f"{name} must be a Unix time in seconds (a float), not {_kind(value)}")
    try:
        moment = float(value)
    except OverflowError:
        raise ValueError(
            f"{name} is too large for a Unix time (an int of {int(value).bit_length()} bits)"
        ) from None
    if math.isnan(moment):
        raise ValueError(f"{name} must be a Unix time in seconds, not NaN")
    return moment


def check_seconds(value: object, name: str) -> None:
    """Refuse a duration (or None) that is not a positive number of seconds.

    Raises:
        TypeError: Not an int or float (a bool is refused too).
        ValueError: Zero, negative or NaN.
    """
    if value is None:
        return
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise TypeError(f"{name} must be a number of seconds (or None), not {_kind(value)}")
    if not value > 0:
        raise ValueError(f"{name} must be more than 0 seconds, not {value!r}")


def check_flag(value: object, name: str) -> None:
    """Refuse anything but True or False.

    Raises:
        TypeError: Not a bool.
    """
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, not {_kind(value)}")


def check_choice(value: object, name: str, choices: tuple[str, ...], *, optional: bool) -> None:
    """Refuse a value that is not one of ``choices`` (or None when ``optional``).

    Raises:
        ValueError: Not one of them.
    """
    if optional and value is None:
        return
    if not isinstance(value, str) or value not in choices:
        raise ValueError(
            f"{name} must be one of {', '.join(map(repr, choices))}, not {_shown(value)}"
        )


def check_callable(value: object, name: str) -> None:
    """Refuse anything but a callable or None.

    Raises:
        TypeError: Neither callable nor None.
    """
    if value is not None and not callable(value):
        raise TypeError(f"{name} must be a function (or None), not {_kind(value)}")


def check_instance(value: object, cls: type[T], name: str, *, optional: bool = False) -> None:
    """Refuse anything but an instance of ``cls`` (or None when ``optional``).

    Raises:
        TypeError: Of another type.
    """
    if optional and value is None:
        return
    if not isinstance(value, cls):
        raise TypeError(f"{name} must be {cls.__name__}, not {_kind(value)}")


def _shown(value: object) -> str:
    """A short, printable form of a caller's value for a message."""
    if isinstance(value, str):
        text = value.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
        return repr(text[:40] + ("..." if len(text) > 40 else ""))
    return _kind(value)
