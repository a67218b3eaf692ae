"""`StoreAuth`: bearer tokens checked against the principals and tokens kept in a store.

The server asks who a request is from on every request, synchronously (`Authenticator`), so
the answer must come from memory: a `StoreAuth` holds a mirror of the store's principals and
of their tokens that are not revoked, by token hash, with the `Identity` each token is worth
worked out once. While it runs (``async with auth``, which the server's lifespan does) it
follows the store's identity changes (`interlock.stores.Store.identity_changes`), a short
read every ``refresh`` seconds that finds nothing most of the time: a token revoked or made
through any server, or the command line, is refused or taken by every server within that
time, without a restart. A token's expiry is checked against the clock on each request.

Invariant: the mirror holds the store as of its last read: every change up to revision
``_rev`` is applied, none after it.

A server that cannot read the store for ``stale_after`` seconds refuses every token until it
can again: it cannot know what was revoked meanwhile.

When a token is used, the store is told (``last_used_at``) at most once a minute per token by
each server, in the follower's next round, never on the request's path.
"""

from __future__ import annotations

import logging
import math
import re
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Final, Self

import anyio
from anyio.abc import TaskGroup

from .._errors import InterlockError, StoreClosed, UnknownPrincipal
from .._principals import principal_key
from ..stores import IdentityChange, PrincipalRecord, Role, Store, TokenRecord
from ._auth import Identity, TokenAuth, bearer_token, hash_token, lower_role, new_token

__all__ = [
    "ImportReport",
    "IssuedToken",
    "StoreAuth",
    "import_tokens",
    "issue_token",
    "parse_expiry",
]

log = logging.getLogger("interlock.server")

PAGE: Final = 1000
"""Identity changes read at once."""
USE_EVERY: Final = 60.0
"""Seconds between two records of one token's use by one server."""
SWEEP_EVERY: Final = 60.0
"""Seconds between two sweeps of the expired tokens out of the mirror (they are refused by
their expiry before that)."""
_MAX_BACKOFF: Final = 1.0


@dataclass(frozen=True, slots=True)
class _Entry:
    """A token the mirror lets in (until it expires): who it is, and until when."""

    identity: Identity
    expires_at: float | None
    id: str


