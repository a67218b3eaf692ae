"""The SQL of principals and tokens, which both SQL stores run alike but for the placeholder,
and their rows to records and back.

Every write takes the next identity revision first (`IdentitySql.next_revision`): in SQLite
the transaction holds the file's write lock already, in PostgreSQL the update locks the one
row of ``identity_revision`` until the transaction ends. Either way, identity writes run one
at a time, so what a write reads before it writes is still true when it commits, and
revisions go up in commit order. A read of the changes takes the current revision first and
lists only rows up to it: every revision up to it was committed before it was given out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec

from .._errors import ContactTaken, StoreError
from .._lazy import lazy_module
from ._identities import ROLES, Contact, PrincipalRecord, Role, TokenRecord, email_key

if TYPE_CHECKING:
    import json
else:  # imported by the first call that needs it, not by `import interlock`
    json = lazy_module("json", globals())

__all__ = [
    "PRINCIPAL_COLUMNS",
    "TOKEN_COLUMNS",
    "IdentitySql",
    "check_contacts_free",
    "contacts_after",
    "encode_names",
    "principal_from_row",
    "token_from_row",
]

PRINCIPAL_COLUMNS: Final = (
    "name_key, name, display_name, role, group_names, disabled, created_at, rev, email, slack_user"
)
TOKEN_COLUMNS: Final = (
    "t.id, t.hash, o.name, t.role, t.tools, t.threads, t.created_at, t.expires_at, "
    "t.revoked_at, t.last_used_at, t.rev"
)
"""A token's columns, with its principal's name (``o``: the principal it belongs to)."""
_TOKENS: Final = "tokens t JOIN principals o ON o.name_key = t.principal"


class IdentitySql(msgspec.Struct, frozen=True, kw_only=True):
    """The statements of principals and tokens, with one backend's placeholder."""

    next_revision: str
    """Add one to the identity revision and return it (taking its lock)."""
    revision: str
    """The identity revision now."""
    select_principal: str
    """A principal's row, by key."""
    insert_principal: str
    """A new principal's row."""
    update_principal: str
    """Parameters: role, display name, groups, disabled, email, email key, Slack user, rev,
    key."""
    principal_by_email: str
    """A principal's row, by the key of its e-mail address (`email_key`)."""
    principal_by_slack_user: str
    """A principal's row, by its Slack user id."""
    principals: str
    """`Store.principals`: those after a key, in key order."""
    taken: str
    """Whether a token has this id or this hash."""
    insert_token: str
    """A new token's row."""
    select_token: str
    """A token (with its principal's name), by id."""
    tokens: str
    """`Store.tokens`: those after an id, in id order."""
    tokens_of: str
    """`tokens` of one principal (by key)."""
    live_tokens_of: str
    """The ids of a principal's tokens not revoked yet, in id order."""
    revoke: str
    """Parameters: revoked_at, rev, id; only a token not revoked yet."""
    touch: str
    """Parameters: last_used_at, id, last_used_at; only forward."""
    changed_principals: str
    """Principals with after < rev <= upto, in rev order."""
    changed_tokens: str
    """Tokens with after < rev <= upto, in rev order."""

    @classmethod
    def bound_to(cls, p: str) -> IdentitySql:
        """The statements with each parameter written as ``p`` (``?`` or ``%s``)."""
        return cls(
            next_revision="UPDATE identity_revision SET rev = rev + 1 WHERE id = 1 RETURNING rev",
            revision="SELECT rev FROM identity_revision WHERE id = 1",
            select_principal=f"SELECT {PRINCIPAL_COLUMNS} FROM principals WHERE name_key = {p}",
            insert_principal=(
                f"INSERT INTO principals ({PRINCIPAL_COLUMNS}, email_key) "
                f"VALUES ({', '.join([p] * 11)})"
            ),
            update_principal=(
                f"UPDATE principals SET role = {p}, display_name = {p}, group_names = {p}, "
                f"disabled = {p}, email = {p}, email_key = {p}, slack_user = {p}, rev = {p} "
                f"WHERE name_key = {p}"
            ),
            principal_by_email=(
                f"SELECT {PRINCIPAL_COLUMNS} FROM principals WHERE email_key = {p}"
            ),
            principal_by_slack_user=(
                f"SELECT {PRINCIPAL_COLUMNS} FROM principals WHERE slack_user = {p}"
            ),
            principals=(
                f"SELECT {PRINCIPAL_COLUMNS} FROM principals WHERE name_key > {p} "
                f"ORDER BY name_key LIMIT {p}"
            ),
            taken=f"SELECT 1 FROM tokens WHERE id = {p} OR hash = {p} LIMIT 1",
            insert_token=(
                "INSERT INTO tokens (id, hash, principal, role, tools, threads, created_at, "
                f"expires_at, revoked_at, last_used_at, rev) VALUES ({', '.join([p] * 8)}, "
                f"NULL, NULL, {p})"
            ),
            select_token=f"SELECT {TOKEN_COLUMNS} FROM {_TOKENS} WHERE t.id = {p}",
            tokens=(
                f"SELECT {TOKEN_COLUMNS} FROM {_TOKENS} WHERE t.id > {p} ORDER BY t.id LIMIT {p}"
            ),
            tokens_of=(
                f"SELECT {TOKEN_COLUMNS} FROM {_TOKENS} WHERE t.principal = {p} AND t.id > {p} "
                f"ORDER BY t.id LIMIT {p}"
            ),
            live_tokens_of=(
                f"SELECT id FROM tokens WHERE principal = {p} AND revoked_at IS NULL ORDER BY id"
            ),
            revoke=(
                f"UPDATE tokens SET revoked_at = {p}, rev = {p} WHERE id = {p} "
                "AND revoked_at IS NULL"
            ),
            touch=(
                f"UPDATE tokens SET last_used_at = {p} WHERE id = {p} "
                f"AND (last_used_at IS NULL OR last_used_at < {p})"
            ),
            changed_principals=(
                f"SELECT {PRINCIPAL_COLUMNS} FROM principals WHERE rev > {p} AND rev <= {p} "
                f"ORDER BY rev LIMIT {p}"
            ),
            changed_tokens=(
                f"SELECT {TOKEN_COLUMNS} FROM {_TOKENS} WHERE t.rev > {p} AND t.rev <= {p} "
                f"ORDER BY t.rev LIMIT {p}"
            ),
        )


