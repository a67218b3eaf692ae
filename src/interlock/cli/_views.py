"""How the commands show questions, decisions and the end of a run to a person."""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

import click
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..runtime import Decision, Interrupt, RunResult
from ..stores import AuditRecord
from ._output import ago, countdown
from ._read import entry_data, summary, what

NEEDS_APP: Final = frozenset({"approve", "reject", "edit", "respond", "answer", "resume", "sweep"})
"""The commands that decide or continue threads, which run the app's graph."""

__all__ = [
    "NEEDS_APP",
    "again",
    "describe_answer",
    "describe_change",
    "describe_decision",
    "edit_diff",
    "entry_details",
    "interrupt_table",
    "new_table",
    "print_outcome",
    "stamp",
]


def stamp(at: float) -> str:
    """An exact local time, for a person who wants more than "3m ago"."""
    return datetime.fromtimestamp(at).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def new_table(title: str | None = None) -> Table:
    """A table in the commands' one style: a rule under the header, no outer frame."""
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)


def interrupt_table(interrupts: Sequence[Interrupt], *, title: str | None = None) -> Table:
    """Questions as rows: id, thread, tool or kind, the question, age, deadline.

    It fits 80 columns when no question has a deadline: the deadline column, like the
    approvals column, is there only when a row needs it.
    """
    now = time.time()
    approvals = [_approvals(i) for i in interrupts]
    deadlines = any(i.deadline is not None for i in interrupts)
    table = new_table(title)
    table.pad_edge = False
    # Ids and threads are what a person copies into the next command: never wrapped.
    table.add_column("id", no_wrap=True, min_width=max((len(i.id) for i in interrupts), default=2))
    table.add_column("thread", no_wrap=True)
    table.add_column("tool / kind", no_wrap=True)
    # The one column that wraps, between words; a word wider than the column (a call's
    # arguments as JSON) ends in "…": `interlock show ID` shows it whole.
    table.add_column("question", overflow="ellipsis", min_width=16, ratio=1)
    table.add_column("age", no_wrap=True)
    if deadlines:
        table.add_column("deadline", no_wrap=True)
    if any(a is not None for a in approvals):
        table.add_column("approvals", no_wrap=True)
    for i, given in zip(interrupts, approvals, strict=True):
        row = [i.id, escape(i.thread), escape(what(i)), escape(summary(i)), ago(i.created_at, now)]
        if deadlines:
            row.append(countdown(i.deadline, now))
        if given is not None or any(a is not None for a in approvals):
            row.append(escape(given or "-"))
        table.add_row(*row)
    return table


def _approvals(interrupt: Interrupt) -> str | None:
    """A quorum's progress, ``1/2 (ada)``; None for a question one answer decides."""
    if interrupt.approvals < 2:
        return None
    who = f" ({', '.join(interrupt.approved_by)})" if interrupt.approved_by else ""
    return f"{len(interrupt.approved_by)}/{interrupt.approvals}{who}"


def describe_answer(answer: Any) -> str:
    """An answer as a person reads it: ``approve``, ``reject: "too risky"``, or its JSON."""
    if isinstance(answer, dict) and isinstance(answer.get("action"), str):
        action = answer["action"]
        if action == "reject" and answer.get("message"):
            return f"reject: {json.dumps(answer['message'], ensure_ascii=False)}"
        if action == "edit":
            return f"edit to {json.dumps(answer.get('arguments'), ensure_ascii=False)}"
        if action == "respond":
            return f"respond: {json.dumps(answer.get('content'), ensure_ascii=False)}"
        return str(action)
    if answer is True:
        return "approve (true)"
    if answer is False:
        return "reject (false)"
    return json.dumps(answer, ensure_ascii=False, default=repr)


def describe_decision(decision: Decision) -> str:
    """Who decided what, and when."""
    who = decision.actor or "someone who gave no name"
    text = (
        f"{who} decided {ago(decision.decided_at)} ({stamp(decision.decided_at)}): "
        f"{describe_answer(decision.answer)}"
    )
    if decision.reason:
        text += f", reason: {decision.reason}"
    return text


