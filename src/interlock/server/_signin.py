"""Who is calling, in one function; and signing people in and out of the web inbox.

`authenticate` tries, in order: the ``Authorization`` header (a bearer token: when the header
is there, it alone decides), the session cookie of a browser signed in with single sign-on,
and the identity headers of a trusted proxy. A request authenticated by a cookie (the
session's, or the proxy's that the browser sends it) and that may change something (any
method but GET, HEAD and OPTIONS) must also carry the ``X-CSRF-Token`` header with the token
``GET /auth/session`` gave the page: another site can make a browser send its cookies, and
cannot read that token.

The sign-in routes: ``GET /auth/login`` sends the browser to the provider, ``GET
/auth/callback`` takes it back and opens a session, ``POST /auth/logout`` ends it, and ``GET
/auth/session`` tells the page who the browser is signed in as (by cookie or proxy), with the
CSRF token. The session cookie is HttpOnly, SameSite=Strict, and Secure when the server is
reached over TLS (the request is https, or the redirect URL is); the sign-in cookie that binds
a sign-in to its browser is SameSite=Lax, since the provider's redirect back is a navigation
from another site.
"""

from __future__ import annotations

import hmac
import html
import logging
import re
from dataclasses import dataclass
from typing import Final, Literal

import msgspec
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ._access import NoAccess
from ._auth import Identity
from ._errors import ApiError, json_response
from ._oidc import ProviderUnavailable, SignInRefused
from ._sessions import SIGN_IN_SECONDS, new_secret
from ._state import ServerState

__all__ = [
    "CSRF_HEADER",
    "SESSION_COOKIE",
    "SIGN_IN_COOKIE",
    "authenticate",
    "browser_session",
    "sign_in",
    "sign_in_callback",
    "sign_out",
]

log = logging.getLogger("interlock.server")

SESSION_COOKIE: Final = "interlock_session"
SIGN_IN_COOKIE: Final = "interlock_signin"
CSRF_HEADER: Final = "X-CSRF-Token"
_SAFE: Final = frozenset({"GET", "HEAD", "OPTIONS"})
_SECRET: Final = re.compile(r"^[A-Za-z0-9_-]{43}$")
_ROUTE: Final = re.compile(r"^#/[\x21-\x7e]{0,500}$")
"""An inbox route to return to after signing in: a fragment, so it cannot leave the page."""

Via = Literal["token", "session", "proxy"]


@dataclass(frozen=True, kw_only=True)
class Caller:
    """Who made a request, and how they proved it."""

    identity: Identity
    via: Via
    csrf: str | None
    """The token its state-changing requests must carry; None for a bearer token."""


def authenticate(request: Request, state: ServerState) -> Identity | None:
    """The identity of the request's caller, or None: bearer token, session cookie, proxy.

    Raises:
        ApiError: 403 when a request authenticated by a cookie would change something
            without the CSRF token, or the proxy names someone with no access here.
    """
    found = caller(request, state)
    if found is None:
        return None
    sent = request.headers.get(CSRF_HEADER, "")
    if found.csrf is not None and request.method not in _SAFE and not _same(sent, found.csrf):
        raise ApiError(
            403,
            "csrf_failed",
            f"this request came with the browser's sign-in and without its CSRF token: "
            f"send the {CSRF_HEADER} header with the token GET auth/session gives (the "
            "inbox does; reload it), or call with a bearer token",
        )
    return found.identity


def caller(request: Request, state: ServerState) -> Caller | None:
    """Who the request is from (see `authenticate`), before any CSRF check."""
    header = request.headers.get("authorization")
    if header is not None:
        identity = state.auth.authenticate(header)
        return None if identity is None else Caller(identity=identity, via="token", csrf=None)
    try:
        return _browser(request, state)
    except NoAccess as exc:
        raise ApiError(403, "no_access", str(exc)) from exc


def _browser(request: Request, state: ServerState) -> Caller | None:
    """The session cookie's identity, else the trusted proxy's (raises `NoAccess`)."""
    sessions = state.sessions
    if sessions is None:
        return None
    secret = request.cookies.get(SESSION_COOKIE)
    if secret and _SECRET.match(secret):
        session = sessions.find(secret)
        if session is not None:
            return Caller(identity=session.identity, via="session", csrf=session.csrf)
    if state.proxy is not None:
        identity = state.proxy.identity(request)
        if identity is not None:
            return Caller(identity=identity, via="proxy", csrf=sessions.csrf_for(identity.name))
    return None


