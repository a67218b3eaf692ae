"""The principal and token methods of the two SQL stores, written once.

`SqliteStore` and `PostgresStore` each run an operation on a connection with their own
``_run`` (a worker thread and the file's lock; a pooled connection and its retries) and have
their own operations module (`_sqlite_identities`, `_postgres_identities`); what they do with
the arguments in between (check them, then run the operation) is the same, and lives here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from .._args import check_limit, check_name
from ._identities import (
    IdentityChange,
    PrincipalRecord,
    Role,
    TokenRecord,
    check_identity_page,
    check_new_principal,
    check_principal,
    check_principal_update,
    check_revoke_args,
    check_token_args,
    check_used,
    contact_query,
)

__all__ = ["SqlIdentities"]

T = TypeVar("T")


class SqlIdentities:
    """`Store`'s principal and token methods over a store's ``_run`` and operations module."""

    _identity_ops: Any
    """The module of the backend's operations (``add_principal(conn, ...)``...)."""

    _clock: Callable[[], float]
    """The store's clock (Unix time)."""

    async def _run(self, fn: Callable[[Any], T]) -> T:
        raise NotImplementedError

    async def add_principal(
        self,
        name: str,
        *,
        role: Role,
        display_name: str = "",
        groups: Sequence[str] = (),
        email: str | None = None,
        slack_user: str | None = None,
    ) -> PrincipalRecord:
        """Add a principal (see `Store.add_principal`)."""
        key, named, mail, user = check_new_principal(
            name, role, display_name, groups, email, slack_user
        )
        return await self._run(
            lambda c: self._identity_ops.add_principal(
                c, key, name, role, display_name, named, (mail, user), self._clock()
            )
        )

    async def update_principal(
        self,
        name: str,
        *,
        role: Role | None = None,
        display_name: str | None = None,
        groups: Sequence[str] | None = None,
        disabled: bool | None = None,
        email: str | None = None,
        slack_user: str | None = None,
    ) -> PrincipalRecord:
        """Change a principal (see `Store.update_principal`)."""
        key, named, mail, user = check_principal_update(
            name, role, display_name, groups, disabled, email, slack_user
        )
        return await self._run(
            lambda c: self._identity_ops.update_principal(
                c, key, name, role, display_name, named, disabled, (mail, user)
            )
        )

    async def principal_by_contact(
        self, *, email: str | None = None, slack_user: str | None = None
    ) -> PrincipalRecord | None:
        """Return the principal with this e-mail address or Slack user id, or None (see
        `Store.principal_by_contact`)."""
        field, value = contact_query(email, slack_user)
        return await self._run(lambda c: self._identity_ops.principal_by_contact(c, field, value))

    async def get_principal(self, name: str) -> PrincipalRecord | None:
        """Return the principal named ``name`` (in normal form), or None."""
        key = check_principal(name)
        return await self._run(lambda c: self._identity_ops.get_principal(c, key))

    async def principals(
        self, *, limit: int = 100, after: str | None = None
    ) -> list[PrincipalRecord]:
        """Return principals in the order of their keys (see `Store.principals`)."""
        check_limit(limit, "limit")
        start = None if after is None else check_principal(after)
        return await self._run(lambda c: self._identity_ops.principals(c, limit, start))

    async def add_token(
        self,
        id: str,
        *,
        hash: str,
        principal: str,
        role: Role | None = None,
        tools: Sequence[str] = ("*",),
        threads: Sequence[str] = ("",),
        expires_at: float | None = None,
    ) -> TokenRecord:
        """Add a token of a principal (see `Store.add_token`)."""
        owner = (check_principal(principal), principal)
        scopes = check_token_args(id, hash, role, tools, threads, expires_at)
        return await self._run(
            lambda c: self._identity_ops.add_token(
                c, id, hash, owner, role, scopes, expires_at, self._clock()
            )
        )

    async def tokens(
        self, *, principal: str | None = None, limit: int = 100, after: str | None = None
    ) -> list[TokenRecord]:
        """Return tokens in id order (see `Store.tokens`)."""
        key = None if principal is None else check_principal(principal)
        check_limit(limit, "limit")
        check_name(after, "after", optional=True)
        return await self._run(lambda c: self._identity_ops.tokens(c, key, limit, after))

    async def revoke_tokens(
        self, *, id: str | None = None, principal: str | None = None
    ) -> list[TokenRecord]:
        """Revoke one token or all of a principal's (see `Store.revoke_tokens`)."""
        check_revoke_args(id, principal)
        owner = None if principal is None else (check_principal(principal), principal)
        return await self._run(
            lambda c: self._identity_ops.revoke_tokens(c, id, owner, self._clock())
        )

    async def touch_tokens(self, used: Mapping[str, float]) -> None:
        """Record when tokens were used (see `Store.touch_tokens`)."""
        checked = check_used(used)
        await self._run(lambda c: self._identity_ops.touch_tokens(c, checked))

    async def identity_changes(self, *, after: int = 0, limit: int = 1000) -> list[IdentityChange]:
        """Return the principals and tokens written after revision ``after`` (see
        `Store.identity_changes`)."""
        start = check_identity_page(after, limit)
        return await self._run(lambda c: self._identity_ops.changes(c, start, limit))
