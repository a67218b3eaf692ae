"""Principals and their tokens, as a store keeps them: the records, and the checks every
backend makes of what it is asked to write.

A principal is a person or service the approval server knows: a name (unique in its normal
form, `interlock._principals.principal_key`), a role, groups, and whether it is disabled. A
token speaks for one principal; the store keeps its hash only (``sha256:<64 hex digits>``),
never the token. A token may narrow what its principal may do (a lower role, some tools, some
thread prefixes), never widen it: the server works that out (`interlock.server.StoreAuth`).

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
    "MAX_SCOPES",
    "ROLES",
    "TOKEN_HASH",
    "IdentityChange",
    "PrincipalRecord",
    "Role",
    "TokenRecord",
    "check_display_name",
    "check_groups",
    "check_identity_page",
    "check_new_principal",
    "check_principal",
    "check_principal_update",
    "check_revoke_args",
    "check_role",
    "check_token_args",
    "check_used",
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


def check_new_principal(
    name: object, role: object, display_name: object, groups: object
) -> tuple[str, tuple[str, ...]]:
    """Refuse a principal no backend may add; return its key and its groups as a tuple.

    Raises:
        TypeError, ValueError: As `check_principal`, `check_role`, `check_display_name` and
            `check_groups` do.
    """
    key = check_principal(name)
    check_role(role)
    check_display_name(display_name)
    return key, check_groups(groups)


def check_principal_update(
    name: object, role: object, display_name: object, groups: object, disabled: object
) -> tuple[str, tuple[str, ...] | None]:
    """Refuse a change no backend may make; return the key and the groups (None: unchanged).

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
    return key, None if groups is None else check_groups(groups)


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
