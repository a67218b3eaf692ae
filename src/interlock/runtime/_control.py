"""External pause: a run handle that stops a run from outside, planned or forced."""

from __future__ import annotations

import contextlib
import math
import signal
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .._errors import GraphDefinitionError, StoreError
from .._lazy import lazy_module
from ._records import RunResult

if TYPE_CHECKING:
    import anyio
    import anyio.abc
else:  # imported by the first call that needs it, not by `import interlock`
    anyio = lazy_module("anyio", globals(), "anyio.abc")

__all__ = ["GracefulShutdown", "RunControl", "RunHandle"]


class RunControl:
    """What a running level checks to know it must stop (engine use).

    Planned: the level stops at its next superstep boundary; running tasks finish. Forced: the
    running tasks are also cancelled; they re-run from their saved inputs on resume, while
    tasks that finished in that superstep keep their results.
    """

    __slots__ = ("_scopes", "forced", "remote", "requested")

    def __init__(self, remote: Callable[[], Awaitable[str | None]] | None = None) -> None:
        self.requested = False
        self.forced = False
        self.remote = remote
        """Takes a pause request made through the store by another process, if any."""
        self._scopes: set[anyio.CancelScope] = set()

    async def check(self) -> bool:
        """At a superstep boundary: must the run pause? Also takes requests from the store."""
        if not self.requested and self.remote is not None:
            await self.apply(await self.remote())
        return self.requested

    async def apply(self, kind: str | None) -> None:
        """Act on a pause request taken from the store."""
        if kind == "forced":
            self.force()
        elif kind == "planned":
            self.requested = True

    def watch(self, scope: anyio.CancelScope) -> None:
        """Register the cancel scope of a superstep that is running."""
        if self.forced:
            scope.cancel()
        self._scopes.add(scope)

    def unwatch(self, scope: anyio.CancelScope) -> None:
        """The superstep ended."""
        self._scopes.discard(scope)

    def force(self) -> None:
        """Cancel every running superstep (of the top graph and of its subgraphs)."""
        self.requested = self.forced = True
        for scope in list(self._scopes):
            scope.cancel()


