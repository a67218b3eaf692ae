"""The admin routes: principals and their tokens, managed while the server runs.

They work when the server authenticates with a `StoreAuth`: they change the principals and
tokens of its store, then read the change back at once, so this server's next request sees
it; every other server that follows the store sees it within its ``refresh`` time. A server
that reads a tokens file (`TokenAuth`) answers them 409: its identities change by editing
the file and restarting it.

Every route needs the admin role. A token is shown once, in the answer that makes it; the
store keeps its hash only, and no listing shows it again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable
from typing import Annotated, Final, Literal, TypeVar

import msgspec
from msgspec import Meta
from starlette.requests import Request
from starlette.responses import Response

from .._errors import (
    ContactTaken,
    InterlockError,
    PrincipalExists,
    UnknownPrincipal,
    UnknownToken,
)
from .._principals import MAX_PRINCIPAL
from ..stores import PrincipalRecord, Role, TokenRecord
from ._api import _body, _identity, _path, _state
from ._errors import ApiError, json_response
from ._params import PrincipalsQuery, TokensQuery, read_query
from ._store_auth import StoreAuth, issue_token, parse_expiry

__all__ = [
    "IssuedTokenView",
    "NewPrincipal",
    "NewToken",
    "PrincipalChange",
    "PrincipalPage",
    "PrincipalView",
    "RevokedTokens",
    "TokenPage",
    "TokenView",
    "change_principal",
    "create_principal",
    "create_token",
    "list_principals",
    "list_tokens",
    "revoke_principal_tokens",
    "revoke_token",
]

log = logging.getLogger("interlock.server")

T = TypeVar("T")

TokenStatus = Literal["active", "revoked", "expired"]

_Name = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=MAX_PRINCIPAL,
        description=(
            "A principal's name: unique compared case-folded (NFKC), without white space "
            "around it or control and format characters."
        ),
    ),
]
_Scope = Annotated[list[Annotated[str, Meta(max_length=512)]], Meta(min_length=1, max_length=100)]
_Groups = Annotated[list[Annotated[str, Meta(max_length=MAX_PRINCIPAL)]], Meta(max_length=100)]
_Display = Annotated[str, Meta(max_length=MAX_PRINCIPAL, description="How people see it.")]
_Email = Annotated[
    str,
    Meta(
        max_length=300,
        description=(
            "Its e-mail address, for e-mail links: unique among principals, compared "
            'case-insensitively ("" clears it).'
        ),
    ),
]
_SlackUser = Annotated[
    str,
    Meta(
        max_length=22,
        description=(
            "Its Slack user id (such as U024BE7LH), which maps who acts in Slack to it: unique "
            'among principals ("" clears it).'
        ),
    ),
]


class PrincipalView(msgspec.Struct, kw_only=True):
    """A principal: a person or service who signs in with its tokens."""

    name: str
    display_name: str
    role: Role
    groups: list[str]
    disabled: bool
    email: str | None
    """Its e-mail address (null: none)."""
    slack_user: str | None
    """Its Slack user id (null: none)."""
    created_at: float


class PrincipalPage(msgspec.Struct, kw_only=True):
    """Principals by name; pass ``next`` as ``after`` for the following page."""

    items: list[PrincipalView]
    next: str | None


class NewPrincipal(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A principal to add."""

    name: _Name
    role: Role = "viewer"
    display_name: _Display = ""
    groups: _Groups = msgspec.field(default_factory=list)
    email: _Email | None = None
    slack_user: _SlackUser | None = None


