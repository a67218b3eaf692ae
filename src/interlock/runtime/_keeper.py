"""A thread of the process that keeps running calls' leases alive while their event loop cannot.

A call renews its lease from its own event loop every ``ttl / 3`` (`RunCtx`). A node that blocks
that loop — a sync node making a 40-second HTTP call, a ``time.sleep`` in an async node — stops
the renewals, and without them the lease lapses: another executor takes the thread over and the
node body runs a second time. So every leased call is also *watched* by one keeper thread per
process. When a call's renewal is half a ``ttl`` overdue (its loop is stuck), the keeper renews
the lease itself, from its own thread, through a short-lived event loop of its own. The built-in
stores serve a call from any thread (SQLite under its connection lock, PostgreSQL on a pooled
connection, the memory store without awaiting).

Costs on the hot path: registering and unregistering a watch (a lock and a set operation); the
keeper thread sleeps until the earliest watch could be due and is woken only when a new watch
would be due sooner. Sync nodes keep running on the event loop thread (decision 7).
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Final

from .._daemon import start_thread
from .._errors import FencedOut
from .._lazy import lazy_asyncio, lazy_module
from ..stores import Fence, Store

if TYPE_CHECKING:
    import asyncio

    import anyio
    import anyio.to_thread
else:  # imported by the first call that needs it, not by `import interlock`
    asyncio = lazy_asyncio(globals())
    anyio = lazy_module("anyio", globals(), "anyio.to_thread")

__all__ = ["KEEPER", "LeaseKeeper", "Watch"]

_PATIENCE: Final = 0.5
"""Fraction of ``ttl`` after the last renewal at which the keeper steps in."""
_RETRY: Final = 1 / 6
"""Fraction of ``ttl`` the keeper waits before trying again after a failed renewal."""


class Watch:
    """One running call's lease, as the keeper sees it."""

    __slots__ = ("due", "fence", "lock", "lost", "period", "stopped", "store", "thread")

    def __init__(self, store: Store, thread: str, fence: Fence) -> None:
        self.store = store
        self.thread = thread
        self.fence = fence
        self.period = fence.ttl * _PATIENCE
        self.due = time.monotonic() + self.period
        """When the keeper renews unless the call's own loop renews before (monotonic)."""
        self.lock = threading.Lock()
        """Held by the keeper while it renews; the call waits for it before writing on."""
        self.stopped = False
        self.lost = False
        """The keeper found the lease taken over (`FencedOut`); it stopped renewing it."""

    def renewed(self, at: float) -> None:
        """The call's own loop renewed the lease at ``at`` (monotonic)."""
        self.due = at + self.period


class LeaseKeeper:
    """Renews the leases of watched calls whose own renewals are overdue; see the module."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        # Invariant: the keeper thread is running whenever _watches is not empty.
        self._watches: set[Watch] = set()
        self._thread: threading.Thread | None = None
        self._wake_at: float | None = None
        """When the keeper thread wakes next (None: it waits for a watch)."""

    def watch(self, store: Store, thread: str, fence: Fence) -> Watch:
        """Start watching a call's lease (held under ``fence``) until `unwatch`."""
        watch = Watch(store, thread, fence)
        with self._cond:
            self._watches.add(watch)
            if self._thread is None:
                self._thread = start_thread(self._serve, "interlock-lease-keeper")
            elif self._wake_at is None or watch.due < self._wake_at:
                self._cond.notify()
        return watch

    async def unwatch(self, watch: Watch) -> None:
        """Stop watching; a renewal in flight finishes first (the call's release comes last)."""
        watch.stopped = True
        with self._cond:
            self._watches.discard(watch)
        if watch.lock.locked():
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(_wait_for, watch.lock)

    def _serve(self) -> None:
        while True:
            with self._cond:
                while True:
                    now = time.monotonic()
                    due = [w for w in self._watches if w.due <= now]
                    if due:
                        self._wake_at = now
                        break
                    self._wake_at = min((w.due for w in self._watches), default=None)
                    self._cond.wait(None if self._wake_at is None else self._wake_at - now)
            for watch in due:
                self._renew(watch)

    def _renew(self, watch: Watch) -> None:
        with watch.lock:
            if watch.stopped or watch.due > time.monotonic():
                return  # the call ended, or its own loop renewed meanwhile
            started = time.monotonic()
            try:
                asyncio.run(watch.store.renew_lease(watch.thread, watch.fence))
            except FencedOut:
                # Someone else runs the thread now; the call's next write is refused.
                watch.lost = watch.stopped = True
                with self._cond:
                    self._watches.discard(watch)
                return
            except Exception:  # the store hiccuped: try again soon, the lease has time left
                watch.due = time.monotonic() + watch.fence.ttl * _RETRY
                return
            watch.renewed(started)

    def _after_fork(self) -> None:
        # The keeper thread does not exist in a forked child; its lock may be held by it.
        self._cond = threading.Condition()
        self._watches = set()
        self._thread = None
        self._wake_at = None


def _wait_for(lock: threading.Lock) -> None:
    with lock:
        pass


KEEPER: Final = LeaseKeeper()
"""The process's keeper."""

os.register_at_fork(after_in_child=KEEPER._after_fork)
