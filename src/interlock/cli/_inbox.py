"""``interlock inbox`` and ``interlock show``: the questions waiting on people."""

from __future__ import annotations

import json
import time
from typing import Any, Final

import click
import msgspec
from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from .._args import MAX_LIMIT
from ..runtime import Authority, Decision, Interrupt
from ..stores import AuditRecord, PendingFilter
from ._load import open_target, target_options
from ._output import ago, countdown, echo_json, out_console, parse_duration, run
from ._read import (
    about,
    audit_json,
    audit_log,
    form_of,
    interrupt_json,
    pending,
    question,
    question_hash,
    recorded,
    summary,
)
from ._views import (
    again,
    describe_change,
    describe_decision,
    edit_diff,
    entry_details,
    interrupt_table,
    new_table,
    stamp,
)

__all__ = ["inbox", "show"]

_PAGE: Final = 50
"""Questions per page, unless --limit says otherwise."""


@click.command()
@click.option("--thread", help="Only this thread's questions.")
@click.option("--tool", help="Only tool calls of this tool (e.g. execute).")
@click.option("--key", help="Only questions with this key.")
@click.option(
    "--older-than",
    "older_than",
    metavar="DURATION",
    help="Only questions asked longer ago than this: 90 (seconds), 10m, 2h, 1d.",
)
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_LIMIT - 1),  # one more is read, to tell whether more follow
    metavar="N",
    default=_PAGE,
    show_default=True,
    help="At most this many.",
)
@click.option("--after", metavar="ID", help="Start after this id (the last of the previous page).")
@click.option(
    "--json", "as_json", is_flag=True, help="Print JSON (exact times) instead of a table."
)
@target_options
def inbox(
    thread: str | None,
    tool: str | None,
    key: str | None,
    older_than: str | None,
    limit: int,
    after: str | None,
    as_json: bool,
    app_spec: str | None,
    store_url: str | None,
) -> None:
    """List the questions waiting for a person, oldest first.

    Works from --store alone; --app is needed only when questions hold the app's own types.
    """
    cutoff = None
    if older_than is not None:
        try:
            cutoff = time.time() - parse_duration(older_than)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'--older-than'") from exc
    where = PendingFilter(thread=thread, key=key, tool=tool, older_than=cutoff)
    target = open_target(app_spec, store_url, decides=False)

    async def read() -> tuple[list[Interrupt], list[dict[str, Any]]]:
        try:
            # One more than asked for tells whether another page follows.
            found = await pending(target, where, limit=limit + 1, after=after)
            return found, [interrupt_json(target, i) for i in found[:limit]]
        finally:
            await target.aclose()

    found, shown = run(read)
    if as_json:
        echo_json(shown)
        return
    out = out_console()
    page = found[:limit]
    if not page:
        filtered = any(v is not None for v in (thread, tool, key, older_than, after))
        out.print("No questions are waiting" + (" that match these filters." if filtered else "."))
        return
    out.print(interrupt_table(page))
    if len(found) > limit:
        args = _filters(thread=thread, tool=tool, key=key, older_than=older_than, limit=limit)
        out.print(
            f"More are waiting. Next page: {escape(again('inbox', *args, '--after', page[-1].id))}"
        )
    else:
        out.print(f"{len(page)} waiting. Read one with: {escape(again('show', page[0].id))}")


def _filters(**given: object) -> list[str]:
    """The options of this page again, for the next page's command line."""
    args: list[str] = []
    for name, value in given.items():
        if value is not None and not (name == "limit" and value == _PAGE):
            args += [f"--{name.replace('_', '-')}", str(value)]
    return args


@click.command()
@click.argument("interrupt_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (exact times) instead.")
@target_options
def show(interrupt_id: str, as_json: bool, app_spec: str | None, store_url: str | None) -> None:
    """Show one question in full: what is asked, what answer it takes, and its audit entries."""
    target = open_target(app_spec, store_url, decides=False)

    async def read() -> tuple[Interrupt, str | None, Decision | None, list[AuditRecord], str]:
        try:
            interrupt, row = await question(target, interrupt_id)
            head = await target.store.get_thread(interrupt.thread)
            entries = about(await audit_log(target, interrupt.thread), interrupt.id)
            return (
                interrupt,
                None if head is None else head.status,
                recorded(target, row),
                entries,
                question_hash(target, interrupt),
            )
        finally:
            await target.aclose()

    interrupt, status, decision, entries, digest = run(read)
    if as_json:
        shown = interrupt_json(target, interrupt)
        shown["payload_hash"] = digest
        shown["thread_status"] = status
        shown["decision"] = decision
        shown["audit"] = [audit_json(e) for e in entries]
        rules = target.app.who_decides(interrupt) if target.app is not None else interrupt.authority
        shown["authority"] = None if rules is None else msgspec.to_builtins(rules)
        shown["started_by"] = interrupt.started_by
        echo_json(shown)
        return
    rules = target.app.who_decides(interrupt) if target.app is not None else interrupt.authority
    _print_question(out_console(), interrupt, status, decision, entries, digest, rules)


