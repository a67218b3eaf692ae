"""Browser sessions: who a cookie belongs to, its CSRF token, and the sign-ins under way.

Both tables are in this process's memory, keyed by the SHA-256 of a random 256-bit secret
that only the browser holds (in an HttpOnly cookie): a session ends when it expires, when
its person signs out (the server forgets it, so a copy of the cookie is worth nothing after),
or when the server restarts (people sign in again; the provider's own session usually makes
that one click). Several server processes behind one address need the load balancer to send
a browser to the same one (sticky sessions), or the trusted proxy mode, which keeps no state
here.

A sign-in under way is kept under its ``state`` and taken out when the provider sends the
browser back: a ``state`` works once. It is bound to the browser that started it by a second
cookie, so a link to the callback made by someone else does not sign a victim in as them.

Invariant: a table never holds more than its limit; a new entry first drops the expired
ones, then the oldest.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeVar

from ._auth import Identity

__all__ = ["BrowserSession", "PendingSignIn", "Sessions"]

SIGN_IN_SECONDS: Final = 600.0
"""How long a person has at the provider between leaving for it and coming back."""
MAX_SESSIONS: Final = 100_000
MAX_PENDING: Final = 10_000

T = TypeVar("T", "BrowserSession", "PendingSignIn")


@dataclass(frozen=True, kw_only=True)
class BrowserSession:
    """A browser signed in with single sign-on."""

    identity: Identity
    """Who signed in, with the role and scopes their groups gave them then."""
    csrf: str
    """The token every state-changing request with this session's cookie must carry."""
    expires: float
    """When it ends (the sessions' clock)."""


@dataclass(frozen=True, kw_only=True)
class PendingSignIn:
    """A browser sent to the provider, not back yet."""

    browser: str
    """The SHA-256 of the secret in the sign-in cookie of the browser that left."""
    verifier: str
    """The PKCE code verifier whose challenge the provider got."""
    nonce: str
    """The nonce the ID token must carry."""
    next: str
    """The inbox route to show after signing in (``#/interrupts/...``), or ``""``."""
    expires: float
    """When the provider's answer is no longer taken (the sessions' clock)."""


def new_secret() -> str:
    """A random secret for a cookie (43 URL-safe characters, 256 bits)."""
    return secrets.token_urlsafe(32)


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


class Sessions:
    """The browser sessions of this server and the sign-ins under way (see the module).

    Args:
        lifetime: Seconds a session lasts.
        clock: The time, in seconds (``time.monotonic``; tests pass their own).
    """

    def __init__(
        self,
        *,
        lifetime: float,
        clock: Callable[[], float] = time.monotonic,
        max_sessions: int = MAX_SESSIONS,
        max_pending: int = MAX_PENDING,
    ) -> None:
        self.lifetime = lifetime
        self._clock = clock
        self._sessions: dict[str, BrowserSession] = {}
        self._pending: dict[str, PendingSignIn] = {}
        self._max_sessions = max_sessions
        self._max_pending = max_pending
        self._key = secrets.token_bytes(32)

    def __repr__(self) -> str:
        return f"<Sessions {len(self._sessions)} signed in, {len(self._pending)} signing in>"

    # -- signing in ------------------------------------------------------------------------------

    def begin(self, browser: str, *, next: str = "") -> tuple[str, PendingSignIn]:
        """Keep a new sign-in of the browser holding ``browser``; its ``state`` and record."""
        state = new_secret()
        pending = PendingSignIn(
            browser=_digest(browser),
            verifier=secrets.token_urlsafe(48),
            nonce=new_secret(),
            next=next,
            expires=self._clock() + SIGN_IN_SECONDS,
        )
        _put(self._pending, _digest(state), pending, self._clock(), self._max_pending)
        return state, pending

    def finish(self, state: str, browser: str | None) -> PendingSignIn | None:
        """Take the sign-in of ``state`` out; it, if it is live and ``browser`` started it.

        A ``state`` is taken out whether or not the browser matches: it works at most once.
        """
        pending = self._pending.pop(_digest(state), None)
        if pending is None or pending.expires <= self._clock() or browser is None:
            return None
        if not hmac.compare_digest(pending.browser, _digest(browser)):
            return None
        return pending

    # -- sessions --------------------------------------------------------------------------------

    def open(self, identity: Identity) -> tuple[str, BrowserSession]:
        """A new session of ``identity``: the secret for its cookie, and the session."""
        secret = new_secret()
        session = BrowserSession(
            identity=identity, csrf=new_secret(), expires=self._clock() + self.lifetime
        )
        _put(self._sessions, _digest(secret), session, self._clock(), self._max_sessions)
        return secret, session

    def find(self, secret: str) -> BrowserSession | None:
        """The live session whose cookie holds ``secret``, or None."""
        key = _digest(secret)
        session = self._sessions.get(key)
        if session is not None and session.expires <= self._clock():
            del self._sessions[key]
            return None
        return session

    def close(self, secret: str) -> bool:
        """End the session whose cookie holds ``secret``; whether there was one."""
        return self._sessions.pop(_digest(secret), None) is not None

    def csrf_for(self, name: str) -> str:
        """The CSRF token of a person the proxy names (derived: the proxy keeps no session here)."""
        mac = hmac.new(self._key, name.encode("utf-8", "surrogatepass"), hashlib.sha256)
        return mac.hexdigest()


def _put(table: dict[str, T], key: str, value: T, now: float, limit: int) -> None:
    if len(table) >= limit:
        for old in [k for k, v in table.items() if v.expires <= now]:
            del table[old]
    while len(table) >= limit:
        del table[next(iter(table))]
    table[key] = value
