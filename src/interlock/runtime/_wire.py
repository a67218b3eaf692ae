"""Plain-data form of a `Level` (what goes into a checkpoint body) and back.

The wire form holds only builtins and user values; the codec turns it into bytes. Loading
checks the shape and turns any mismatch into `CheckpointCorrupt`.
"""

from __future__ import annotations

from typing import Any, Final, get_args

import msgspec

from .._errors import CheckpointCorrupt
from ..graph._builder import CompiledGraph
from ..graph._channels import MISSING, AppendChannel
from ._authority import Authority
from ._context import Scratch
from ._level import Level, TaskResult, TaskState
from ._records import (
    Address,
    Decision,
    Interrupt,
    InterruptKind,
    OnTimeout,
    Send,
    TimeoutDefault,
    decision_dict,
)
from ._signals import Raised

__all__ = [
    "WIRE_VERSION",
    "level_from_wire",
    "level_to_wire",
    "raised_from_wire",
    "raised_to_wire",
]

WIRE_VERSION = 1

_KINDS: Final[dict[str, InterruptKind]] = {k: k for k in get_args(InterruptKind)}
_TIMEOUT_DEFAULT: Final = "default"
"""The tag of a `TimeoutDefault` on the wire: ``["default", value]``."""


def _timeout_to_wire(policy: OnTimeout | None) -> Any:
    if isinstance(policy, TimeoutDefault):
        return [_TIMEOUT_DEFAULT, policy.value]
    return policy


def _timeout_from_wire(w: Any) -> OnTimeout | None:
    if w is None:
        return None
    if w == "reject":
        return "reject"
    if w == "escalate":
        return "escalate"
    if isinstance(w, list) and len(w) == 2 and w[0] == _TIMEOUT_DEFAULT:
        return TimeoutDefault(w[1])
    raise ValueError(f"unknown on_timeout policy {w!r}")


def raised_to_wire(r: Raised) -> list[Any]:
    """Encode a pending interrupt.

    Fourteen fields; a quorum (``approvals`` > 1) appends three: the number needed, the schema
    of an approving answer, and the votes recorded so far. A question that says who may
    decide it, or whose run's starter is known, appends two more: its authority (a mapping,
    or None) and the starter's name (16 or 19 fields).
    """
    i = r.interrupt
    w = [
        i.id,
        i.key,
        str(i.address),
        i.kind,
        i.info,
        i.schema,
        i.created_at,
        i.deadline,
        r.validator,
        r.has_default,
        _timeout_to_wire(r.on_timeout),
        r.task,
        r.local,
        r.owner,
    ]
    if i.approvals > 1:
        w.extend([i.approvals, r.approving, [decision_dict(v) for v in r.votes]])
    if i.authority is not None or i.started_by is not None:
        authority = None if i.authority is None else msgspec.to_builtins(i.authority)
        w.extend([authority, i.started_by])
    return w


def _expect(value: Any, kinds: type | tuple[type, ...], what: str) -> None:
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in _as_tuple(kinds)):
        raise ValueError(f"{what} has the wrong type ({type(value).__name__})")


def _as_tuple(kinds: type | tuple[type, ...]) -> tuple[type, ...]:
    return kinds if isinstance(kinds, tuple) else (kinds,)


_NUMBER = (int, float)
_OPTIONAL_STR = (str, type(None))


