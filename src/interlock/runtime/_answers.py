"""Delivering answers to the tasks that wait on them, down into stored subgraph levels.

A decision is recorded against the top level; an interrupt raised inside a subgraph lives in
that subgraph's level, which its parent task keeps in wire form in its scratch. Delivering the
answer there means decoding that level, answering it, and encoding it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._errors import GraphDefinitionError
from ..graph._builder import CompiledGraph
from ._context import Scratch
from ._engine import known_plan
from ._level import ESCALATE, Level
from ._signals import Raised
from ._wire import level_from_wire, level_to_wire

__all__ = ["deliver"]


def deliver(level: Level, answers: Mapping[str, Any]) -> None:
    """Deliver answers (interrupt id → value) to the level's tasks that wait on them.

    Answered interrupts leave ``level.pending``. Answers for interrupts inside a subgraph are
    delivered into its stored level.
    """
    keep: list[Raised] = []
    for r in level.pending:
        if r.id not in answers:
            keep.append(r)
            continue
        if r.owner is None:  # a pause between supersteps: nothing to deliver
            continue
        task = next(t for t in level.tasks if t.id == r.owner)
        if r.task == r.owner:
            if r.interrupt.kind == "before":
                task.passed_before = True
            else:
                sc = level.scratch.setdefault(r.owner, Scratch())
                if answers[r.id] is ESCALATE:
                    sc.escalated.append(r.local)
                else:
                    sc.answers[r.local] = answers[r.id]
                sc.targeted.append(r.local)
        else:
            _deliver_to_child(level, r, answers[r.id])
    level.pending = keep


def _deliver_to_child(level: Level, r: Raised, answer: Any) -> None:
    assert r.owner is not None
    sc = level.scratch.setdefault(r.owner, Scratch())
    where = str(r.interrupt.address)
    for addr, wire in sc.children.items():
        if where == addr or where.startswith(addr + "/"):
            task = next(t for t in level.tasks if t.id == r.owner)
            plan = child_plan(level, task.node, wire)
            child = level_from_wire(plan, wire, thread=level.thread, lineage=level.lineage)
            deliver(child, {r.id: answer})
            sc.children[addr] = level_to_wire(child, full=True)
            sc.targeted.append(f"{where}\x1f")
            return
    raise GraphDefinitionError(f"no stored subgraph holds interrupt {r.id} at {where}")


def child_plan(level: Level, node: str, wire: Any) -> CompiledGraph:
    """The plan of a child level stored by a task of ``node``: its subgraph, or a graph the
    node ran with `run_graph` (found by the fingerprint stored with it)."""
    sub = level.plan.nodes[node].subgraph
    if sub is not None:
        return sub.plan
    fp = wire.get("fp") if isinstance(wire, dict) else None
    plan = known_plan(fp)
    if plan is None:
        raise GraphDefinitionError(
            f"node {node!r} of graph {level.plan.name!r} keeps a child graph (fingerprint "
            f"{fp!r}) that this process has not built; build the agent or graph that node "
            "runs (import the module that defines it) before resuming"
        )
    return plan