class PrincipalChange(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """What to change of a principal (what is left out stays)."""

    role: Role | None = None
    display_name: _Display | None = None
    groups: _Groups | None = None
    disabled: bool | None = None
    """True refuses every token of the principal until it is false again."""
    email: _Email | None = None
    slack_user: _SlackUser | None = None


class TokenView(msgspec.Struct, kw_only=True):
    """A token of a principal (never the token itself, which is shown once)."""

    id: str
    principal: str
    role: Role | None
    """The most it may do (null: its principal's role)."""
    tools: list[str]
    threads: list[str]
    created_at: float
    expires_at: float | None
    revoked_at: float | None
    last_used_at: float | None
    status: TokenStatus


class IssuedTokenView(TokenView, kw_only=True):
    """A token just made, with the token itself: shown this once, kept nowhere."""

    token: str


class TokenPage(msgspec.Struct, kw_only=True):
    """Tokens by id; pass ``next`` as ``after`` for the following page."""

    items: list[TokenView]
    next: str | None


class RevokedTokens(msgspec.Struct, kw_only=True):
    """The tokens a revocation revoked (none when they were revoked already)."""

    items: list[TokenView]


class NewToken(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A token to make for a principal; it can narrow what the principal may do, not widen."""

    principal: _Name
    role: Role | None = None
    """At most the principal's role (null: the principal's role)."""
    tools: _Scope = msgspec.field(default_factory=lambda: ["*"])
    threads: _Scope = msgspec.field(default_factory=lambda: [""])
    expires: (
        Annotated[
            str,
            Meta(
                max_length=100,
                description="A duration (12h, 30d, 1w) or a timestamp with its time zone.",
            ),
        ]
        | None
    ) = None


_NO_STORE: Final = (
    "this server reads its identities from a tokens file, which it read when it started: add "
    "or change them there and restart it, or serve the principals and tokens of the store "
    "(interlock serve --store-identities, or create_app(auth=StoreAuth(store)))"
)


def _store_auth(request: Request) -> StoreAuth:
    """The server's `StoreAuth`, once the caller is known to be an admin (409 without one)."""
    auth = _state(request).auth
    if not isinstance(auth, StoreAuth):
        raise ApiError(409, "identities_in_file", _NO_STORE)
    return auth


async def _changed(auth: StoreAuth, change: Awaitable[T]) -> T:
    """Make ``change`` in the store, refused as the API refuses; then read it back at once."""
    done = await _refused(change, 422, "invalid_body")
    try:
        await auth.refresh()
    except InterlockError as exc:  # the follower reads it in its next round
        log.warning("reading the identities back after a change failed: %s", exc)
    return done


async def _refused(call: Awaitable[T], status: int, error: str) -> T:
    try:
        return await call
    except PrincipalExists as exc:
        raise ApiError(409, "principal_exists", str(exc)) from exc
    except ContactTaken as exc:
        raise ApiError(409, "contact_taken", str(exc)) from exc
    except UnknownPrincipal as exc:
        raise ApiError(404, "unknown_principal", str(exc)) from exc
    except UnknownToken as exc:
        raise ApiError(404, "unknown_token", str(exc)) from exc
    except (TypeError, ValueError) as exc:
        # The store checks its arguments before anything else (`Store`): a refusal of what
        # the client sent.
        raise ApiError(status, error, str(exc)) from exc


def principal_view(record: PrincipalRecord) -> PrincipalView:
    """The JSON view of a principal."""
    return PrincipalView(
        name=record.name,
        display_name=record.display_name,
        role=record.role,
        groups=list(record.groups),
        disabled=record.disabled,
        email=record.email,
        slack_user=record.slack_user,
        created_at=record.created_at,
    )


def token_view(record: TokenRecord, now: float) -> TokenView:
    """The JSON view of a token (without its hash)."""
    return TokenView(
        id=record.id,
        principal=record.principal,
        role=record.role,
        tools=list(record.tools),
        threads=list(record.threads),
        created_at=record.created_at,
        expires_at=record.expires_at,
        revoked_at=record.revoked_at,
        last_used_at=record.last_used_at,
        status=token_status(record, now),
    )


def token_status(record: TokenRecord, now: float) -> TokenStatus:
    """``revoked``, ``expired`` or ``active``."""
    if record.revoked_at is not None:
        return "revoked"
    return "active" if record.live(now) else "expired"


async def list_principals(request: Request) -> Response:
    _identity(request, "admin")
    query = read_query(request, PrincipalsQuery)
    auth = _store_auth(request)
    found = await _refused(
        auth.store.principals(limit=query.limit + 1, after=query.after), 400, "bad_parameter"
    )
    page = found[: query.limit]
    more = len(found) > query.limit
    return json_response(
        PrincipalPage(items=[principal_view(p) for p in page], next=page[-1].name if more else None)
    )


async def create_principal(request: Request) -> Response:
    _identity(request, "admin")
    body = await _body(request, NewPrincipal)
    auth = _store_auth(request)
    added = await _changed(
        auth,
        auth.store.add_principal(
            body.name,
            role=body.role,
            display_name=body.display_name,
            groups=body.groups,
            email=body.email,
            slack_user=body.slack_user,
        ),
    )
    return json_response(principal_view(added), 201)


async def change_principal(request: Request) -> Response:
    _identity(request, "admin")
    name = _path(request, "name")
    body = await _body(request, PrincipalChange)
    auth = _store_auth(request)
    changed = await _changed(
        auth,
        auth.store.update_principal(
            name,
            role=body.role,
            display_name=body.display_name,
            groups=body.groups,
            disabled=body.disabled,
            email=body.email,
            slack_user=body.slack_user,
        ),
    )
    return json_response(principal_view(changed))


async def list_tokens(request: Request) -> Response:
    _identity(request, "admin")
    query = read_query(request, TokensQuery)
    auth = _store_auth(request)
    found = await _refused(
        auth.store.tokens(principal=query.principal, limit=query.limit + 1, after=query.after),
        400,
        "bad_parameter",
    )
    page = found[: query.limit]
    now = time.time()
    return json_response(
        TokenPage(
            items=[token_view(t, now) for t in page],
            next=page[-1].id if len(found) > query.limit else None,
        )
    )


async def create_token(request: Request) -> Response:
    _identity(request, "admin")
    body = await _body(request, NewToken)
    auth = _store_auth(request)
    now = time.time()
    try:
        expires_at = None if body.expires is None else parse_expiry(body.expires, now=now)
    except ValueError as exc:
        raise ApiError(422, "invalid_body", f"expires: {exc}") from exc
    issued = await _changed(
        auth,
        issue_token(
            auth.store,
            body.principal,
            role=body.role,
            tools=body.tools,
            threads=body.threads,
            expires_at=expires_at,
        ),
    )
    view = token_view(issued.record, now)
    fields = {f: getattr(view, f) for f in view.__struct_fields__}
    return json_response(IssuedTokenView(**fields, token=issued.token), 201)


async def revoke_token(request: Request) -> Response:
    _identity(request, "admin")
    token_id = _path(request, "id")
    auth = _store_auth(request)
    revoked = await _changed(auth, auth.store.revoke_tokens(id=token_id))
    now = time.time()
    return json_response(RevokedTokens(items=[token_view(t, now) for t in revoked]))


async def revoke_principal_tokens(request: Request) -> Response:
    _identity(request, "admin")
    name = _path(request, "name")
    auth = _store_auth(request)
    revoked = await _changed(auth, auth.store.revoke_tokens(principal=name))
    now = time.time()
    return json_response(RevokedTokens(items=[token_view(t, now) for t in revoked]))
