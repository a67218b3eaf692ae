"""`LoopClients`: the SDK clients of one model adapter, one for each running event loop.

An SDK's asynchronous client belongs to the event loop it is used in (its pooled connections
do), and the SDKs ask for a client to be closed before its loop ends. So an adapter holds a
`LoopClients`, which builds a client for each event loop the model is used in and closes it as
that loop ends: ``asyncio.run``, ``anyio.run`` and ``trio.run`` finalize the async generators
still open when their main task returns, and `LoopClients` keeps one open per loop for that.
``app.run_sync(...)`` then ``app.resume_sync(...)``, each in a loop of its own, share one model.

A client the caller built and passed in (``client=``) is used as it is, in the one loop it is
first used in, and never closed here: it is the caller's.

This module imports no SDK: the adapter says how to build and close its clients.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Generic, TypeVar

import anyio
import anyio.lowlevel

from .._errors import ModelError

__all__ = ["LoopClients", "closed_error", "elsewhere_error"]

C = TypeVar("C")
"""The SDK's client type."""


class LoopClients(Generic[C]):
    """The clients of one model: one per running event loop, each closed as its loop ends.

    Build it with `LoopClients.owned` (the model builds and closes its clients) or
    `LoopClients.given` (the caller's client, used in one loop and never closed).
    """

    def __init__(
        self,
        *,
        build: Callable[[], C] | None,
        close: Callable[[C], Awaitable[object]] | None,
        unused: C | None,
        given: C | None,
        given_closed: Callable[[C], bool] | None,
        closed_error: Callable[[], BaseException],
        elsewhere_error: Callable[[], BaseException] | None,
    ) -> None:
        self._build = build
        self._close = close
        # A client built before any loop asked (so that its settings were checked at once),
        # until a loop takes it.
        self._unused = unused
        self._given = given
        self._given_closed = given_closed
        self._closed_error = closed_error
        self._elsewhere_error = elsewhere_error
        # Invariant: `_clients` holds a client for a loop only while that loop runs (or after
        # a loop that ended without closing its async generators, which leaves no way to close
        # the client either); `_keeps` holds the async generator that closes it.
        self._clients: dict[anyio.lowlevel.EventLoopToken, C] = {}
        self._keeps: dict[anyio.lowlevel.EventLoopToken, AsyncGenerator[None, None]] = {}
        self._first_loop: anyio.lowlevel.EventLoopToken | None = None  # the given client's
        self._closed = False
        self._lock = threading.Lock()

    @classmethod
    def owned(
        cls,
        build: Callable[[], C],
        close: Callable[[C], Awaitable[object]],
        *,
        closed_error: Callable[[], BaseException],
        first: C | None = None,
    ) -> LoopClients[C]:
        """Clients the model builds with ``build()`` and closes with ``close(client)``.

        Args:
            build: Builds a new client (in no particular loop; it is used in the loop that
                asked for it).
            close: Closes a client (awaited in the client's loop, shielded from cancellation).
            closed_error: What `here` raises once `aclose` was called.
            first: A client built already, given to the first loop that asks instead of a new
                one (and closed by `aclose` if no loop ever asked).
        """
        return cls(
            build=build,
            close=close,
            unused=first,
            given=None,
            given_closed=None,
            closed_error=closed_error,
            elsewhere_error=None,
        )

    @classmethod
    def given(
        cls,
        client: C,
        *,
        is_closed: Callable[[C], bool],
        closed_error: Callable[[], BaseException],
        elsewhere_error: Callable[[], BaseException],
    ) -> LoopClients[C]:
        """The caller's ``client``: used in the one event loop it is first used in, never closed.

        Args:
            client: The caller's client.
            is_closed: Whether the client was closed (by its owner): the model is closed then.
            closed_error: What `here` raises once `aclose` was called or the client closed.
            elsewhere_error: What `here` raises in a loop other than the first it ran in.
        """
        return cls(
            build=None,
            close=None,
            unused=None,
            given=client,
            given_closed=is_closed,
            closed_error=closed_error,
            elsewhere_error=elsewhere_error,
        )

    @property
    def closed(self) -> bool:
        """Whether `aclose` was called (or the given client was closed by its owner)."""
        if self._closed:
            return True
        given, is_closed = self._given, self._given_closed
        return given is not None and is_closed is not None and is_closed(given)

    async def here(self) -> C:
        """The client for the running event loop: built (and kept until the loop ends) the
        first time it is asked for in that loop.

        Raises:
            BaseException: ``elsewhere_error()`` for a given client asked for in another loop
                than its first; ``closed_error()`` once closed.
        """
        loop = anyio.lowlevel.current_token()
        given = self._given
        if given is not None:
            if self._first_loop not in (None, loop):
                assert self._elsewhere_error is not None
                raise self._elsewhere_error()
            if self.closed:
                raise self._closed_error()
            self._first_loop = loop
            return given
        if self._closed:
            raise self._closed_error()
        # Invariant: no await between the lookup and the new entry, so the tasks of one loop
        # share one client; the lock keeps loops in other threads from taking the same one.
        with self._lock:
            client = self._clients.get(loop)
            if client is not None:
                return client
            client, self._unused = self._unused, None
            if client is None:
                assert self._build is not None
                client = self._build()
            self._clients[loop] = client
            keeper = self._keeps[loop] = self._keep(loop, client)
        await keeper.asend(None)
        return client

    async def aclose(self) -> None:
        """Close the running loop's client, and the one built first if no loop took it; refuse
        clients from now on (a given client is left open).

        The clients of other event loops that still run are closed as those loops end.
        """
        self._closed = True
        if self._given is not None:
            return
        keeper = self._keeps.pop(anyio.lowlevel.current_token(), None)
        if keeper is not None:
            await keeper.aclose()  # closes the loop's client
        unused, self._unused = self._unused, None
        if unused is not None:
            assert self._close is not None
            await self._close(unused)  # never used: it belongs to no loop yet

    async def _keep(
        self, loop: anyio.lowlevel.EventLoopToken, client: C
    ) -> AsyncGenerator[None, None]:
        """Wait, open, until ``loop`` ends (or `aclose`), then close ``client``.

        The SDKs ask for a client to be closed before its event loop ends, which a collected
        client cannot do; a loop that ends closes the async generators still open while it
        still runs, and this one closes the client then.
        """
        try:
            yield
        finally:
            if self._clients.get(loop) is client:
                del self._clients[loop]
                self._keeps.pop(loop, None)
            assert self._close is not None
            with anyio.CancelScope(shield=True):
                await self._close(client)


def closed_error(model: object, where: str, endpoint: str) -> ModelError:
    """What a model says when it is used after `aclose`."""
    return ModelError(
        f"{where} was closed (aclose()); create a new {type(model).__name__} to go on",
        endpoint=endpoint,
    )


def elsewhere_error(client: str, where: str, endpoint: str) -> ModelError:
    """What a model says when the ``client=`` it was given runs in another event loop."""
    return ModelError(
        f"{where} was given an {client} client (client=) that was first used in another event "
        "loop, and a client works only in the loop it was first used in (app.run_sync and "
        "app.resume_sync each start one): create the model inside the loop that uses it, or "
        "leave client= out and the model builds a client for each loop",
        endpoint=endpoint,
    )