def _same(sent: str, expected: str) -> bool:
    return hmac.compare_digest(
        sent.encode("utf-8", "surrogateescape"), expected.encode("utf-8", "surrogateescape")
    )


# -- the routes ----------------------------------------------------------------------------------


class SignedInView(msgspec.Struct, kw_only=True):
    """Who a browser is signed in as."""

    name: str
    role: str
    tools: list[str]
    threads: list[str]
    groups: list[str]


class BrowserView(msgspec.Struct, kw_only=True):
    """What the inbox needs to know of its browser's sign-in (``GET /auth/session``)."""

    identity: SignedInView | None
    """Who the browser is signed in as, by its session cookie or the trusted proxy."""
    via: Literal["session", "proxy"] | None
    csrf: str | None
    """The ``X-CSRF-Token`` its state-changing requests must carry."""
    sign_in: str | None
    """Where to sign in with single sign-on (relative to the server), if it is configured."""
    sign_out: str | None
    """Where to sign out: ``auth/logout`` (POST) for a session, the proxy's sign-out URL."""
    refused: str | None
    """Why the proxy's person may not use the server, when it names one who may not."""
    four_eyes: bool


class SignedOut(msgspec.Struct, kw_only=True):
    """The answer to ``POST /auth/logout``."""

    signed_out: bool
    """Whether a session ended (False: the cookie named none)."""


def _state(request: Request) -> ServerState:
    state: ServerState = request.app.state.interlock
    return state


async def browser_session(request: Request) -> Response:
    """``GET /auth/session``: who this browser is signed in as, by cookie or proxy."""
    state = _state(request)
    refused: str | None = None
    try:
        found = _browser(request, state)
    except NoAccess as exc:
        found, refused = None, str(exc)
    sign_out = None
    if found is not None and found.via == "session":
        sign_out = "auth/logout"
    elif found is not None and state.proxy is not None:
        sign_out = state.proxy.config.sign_out_url
    view = BrowserView(
        identity=None if found is None else _view(found.identity),
        via=None if found is None or found.via == "token" else found.via,
        csrf=None if found is None else found.csrf,
        sign_in="auth/login" if state.oidc is not None else None,
        sign_out=sign_out,
        refused=refused,
        four_eyes=state.four_eyes,
    )
    return json_response(view, headers={"Cache-Control": "no-store"})


def _view(identity: Identity) -> SignedInView:
    return SignedInView(
        name=identity.name,
        role=identity.role,
        tools=list(identity.tools),
        threads=list(identity.threads),
        groups=list(identity.groups),
    )


async def sign_in(request: Request) -> Response:
    """``GET /auth/login``: send the browser to the OpenID provider."""
    state = _state(request)
    oidc, sessions = state.oidc, state.sessions
    if oidc is None or sessions is None:
        raise ApiError(404, "not_found", "single sign-on is not configured on this server")
    route = request.query_params.get("next", "")
    # One sign-in cookie per browser, kept across its tabs: each tab's sign-in stays valid.
    browser = request.cookies.get(SIGN_IN_COOKIE, "")
    if not _SECRET.match(browser):
        browser = new_secret()
    key, pending = sessions.begin(browser, next=route if _ROUTE.match(route) else "")
    try:
        url = await oidc.sign_in_url(state=key, nonce=pending.nonce, verifier=pending.verifier)
    except ProviderUnavailable as exc:
        log.warning("single sign-on: %s", exc)
        return _page(502, "The sign-in provider did not answer", f"{exc}. Try again in a moment.")
    response = RedirectResponse(url, 303, headers={"Cache-Control": "no-store"})
    response.set_cookie(
        SIGN_IN_COOKIE,
        browser,
        max_age=int(SIGN_IN_SECONDS),
        path=_root(request) + "/auth/",
        secure=_secure(request, state),
        httponly=True,
        samesite="lax",
    )
    return response