class RunHandle:
    """A run in the background of an ``async with`` block, that can be paused from outside.

    Create it with `App.start`. ``await handle.pause()`` asks the run to stop at its next
    superstep boundary; ``await handle.pause(timeout=2.0)`` also cancels the tasks still
    running after 2 s (they run again on resume). The block does not end before the run does.
    Pausing twice is harmless; pausing a run that already finished returns its result.

    Examples:
        >>> import anyio
        >>> from typing import TypedDict
        >>> from interlock import END, START, Graph, MemoryStore
        >>> class S(TypedDict, total=False):
        ...     done: bool
        >>> async def slow(state: S) -> dict:
        ...     await anyio.sleep(30)
        ...     return {"done": True}
        >>> g = Graph(S)
        >>> app = g.add_node("slow", slow).add_edge(START, "slow").add_edge("slow", END).compile(
        ...     store=MemoryStore()
        ... )
        >>> async def main():
        ...     async with app.start({}, thread="t") as handle:
        ...         await anyio.sleep(0.05)  # the node is running now
        ...         return await handle.pause(timeout=0.1)  # forced: the node is cancelled
        >>> anyio.run(main).status
        'paused'
    """

    def __init__(
        self,
        start: Callable[[RunControl], Awaitable[RunResult[Any]]],
        *,
        remote: Callable[[], Awaitable[str | None]] | None = None,
        poll_interval: float | None = None,
    ) -> None:
        self._start = start
        self._control = RunControl(remote)
        self._poll_interval = poll_interval
        self._done = anyio.Event()
        self._result: RunResult[Any] | None = None
        self._error: BaseException | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._scope = anyio.CancelScope()

    async def __aenter__(self) -> RunHandle:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._main)
        if self._control.remote is not None and self._poll_interval is not None:
            self._tg.start_soon(self._poll)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._tg is not None
        if exc is not None:
            self._scope.cancel()
        return await self._tg.__aexit__(exc_type, exc, tb)

    async def _main(self) -> None:
        with self._scope:
            try:
                self._result = await self._start(self._control)
            except Exception as exc:  # handed to result(); the block's owner decides
                self._error = exc
        self._done.set()

    async def _poll(self) -> None:
        # Step boundaries check the store themselves; this notices a request while a long task
        # runs, which only matters for a forced pause (it cancels the task).
        assert self._control.remote is not None and self._poll_interval is not None
        while not self._done.is_set():
            with anyio.move_on_after(self._poll_interval):
                await self._done.wait()
            if not self._done.is_set() and not self._control.forced:
                try:
                    request = await self._control.remote()
                except StoreError:
                    # The store is down for a moment: the run's own next write meets it (and
                    # says so); the next look, or the next step boundary, asks again.
                    continue
                await self._control.apply(request)

    @property
    def done(self) -> bool:
        """True once the run stopped (finished, paused, failed or cancelled)."""
        return self._done.is_set()

    async def result(self) -> RunResult[Any]:
        """Wait for the run to stop and return its result (or raise its error)."""
        await self._done.wait()
        if self._error is not None:
            raise self._error
        if self._result is None:
            raise GraphDefinitionError("the run was cancelled; it has no result")
        return self._result

    async def check_pause_request(self) -> None:
        """Look at the store's pause request for this run now, not at the next poll.

        For whoever learns of a request first (a worker listening for them): a planned
        request stops the run at its next superstep boundary, a forced one cancels its running
        tasks at once. Without a request in the store this does nothing.
        """
        control = self._control
        if not self._done.is_set() and control.remote is not None and not control.forced:
            await control.apply(await control.remote())

    def force_pause(self) -> None:
        """Cancel the running tasks now, without waiting (a forced pause; `pause` waits)."""
        if not self._done.is_set():
            self._control.force()

    def request_pause(self) -> None:
        """Ask for a planned pause without waiting for it (`pause` waits)."""
        if not self._done.is_set():
            self._control.requested = True

    async def pause(self, *, timeout: float | None = None) -> RunResult[Any]:  # noqa: ASYNC109
        """Stop the run at its next superstep boundary and return the paused result.

        Args:
            timeout: Seconds to let running tasks finish; after that they are cancelled and
                will re-run on resume. None waits for them (a planned pause).
        """
        if not self._done.is_set():
            self.request_pause()
            with anyio.move_on_after(math.inf if timeout is None else timeout):
                await self._done.wait()
            if not self._done.is_set():
                self._control.force()
        return await self.result()

    def cancel(self) -> None:
        """Cancel the run; the thread stays at its last committed checkpoint."""
        self._scope.cancel()


class GracefulShutdown:
    """Pause every watched run when the process is asked to stop (SIGTERM by default).

    Runs are paused planned first; tasks still running after ``grace`` seconds are cancelled
    (a forced pause), so every thread ends durable and resumable (a sketch, not run)::

        async with GracefulShutdown(grace=10) as shutdown:
            async with app.start(input, thread="t") as handle:
                shutdown.watch(handle)
                result = await handle.result()
    """

    def __init__(
        self, *, grace: float = 10.0, signals: tuple[signal.Signals, ...] = (signal.SIGTERM,)
    ) -> None:
        self.grace = grace
        self.signals = signals
        self.triggered = anyio.Event()
        """Set once a signal arrived."""
        self._handles: list[RunHandle] = []
        self._tg: anyio.abc.TaskGroup | None = None

    def watch(self, handle: RunHandle) -> None:
        """Pause this run too when the signal comes (at once if it already came)."""
        self._handles.append(handle)
        if self.triggered.is_set() and self._tg is not None:
            self._tg.start_soon(self._pause_one, handle)

    async def __aenter__(self) -> GracefulShutdown:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        await self._tg.start(self._receive)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        return await self._tg.__aexit__(exc_type, exc, tb)

    async def _receive(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        with anyio.open_signal_receiver(*self.signals) as received:
            task_status.started()
            async for _ in received:
                self.triggered.set()
                for handle in list(self._handles):
                    assert self._tg is not None
                    self._tg.start_soon(self._pause_one, handle)

    async def _pause_one(self, handle: RunHandle) -> None:
        if not handle.done:
            with contextlib.suppress(Exception):  # the run's own error stays with its handle
                await handle.pause(timeout=self.grace)
