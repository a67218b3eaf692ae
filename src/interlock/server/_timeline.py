"""A thread's timeline and the comparison of two of its checkpoints: what the Studio shows.

``GET /v1/threads/{thread}/timeline`` pages through the thread's checkpoints, newest first,
each with what ran, what changed in the state since the checkpoint before it, the questions
pending at it, its metadata (as the history shows it) and the audit entries written from it
until the next one. ``GET /v1/threads/{thread}/compare`` gives the changes between any two
checkpoints. Both read the same records as the history and the audit log, and show what the
identity may read of them:

- a state is converted to JSON builtins and, for an identity limited to some tools, stripped of
  the calls of the others (`strip_calls`) *before* it is compared, so no change reveals a call
  the identity may not see;
- the audit entries go through `visible_audit`, the pending questions through the tool scope,
  the metadata through the history's filter.

A value of a change whose JSON is longer than `FOLD_CHARS` is folded: a preview of its JSON and
its length stand in for it (``{"$folded": true, "preview": ..., "chars": N}``), so a long chat
whose every step adds a large document opens at once.

Which checkpoint an audit entry belongs to is read from the times: entry ``e`` belongs to
checkpoint ``c`` when ``c.created_at <= e.at < created_at`` of the next checkpoint. Every store
stamps the entries written with a checkpoint with its clock read inside that checkpoint's
append, after the runtime stamped the checkpoint's ``created_at`` and before it stamps the
next one's, so they land on their own checkpoint; an entry written between two checkpoints (a
dangerous call of a node, an approval) lands on the one before it. The page's entries are
found without reading the whole log: an entry's ``seq`` counts from 1 without gaps, so the
first entry at or after the page's oldest checkpoint is found by bisection, one entry read per
probe, and the log is read on from there.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Any, Final

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from .._collector import collector_paused
from .._plain import plain
from ..runtime import Change, ChangeOp, StateSnapshot, diff_values
from ._api import (
    _audit,
    _metadata,
    _readable_thread,
    _thread_read,
    _tool_of,
    checkpoint_fields,
    read_checkpoints,
)
from ._auth import Identity
from ._errors import json_response
from ._params import CompareQuery, TimelineQuery, read_query
from ._scopes import opaque, sees_every_tool, strip_calls, visible_audit
from ._served import Served
from ._views import AuditItem, CheckpointFields

__all__ = [
    "FOLD_CHARS",
    "ChangeView",
    "CheckpointBrief",
    "Comparison",
    "RanNode",
    "TimelineEntry",
    "TimelinePage",
    "compare_checkpoints",
    "get_timeline",
]


FOLD_CHARS: Final = 2000
"""A value of a change whose JSON is longer than this is folded."""
PREVIEW_CHARS: Final = 300
"""How much of a folded value's JSON its preview keeps."""
_AUDIT_PAGE: Final = 500
"""Audit entries read at once when reading the log forward."""


class RanNode(msgspec.Struct, kw_only=True):
    """A task that ran in the steps that led to a checkpoint."""

    node: str
    """The node it ran (twice in a row for two tasks of one node: a fan-out)."""
    keys: list[str]
    """The state keys it wrote."""


class ChangeView(msgspec.Struct, kw_only=True):
    """One change of a thread's state (see `interlock.diff_values`)."""

    path: list[str | int]
    """Keys and list indexes from the top of the state (``["messages", 3, "content"]``)."""
    op: ChangeOp
    """``add``, ``remove``, ``change``, or ``append`` (a list got more items)."""
    old: Any = None
    """The value before (for ``append``: the list's old length). A value whose JSON is
    longer than 2,000 characters is folded: ``{"$folded": true, "preview": the first 300
    characters of its JSON, "chars": its length}``."""
    new: Any = None
    """The value after (for ``append``: the added items, each folded on its own)."""


class TimelineEntry(CheckpointFields, kw_only=True):
    """One checkpoint of a thread's timeline, with what led to it and what followed."""

    ran: list[RanNode]
    """The tasks that ran since the checkpoint before it, in task order."""
    changes: list[ChangeView]
    """The state's changes since the checkpoint before it (the oldest: since nothing)."""
    metadata: Any
    """As the history shows it (a run's starter, an edit's actor, where a fork came from)."""
    interrupts: list[str]
    """The ids of the questions and pauses pending at it."""
    events: list[AuditItem]
    """The audit entries written from it until the next checkpoint (the latest: all since),
    oldest first."""