def _print_question(
    out: Console,
    interrupt: Interrupt,
    status: str | None,
    decision: Decision | None,
    entries: list[AuditRecord],
    digest: str,
    authority: Authority | None = None,
) -> None:
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold", no_wrap=True)
    facts.add_column(overflow="fold")
    facts.add_row("id", interrupt.id)
    facts.add_row("thread", f"{escape(interrupt.thread)} ({status or 'deleted'})")
    edit = _edit(decision)
    edited = f" ({_edited_by(decision)}: see the edited arguments below)" if edit else ""
    facts.add_row("status", f"{interrupt.status}{escape(edited)}")
    facts.add_row("kind", f"{interrupt.kind} ({form_of(interrupt).replace('_', ' ')})")
    facts.add_row("address", escape(str(interrupt.address) or "(the graph)"))
    if interrupt.key is not None:
        facts.add_row("key", escape(interrupt.key))
    facts.add_row("asked", f"{ago(interrupt.created_at)} ({stamp(interrupt.created_at)})")
    if interrupt.deadline is not None:
        facts.add_row("deadline", f"{countdown(interrupt.deadline)} ({stamp(interrupt.deadline)})")
    if interrupt.approvals > 1:
        given = interrupt.approved_by
        who = f" ({escape(', '.join(given))})" if given else ""
        facts.add_row("approvals", f"{len(given)} of {interrupt.approvals} given{who}")
    if authority is not None:
        facts.add_row("who decides", escape(authority.describe(interrupt.started_by)))
    facts.add_row("payload hash", digest)
    if decision is not None:
        facts.add_row("decided", escape(describe_decision(decision)))
    out.print(Panel(facts, title=escape(summary(interrupt)), title_align="left", expand=False))
    out.print(_info_view(interrupt, edit, decision))
    if interrupt.schema is not None and form_of(interrupt) != "tool_call":
        out.print("[bold]Answer schema[/bold]")
        out.print(escape(_pretty(interrupt.schema)))
    if entries:
        table = new_table("Audit entries about it")
        table.add_column("#", no_wrap=True)
        table.add_column("time", no_wrap=True)
        table.add_column("kind", no_wrap=True)
        table.add_column("actor", no_wrap=True)
        table.add_column("details", overflow="fold")
        for e in entries:
            table.add_row(
                str(e.seq), ago(e.at), e.kind, escape(e.actor or "-"), escape(entry_details(e))
            )
        out.print(table)
    if interrupt.status == "pending":
        out.print(_how_to_answer(interrupt))


def _info_view(
    interrupt: Interrupt, edit: dict[str, Any] | None, decision: Decision | None
) -> Group | str:
    """What is asked: a tool call's fields and arguments, or the info as pretty JSON.

    A call a person edited shows both: the arguments asked for, and those it ran with.
    """
    info = interrupt.info
    if form_of(interrupt) != "tool_call":
        return Group("[bold]Question[/bold]", escape(_pretty(info)))
    lines: list[Any] = [f"[bold]{escape(str(info.get('question', '')))}[/bold]"]
    for field in ("agent", "tool", "call_id", "rule", "description"):
        if info.get(field):
            lines.append(f"{field}: {escape(str(info[field]))}")
    if edit is None:
        lines += ["[bold]Arguments[/bold]", escape(_pretty(info.get("arguments")))]
    else:
        who = escape(decision.actor if decision and decision.actor else "a person")
        lines += [
            "[bold]Arguments as asked[/bold] (replaced by the edit below)",
            escape(_pretty(info.get("arguments"))),
            f"[bold]Edited arguments[/bold] (by {who}: what the call runs with)",
            escape(_pretty(edit.get("arguments"))),
        ]
        changes = [describe_change(c) for c in edit_diff(decision)]
        if changes:
            lines += ["[bold]Changed[/bold]", *(f"  {escape(c)}" for c in changes)]
    if info.get("schema") is not None:
        lines += ["[bold]The tool's argument schema[/bold] (an edit must fit it)"]
        lines.append(escape(_pretty(info["schema"])))
    return Group(*lines)


def _edit(decision: Decision | None) -> dict[str, Any] | None:
    """The answer of ``decision`` when it edited a tool call's arguments, else None."""
    answer = None if decision is None else decision.answer
    if isinstance(answer, dict) and answer.get("action") == "edit":
        return answer
    return None


def _edited_by(decision: Decision | None) -> str:
    who = None if decision is None else decision.actor
    return f"edited by {who}" if who else "edited"


def _how_to_answer(interrupt: Interrupt) -> str:
    form = form_of(interrupt)
    i = interrupt.id
    if form == "pause":
        onward = again("resume", interrupt.thread)
        return f"It is a pause, not a question. Continue with: {escape(onward)}"
    if form == "tool_call":
        options = [
            again("approve", i),
            again("reject", i, "--reason", "WHY"),
            again("edit", i, "--arguments", json.dumps(interrupt.info.get("arguments") or {})),
            again("respond", i, "TEXT"),
        ]
    elif form == "approval":
        options = [again("approve", i), again("reject", i, "--reason", "WHY")]
    else:
        options = [again("answer", i, "JSON")]
        if interrupt.schema is None or _takes_yes_no(interrupt.schema):
            options[:0] = [again("approve", i), again("reject", i, "--reason", "WHY")]
    return "Answer with one of:\n" + "\n".join(f"  {escape(o)}" for o in options)


def _takes_yes_no(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "boolean"


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=repr)
