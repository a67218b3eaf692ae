"""Pausing CPython's cyclic garbage collector while a page of records is built.

Building a page allocates a few containers per record (the row tuples a driver returns, a
question's dicts and lists, the `Interrupt` holding them), all reachable and none in a cycle.
The collector counts every allocation and scans the young objects every 700, the older ones
every ten scans, and the whole heap when it has grown by a quarter: for a page of 5,000
questions that was about 70 scans finding nothing, one of them over the whole heap (~17 of
S5's 64 ms in a fresh process). Paused, what outlives the page is scanned once, by the first
young scan after it, and what does not (the rows) is never scanned. Mercurial's
``util.nogc`` does the same around the large containers it builds.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block, if it runs; nothing else changes.

    Only a running collector is paused, and it is always turned back on: another thread that
    turns it off meanwhile finds it on again afterwards, which costs time, never correctness.
    Keep the block synchronous (no ``await``), so that only the page's own work runs paused.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