class StoreAuth:
    """Bearer tokens checked against the principals and tokens kept in ``store``.

    A token is let in while it is neither revoked nor expired and its principal is not
    disabled, as an `Identity` named for its principal: the principal's role, lowered to the
    token's if the token has a lower one (never raised), the token's tool and thread scopes,
    and the principal's groups.

    It must run to follow the store: ``async with auth:`` reads every principal and token,
    then follows the changes until the block ends. `create_app` does that in the server's
    lifespan when it is given one (a sketch, not run)::

        auth = StoreAuth(store)
        api = create_app(app, auth=auth)

    Args:
        store: Where the principals and tokens are (often the served app's store).
        refresh: Seconds between two looks at the store's identity changes: the longest a
            revocation made elsewhere takes to reach this server.
        stale_after: Seconds without a successful look after which every token is refused,
            until the store answers again.
        clock: Unix time, for expiries and the record of uses.
    """

    def __init__(
        self,
        store: Store,
        *,
        refresh: float = 0.25,
        stale_after: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(store, Store):
            raise TypeError(f"store must be an interlock Store, not {store!r:.80}")
        for name, value in (("refresh", refresh), ("stale_after", stale_after)):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{name} must be a number of seconds, not {value!r}")
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be more than 0 seconds, not {value!r}")
        if not refresh < stale_after:
            raise ValueError(
                f"refresh ({refresh:g}s) must be shorter than stale_after ({stale_after:g}s), "
                "or every token would be refused between two looks at the store"
            )
        self._store = store
        self._interval = float(refresh)
        self._stale_after = float(stale_after)
        self._clock = clock
        self._reading = anyio.Lock()
        self._group: TaskGroup | None = None
        self._stale_warned = False
        self._forget()

    def _forget(self) -> None:
        """Start over from an empty mirror (revision 0)."""
        self._rev = 0
        self._principals: dict[str, PrincipalRecord] = {}
        # Tokens not revoked, by hash; by principal key, their hashes.
        self._tokens: dict[str, TokenRecord] = {}
        self._of: dict[str, set[str]] = {}
        self._live: dict[str, _Entry] = {}
        self._used_at: dict[str, float] = {}
        self._to_record: dict[str, float] = {}
        self._confirmed = -math.inf  # time.monotonic() when the last successful read began

    @property
    def store(self) -> Store:
        """Where the principals and tokens are."""
        return self._store

    @property
    def running(self) -> bool:
        """Whether it follows the store (inside ``async with``)."""
        return self._group is not None

    def __repr__(self) -> str:
        state = "following" if self.running else "stopped"
        return (
            f"<StoreAuth {len(self._principals)} principals, {len(self._live)} tokens let in, "
            f"revision {self._rev} {state}>"
        )

    async def __aenter__(self) -> Self:
        if self._group is not None:
            raise RuntimeError("this StoreAuth is running already; enter it once")
        await self.refresh()
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        group.start_soon(self._follow)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        group, self._group = self._group, None
        if group is None:
            return
        group.cancel_scope.cancel()
        # Not given the block's exception: that is the caller's to raise, not the group's.
        await group.__aexit__(None, None, None)
        with anyio.CancelScope(shield=True), anyio.move_on_after(2.0):
            try:
                await self._record_uses()
            except InterlockError as exc:
                log.warning("recording the last uses of tokens failed: %s", exc)

    def authenticate(self, authorization: str | None) -> Identity | None:
        """The identity an ``Authorization: Bearer <token>`` header value names, or None.

        Raises:
            RuntimeError: It is not running (see the class docstring).
        """
        if self._group is None:
            raise RuntimeError(
                "this StoreAuth does not follow its store: enter it (async with auth) or serve "
                "it with create_app, whose lifespan enters it"
            )
        token = bearer_token(authorization)
        if token is None:
            return None
        entry = self._live.get(hash_token(token))
        if entry is None:
            return None
        now = self._clock()
        if entry.expires_at is not None and now >= entry.expires_at:
            return None
        if time.monotonic() - self._confirmed > self._stale_after:
            if not self._stale_warned:
                self._stale_warned = True
                log.warning(
                    "the identities were last read from the store more than %gs ago: every "
                    "token is refused until it answers again",
                    self._stale_after,
                )
            return None
        if now - self._used_at.get(entry.id, -math.inf) >= USE_EVERY:
            self._used_at[entry.id] = now
            self._to_record[entry.id] = now
        return entry.identity

    async def refresh(self) -> None:
        """Apply the store's identity changes since the last read, now.

        The server calls it after each change it makes, so that its own answers follow at
        once; the follower calls it every ``refresh`` seconds.

        Raises:
            StoreError: The store did not answer (the mirror is kept as it was).
        """
        async with self._reading:
            started = time.monotonic()
            while True:
                try:
                    page = await self._store.identity_changes(after=self._rev, limit=PAGE)
                except ValueError:
                    # Ahead of the store: it was restored from an older copy. Read it anew.
                    log.warning(
                        "the store's identity revision is behind this server's (%d): the "
                        "store was restored from a backup; reading its identities anew",
                        self._rev,
                    )
                    self._forget()
                    continue
                self._apply(page)
                if len(page) < PAGE:
                    break
            self._confirmed = started
            self._stale_warned = False

    def _apply(self, changes: Sequence[IdentityChange]) -> None:
        now = self._clock()
        for change in changes:
            if isinstance(change, PrincipalRecord):
                key = change.key
                self._principals[key] = change
                for digest in self._of.get(key, ()):
                    self._let_in(digest)
            else:
                key = principal_key(change.principal)
                held = self._of.setdefault(key, set())
                if change.live(now):
                    self._tokens[change.hash] = change
                    held.add(change.hash)
                    if change.last_used_at is not None:
                        self._used_at.setdefault(change.id, change.last_used_at)
                else:
                    self._tokens.pop(change.hash, None)
                    held.discard(change.hash)
                    self._used_at.pop(change.id, None)
                self._let_in(change.hash)
            self._rev = change.rev

    def _let_in(self, digest: str) -> None:
        """Work out what the token ``digest`` is worth now (nothing: it is not let in)."""
        token = self._tokens.get(digest)
        owner = None if token is None else self._principals.get(principal_key(token.principal))
        if token is None or owner is None or owner.disabled:
            self._live.pop(digest, None)
            return
        identity = Identity(
            name=owner.name,
            role=owner.role if token.role is None else lower_role(owner.role, token.role),
            tools=token.tools,
            threads=token.threads,
            groups=owner.groups,
        )
        self._live[digest] = _Entry(identity=identity, expires_at=token.expires_at, id=token.id)

    def _drop_expired(self) -> None:
        now = self._clock()
        for digest, entry in list(self._live.items()):
            if entry.expires_at is not None and now >= entry.expires_at:
                del self._live[digest]
                token = self._tokens.pop(digest, None)
                if token is not None:
                    self._of.get(principal_key(token.principal), set()).discard(digest)

    async def _record_uses(self) -> None:
        if not self._to_record:
            return
        batch, self._to_record = self._to_record, {}
        try:
            await self._store.touch_tokens(batch)
        except BaseException:
            self._to_record = {**batch, **self._to_record}
            raise

    async def _follow(self) -> None:
        failures = 0
        swept = time.monotonic()
        while True:
            await anyio.sleep(min(_MAX_BACKOFF, self._interval * 2**failures))
            try:
                await self.refresh()
                await self._record_uses()
            except StoreClosed:
                return
            except InterlockError as exc:
                failures = min(failures + 1, 16)
                log.warning("reading the identities from the store failed (%s); retrying", exc)
                continue
            failures = 0
            if time.monotonic() - swept >= SWEEP_EVERY:
                swept = time.monotonic()
                self._drop_expired()


@dataclass(frozen=True, kw_only=True)
class IssuedToken:
    """A token just made: the token itself, shown once, and its record in the store."""

    token: str = field(repr=False)
    """The token to give to its holder; the store keeps only its hash."""
    record: TokenRecord
    """As the store keeps it (its ``id`` names it in listings and revocations)."""


async def issue_token(
    store: Store,
    principal: str,
    *,
    role: Role | None = None,
    tools: Sequence[str] = ("*",),
    threads: Sequence[str] = ("",),
    expires_at: float | None = None,
) -> IssuedToken:
    """Make a new token of ``principal`` and keep its hash in ``store``.

    Args:
        store: Where the principal is.
        principal: Its name (in any form of it: ``Ana`` or ``ana``).
        role: The most the token may do, no more than its principal's role (None: the
            principal's role, whatever it becomes).
        tools: Patterns of the tools whose questions it may see and decide.
        threads: Prefixes of the thread ids it may see.
        expires_at: Unix time from which it is refused (`parse_expiry` reads ``30d``).

    Raises:
        UnknownPrincipal: No principal has that name.
        ValueError: ``role`` is above the principal's, ``expires_at`` has passed, or a scope
            is not one.
    """
    owner = await store.get_principal(principal)
    if owner is None:
        raise UnknownPrincipal(principal)
    if role is not None and lower_role(owner.role, role) != role:
        raise ValueError(
            f"a token of {owner.name!r} may do at most what its principal may, as a "
            f"{owner.role}: give role {owner.role!r} or a lower one, or leave it out"
        )
    if expires_at is not None and expires_at <= time.time():
        raise ValueError("the token would expire before it is made: give a time to come")
    secret = new_token()
    record = await store.add_token(
        secrets.token_hex(6),
        hash=hash_token(secret),
        principal=owner.name,
        role=role,
        tools=tools,
        threads=threads,
        expires_at=expires_at,
    )
    return IssuedToken(token=secret, record=record)


@dataclass(frozen=True, kw_only=True)
class ImportReport:
    """What `import_tokens` did."""

    principals: tuple[str, ...]
    """The principals it added."""
    tokens: tuple[str, ...]
    """The ids of the tokens it added."""
    kept: tuple[str, ...]
    """Notes on what it left as the store has it (a principal there already, with another
    role or other groups)."""


async def import_tokens(store: Store, auth: TokenAuth) -> ImportReport:
    """Add the identities of a tokens file (`TokenAuth.from_file`) to ``store``.

    A principal is added for each identity whose name the store does not have (its role and
    groups); a token for each hash the store does not have, revoked or not, with the
    identity's scopes (and no expiry). What the store has already stays as it is: importing
    the same file again adds nothing, and a token revoked in the store is never brought back.

    Raises:
        StoreError: The store failed (what was added before stays).
    """
    known: set[str] = set()
    after: str | None = None
    while page := await store.tokens(limit=PAGE, after=after):
        known.update(t.hash for t in page)
        after = page[-1].id
    added: list[str] = []
    tokens: list[str] = []
    kept: list[str] = []
    for digest, identity in auth.tokens.items():
        owner = await store.get_principal(identity.name)
        if owner is None:
            owner = await store.add_principal(
                identity.name, role=identity.role, groups=identity.groups
            )
            added.append(owner.name)
        elif (owner.role, owner.groups) != (identity.role, identity.groups):
            kept.append(
                f"{owner.name} is a {owner.role} in the store (the file says {identity.role}"
                f"{', groups ' + ', '.join(identity.groups) if identity.groups else ''}): "
                "kept as the store has it"
            )
        if digest in known:
            continue
        role = None if identity.role == owner.role else lower_role(owner.role, identity.role)
        record = await store.add_token(
            secrets.token_hex(6),
            hash=digest,
            principal=owner.name,
            role=role,
            tools=identity.tools,
            threads=identity.threads,
        )
        known.add(digest)
        tokens.append(record.id)
    return ImportReport(principals=tuple(added), tokens=tuple(tokens), kept=tuple(kept))


_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION: Final = re.compile(r"(?:\d+(?:\.\d+)?[smhdw])+")
_PART: Final = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


def parse_expiry(text: str, *, now: float | None = None) -> float:
    """The Unix time ``text`` names: a duration from ``now`` (``12h``, ``30d``, ``1w``,
    ``1h30m``) or a timestamp with its time zone (``2030-01-31T18:00:00+01:00``, ``...Z``).

    >>> parse_expiry("12h", now=1_000_000.0)
    1043200.0
    >>> parse_expiry("2030-01-01T00:00:00Z")
    1893456000.0

    Raises:
        ValueError: It is neither, or a timestamp without its time zone.
    """
    if not isinstance(text, str):
        raise TypeError(f"an expiry must be a str, not {type(text).__name__}")
    cleaned = text.strip().lower()
    if _DURATION.fullmatch(cleaned):
        seconds = sum(float(n) * _UNITS[unit] for n, unit in _PART.findall(cleaned))
        return (time.time() if now is None else now) + seconds
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"{text!r} is not an expiry: give a duration (45m, 12h, 30d, 1w, 1h30m) or a "
            "timestamp with its time zone (2030-01-31T18:00:00Z)"
        ) from None
    if moment.tzinfo is None:
        raise ValueError(
            f"{text!r} has no time zone: add one (Z for UTC, or +01:00), so that every "
            "server reads the same moment"
        )
    return moment.timestamp()
