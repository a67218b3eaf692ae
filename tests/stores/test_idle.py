"""`loop_is_idle`: the fast path of the SQL stores, and the private asyncio state it reads."""

from __future__ import annotations

import asyncio
import collections
import platform
import selectors
import socket
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from interlock.stores._idle import loop_is_idle, unknown_internals
from interlock.stores._worker import ThreadWorker

PYTHON = f"Python {platform.python_version()} ({sys.implementation.name})"

stock_loop_only = pytest.mark.skipif(
    sys.platform == "win32", reason="the stock loop on Windows is the proactor loop"
)


def run_on(factory: Callable[[], asyncio.AbstractEventLoop], main: Coroutine[Any, Any, Any]) -> Any:
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


@stock_loop_only
def test_the_stock_loop_still_has_the_internals_the_fast_path_reads() -> None:
    loop = asyncio.new_event_loop()
    try:
        why = unknown_internals(loop)
        assert why is None, (
            f"On {PYTHON}, asyncio's selector event loop changed: {why}. "
            "interlock.stores._idle.loop_is_idle now always answers False, so every store "
            "call takes the slower worker-thread path. Update _idle.py for this Python."
        )
        # What the checks above do not cover: the shapes loop_is_idle relies on inside them.
        selector = getattr(loop, "_selector", None)
        assert isinstance(selector, selectors.BaseSelector)
        assert len(selector.get_map()) == 1, (
            f"On {PYTHON}, a fresh asyncio loop registers {len(selector.get_map())} file "
            "descriptors, not just its wake-up pipe: loop_is_idle would never see it idle"
        )
        handle = loop.call_later(60, lambda: None)
        scheduled = getattr(loop, "_scheduled", None)
        assert scheduled and isinstance(scheduled[0], asyncio.TimerHandle), (
            f"On {PYTHON}, asyncio's loop no longer keeps its timers as TimerHandles in "
            "loop._scheduled: loop_is_idle cannot see when the next one is due"
        )
        handle.cancel()
        loop.call_soon(lambda: None)
        ready = getattr(loop, "_ready", None)
        assert isinstance(ready, collections.deque) and len(ready) == 1, (
            f"On {PYTHON}, asyncio's loop no longer queues due callbacks in loop._ready: "
            "loop_is_idle cannot see them"
        )
    finally:
        loop.close()


@stock_loop_only
def test_a_lone_task_on_the_stock_loop_is_idle_and_calls_run_right_there() -> None:
    async def main() -> tuple[bool, int, int]:
        worker = ThreadWorker("test")
        ran_on = await worker.run(threading.get_ident)
        worker.stop()
        return loop_is_idle(asyncio.get_running_loop()), ran_on, threading.get_ident()

    idle, ran_on, me = run_on(asyncio.new_event_loop, main())
    assert idle, f"On {PYTHON}, loop_is_idle no longer recognises an idle stock loop"
    assert ran_on == me  # the fast path: no hop to the worker thread


@stock_loop_only
def test_other_tasks_near_timers_and_watchers_make_the_loop_busy() -> None:
    async def main() -> list[bool]:
        loop = asyncio.get_running_loop()
        seen = [loop_is_idle(loop)]
        other = asyncio.ensure_future(asyncio.sleep(10))
        await asyncio.sleep(0)
        seen.append(loop_is_idle(loop))  # another task exists
        other.cancel()
        await asyncio.gather(other, return_exceptions=True)
        handle = loop.call_later(0.5, lambda: None)
        seen.append(loop_is_idle(loop))  # a timer is due soon
        handle.cancel()
        await asyncio.sleep(0)
        seen.append(loop_is_idle(loop))
        far = loop.call_later(10, lambda: None)
        seen.append(loop_is_idle(loop))  # a timer due much later (a lease renewal) does not count
        far.cancel()
        a, b = socket.socketpair()
        try:
            loop.add_reader(a.fileno(), lambda: None)
            seen.append(loop_is_idle(loop))  # someone watches a socket
            loop.remove_reader(a.fileno())
        finally:
            a.close()
            b.close()
        loop.call_soon(lambda: None)
        seen.append(loop_is_idle(loop))  # a callback is due
        return seen

    assert run_on(asyncio.new_event_loop, main()) == [True, False, False, True, True, False, False]


class SubclassedLoop(asyncio.SelectorEventLoop):
    """A loop that may behave differently from the one whose internals are known."""


class LookAlike:
    """Something shaped like the stock loop from outside (as uvloop might be), but another type."""

    def __init__(self) -> None:
        self._ready: collections.deque[object] = collections.deque()
        self._scheduled: list[object] = []
        self._selector = selectors.DefaultSelector()

    def time(self) -> float:
        return 0.0


def test_a_loop_it_does_not_know_takes_the_slow_path() -> None:
    async def main() -> tuple[bool, str | None, int, int]:
        loop = asyncio.get_running_loop()
        worker = ThreadWorker("test")
        ran_on = await worker.run(threading.get_ident)
        await asyncio.to_thread(worker.stop)
        return loop_is_idle(loop), unknown_internals(loop), ran_on, threading.get_ident()

    idle, why, ran_on, me = run_on(SubclassedLoop, main())
    assert not idle and why is not None and "SubclassedLoop" in why
    assert ran_on != me  # the call went through the worker thread
    look_alike = LookAlike()
    try:
        assert not loop_is_idle(look_alike)  # type: ignore[arg-type]
        assert unknown_internals(look_alike) is not None
    finally:
        look_alike._selector.close()
    assert not loop_is_idle(object())  # type: ignore[arg-type]


@stock_loop_only
def test_unexpected_internals_answer_false_and_never_raise() -> None:
    loop = asyncio.new_event_loop()
    try:
        assert loop_is_idle(loop)  # not running, nothing registered
        for name, bad in [("_ready", None), ("_scheduled", ()), ("_selector", "epoll")]:
            real = getattr(loop, name)
            setattr(loop, name, bad)
            try:
                assert not loop_is_idle(loop), name
                assert name in (unknown_internals(loop) or ""), name
            finally:
                setattr(loop, name, real)
        scheduled = getattr(loop, "_scheduled")  # noqa: B009 - a private attribute
        scheduled.append("not a timer handle")
        assert not loop_is_idle(loop)
        scheduled.clear()
    finally:
        loop.close()
    assert not loop_is_idle(loop)  # closed: its selector is gone