class TimelinePage(msgspec.Struct, kw_only=True):
    """A page of a thread's timeline, newest first; pass ``next`` as ``before`` for older
    checkpoints (None: this page holds the oldest)."""

    items: list[TimelineEntry]
    next: str | None


class CheckpointBrief(msgspec.Struct, kw_only=True):
    """Which checkpoint a comparison starts or ends at."""

    checkpoint_id: str
    step: int
    status: str
    source: str
    created_at: float


class Comparison(msgspec.Struct, kw_only=True):
    """The changes that turn one checkpoint's state into another's."""

    from_checkpoint: CheckpointBrief
    to_checkpoint: CheckpointBrief
    changes: list[ChangeView]


# -- the handlers --------------------------------------------------------------------------------


async def get_timeline(request: Request) -> Response:
    state, identity, thread = _thread_read(request)
    query = read_query(request, TimelineQuery)
    served = await _readable_thread(state, identity, thread, query.app)
    limit = query.limit
    # One more than the page: the oldest checkpoint of the page is compared with it.
    snapshots = await read_checkpoints(
        served.app.history(thread, limit=limit + 1, before=query.before)
    )
    page, older = snapshots[:limit], snapshots[limit:]
    with collector_paused():  # a long chat's page is tens of thousands of containers
        shown = [_shown_values(s.values, identity) for s in snapshots]
        changes = [
            _views(diff_values(shown[i + 1] if i + 1 < len(shown) else {}, shown[i]))
            for i in range(len(page))
        ]
    until = None
    if query.before is not None:
        newer = await served.store.get_checkpoint(thread, query.before)
        until = None if newer is None else newer.created_at
    events = await _events(served, identity, thread, page, until)
    items = [
        TimelineEntry(
            **checkpoint_fields(s),
            ran=_ran(s.metadata),
            changes=changes[i],
            metadata=_metadata(s.metadata, identity),
            interrupts=[q.id for q in s.interrupts if identity.sees_tool(_tool_of(q))],
            events=found,
        )
        for i, (s, found) in enumerate(zip(page, events, strict=True))
    ]
    more = page[-1].checkpoint_id if older else None
    return json_response(TimelinePage(items=items, next=more))


async def compare_checkpoints(request: Request) -> Response:
    state, identity, thread = _thread_read(request)
    query = read_query(request, CompareQuery)
    served = await _readable_thread(state, identity, thread, query.app)
    to = await read_checkpoints(served.app.get_state(thread, query.to))
    start_id = query.from_
    if start_id is None:
        # The thread's first checkpoint: a checkpoint's seq is its parent's + 1, from 1.
        first = await served.store.checkpoints_at(thread, [1])
        start_id = first[0].id if first else to.checkpoint_id
    start = await read_checkpoints(served.app.get_state(thread, start_id))
    changes = diff_values(_shown_values(start.values, identity), _shown_values(to.values, identity))
    comparison = Comparison(
        from_checkpoint=_brief(start), to_checkpoint=_brief(to), changes=_views(changes)
    )
    return json_response(comparison)


def _brief(s: StateSnapshot[Any]) -> CheckpointBrief:
    return CheckpointBrief(
        checkpoint_id=s.checkpoint_id,
        step=s.step,
        status=s.status,
        source=s.source,
        created_at=s.created_at,
    )


# -- states and their changes --------------------------------------------------------------------


def _shown_values(values: dict[str, Any], identity: Identity) -> dict[str, Any]:
    """A state as ``identity`` may read it, as JSON builtins: without the calls of the tools
    outside its scope (before anything compares it, so no change reveals them).

    Converted as `plain` converts, but for the floats JSON has no form for (NaN, infinity),
    which only the changes found are rid of (`_views`): walking every value of a long chat
    in Python, for each checkpoint of a page, would cost more than the rest of the page.
    """
    if sees_every_tool(identity):
        shown = _builtins(values, str)
    else:
        shown = strip_calls(identity, _builtins(values, opaque))
    return shown if isinstance(shown, dict) else {}