def edit_diff(decision: Decision | None) -> list[dict[str, Any]]:
    """The changes of an edited tool call's arguments (``Decision.details["diff"]``), or []."""
    details = None if decision is None else decision.details
    return _diff_of(details)


def _diff_of(details: Any) -> list[dict[str, Any]]:
    diff = details.get("diff") if isinstance(details, dict) else None
    return [c for c in diff if isinstance(c, dict)] if isinstance(diff, list) else []


def describe_change(change: dict[str, Any]) -> str:
    """One change of an edit's diff, as a person reads it: ``/command: "ls" → "ls -l"``."""
    path = str(change.get("path", "/"))
    before = json.dumps(change.get("before"), ensure_ascii=False, default=repr)
    after = json.dumps(change.get("after"), ensure_ascii=False, default=repr)
    if change.get("op") == "add":
        return f"{path}: added {after}"
    if change.get("op") == "remove":
        return f"{path}: removed (was {before})"
    return f"{path}: {before} → {after}"


def entry_details(entry: AuditRecord) -> str:
    """An audit entry's details in one line: the answer and reason of a decision, else JSON.

    An edit of a tool call's arguments reads ``edited the call: /command: "a" → "b"``.
    """
    data = entry_data(entry)
    if entry.kind in ("decision", "expired") and "answer" in data:
        answer = data["answer"]
        changes = _diff_of(data.get("details"))
        edited = isinstance(answer, dict) and answer.get("action") == "edit" and changes
        if edited:
            text = "edited the call: " + "; ".join(describe_change(c) for c in changes)
        else:
            text = describe_answer(answer)
        for name in ("reason", "nonce"):
            if data.get(name):
                text += f", {name}: {data[name]}"
        if data.get("details") is not None and not edited:
            text += f", details: {json.dumps(data['details'], ensure_ascii=False)}"
        return text
    if entry.kind == "approval" and isinstance(data.get("approved_by"), list):
        given, needed = data["approved_by"], data.get("approvals", "?")
        text = f"approve, {len(given)} of {needed} ({', '.join(map(str, given))})"
        return text + (f", reason: {data['reason']}" if data.get("reason") else "")
    if entry.kind == "interrupt" and "address" in data:
        key = f" (key {data['key']})" if data.get("key") else ""
        return f"asked at {data['address'] or 'the graph'}{key}"
    shown = {k: v for k, v in data.items() if k not in ("interrupt", "payload_hash")}
    return json.dumps(shown, ensure_ascii=False, default=repr)


def again(command: str, *args: str) -> str:
    """The command line that does ``command`` next, with the ``--app``/``--store`` given.

    Options given as environment variables are left out: they are still set.
    """
    ctx = click.get_current_context()
    parts = ["interlock", *command.split(), *args]
    for name, flag in (("app_spec", "--app"), ("store_url", "--store")):
        value = ctx.params.get(name)
        if value and ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE:
            parts += [flag, value]
    line = shlex.join(parts)
    if command in NEEDS_APP and not ctx.params.get("app_spec"):
        line += " --app MODULE:ATTR"  # a placeholder the person fills in
    return line


def print_outcome(out: Console, result: RunResult[Any]) -> None:
    """How the run ended: done, waiting on new questions (listed), or paused."""
    thread = escape(result.thread)
    if result.status == "done":
        out.print(f"[green]Thread {thread} is done.[/green]")
    elif result.status == "interrupted":
        waiting = [i for i in result.interrupts if i.needs_answer]
        out.print(f"Thread {thread} is waiting on {len(waiting)} new question(s):")
        out.print(interrupt_table(waiting))
        if waiting:
            out.print(f"Read the first with: {escape(again('show', waiting[0].id))}")
    elif result.status == "paused":
        out.print(
            f"[yellow]Thread {thread} is paused.[/yellow] Continue it with: "
            f"{escape(again('resume', result.thread))}"
        )
    else:  # "failed" is raised, not returned; shown anyway should that change
        out.print(f"Thread {thread} stopped with status {result.status}.")