def raised_from_wire(w: list[Any], thread: str = "") -> Raised:
    """Decode a pending interrupt of ``thread`` (any shape or type mismatch: `ValueError`)."""
    _expect(w, list, "a pending interrupt")
    if len(w) not in (14, 16, 17, 19):
        raise ValueError(f"a pending interrupt has {len(w)} fields, not 14, 16, 17 or 19")
    authority: Authority | None = None
    starter: str | None = None
    if len(w) in (16, 19):
        authority, starter = _authority_from_wire(w[-2:])
        w = w[:-2]
    (iid, key, addr, kind, info, schema, created, deadline, vname, has_default, on_timeout) = w[:11]
    task, local, owner = w[11:14]
    known = _KINDS.get(kind) if isinstance(kind, str) else None
    if known is None:
        raise ValueError(f"unknown interrupt kind {kind!r}")
    for value, kinds, what in (
        (iid, str, "interrupt id"),
        (key, _OPTIONAL_STR, "interrupt key"),
        (addr, str, "interrupt address"),
        (schema, (dict, type(None)), "interrupt schema"),
        (created, _NUMBER, "interrupt time"),
        (deadline, (*_NUMBER, type(None)), "interrupt deadline"),
        (vname, _OPTIONAL_STR, "validator name"),
        (has_default, bool, "interrupt default flag"),
        (task, str, "interrupt task"),
        (local, str, "interrupt local key"),
        (owner, _OPTIONAL_STR, "interrupt owner"),
    ):
        _expect(value, kinds, what)
    approvals, approving, votes = _quorum_from_wire(w[14:])
    record = Interrupt(
        id=str(iid),
        thread=thread,
        key=key,
        address=Address.parse(addr),
        kind=known,
        info=info,
        schema=schema,
        created_at=float(created),
        deadline=deadline,
        approvals=approvals,
        approved_by=tuple(str(v.actor) for v in votes),
        authority=authority,
        started_by=starter,
    )
    return Raised(
        record,
        validator=vname,
        has_default=bool(has_default),
        on_timeout=_timeout_from_wire(on_timeout),
        task=str(task),
        local=str(local),
        owner=owner,
        approving=approving,
        votes=votes,
    )


def _authority_from_wire(w: list[Any]) -> tuple[Authority | None, str | None]:
    """The authority fields of a pending interrupt: ``(authority, started_by)``."""
    authority, starter = w
    _expect(authority, (dict, type(None)), "interrupt authority")
    _expect(starter, _OPTIONAL_STR, "interrupt starter")
    if authority is None:
        return None, starter
    try:
        return msgspec.convert(authority, Authority), starter
    except (msgspec.ValidationError, ValueError) as exc:
        raise ValueError(f"interrupt authority is not valid: {exc}") from exc


def _quorum_from_wire(
    w: list[Any],
) -> tuple[int, dict[str, Any] | None, tuple[Decision, ...]]:
    """The quorum fields of a pending interrupt: ``(approvals, approving, votes)``."""
    if not w:
        return 1, None, ()
    approvals, approving, votes = w
    _expect(approvals, int, "interrupt approvals")
    _expect(approving, dict, "interrupt approving schema")
    _expect(votes, list, "interrupt votes")
    if approvals < 2:
        raise ValueError(f"a quorum interrupt needs at least 2 approvals, not {approvals}")
    try:
        recorded = tuple(msgspec.convert(v, Decision) for v in votes)
    except msgspec.ValidationError as exc:
        raise ValueError(f"an interrupt vote is malformed: {exc}") from exc
    actors = [v.actor for v in recorded]
    if None in actors or len(set(actors)) != len(actors) or len(actors) >= approvals:
        raise ValueError("an interrupt's votes must name distinct actors, fewer than needed")
    return approvals, approving, recorded


def _goto_to_wire(g: str | Send) -> Any:
    return g if isinstance(g, str) else {"send": g.node, "arg": g.arg}


def _goto_from_wire(g: Any) -> str | Send:
    if isinstance(g, str):
        return g
    return Send(str(g["send"]), g["arg"])


def level_to_wire(level: Level, *, full: bool, segmented: bool = False) -> dict[str, Any]:
    """Encode a level; channels as full values (``full``) or as deltas since their last mark.

    ``segmented`` (with ``full``): append channels refer to the items earlier snapshots of the
    thread hold instead of copying them (`AppendChannel.segments`).
    """
    channels: dict[str, Any] = {}
    for key, ch in level.channels.items():
        if not full:
            d = ch.delta()
        elif segmented and isinstance(ch, AppendChannel):
            d = ch.segments()
        else:
            d = ch.full()
        if d is not None:
            channels[key] = list(d)
    body: dict[str, Any] = {
        "v": WIRE_VERSION,
        "fp": level.plan.fingerprint,
        "lin": level.lineage,
        "step": level.step,
        "ch": channels,
        "tasks": [
            [
                t.id,
                t.node,
                t.sub,
                t.arg is not MISSING,
                None if t.arg is MISSING else t.arg,
                t.passed_before,
            ]
            for t in level.tasks
        ],
    }
    if level.results:
        body["res"] = {
            tid: [[list(w) for w in r.writes], [_goto_to_wire(g) for g in r.goto]]
            for tid, r in level.results.items()
        }
    if level.scratch:
        body["scr"] = {tid: s.to_wire() for tid, s in level.scratch.items()}
    if level.pending:
        body["pend"] = [raised_to_wire(r) for r in level.pending]
    if level.origin:
        body["org"] = level.origin
    if level.written:
        body["wr"] = sorted(level.written)
    return body