async def sign_in_callback(request: Request) -> Response:
    """``GET /auth/callback``: the provider sends the browser back; open its session."""
    state = _state(request)
    oidc, sessions = state.oidc, state.sessions
    if oidc is None or sessions is None:
        raise ApiError(404, "not_found", "single sign-on is not configured on this server")
    params = request.query_params
    key = params.get("state", "")
    pending = sessions.finish(key, request.cookies.get(SIGN_IN_COOKIE)) if key else None
    if pending is None:
        return _page(
            400,
            "This sign-in is over",
            "The answer from the sign-in provider was used already, came too late, or "
            "belongs to a sign-in started in another browser. Sign in again.",
        )
    if "error" in params:
        reason = params.get("error_description") or params["error"]
        return _page(403, "The provider did not sign you in", f"It answered: {reason}.")
    code = params.get("code", "")
    if not code:
        return _page(400, "Sign-in failed", "The provider's answer has no code. Sign in again.")
    try:
        identity = await oidc.identity(code=code, verifier=pending.verifier, nonce=pending.nonce)
    except SignInRefused as exc:
        log.warning("single sign-on refused: %s", exc)
        return _page(
            401,
            "Sign-in refused",
            f"{exc}. Sign in again; if it happens again, tell whoever runs this server.",
        )
    except NoAccess as exc:
        log.info("single sign-on: no access: %s", exc)
        return _page(403, "No access", f"{exc}. Ask an administrator for access.")
    except ProviderUnavailable as exc:
        log.warning("single sign-on: %s", exc)
        return _page(502, "The sign-in provider did not answer", f"{exc}. Try again in a moment.")
    secret, _ = sessions.open(identity)
    log.info(
        "%s signed in with single sign-on as %s (groups: %s)",
        identity.name,
        identity.role,
        ", ".join(identity.groups) or "none",
    )
    secure = _secure(request, state)
    response = RedirectResponse(
        "../inbox" + pending.next, 303, headers={"Cache-Control": "no-store"}
    )
    response.set_cookie(
        SESSION_COOKIE,
        secret,
        max_age=int(sessions.lifetime),
        path=_root(request) + "/",
        secure=secure,
        httponly=True,
        samesite="strict",
    )
    response.delete_cookie(
        SIGN_IN_COOKIE, path=_root(request) + "/auth/", secure=secure, httponly=True, samesite="lax"
    )
    return response


async def sign_out(request: Request) -> Response:
    """``POST /auth/logout``: end this browser's session (with its CSRF token)."""
    state = _state(request)
    sessions = state.sessions
    secret = request.cookies.get(SESSION_COOKIE, "")
    session = sessions.find(secret) if sessions is not None and _SECRET.match(secret) else None
    if session is not None:
        assert sessions is not None
        if not _same(request.headers.get(CSRF_HEADER, ""), session.csrf):
            raise ApiError(
                403, "csrf_failed", f"signing out needs the {CSRF_HEADER} header of the session"
            )
        sessions.close(secret)
        log.info("%s signed out", session.identity.name)
    response = json_response(SignedOut(signed_out=session is not None))
    response.delete_cookie(
        SESSION_COOKIE,
        path=_root(request) + "/",
        secure=_secure(request, state),
        httponly=True,
        samesite="strict",
    )
    return response


def _root(request: Request) -> str:
    root: str = request.scope.get("root_path", "")
    return root.rstrip("/")


def _secure(request: Request, state: ServerState) -> bool:
    """Whether the browser reaches the server over TLS (so cookies are Secure)."""
    return request.url.scheme == "https" or (state.oidc is not None and state.oidc.secure)


def _page(status: int, title: str, text: str) -> Response:
    """A short page for a person whose browser came back from the provider."""
    body = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)} · interlock</title></head><body><main>"
        f"<h1>{html.escape(title)}</h1><p>{html.escape(text)}</p>"
        '<p><a href="login">Sign in again</a> · <a href="../inbox">Back to the inbox</a></p>'
        "</main></body></html>"
    )
    return Response(
        body,
        status,
        media_type="text/html; charset=utf-8",
        headers={
            "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
            "Cache-Control": "no-store",
        },
    )
