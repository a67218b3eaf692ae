"""Diagnostic only: ``langgraph dev`` with the in-memory queue woken on each new run.

The in-memory runtime's queue (``langgraph_runtime_inmem.ops.Runs.next``) takes the time, then
sleeps 0.5 s whenever its previous poll found nothing, then picks only the runs created before
that time. A run created while it sleeps therefore waits for the next poll: 0.5–1.0 s per run,
which is most of what a sequential client measures (see README.md).

This wrapper patches, in this process only, ``Runs.put`` to set an event and ``Runs.next`` to
wait for that event (still at most 0.5 s) instead of sleeping, then starts the ordinary
``langgraph dev`` command with the arguments it was given. Nothing else changes. The figure it
yields is *not* LangGraph as shipped; it shows what the server costs apart from its poll.

    python _wake_queue.py dev --no-browser --no-reload --port 8123 --config langgraph.json
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from typing import Any

from langgraph_runtime_inmem import ops

_original_put = ops.Runs.put
_original_next = ops.Runs.next
_new_run = asyncio.Event()


async def _put(*args: Any, **kwargs: Any) -> Any:
    result = await _original_put(*args, **kwargs)
    _new_run.set()
    return result


async def _next(wait: bool, limit: int = 1) -> AsyncIterator[Any]:
    if wait:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(_new_run.wait(), timeout=0.5)
    _new_run.clear()
    # The original takes its cut-off time after this point (wait=False: sleep(0) only), so the
    # run that woke us is eligible.
    async for item in _original_next(wait=False, limit=limit):
        yield item


ops.Runs.put = staticmethod(_put)  # type: ignore[method-assign]
ops.Runs.next = staticmethod(_next)  # type: ignore[method-assign]


if __name__ == "__main__":
    from langgraph_cli.cli import cli

    sys.exit(cli.main(args=sys.argv[1:], prog_name="langgraph", standalone_mode=True))
