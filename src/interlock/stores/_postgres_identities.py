"""What each of `PostgresStore`'s principal and token operations does on a connection.

As in `_postgres_ops`: each write is one short READ COMMITTED transaction, and driver errors
are left to `PostgresStore`. A write first takes the next identity revision, which locks the
revision's row until it commits (see `_identity_sql`): identity writes run one at a time, so
what a write reads (is the name free?) stays true until it commits. The arguments are checked
already (by the checks of `_identities`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from psycopg import Connection

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

Conn = Connection[Any]

SQL: Final = IdentitySql.bound_to("%s")
_LOCK_REVISION: Final = "SELECT rev FROM identity_revision WHERE id = 1 FOR UPDATE"


def _one(conn: Conn, query: str, params: Any = ()) -> Any:
    return conn.execute(query, params).fetchone()


def _next_revision(conn: Conn) -> int:
    return int(_one(conn, SQL.next_revision)[0])


def add_principal(
    conn: Conn,
    key: str,
    name: str,
    role: Role,
    display_name: str,
    groups: tuple[str, ...],
    contacts: tuple[str | None, str | None],
    now: float,
) -> PrincipalRecord:
    """`Store.add_principal`; ``contacts`` are its e-mail address and Slack user id."""
    with conn.transaction():
        rev = _next_revision(conn)
        found = _one(conn, SQL.select_principal, (key,))
        if found is not None:
            raise PrincipalExists(name, found[1])
        email, slack_user = contacts
        check_contacts_free(conn, SQL, key, email, slack_user)
        row = (key, name, display_name, role, encode_names(groups), False, now, rev)
        mail = (email, slack_user, None if email is None else email_key(email))
        conn.execute(SQL.insert_principal, (*row, *mail))
    return principal_from_row((*row, email, slack_user))


def update_principal(
    conn: Conn,
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
    with conn.transaction():
        rev = _next_revision(conn)
        found = _one(conn, SQL.select_principal, (key,))
        if found is None:
            raise UnknownPrincipal(name)
        old = principal_from_row(found)
        email, slack_user = contacts
        check_contacts_free(conn, SQL, key, email or None, slack_user or None)
        conn.execute(
            SQL.update_principal,
            (
                old.role if role is None else role,
                old.display_name if display_name is None else display_name,
                encode_names(old.groups if groups is None else groups),
                old.disabled if disabled is None else disabled,
                *contacts_after(old, email, slack_user),
                rev,
                key,
            ),
        )
        return principal_from_row(_one(conn, SQL.select_principal, (key,)))


def get_principal(conn: Conn, key: str) -> PrincipalRecord | None:
    """`Store.get_principal`."""
    row = _one(conn, SQL.select_principal, (key,))
    return None if row is None else principal_from_row(row)


def principal_by_contact(conn: Conn, field: Contact, value: str) -> PrincipalRecord | None:
    """`Store.principal_by_contact` (an e-mail address in the form of `email_key`)."""
    query = SQL.principal_by_email if field == "email" else SQL.principal_by_slack_user
    row = _one(conn, query, (value,))
    return None if row is None else principal_from_row(row)


def principals(conn: Conn, limit: int, after: str | None) -> list[PrincipalRecord]:
    """`Store.principals` after the key ``after``."""
    rows = conn.execute(SQL.principals, ("" if after is None else after, limit)).fetchall()
    return [principal_from_row(r) for r in rows]


def add_token(
    conn: Conn,
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
    with conn.transaction():
        rev = _next_revision(conn)
        if _one(conn, SQL.select_principal, (key,)) is None:
            raise UnknownPrincipal(name)
        if _one(conn, SQL.taken, (id, hash)) is not None:
            raise token_taken(id)
        tools, threads = (encode_names(s) for s in scopes)
        expires = None if expires_at is None else float(expires_at)
        conn.execute(SQL.insert_token, (id, hash, key, role, tools, threads, now, expires, rev))
        return token_from_row(_one(conn, SQL.select_token, (id,)))


def tokens(conn: Conn, principal: str | None, limit: int, after: str | None) -> list[TokenRecord]:
    """`Store.tokens`; ``principal`` is a key."""
    start = "" if after is None else after
    if principal is None:
        rows = conn.execute(SQL.tokens, (start, limit)).fetchall()
    else:
        rows = conn.execute(SQL.tokens_of, (principal, start, limit)).fetchall()
    return [token_from_row(r) for r in rows]


def revoke_tokens(
    conn: Conn, id: str | None, principal: tuple[str, str] | None, now: float
) -> list[TokenRecord]:
    """`Store.revoke_tokens`; ``principal`` is its key and its name as given."""
    with conn.transaction():
        # The revision's lock first, as every identity write takes it; a revision is taken
        # for each token revoked only, so a call that revokes none changes nothing.
        conn.execute(_LOCK_REVISION)
        if id is not None:
            found = _one(conn, SQL.select_token, (id,))
            if found is None:
                raise UnknownToken(id)
            targets = [] if found[8] is not None else [id]
        else:
            assert principal is not None
            key, name = principal
            if _one(conn, SQL.select_principal, (key,)) is None:
                raise UnknownPrincipal(name)
            targets = [r[0] for r in conn.execute(SQL.live_tokens_of, (key,)).fetchall()]
        revoked = []
        for target in targets:
            conn.execute(SQL.revoke, (now, _next_revision(conn), target))
            revoked.append(token_from_row(_one(conn, SQL.select_token, (target,))))
    return revoked


def touch_tokens(conn: Conn, used: Mapping[str, float]) -> None:
    """`Store.touch_tokens` (no new revision, and no lock on it)."""
    if not used:
        return
    with conn.transaction(), conn.cursor() as cur:
        cur.executemany(SQL.touch, [(at, id, at) for id, at in used.items()])


def changes(conn: Conn, after: int, limit: int) -> list[IdentityChange]:
    """`Store.identity_changes`: the revision now, then the rows up to it.

    Each statement reads what was committed when it began (READ COMMITTED): every revision
    up to the one read first was committed before that one was given out, so the rows that
    follow are all there, or were written again since with a later revision (read next time).
    """
    upto = int(_one(conn, SQL.revision)[0])
    if after > upto:
        raise revision_ahead(after, upto)
    if after == upto:
        return []
    window = (after, upto, limit)
    found: list[IdentityChange] = [
        *(principal_from_row(r) for r in conn.execute(SQL.changed_principals, window)),
        *(token_from_row(r) for r in conn.execute(SQL.changed_tokens, window)),
    ]
    return sorted(found, key=lambda r: r.rev)[:limit]