def apply_channels(level: Level, channels: dict[str, Any]) -> None:
    """Apply a body's channel deltas (or full values) to a level."""
    _expect(channels, dict, "channels")
    for key, (op, payload) in channels.items():
        ch = level.channels.get(key)
        if ch is None:
            raise ValueError(f"checkpoint has unknown state key {key!r}")
        ch.apply(op, payload)


def level_from_wire(
    plan: CompiledGraph,
    body: dict[str, Any],
    *,
    thread: str,
    lineage: str | None = None,
    channels: bool = True,
) -> Level:
    """Rebuild a level from its wire form (channels applied when ``channels``)."""
    try:
        _expect(body, dict, "a checkpoint body")
        if body["v"] != WIRE_VERSION:
            raise ValueError(f"unsupported checkpoint version {body['v']!r}")
        _expect(body["lin"], str, "lineage")
        _expect(body["step"], int, "step")
        _expect(body["ch"], dict, "channels")
        _expect(body["tasks"], list, "tasks")
        for part in ("res", "scr", "org"):
            _expect(body.get(part, {}), dict, part)
        _expect(body.get("pend", []), list, "pend")
        level = Level(plan, thread=thread, lineage=lineage or body["lin"], base=Address())
        level.step = body["step"]
        if channels:
            apply_channels(level, body["ch"])
        for task in body["tasks"]:
            _expect(task, list, "a task")
            tid, node, sub, has_arg, arg, passed = task
            for value, kinds, what in (
                (tid, str, "task id"),
                (sub, str, "task sub id"),
                (has_arg, bool, "task input flag"),
                (passed, bool, "task breakpoint flag"),
            ):
                _expect(value, kinds, what)
            if not isinstance(node, str) or node not in plan.nodes:
                raise ValueError(f"checkpoint names unknown node {node!r}")
            level.tasks.append(
                TaskState(
                    id=str(tid),
                    node=str(node),
                    sub=str(sub),
                    arg=arg if has_arg else MISSING,
                    passed_before=bool(passed),
                )
            )
        for tid, (writes, goto) in body.get("res", {}).items():
            level.results[str(tid)] = TaskResult(
                writes=[(str(k), v) for k, v in writes], goto=[_goto_from_wire(g) for g in goto]
            )
        for tid, s in body.get("scr", {}).items():
            level.scratch[str(tid)] = Scratch.from_wire(s)
        level.pending = [raised_from_wire(w, thread) for w in body.get("pend", [])]
        # Everything that names a task must name one of this level's tasks.
        task_ids = {t.id for t in level.tasks}
        owners = {r.owner for r in level.pending if r.owner is not None}
        if not (owners | set(level.results) | set(level.scratch)) <= task_ids:
            raise ValueError("interrupts, results or scratch name a task the checkpoint lacks")
        level.origin = {str(k): int(v) for k, v in body.get("org", {}).items()}
        level.written = {str(k) for k in body.get("wr", [])}
        for ch in level.channels.values():
            ch.mark()
        return level
    except CheckpointCorrupt:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise CheckpointCorrupt(
            f"checkpoint of thread {thread!r} has an invalid structure ({type(exc).__name__}: "
            f"{exc}); it was not written by this version of interlock or was damaged",
            thread=thread,
        ) from exc


def subgraph_output(level: Level, parent_keys: frozenset[str]) -> dict[str, Any]:
    """What a finished subgraph hands back to its parent: its writes to shared keys.

    For append keys that is the items it appended (so the parent's reducer does not duplicate
    what it passed in); for other keys the final value.
    """
    out: dict[str, Any] = {}
    for key in level.written:
        if key not in parent_keys:
            continue
        ch = level.channels[key]
        if isinstance(ch, AppendChannel):
            out[key] = ch.value[level.origin.get(key, 0) :]
        elif ch.value is not MISSING:
            out[key] = ch.value
    return out
