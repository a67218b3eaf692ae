"""Who continues a thread once a decision makes it runnable: the one rule, in one place.

A decision is recorded by whoever makes it (`App.decide`, a person's surface, the sweeper
answering a question whose deadline passed); then the thread must run on, and exactly one
component may run it:

- **workers**, once `interlock.workers.Workers.install` put its trigger into the store's
  PostgreSQL database: the trigger queues the continuation in the decision's own commit,
  and a worker runs it. Everyone else records and stops (the server, ``interlock sweep``,
  `App.sweep`).
- otherwise **the caller**: whoever recorded the decision goes on itself (`App.resume` with
  answers, the approval server in its background, `App.sweep`), holding the thread's lease
  from the decision to the run.

A caller that resumes with answers holds the lease through its decision, so the trigger
leaves that thread to it even where workers are installed: ``App.resume(thread, answers)``
always goes on in the calling process. What this rule decides is the continuation of a
decision that was only *recorded*.
"""

from __future__ import annotations

from typing import Literal

from ..stores import Store

__all__ = ["Continuation", "Continuer"]

Continuer = Literal["caller", "workers"]
"""Who continues a thread after a recorded decision (see the module's rule)."""


class Continuation:
    """One App's answer to who continues its threads, asked of its store once and kept."""

    __slots__ = ("_known", "_store")

    def __init__(self, store: Store) -> None:
        self._store = store
        self._known: Continuer | None = None

    async def owner(self, *, refresh: bool = False) -> Continuer:
        """``"workers"`` when the store's database has workers installed, else ``"caller"``.

        Asked of the store once (``PostgresStore.workers_continue``; no other store has
        workers) and remembered; ``refresh`` asks again (after installing workers while the
        process runs).
        """
        if self._known is None or refresh:
            ask = getattr(self._store, "workers_continue", None)
            self._known = "workers" if ask is not None and await ask() else "caller"
        return self._known
