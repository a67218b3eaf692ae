"""Principals and their tokens, as a store keeps them: the records, and the checks every
backend makes of what it is asked to write.

A principal is a person or service the approval server knows: a name (unique in its normal
form, `interlock._principals.principal_key`), a role, groups, and whether it is disabled. A
token speaks for one principal; the store keeps its hash only (``sha256:<64 hex digits>``),
never the token. A token may narrow what its principal may do (a lower role, some tools, some
thread prefixes), never widen it: the server works that out (`interlock.server.StoreAuth`).

A principal may have contact addresses, by which a channel reaches the person and knows who
answers: an e-mail address (for one-tap e-mail links; compared case-insensitively) and a Slack
user id (to map who clicked in Slack to a principal). Each names one principal at most.

Every write of a principal or a token takes the next number of one counter of the store, its
identity revision, and gives it to the row it writes (``rev``), under the same lock: revisions
go up in commit order, so a follower that asks for the rows changed after the last revision it
saw (`Store.identity_changes`) never misses one. Recording that a token was used does not count
as a change.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Final, Literal, get_args

import msgspec

from .._args import check_limit, check_name
from .._errors import StoreError
from .._principals import MAX_PRINCIPAL, principal_key

__all__ = [
    "CONTACTS",
    "MAX_EMAIL",
    "MAX_SCOPES",
    "ROLES",
    "SLACK_USER",
    "TOKEN_HASH",
    "Contact",
    "IdentityChange",
    "PrincipalRecord",
    "Role",
    "TokenRecord",
    "check_contact_changes",
    "check_display_name",
    "check_email",
    "check_groups",
    "check_identity_page",
    "check_new_principal",
    "check_principal",
    "check_principal_update",
    "check_revoke_args",
    "check_role",
    "check_slack_user",
    "check_token_args",
    "check_used",
    "contact_query",
    "email_key",
    "revision_ahead",
    "token_taken",
]

Role = Literal["viewer", "approver", "admin"]
"""What a principal may do; each role may do everything the ones before it may: ``viewer``
reads, ``approver`` also decides and starts runs, ``admin`` also pauses threads, manages
principals and tokens, and reads the delivery log."""

ROLES: Final[tuple[Role, ...]] = get_args(Role)
"""Every role, from the least to the most allowed: ``("viewer", "approver", "admin")``."""

TOKEN_HASH: Final = re.compile(r"sha256:[0-9a-f]{64}")
"""The form a token is kept in: ``sha256:`` and the 64 lower-case hex digits of its SHA-256.
A store refuses anything else, so a token itself can never be written where its hash goes."""

MAX_SCOPES: Final = 100
"""The most tool patterns, or thread prefixes, or groups, one record may name."""

MAX_EMAIL: Final = 254
"""The longest e-mail address, in characters (what SMTP's paths allow)."""

SLACK_USER: Final = re.compile(r"[UW][A-Z0-9]{2,20}")
"""The form of a Slack user id: ``U`` (or ``W``, in an Enterprise Grid) and upper-case letters
and digits, such as ``U024BE7LH``."""

Contact = Literal["email", "slack_user"]
"""A kind of contact address of a principal: its e-mail address or its Slack user id."""

CONTACTS: Final[tuple[Contact, ...]] = get_args(Contact)
"""Every kind of contact address: ``("email", "slack_user")``."""

# What may not be in an address: white space, and what would end it or quote it in a header.
_EMAIL: Final = re.compile(r'[^@\s<>(),;:"\[\]\\]{1,64}@[^@\s<>(),;:"\[\]\\]+')


class PrincipalRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A person or service the server knows, as the store keeps it."""

    name: str
    """Its name as given (recorded as the actor of its decisions); unique in normal form."""
    display_name: str = ""
    """How people see it (empty: its name)."""
    role: Role
    """What it may do (see `Role`)."""
    groups: tuple[str, ...] = ()
    """The groups it belongs to (a question's `interlock.Authority` may name them)."""
    disabled: bool = False
    """A disabled principal's tokens are refused until it is enabled again."""
    email: str | None = None
    """Its e-mail address, as given (stripped), for e-mail links; unique among principals,
    compared case-insensitively (None: none)."""
    slack_user: str | None = None
    """Its Slack user id (such as ``U024BE7LH``), which maps who acts in Slack to it; unique
    among principals (None: none)."""
    created_at: float
    """Unix time it was added."""
    rev: int
    """The identity revision of its last change (see `Store.identity_changes`)."""

    @property
    def key(self) -> str:
        """Its name in normal form (NFKC, case-folded): what names are compared by."""
        return principal_key(self.name)


class TokenRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A token of a principal, as the store keeps it: its hash, never the token."""

    id: str
    """Names the token in listings and revocations; shown when it is made."""
    hash: str
    """``sha256:<64 hex digits>`` of the token (see `TOKEN_HASH`)."""
    principal: str
    """The name of the principal it speaks for."""
    role: Role | None = None
    """The most it may do: its principal's role or a lower one (None: its principal's role)."""
    tools: tuple[str, ...] = ("*",)
    """Patterns of the tools whose questions it may see and decide (``*``: every one)."""
    threads: tuple[str, ...] = ("",)
    """Prefixes of the thread ids it may see and act on (``""``: every thread)."""
    created_at: float
    """Unix time it was made."""
    expires_at: float | None = None
    """Unix time from which it is refused (None: never)."""
    revoked_at: float | None = None
    """Unix time it was revoked (None: it was not)."""
    last_used_at: float | None = None
    """About when it was last used (written at most once a minute by each server)."""
    rev: int
    """The identity revision of its last change (see `Store.identity_changes`)."""

    def live(self, now: float) -> bool:
        """Whether it is neither revoked nor expired at the Unix time ``now``."""
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)


IdentityChange = PrincipalRecord | TokenRecord
"""A row `Store.identity_changes` lists: a principal or a token, as it is now."""


def check_principal(name: object) -> str:
    """Refuse a principal's name that is not one; return its normal form (its key).

    Raises:
        TypeError: ``name`` is not a str.
        InvalidId: ``name`` is empty, too long, has white space around it or holds a
            character a name may not hold (see `interlock._principals.principal_key`).
    """
    return principal_key(name)


def check_role(role: object, name: str = "role", *, optional: bool = False) -> None:
    """Refuse a role that is not a `Role` (None too, unless ``optional``).

    Raises:
        ValueError: Not one of `ROLES`.
    """
    if optional and role is None:
        return
    if not isinstance(role, str) or role not in ROLES:
        raise ValueError(f"{name} must be one of {', '.join(ROLES)}, not {role!r:.80}")


def check_display_name(value: object) -> None:
    """Refuse a display name that is not one line of printable text (empty is allowed).

    Raises:
        TypeError: Not a str.
        InvalidId: Too long, or holds a control, line-separator or bidirectional character.
    """
    if not isinstance(value, str):
        raise TypeError(f"display_name must be a str, not {type(value).__name__}")
    if value:
        check_name(value, "display_name")
        if len(value) > MAX_PRINCIPAL:
            raise ValueError(
                f"display_name must be at most {MAX_PRINCIPAL} characters, not {len(value)}"
            )


def check_groups(groups: object) -> tuple[str, ...]:
    """Refuse groups that are not distinct group names; return them as a tuple.

    Raises:
        TypeError: Not a list or tuple of str.
        InvalidId: A name is not one (as for a principal's).
        ValueError: Too many, or one group named twice (in normal form).
    """
    names = _strings(groups, "groups")
    seen: dict[str, str] = {}
    for group in names:
        key = principal_key(group, "group")
        if key in seen:
            raise ValueError(
                f"groups name {seen[key]!r} and {group!r}, which are one group (names are "
                "compared in normal form); name it once"
            )
        seen[key] = group
    return names


def check_email(value: object) -> str:
    """Refuse what is not one e-mail address (``""`` is none); return it stripped.

    Raises:
        TypeError: Not a str.
        ValueError: Not of the form ``local@domain``, too long, or holding white space, a
            control character or what would end or quote an address in a mail header.
    """
    if not isinstance(value, str):
        raise TypeError(f"email must be a str (an e-mail address), not {type(value).__name__}")
    email = value.strip()
    if not email:
        return ""
    domain = email.rpartition("@")[2]
    if (
        len(email) > MAX_EMAIL
        or _EMAIL.fullmatch(email) is None
        or domain.startswith(".")
        or domain.endswith(".")
        or ".." in domain
    ):
        raise ValueError(
            f"email must be one e-mail address such as ana@example.com (at most {MAX_EMAIL} "
            f"characters, no spaces, commas or angle brackets), not {value!r:.80}"
        )
    check_name(email, "email")  # no control or bidirectional characters
    return email


def check_slack_user(value: object) -> str:
    """Refuse what is not a Slack user id (``""`` is none); return it.

    Raises:
        TypeError: Not a str.
        ValueError: Not of the form `SLACK_USER`.
    """
    if not isinstance(value, str):
        raise TypeError(f"slack_user must be a str (a Slack user id), not {type(value).__name__}")
    if value and SLACK_USER.fullmatch(value) is None:
        raise ValueError(
            "slack_user must be a Slack user id: U or W and 2 to 20 upper-case letters or "
            f"digits, such as U024BE7LH (Slack shows it in a member's profile), not {value!r:.80}"
        )
    return value


def email_key(email: str) -> str:
    """An e-mail address in the form addresses are compared by (lower-case)."""
    return email.lower()


def check_contact_changes(email: object, slack_user: object) -> tuple[str | None, str | None]:
    """Refuse contact addresses no backend may write; return them checked.

    None stays None (unchanged); ``""`` stays ``""`` (cleared, or none for a new principal).

    Raises:
        TypeError, ValueError: As `check_email` and `check_slack_user` do.
    """
    return (
        None if email is None else check_email(email),
        None if slack_user is None else check_slack_user(slack_user),
    )


def contact_query(email: object, slack_user: object) -> tuple[Contact, str]:
    """Refuse a lookup that does not give exactly one contact address; return which, and the
    value to look up (an e-mail address in the form of `email_key`).

    Raises:
        TypeError, ValueError: Both or neither are given, or the one given is not one.
    """
    if (email is None) == (slack_user is None):
        raise ValueError("give exactly one of email and slack_user to look a principal up by")
    if email is not None:
        found = check_email(email)
        if not found:
            raise ValueError("email is empty: give the e-mail address to look a principal up by")
        return "email", email_key(found)
    user = check_slack_user(slack_user)
    if not user:
        raise ValueError("slack_user is empty: give the Slack user id to look a principal up by")
    return "slack_user", user


def check_new_principal(
    name: object,
    role: object,
    display_name: object,
    groups: object,
    email: object = None,
    slack_user: object = None,
) -> tuple[str, tuple[str, ...], str | None, str | None]:
    """Refuse a principal no backend may add; return its key, its groups as a tuple, and its
    contact addresses (None: none).

    Raises:
        TypeError, ValueError: As `check_principal`, `check_role`, `check_display_name`,
            `check_groups`, `check_email` and `check_slack_user` do.
    """
    key = check_principal(name)
    check_role(role)
    check_display_name(display_name)
    named = check_groups(groups)
    mail, user = check_contact_changes(email, slack_user)
    return key, named, mail or None, user or None


def check_principal_update(
    name: object,
    role: object,
    display_name: object,
    groups: object,
    disabled: object,
    email: object = None,
    slack_user: object = None,
) -> tuple[str, tuple[str, ...] | None, str | None, str | None]:
    """Refuse a change no backend may make; return the key, the groups and the contact
    addresses (None: unchanged; ``""``: cleared).

    Raises:
        TypeError, ValueError: As `check_new_principal` does, for what is given; ``disabled``
            is not a bool or None.
    """
    key = check_principal(name)
    check_role(role, optional=True)
    if display_name is not None:
        check_display_name(display_name)
    if disabled is not None and not isinstance(disabled, bool):
        raise TypeError(f"disabled must be True, False or None, not {disabled!r:.80}")
    named = None if groups is None else check_groups(groups)
    return (key, named, *check_contact_changes(email, slack_user))


def check_token_args(
    id: object,
    hash: object,
    role: object,
    tools: object,
    threads: object,
    expires_at: object,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Refuse a token that no backend may write; return its tools and threads as tuples.

    Raises:
        TypeError: An argument is not of its type.
        ValueError: The id is not one, the hash is not ``sha256:<64 hex digits>``, the role
            not a `Role`, a scope empty or holding a character it may not, or the expiry NaN
            or infinite.
    """
    check_name(id, "id")
    if not isinstance(hash, str) or TOKEN_HASH.fullmatch(hash) is None:
        raise ValueError(
            "hash must be sha256:<64 lower-case hex digits>, the hash of the token "
            "(interlock.server.hash_token); a store never keeps a token itself"
        )
    check_role(role, optional=True)
    scopes = _scope(tools, "tools"), _scope(threads, "threads")
    if expires_at is not None:
        if not isinstance(expires_at, int | float) or isinstance(expires_at, bool):
            raise TypeError(f"expires_at must be a Unix time or None, not {expires_at!r:.80}")
        if not math.isfinite(expires_at):
            raise ValueError(f"expires_at must be a finite Unix time, not {expires_at!r}")
    return scopes


def check_revoke_args(id: object, principal: object) -> None:
    """Refuse a revocation that does not name exactly one token or one principal.

    Raises:
        TypeError: ``id`` or ``principal`` is neither a str nor None.
        ValueError: Both or neither are given.
    """
    if (id is None) == (principal is None):
        raise ValueError("give the id of one token, or a principal to revoke all of its tokens")
    if id is not None:
        check_name(id, "id")
    else:
        check_principal(principal)


def check_used(used: object) -> dict[str, float]:
    """Refuse what `Store.touch_tokens` cannot record; return it as a dict.

    Raises:
        TypeError: Not a mapping of token ids to Unix times.
        ValueError: A time is NaN or infinite.
    """
    if not isinstance(used, Mapping):
        raise TypeError(f"used must be a mapping of token ids to Unix times, not {used!r:.80}")
    out: dict[str, float] = {}
    for id, at in used.items():
        check_name(id, "token id")
        if not isinstance(at, int | float) or isinstance(at, bool) or not math.isfinite(at):
            raise ValueError(f"the time token {id!r} was used must be a Unix time, not {at!r:.80}")
        out[id] = float(at)
    return out


def check_identity_page(after: object, limit: object) -> int:
    """Refuse a revision or a page size `Store.identity_changes` cannot take; return ``after``.

    Raises:
        TypeError: ``after`` or ``limit`` is not an int.
        ValueError: ``after`` is negative or ``limit`` out of range.
    """
    if not isinstance(after, int) or isinstance(after, bool):
        raise TypeError(f"after must be an identity revision (an int), not {after!r:.80}")
    if after < 0:
        raise ValueError(f"after must be an identity revision (0 or more), not {after}")
    check_limit(limit, "limit", least=1)
    return after


def revision_ahead(after: int, current: int) -> ValueError:
    """The error for an identity revision beyond anything the store ever wrote."""
    return ValueError(
        f"identity revision {after} is ahead of this store's, which is {current}: it was "
        "read from another store, or the database was restored from an older copy. Follow "
        "again from 0"
    )


def token_taken(id: str) -> StoreError:
    """The error for a token whose id or hash the store has already."""
    return StoreError(
        f"cannot add token {id!r}: its id or its hash is taken; make a new token "
        "(interlock.server.new_token) with a new id"
    )


def _strings(value: object, name: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list or tuple of str, not {value!r:.80}")
    items = tuple(value)
    if len(items) > MAX_SCOPES:
        raise ValueError(f"{name} may hold at most {MAX_SCOPES} items, not {len(items)}")
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"{name} must hold str items, not {item!r:.80}")
    return items


def _scope(value: object, name: str) -> tuple[str, ...]:
    # An empty item is a scope too: the thread prefix "" is every thread, the tool pattern ""
    # the questions that gate no tool.
    items = _strings(value, name)
    if not items:
        every = '("*",)' if name == "tools" else '("",)'
        raise ValueError(f"{name} is empty, so it would allow nothing: give {every} for all")
    for item in items:
        if item:
            check_name(item, name)
    return items
