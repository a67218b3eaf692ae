"""A dedicated thread that runs a store's blocking calls, one at a time, in order.

`anyio.to_thread.run_sync` costs about 100 µs per call (a pooled thread, a capacity limiter,
cancellation bookkeeping); a store makes one call per checkpoint, so that hop would dominate.
A single long-lived thread fed by a queue, waking the event loop with
``call_soon_threadsafe``, costs less. Under an event loop other than asyncio the worker falls
back to `anyio.to_thread`.

Waking an event loop that sleeps in ``epoll`` from another thread still costs ~100 µs on a
virtual machine, and even a hand-off over a plain queue costs two thread switches (~40 µs).
So when the loop has nothing else to do (`loop_is_idle`: the calling task is its only task,
and no callback, near timer or I/O watcher is registered) the call simply runs on the
caller's thread. Nothing else could have run during that wait, so it blocks nobody; as soon as
anything else is registered, or the loop is one `loop_is_idle` cannot look inside, the worker
thread is used.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .._daemon import start_thread
from .._lazy import lazy_asyncio, lazy_module
from ._idle import loop_is_idle

if TYPE_CHECKING:
    import asyncio
    import queue

    import anyio
    import anyio.lowlevel
    import anyio.to_thread
else:  # imported by the first call that needs it, not by `import interlock`
    asyncio = lazy_asyncio(globals())
    queue = lazy_module("queue", globals())
    anyio = lazy_module("anyio", globals(), "anyio.lowlevel", "anyio.to_thread")

__all__ = ["ThreadWorker", "settle"]


T = TypeVar("T")

if TYPE_CHECKING:  # named in annotations only: reading asyncio's names would import it
    _Item = (
        tuple[Callable[[], Any], asyncio.AbstractEventLoop, asyncio.Future[Any]]
        | tuple[Callable[[], Any], None, queue.SimpleQueue[tuple[Any, BaseException | None]]]
        | None
    )


def settle(fut: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    """Give the awaiting task ``value`` or ``error`` (on its loop), unless it is gone."""
    if fut.done():  # the awaiting task is gone
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(value)


class ThreadWorker:
    """Runs callables on one daemon thread; `run` awaits the result without blocking the loop."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._running = False  # written by the worker thread only

    @property
    def busy(self) -> bool:
        """Whether the worker thread is running a call or has calls queued (a snapshot).

        Callers that could run a call themselves ask it first, so as not to overtake queued
        calls again and again. Calls made through `anyio.to_thread` (no asyncio loop) are not
        counted."""
        return self._running or not self._queue.empty()

    def runs_here(self) -> bool:
        """Whether `run` would call its function on the caller's thread right now (the
        running asyncio loop has nothing else to do): then no hand-off is saved by doing so."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        return loop_is_idle(loop)

    async def run(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the worker thread and return its result (or raise its exception).

        A cancelled caller still waits for ``fn`` to finish (it cannot be interrupted), then
        sees the cancellation — as with `anyio.to_thread.run_sync`.
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            result = await anyio.to_thread.run_sync(fn)
            # Under trio the call returns to a caller cancelled while it ran: raise it now.
            await anyio.lowlevel.checkpoint_if_cancelled()
            return result
        if loop_is_idle(loop):
            # Nothing else could run while we wait, so wait right here: no thread hand-off.
            return fn()
        self._ensure_started()
        fut: asyncio.Future[T] = loop.create_future()
        self._queue.put((fn, loop, fut))
        with anyio.CancelScope(shield=True):
            result = await fut
        await anyio.lowlevel.checkpoint_if_cancelled()
        return result

    def stop(self) -> None:
        """Finish queued calls and stop the thread (blocking; call from a worker thread)."""
        with self._start_lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join()

    def _ensure_started(self) -> None:
        if self._thread is not None:
            return
        with self._start_lock:
            if self._thread is None:
                self._thread = start_thread(self._serve, self._name)

    def _serve(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, loop, target = item
            value: Any = None
            error: BaseException | None = None
            self._running = True
            try:
                value = fn()
            except BaseException as exc:  # handed to the waiting task, not lost
                error = exc
            finally:
                self._running = False
            if loop is None or isinstance(target, queue.SimpleQueue):
                assert isinstance(target, queue.SimpleQueue)
                target.put((value, error))
                continue
            with contextlib.suppress(RuntimeError):  # the loop was closed while we worked
                loop.call_soon_threadsafe(settle, target, value, error)
