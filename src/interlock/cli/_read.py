"""Reading a store for a person: questions, their audit entries, a thread's checkpoints.

This reader needs no app: a question's body is decoded with the target's codec (the app's, or
the default `Codec`), and a thread's checkpoints are listed from the store's records. Only
what needs the graph (which nodes run next) waits for ``--app``.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from typing import Any, Final, Literal

import msgspec

from .._errors import CheckpointCorrupt, CheckpointNotFound
from ..agents import APPROVAL
from ..runtime import Decision, Interrupt
from ..stores import AuditRecord, InterruptRecord, PendingFilter
from ._load import Target
from ._output import Refused

__all__ = [
    "CheckpointRow",
    "QuestionForm",
    "about",
    "audit_json",
    "audit_log",
    "checkpoints",
    "entry_data",
    "failure",
    "form_of",
    "interrupt_json",
    "pending",
    "question",
    "question_hash",
    "recorded",
    "summary",
    "what",
    "with_progress",
]

QuestionForm = Literal["tool_call", "approval", "other", "pause"]
"""What a question takes: a tool-call decision, yes/no, any answer its schema allows, or
nothing (a pause is continued, not answered)."""

_PAGE: Final = 1000
"""Audit entries read per request."""


def form_of(interrupt: Interrupt) -> QuestionForm:
    """What ``interrupt`` takes as an answer."""
    if not interrupt.needs_answer:
        return "pause"
    kind = interrupt.info.get("type") if isinstance(interrupt.info, dict) else None
    if kind == APPROVAL:
        return "tool_call"
    if kind == "approval":
        return "approval"
    return "other"


def decode(target: Target, row: InterruptRecord) -> Interrupt:
    """The `Interrupt` an index row holds, decoded with the target's codec.

    Who approved a quorum question so far is not in the row (see `with_progress`).
    """
    try:
        return target.reader.interrupt(row)
    except CheckpointCorrupt as exc:
        hint = (
            "pass --app so that the app's registered types can be read"
            if target.app is None
            else "the app does not know them: check that --app names the app that asked"
        )
        raise Refused(
            f"the question {row.id} of thread {row.thread!r} cannot be read ({exc}); {hint}"
        ) from exc


async def pending(
    target: Target, where: PendingFilter, *, limit: int, after: str | None
) -> list[Interrupt]:
    """Pending questions, oldest first, through the store's index."""
    if after is not None and await target.store.get_interrupt(after) is None:
        raise Refused(
            f"--after {after}: no interrupt has that id; pass the last id of the previous page"
        )
    if target.app is not None:  # the app reads a quorum's progress from its checkpoint
        return await target.app.inbox(
            thread=where.thread,
            key=where.key,
            tool=where.tool,
            older_than=where.older_than,
            deadline_before=where.deadline_before,
            limit=limit,
            after=after,
        )
    rows = await target.store.pending(where, limit=limit, after=after)
    return await with_progress(target, [decode(target, row) for row in rows])


async def with_progress(target: Target, interrupts: list[Interrupt]) -> list[Interrupt]:
    """``interrupts`` with who approved each pending quorum so far, read from the audit log.

    Every approval of a question that needs several has an audit entry listing the approvers
    up to it, so the latest one tells the progress without decoding any checkpoint.
    """
    progress: dict[str, tuple[str, ...]] = {}
    for thread in dict.fromkeys(i.thread for i in interrupts if i.approvals > 1):
        for e in await audit_log(target, thread):
            data = entry_data(e) if e.kind == "approval" else {}
            if isinstance(data.get("interrupt"), str) and isinstance(data.get("approved_by"), list):
                progress[data["interrupt"]] = tuple(str(a) for a in data["approved_by"])
    return [
        msgspec.structs.replace(i, approved_by=progress[i.id]) if i.id in progress else i
        for i in interrupts
    ]


async def question(target: Target, id: str) -> tuple[Interrupt, InterruptRecord]:
    """The interrupt ``id``, pending or not, with its index row.

    Raises:
        Refused: No interrupt has that id.
    """
    row = await target.store.get_interrupt(id)
    if row is None:
        raise Refused(
            f"no interrupt has the id {id!r} in this store: list the pending ones with "
            "`interlock inbox` and copy an id from there"
        )
    (found,) = await with_progress(target, [decode(target, row)])
    return found, row


def question_hash(target: Target, interrupt: Interrupt) -> str:
    """The hash of the question as read, which a decision passes back as ``seen``."""
    return target.reader.payload_hash(interrupt)


def recorded(target: Target, row: InterruptRecord) -> Decision | None:
    """The decision recorded with a question that left ``pending``, if any."""
    return target.reader.decision(row)


def summary(interrupt: Interrupt, width: int = 100) -> str:
    """The question in one line, for a table."""
    info = interrupt.info
    if interrupt.kind in ("before", "after"):
        text = f"paused {interrupt.kind} {interrupt.address or 'the graph'}"
    elif interrupt.kind == "external":
        text = "paused from outside; continue it with `interlock resume`"
    elif isinstance(info, str):
        text = info
    elif isinstance(info, dict) and isinstance(info.get("question") or info.get("prompt"), str):
        text = info.get("question") or info["prompt"]
    elif info is None:
        text = f"question at {interrupt.address or 'the graph'}"
    else:
        text = json.dumps(info, default=repr, ensure_ascii=False)
    line = " ".join(str(text).split())
    return line if len(line) <= width else line[: width - 1] + "…"


