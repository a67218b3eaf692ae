"""Daemon threads that leave the process's signals to the main thread.

The stores' worker threads and the runtime's lease keeper start theirs here.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Final

__all__ = ["start_thread"]

_SIGNALS: Final = frozenset(
    s for s in (getattr(signal, "SIGINT", None), getattr(signal, "SIGTERM", None)) if s
)


def start_thread(target: Callable[[], None], name: str) -> threading.Thread:
    """Start a daemon thread that never receives SIGINT or SIGTERM.

    The process's signals then reach the main thread, whose blocking read (``input()``, a
    server's accept) they interrupt: delivered to a helper thread, Ctrl-C would wait until
    the main thread's read ended on its own. The thread inherits the signal mask in force
    when it starts, so the signals are blocked around ``start()``.
    """
    thread = threading.Thread(target=target, name=name, daemon=True)
    mask = getattr(signal, "pthread_sigmask", None)
    if mask is None or not _SIGNALS:
        thread.start()
        return thread
    previous = mask(signal.SIG_BLOCK, _SIGNALS)
    try:
        thread.start()
    finally:
        mask(signal.SIG_SETMASK, previous)
    return thread