def _builtins(value: Any, unknown: Callable[[Any], Any]) -> Any:
    try:
        return msgspec.to_builtins(value, enc_hook=unknown, str_keys=True)
    except (TypeError, ValueError, OverflowError):
        return unknown(value)


def _views(changes: Sequence[Change]) -> list[ChangeView]:
    """The changes as the API shows them, large values folded."""
    out = []
    for c in changes:
        if c.op == "append":
            old, new = c.old, [_fold(plain(item)) for item in c.new]
        else:
            old, new = _fold(plain(c.old)), _fold(plain(c.new))
        out.append(ChangeView(path=list(c.path), op=c.op, old=old, new=new))
    return out


def _fold(value: Any) -> Any:
    """``value``, or its folded form when its JSON is longer than `FOLD_CHARS`."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str) and len(value) < FOLD_CHARS // 6 - 2:
        return value  # even escaped (at most 6 characters each), it stays under the limit
    text = msgspec.json.encode(value).decode()
    if len(text) <= FOLD_CHARS:
        return value
    return {"$folded": True, "preview": text[:PREVIEW_CHARS], "chars": len(text)}


def _ran(metadata: dict[str, Any]) -> list[RanNode]:
    """The tasks a checkpoint's metadata says ran (``ran``); what is not of that shape is
    left out (metadata a caller wrote)."""
    found = metadata.get("ran")
    if not isinstance(found, list):
        return []
    return [
        RanNode(node=r["node"], keys=[k for k in r["keys"] if isinstance(k, str)])
        for r in found
        if isinstance(r, dict)
        and isinstance(r.get("node"), str)
        and isinstance(r.get("keys"), list)
    ]


# -- the audit entries of a page -----------------------------------------------------------------


async def _events(
    served: Served,
    identity: Identity,
    thread: str,
    page: Sequence[StateSnapshot[Any]],
    until: float | None,
) -> list[list[AuditItem]]:
    """The audit entries of each checkpoint of ``page`` (newest first), as ``identity`` may
    read them; ``until``: when the checkpoint after the page's newest was written (None: the
    page's newest is the thread's latest)."""
    out: list[list[AuditItem]] = [[] for _ in page]
    if not page:
        return out
    first = await _first_at(served, thread, page[-1].created_at)
    if first is None:
        return out
    entries: list[AuditItem] = []
    after = first - 1
    while True:
        batch = await _audit(served, thread, after, _AUDIT_PAGE)
        if until is not None:
            kept = [e for e in batch if e.at < until]
            entries += kept
            if len(kept) < len(batch):
                break
        else:
            entries += batch
        if len(batch) < _AUDIT_PAGE:
            break
        after = batch[-1].seq
    shown = await visible_audit(identity, entries, served.row)
    # Oldest first: the checkpoint of an entry is the last one written at or before it.
    times = [s.created_at for s in reversed(page)]
    for entry in shown:
        at = bisect.bisect_right(times, entry.at) - 1
        if at >= 0:
            out[len(page) - 1 - at].append(entry)
    return out


async def _first_at(served: Served, thread: str, moment: float) -> int | None:
    """The ``seq`` of the thread's first audit entry written at or after ``moment`` (None:
    there is none).

    Invariant: a thread's entries are numbered 1, 2, 3... without gaps, and written in that
    order by one clock, so their times do not decrease with ``seq``. The first entry at or
    after ``moment`` is found by doubling, then halving, the range: each probe reads one entry.
    """

    probed: dict[int, float | None] = {}

    async def at(seq: int) -> float | None:
        if seq not in probed:
            rows = await served.store.audit_log(thread=thread, after=(thread, seq - 1), limit=1)
            probed[seq] = rows[0].at if rows and rows[0].seq == seq else None
        return probed[seq]

    # Invariant below: every entry up to ``lo`` is older than ``moment``; ``hi`` is at or
    # after it, or past the end of the log.
    lo, hi = 0, 1
    while True:
        found = await at(hi)
        if found is None or found >= moment:
            break
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        found = await at(mid)
        if found is None or found >= moment:
            hi = mid
        else:
            lo = mid
    return hi if await at(hi) is not None else None
