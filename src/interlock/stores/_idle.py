"""Whether an asyncio event loop has nothing to run but the calling task: the stores' fast path.

Why it exists: the SQL stores call blocking drivers. Handing each call to a worker thread keeps
the loop free for other tasks, but the hand-off and the loop's wake-up cost more than a local
query takes (~100 µs on a virtual machine). When the calling task is the loop's only task and
no callback, near timer or I/O watcher is registered, nothing else could run during the call
anyway, so it may simply run on the loop's thread. `loop_is_idle` answers that question.

What it assumes: asyncio has no public way to ask it, so this reads the bookkeeping of the
standard library's selector event loop (what `asyncio.new_event_loop` makes on POSIX):

* ``loop._ready``, exactly a `collections.deque` of the callbacks due now;
* ``loop._scheduled``, exactly a `list` heap of `asyncio.TimerHandle`, the earliest first;
* ``loop._selector``, one of the standard library's selectors (`selectors.DefaultSelector`
  or another class of that module) whose map holds the loop's own wake-up pipe and one entry
  per I/O watcher.

It reads them only on a loop whose type is exactly `asyncio.SelectorEventLoop`, and only when
each has the type listed. Any other loop (a subclass, uvloop, the Windows proactor loop) or
any surprise answers False: the slow path through the worker thread, which is always correct
and merely slower. ``tests/stores/test_idle.py`` fails loudly when a Python release changes
these internals, so the fast path cannot quietly disappear.

Counting the loop's tasks uses the public `asyncio.all_tasks`, except where the cheaper
registry of Python 3.11 (``asyncio.tasks._all_tasks``) already shows at most one task.
"""

from __future__ import annotations

import collections
import functools
import weakref
from typing import TYPE_CHECKING, Final, cast

from .._lazy import lazy_asyncio, lazy_module

if TYPE_CHECKING:
    import asyncio
    import asyncio.tasks
    import selectors
else:  # imported by the first call that needs it, not by `import interlock`
    asyncio = lazy_asyncio(globals())
    selectors = lazy_module("selectors", globals())

__all__ = ["loop_is_idle", "unknown_internals"]

FAR_TIMER: Final = 1.0
"""Seconds: a timer due later than this (a lease renewal) does not make a loop busy.

At worst it fires a moment late, after a store call that held the loop briefly."""


@functools.cache
def _known_selectors() -> frozenset[type[selectors.BaseSelector]]:
    """The selector classes a stock loop may have (exact types: a type check on an ABC is slow).

    Asked only of an asyncio loop, so asyncio has imported `selectors` by then."""
    return frozenset(
        getattr(selectors, name)
        for name in (
            "SelectSelector",
            "PollSelector",
            "EpollSelector",
            "DevpollSelector",
            "KqueueSelector",
        )
        if hasattr(selectors, name)
    )


if TYPE_CHECKING:
    _Internals = tuple["collections.deque[object]", list[object], selectors.BaseSelector]


def _internals(loop: object) -> _Internals | str:
    """The private state `loop_is_idle` reads, or why ``loop`` does not have it as expected."""
    # The one loop type whose internals are read: exactly this one, not a subclass.
    known = asyncio.SelectorEventLoop
    if type(loop) is not known:
        return f"the loop is a {type(loop).__qualname__}, not exactly {known.__qualname__}"
    ready = getattr(loop, "_ready", None)
    if type(ready) is not collections.deque:
        return f"loop._ready is {type(ready).__name__}, not a collections.deque"
    scheduled = getattr(loop, "_scheduled", None)
    if type(scheduled) is not list:
        return f"loop._scheduled is {type(scheduled).__name__}, not a list"
    selector = getattr(loop, "_selector", None)
    if type(selector) not in _known_selectors():
        return f"loop._selector is {type(selector).__name__}, not one of the selectors module's"
    return ready, scheduled, cast("selectors.BaseSelector", selector)


def unknown_internals(loop: object) -> str | None:
    """Why `loop_is_idle` cannot look inside ``loop`` (always False for it), or None if it can."""
    found = _internals(loop)
    return found if isinstance(found, str) else None


def loop_is_idle(loop: asyncio.AbstractEventLoop) -> bool:
    """True when nothing but the calling task could run on ``loop`` while that task blocks.

    False whenever it cannot tell (see the module docstring); it never raises.
    """
    try:
        found = _internals(loop)
        if isinstance(found, str):
            return False
        ready, scheduled, selector = found
        if ready:
            return False
        # A timer due soon may have work to do; one due later does not mind waiting.
        if scheduled:
            first = scheduled[0]
            if not isinstance(first, asyncio.TimerHandle):
                return False
            if first.when() < loop.time() + FAR_TIMER:
                return False
        # The loop's own wake-up pipe is always registered; anything more is someone's I/O.
        if len(selector.get_map()) > 1:
            return False
        registry = getattr(asyncio.tasks, "_all_tasks", None)
        if (
            isinstance(registry, weakref.WeakSet)
            and getattr(asyncio.tasks, "_eager_tasks", None) is None
            and len(registry) <= 1
        ):
            return True
        return len(asyncio.all_tasks(loop)) <= 1
    except Exception:  # any surprise in private state means "cannot tell": the slow path
        return False
