"""What each of `SqliteStore`'s principal and token operations does on its connection.

As in `_sqlite_ops`: each function runs with the store's lock held on its one connection, a
write in one ``BEGIN IMMEDIATE`` transaction, and driver errors are left to `SqliteStore`.
The arguments are checked already (by the checks of `_identities`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Final

from .._errors import PrincipalExists, UnknownPrincipal, UnknownToken
from ._identities import (
    Contact,
    IdentityChange,
    PrincipalRecord,
    Role,
    TokenRecord,
    email_key,
    revision_ahead,
    token_taken,
)
from ._identity_sql import (
    IdentitySql,
    check_contacts_free,
    contacts_after,
    encode_names,
    principal_from_row,
    token_from_row,
)

__all__ = [
    "add_principal",
    "add_token",
    "changes",
    "get_principal",
    "principal_by_contact",
    "principals",
    "revoke_tokens",
    "tokens",
    "touch_tokens",
    "update_principal",
]

SQL: Final = IdentitySql.bound_to("?")


@contextmanager
def _write(conn: sqlite3.Connection) -> Iterator[int]:
    """A ``BEGIN IMMEDIATE`` transaction (rolled back on any error) that has taken the next
    identity revision, which it yields."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield _next_revision(conn)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.rollback()
        raise


def _next_revision(conn: sqlite3.Connection) -> int:
    return int(conn.execute(SQL.next_revision).fetchone()[0])


def add_principal(
    conn: sqlite3.Connection,
    key: str,
    name: str,
    role: Role,
    display_name: str,
    groups: tuple[str, ...],
    contacts: tuple[str | None, str | None],
    now: float,
) -> PrincipalRecord:
    """`Store.add_principal`; ``contacts`` are its e-mail address and Slack user id."""
    with _write(conn) as rev:
        found = conn.execute(SQL.select_principal, (key,)).fetchone()
        if found is not None:
            raise PrincipalExists(name, found[1])
        email, slack_user = contacts
        check_contacts_free(conn, SQL, key, email, slack_user)
        row = (key, name, display_name, role, encode_names(groups), False, now, rev)
        mail = (email, slack_user, None if email is None else email_key(email))
        conn.execute(SQL.insert_principal, (*row, *mail))
    return principal_from_row((*row, email, slack_user))


def update_principal(
    conn: sqlite3.Connection,
    key: str,
    name: str,
    role: Role | None,
    display_name: str | None,
    groups: tuple[str, ...] | None,
    disabled: bool | None,
    contacts: tuple[str | None, str | None],
) -> PrincipalRecord:
    """`Store.update_principal`; ``contacts`` are the e-mail address and the Slack user id
    (None: unchanged; ``""``: cleared)."""
    with _write(conn) as rev:
        found = conn.execute(SQL.select_principal, (key,)).fetchone()
        if found is None:
            raise UnknownPrincipal(name)
        old = principal_from_row(found)
        email, slack_user = contacts
        check_contacts_free(conn, SQL, key, email or None, slack_user or None)
        new = (
            old.role if role is None else role,
            old.display_name if display_name is None else display_name,
            encode_names(old.groups if groups is None else groups),
            old.disabled if disabled is None else disabled,
            *contacts_after(old, email, slack_user),
            rev,
            key,
        )
        conn.execute(SQL.update_principal, new)
        return principal_from_row(conn.execute(SQL.select_principal, (key,)).fetchone())


def get_principal(conn: sqlite3.Connection, key: str) -> PrincipalRecord | None:
    """`Store.get_principal`."""
    row = conn.execute(SQL.select_principal, (key,)).fetchone()
    return None if row is None else principal_from_row(row)


def principal_by_contact(
    conn: sqlite3.Connection, field: Contact, value: str
) -> PrincipalRecord | None:
    """`Store.principal_by_contact` (an e-mail address in the form of `email_key`)."""
    query = SQL.principal_by_email if field == "email" else SQL.principal_by_slack_user
    row = conn.execute(query, (value,)).fetchone()
    return None if row is None else principal_from_row(row)


def principals(conn: sqlite3.Connection, limit: int, after: str | None) -> list[PrincipalRecord]:
    """`Store.principals` after the key ``after``."""
    rows = conn.execute(SQL.principals, ("" if after is None else after, limit)).fetchall()
    return [principal_from_row(r) for r in rows]


def add_token(
    conn: sqlite3.Connection,
    id: str,
    hash: str,
    principal: tuple[str, str],
    role: Role | None,
    scopes: tuple[tuple[str, ...], tuple[str, ...]],
    expires_at: float | None,
    now: float,
) -> TokenRecord:
    """`Store.add_token`; ``principal`` is its key and its name as given."""
    key, name = principal
    with _write(conn) as rev:
        if conn.execute(SQL.select_principal, (key,)).fetchone() is None:
            raise UnknownPrincipal(name)
        if conn.execute(SQL.taken, (id, hash)).fetchone() is not None:
            raise token_taken(id)
        tools, threads = (encode_names(s) for s in scopes)
        expires = None if expires_at is None else float(expires_at)
        conn.execute(SQL.insert_token, (id, hash, key, role, tools, threads, now, expires, rev))
        return token_from_row(conn.execute(SQL.select_token, (id,)).fetchone())


def tokens(
    conn: sqlite3.Connection, principal: str | None, limit: int, after: str | None
) -> list[TokenRecord]:
    """`Store.tokens`; ``principal`` is a key."""
    start = "" if after is None else after
    if principal is None:
        rows = conn.execute(SQL.tokens, (start, limit)).fetchall()
    else:
        rows = conn.execute(SQL.tokens_of, (principal, start, limit)).fetchall()
    return [token_from_row(r) for r in rows]


def revoke_tokens(
    conn: sqlite3.Connection, id: str | None, principal: tuple[str, str] | None, now: float
) -> list[TokenRecord]:
    """`Store.revoke_tokens`; ``principal`` is its key and its name as given."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if id is not None:
            found = conn.execute(SQL.select_token, (id,)).fetchone()
            if found is None:
                raise UnknownToken(id)
            targets = [] if found[8] is not None else [id]
        else:
            assert principal is not None
            key, name = principal
            if conn.execute(SQL.select_principal, (key,)).fetchone() is None:
                raise UnknownPrincipal(name)
            targets = [r[0] for r in conn.execute(SQL.live_tokens_of, (key,)).fetchall()]
        revoked = []
        for target in targets:
            conn.execute(SQL.revoke, (now, _next_revision(conn), target))
            revoked.append(token_from_row(conn.execute(SQL.select_token, (target,)).fetchone()))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.rollback()
        raise
    return revoked


def touch_tokens(conn: sqlite3.Connection, used: Mapping[str, float]) -> None:
    """`Store.touch_tokens` (no new revision)."""
    if not used:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany(SQL.touch, [(at, id, at) for id, at in used.items()])
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.rollback()
        raise


def changes(conn: sqlite3.Connection, after: int, limit: int) -> list[IdentityChange]:
    """`Store.identity_changes`, read in one transaction."""
    conn.execute("BEGIN")
    try:
        upto = int(conn.execute(SQL.revision).fetchone()[0])
        if after > upto:
            raise revision_ahead(after, upto)
        if after == upto:
            return []
        window = (after, upto, limit)
        found: list[IdentityChange] = [
            *(principal_from_row(r) for r in conn.execute(SQL.changed_principals, window)),
            *(token_from_row(r) for r in conn.execute(SQL.changed_tokens, window)),
        ]
    finally:
        conn.execute("COMMIT")
    return sorted(found, key=lambda r: r.rev)[:limit]