def what(interrupt: Interrupt) -> str:
    """The tool a call waits on, or what kind of question it is."""
    info = interrupt.info
    if isinstance(info, dict):
        if form_of(interrupt) == "tool_call" and isinstance(info.get("tool"), str):
            return f"tool:{info['tool']}"
        if interrupt.kind == "reconcile" and isinstance(info.get("tool"), str):
            return f"reconcile:{info['tool']}"  # an agent's tool call cut short
        if isinstance(info.get("type"), str):
            return str(info["type"])
    if interrupt.kind == "dynamic":
        return "question" if interrupt.key is None else f"key:{interrupt.key}"
    return interrupt.kind


def interrupt_json(target: Target, interrupt: Interrupt) -> dict[str, Any]:
    """An interrupt as ``--json`` prints it."""
    info = interrupt.info
    return {
        "id": interrupt.id,
        "thread": interrupt.thread,
        "key": interrupt.key,
        "kind": interrupt.kind,
        "status": interrupt.status,
        "tool": info.get("tool") if form_of(interrupt) == "tool_call" else None,
        "address": str(interrupt.address),
        "info": info,
        "schema": interrupt.schema,
        "created_at": interrupt.created_at,
        "deadline": interrupt.deadline,
        "approvals": interrupt.approvals,
        "approved_by": list(interrupt.approved_by),
        "payload_hash": question_hash(target, interrupt),
    }


async def audit_log(target: Target, thread: str, *, last: int | None = None) -> list[AuditRecord]:
    """The thread's audit entries, oldest first (only the ``last`` ones, if given)."""
    kept: deque[AuditRecord] = deque(maxlen=last)
    cursor: tuple[str, int] | None = None
    while True:
        rows = await target.store.audit_log(thread=thread, after=cursor, limit=_PAGE)
        kept.extend(rows)
        if len(rows) < _PAGE:
            return list(kept)
        cursor = (thread, rows[-1].seq)


def entry_data(entry: AuditRecord) -> dict[str, Any]:
    """An entry's details (its JSON), or what is wrong with them."""
    try:
        data = json.loads(entry.data)
    except ValueError:
        return {"unreadable": entry.data.decode(errors="replace")}
    return data if isinstance(data, dict) else {"value": data}


def about(entries: list[AuditRecord], interrupt_id: str) -> list[AuditRecord]:
    """The entries that name ``interrupt_id``."""
    found = []
    for e in entries:
        data = entry_data(e)
        named = data.get("interrupts")
        if data.get("interrupt") == interrupt_id or (
            isinstance(named, list) and interrupt_id in named
        ):
            found.append(e)
    return found


def audit_json(entry: AuditRecord) -> dict[str, Any]:
    """An audit entry as ``--json`` prints it."""
    return {
        "seq": entry.seq,
        "at": entry.at,
        "kind": entry.kind,
        "actor": entry.actor,
        "data": entry_data(entry),
        "hash": entry.hash.hex(),
    }


@dataclass(frozen=True, kw_only=True)
class CheckpointRow:
    """One checkpoint of a thread's history, as a person reads it."""

    id: str
    """The checkpoint's id."""
    step: int
    """The superstep it was written at."""
    status: str
    """The thread's status there."""
    source: str
    """Why it was written."""
    created_at: float
    """Unix time of the commit."""
    next: tuple[str, ...] | None
    """The nodes to run next (None: not known without the app's graph)."""


async def checkpoints(target: Target, thread: str, *, limit: int) -> list[CheckpointRow]:
    """The thread's latest ``limit`` checkpoints, newest first.

    Raises:
        Refused: The thread does not exist.
    """
    if target.app is not None:
        try:
            snapshots = await target.app.history(thread, limit=limit)
        except CheckpointNotFound as exc:
            raise _no_thread(thread) from exc
        return [
            CheckpointRow(
                id=s.checkpoint_id,
                step=s.step,
                status=s.status,
                source=s.source,
                created_at=s.created_at,
                next=s.next,
            )
            for s in snapshots
        ]
    records = await target.store.list_checkpoints(thread, limit=limit)
    if not records and await target.store.get_thread(thread) is None:
        raise _no_thread(thread)
    return [
        CheckpointRow(
            id=r.id,
            step=r.step,
            status=r.status,
            source=r.source,
            created_at=r.created_at,
            next=None,
        )
        for r in records
    ]


def _no_thread(thread: str) -> Refused:
    return Refused(
        f"no thread {thread!r} in this store: check its id (`interlock inbox` lists the threads "
        "waiting on people)"
    )


async def failure(target: Target, thread: str, checkpoint_id: str) -> tuple[str | None, str | None]:
    """Why a failed checkpoint failed, and the command that continues its thread once fixed.

    Both come from its metadata (``error``, ``continue_with``; see `App.record_failure`);
    either is None when not recorded.
    """
    return await target.reader.failure(thread, checkpoint_id)