def encode_names(names: tuple[str, ...]) -> str:
    """A list of names or scopes as its column holds it: a JSON array."""
    return json.dumps(list(names), ensure_ascii=False)


def principal_from_row(row: Any) -> PrincipalRecord:
    """A principal's record from its row (`PRINCIPAL_COLUMNS`).

    Raises:
        StoreError: The row is damaged (a role outside `ROLES`, groups that are not a list).
    """
    _, name, display_name, role, groups, disabled, created_at, rev, email, slack_user = row
    return PrincipalRecord(
        name=name,
        display_name=display_name,
        role=_role(role, f"principal {name!r}"),
        groups=_names(groups, f"the groups of principal {name!r}"),
        disabled=bool(disabled),
        email=email,
        slack_user=slack_user,
        created_at=float(created_at),
        rev=int(rev),
    )


def check_contacts_free(
    conn: Any, sql: IdentitySql, key: str, email: str | None, slack_user: str | None
) -> None:
    """Refuse contact addresses another principal than the one of ``key`` has (None: not
    asked for), inside an identity write (which holds the identity lock: see the module).

    ``conn`` is either driver's connection: both run ``execute(...).fetchone()``.

    Raises:
        ContactTaken: Another principal has one of them.
    """
    asked: tuple[tuple[Contact, str | None, str, str | None], ...] = (
        ("email", email, sql.principal_by_email, None if email is None else email_key(email)),
        ("slack_user", slack_user, sql.principal_by_slack_user, slack_user),
    )
    for field, value, query, lookup in asked:
        if value is None or lookup is None:
            continue
        holder = conn.execute(query, (lookup,)).fetchone()
        if holder is not None and holder[0] != key:
            raise ContactTaken(field, value, holder[1])


def contacts_after(
    old: PrincipalRecord, email: str | None, slack_user: str | None
) -> tuple[str | None, str | None, str | None]:
    """The e-mail address, its key and the Slack user a principal has after an update that
    gives ``email`` and ``slack_user`` (None: unchanged; ``""``: cleared)."""
    mail = old.email if email is None else email or None
    user = old.slack_user if slack_user is None else slack_user or None
    return mail, None if mail is None else email_key(mail), user


def token_from_row(row: Any) -> TokenRecord:
    """A token's record from its row (`TOKEN_COLUMNS`).

    Raises:
        StoreError: The row is damaged.
    """
    id, hash, principal, role, tools, threads, created_at, expires, revoked, used, rev = row
    where = f"token {id!r}"
    return TokenRecord(
        id=id,
        hash=hash,
        principal=principal,
        role=None if role is None else _role(role, where),
        tools=_names(tools, f"the tools of {where}"),
        threads=_names(threads, f"the threads of {where}"),
        created_at=float(created_at),
        expires_at=None if expires is None else float(expires),
        revoked_at=None if revoked is None else float(revoked),
        last_used_at=None if used is None else float(used),
        rev=int(rev),
    )


def _role(value: object, where: str) -> Role:
    for role in ROLES:
        if value == role:
            return role
    raise _damaged(f"the role of {where} is {value!r:.80}, not one of {', '.join(ROLES)}")


def _names(value: object, what: str) -> tuple[str, ...]:
    try:
        names = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        names = None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise _damaged(f"{what} are {value!r:.80}, not a JSON list of names")
    return tuple(names)


def _damaged(what: str) -> StoreError:
    return StoreError(
        f"the store's identities are damaged: {what}. They were changed outside interlock: "
        "restore the store from a backup, or fix the row"
    )
