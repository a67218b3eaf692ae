"""A thread its continuation cannot move on: recorded ``failed``, with why and how to go on.

After a decision, whoever continues the thread (a worker's job, the approval server's
background run) may hit an error that running again will not fix: the graph changed since the
question (`GraphChanged`), a stored checkpoint is damaged, the run's own update or state cannot
be written. Left as it is, the thread would be ``ready`` with nothing pending: out of the inbox
and its counts, continued by nobody. `record_failure` writes a ``failed`` checkpoint instead,
the one way a thread says it failed: its status, the change feed's ``run_failed``, and the
reason in its metadata, with the command that continues it once the cause is fixed.

Invariant: errors a retry may fix (the store unreachable, the thread busy elsewhere, a run
cancelled) are never recorded as failures; they are the job queue's to retry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from .._errors import CheckpointCorrupt, GraphChanged, RunError, SerializationError, ThreadBusy
from .._lazy import lazy_module
from ..observability import _hooks
from ..stores import CheckpointRecord, Fence
from ._calls import Calls
from ._persist import CONTINUE_WITH, FAILURE
from ._usage import USAGE, is_running_time

if TYPE_CHECKING:
    import shlex
else:  # imported by the first call that needs it, not by `import interlock`
    shlex = lazy_module("shlex", globals())

__all__ = ["record_failure", "strands"]

_LASTING: Final = (GraphChanged, CheckpointCorrupt, SerializationError, RunError)
"""Errors of a continuation that the same continuation would raise again."""


def strands(error: BaseException) -> bool:
    """Whether ``error``, raised by a thread's continuation, would strand the thread.

    True for errors that running again would meet again; False for those a retry may get
    past (`StoreError`, `ThreadBusy`), for refusals that change nothing (`ResumeError`: no
    such thread, nothing to run), for cancellation, and for errors interlock does not raise
    on purpose (a bug is the job queue's to report, not the thread's to carry).
    """
    return isinstance(error, _LASTING)


async def record_failure(calls: Calls[Any], thread: str, error: BaseException) -> str | None:
    """Record ``thread`` failed after ``error``; return the id of its ``failed`` checkpoint.

    That checkpoint is written now, or is the head already (a node raised: the run recorded
    its failure itself). None when there is nothing to record: ``error`` does not strand the
    thread (`strands`), or the thread moved on meanwhile (someone else continues it).
    """
    if not strands(error):
        return None
    head = await calls.io.head(thread)
    if head is None or head.record.status == "done":
        return None
    if head.record.status == "failed":
        return head.record.id
    meta = dict(calls.io.decode(head.record).get("meta") or {})
    if is_running_time(meta.get(USAGE)):  # a thread at rest holds its usage totals whole
        meta[USAGE] = await calls.io.usage_before(thread, head.record, meta[USAGE]) or meta[USAGE]
    meta[FAILURE] = f"{type(error).__name__}: {error}"
    meta[CONTINUE_WITH] = f"interlock resume {shlex.quote(thread)} --app MODULE:ATTR"
    # The lease a failed call could not let go is this App's: take it back with its token,
    # and let it go with this write.
    token = calls.lease.reclaim(thread)
    fence = Fence(owner=calls.lease.owner, token=token, ttl=calls.lease.ttl, release=True)
    try:
        written: CheckpointRecord = await calls.io.commit_failed(
            thread, head, metadata=meta, fence=fence
        )
    except ThreadBusy:
        return None  # the thread moved on, or another executor holds it: theirs to go on
    if _hooks.OBSERVERS:
        _hooks.thread_failed(type(error).__name__)
    return written.id
