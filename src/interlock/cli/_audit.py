"""``interlock audit verify``: check every link of the audit log's hash chains.

Threads are verified one at a time, so the progress bar moves per thread and a report can name
each broken chain. The threads are found through the log's own (thread, seq) order: a cursor
past the last possible entry of one thread lands on the first entry of the next, so listing
them reads one row per thread, not the whole log.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Final

import click
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from ..stores import AuditProblem, AuditReport, Store, verify_audit
from ._load import open_target, target_options
from ._output import EXIT_REFUSED, echo_json, err_console, out_console, run, to_builtins
from ._views import new_table

__all__ = ["audit"]

_LAST_SEQ: Final = 2**63 - 1
"""Above every entry's seq (a 64-bit integer in every store)."""


@click.group()
def audit() -> None:
    """The audit log: every question, decision, edit and effect, hash-chained per thread."""


@audit.command()
@click.option("--thread", help="Verify only this thread's log.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@target_options
def verify(thread: str | None, as_json: bool, app_spec: str | None, store_url: str | None) -> None:
    """Check that no audit entry was edited, removed or inserted since it was written.

    Exits 1, naming each break, if a chain does not hold. On success it prints each thread's
    head hash: keep them somewhere else, to detect even a consistent rewrite later.
    """
    target = open_target(app_spec, store_url, decides=False)
    err = err_console()

    async def check() -> AuditReport:
        try:
            threads = [thread] if thread is not None else [t async for t in _threads(target.store)]
            reports: list[AuditReport] = []
            with Progress(
                TextColumn("verifying the audit log"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[thread]}"),
                console=err,
                transient=True,
                disable=as_json,
            ) as progress:
                task = progress.add_task("verify", total=len(threads), thread="")
                for t in threads:
                    progress.update(task, thread=t)
                    reports.append(await verify_audit(target.store, thread=t))
                    progress.advance(task)
            return _combined(reports)
        finally:
            await target.aclose()

    report: AuditReport = run(check)
    if as_json:
        echo_json({"ok": report.ok, **to_builtins(report)})
    elif report.ok:
        _print_heads(report, thread)
    else:
        _print_problems(report)
    if not report.ok:
        click.get_current_context().exit(EXIT_REFUSED)


async def _threads(store: Store) -> AsyncIterator[str]:
    """Every thread with an audit log, in the log's order."""
    cursor: tuple[str, int] | None = None
    while True:
        rows = await store.audit_log(after=cursor, limit=1)
        if not rows:
            return
        yield rows[0].thread
        cursor = (rows[0].thread, _LAST_SEQ)


def _combined(reports: list[AuditReport]) -> AuditReport:
    problems: list[AuditProblem] = []
    heads: dict[str, str] = {}
    for r in reports:
        problems.extend(r.problems)
        heads.update(r.heads)
    return AuditReport(
        entries=sum(r.entries for r in reports),
        threads=len(heads),
        problems=problems,
        heads=heads,
    )


def _print_heads(report: AuditReport, thread: str | None) -> None:
    out = out_console()
    if report.entries == 0:
        where = f"thread {escape(thread)}" if thread is not None else "this store"
        out.print(f"The audit log of {where} is empty: nothing to verify.")
        return
    out.print(
        f"[green]The audit log holds:[/green] {report.entries} entries in {report.threads} "
        "thread(s), every link intact."
    )
    table = new_table("Heads (keep them elsewhere to detect a rewrite)")
    table.add_column("thread", no_wrap=True)
    table.add_column("head hash", no_wrap=True)
    for t, head in report.heads.items():
        table.add_row(escape(t), head)
    out.print(table)


def _print_problems(report: AuditReport) -> None:
    out = out_console()
    broken = sorted({p.thread for p in report.problems})
    out.print(
        f"[red]The audit log does not hold:[/red] {len(report.problems)} problem(s) in "
        f"{len(broken)} of {report.threads} thread(s) ({report.entries} entries checked)."
    )
    table = new_table()
    table.add_column("thread", no_wrap=True)
    table.add_column("entry", no_wrap=True)
    table.add_column("problem", overflow="fold")
    for p in report.problems:
        table.add_row(escape(p.thread), str(p.seq), escape(p.problem))
    out.print(table)
    out.print(
        "Entries were changed outside interlock. Compare the store with a backup, or with the "
        "heads you published after an earlier verify, to find what was altered; the log "
        "itself cannot be repaired in place."
    )
