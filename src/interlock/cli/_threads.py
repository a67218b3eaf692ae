"""``interlock threads | history | pause | resume | sweep``: threads' records, moving them on."""

from __future__ import annotations

import time
from typing import Any, get_args

import click
from rich.markup import escape

from .._args import MAX_LIMIT
from .._errors import InvalidResume
from ..runtime import RunResult
from ..stores import AuditRecord, CheckpointStatus, PendingFilter, ThreadRecord
from ._decide import actor_name
from ._load import open_target, target_options
from ._output import Refused, ago, echo_json, out_console, run
from ._read import (
    CheckpointRow,
    audit_json,
    audit_log,
    checkpoints,
    failure,
    pending,
    summary,
)
from ._views import again, entry_details, new_table, print_outcome, stamp

__all__ = ["history", "pause", "resume", "sweep", "threads"]

_LIMIT = click.IntRange(1, MAX_LIMIT)


@click.command()
@click.option(
    "--status",
    type=click.Choice(get_args(CheckpointStatus)),
    help="Only threads with this status (failed: those waiting for a fix and a resume).",
)
@click.option(
    "--limit", type=_LIMIT, metavar="N", default=50, show_default=True, help="At most N threads."
)
@click.option("--after", metavar="THREAD", help="Those after this thread id (the next page).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (exact times) instead.")
@target_options
def threads(
    status: CheckpointStatus | None,
    limit: int,
    after: str | None,
    as_json: bool,
    app_spec: str | None,
    store_url: str | None,
) -> None:
    """List threads by id, with --status only those with it.

    A failed thread shows why: a node raised, or its continuation could not run (the graph
    changed since the question...). Fix the cause, then continue it with `interlock resume`.
    """
    target = open_target(app_spec, store_url, decides=False)

    async def read() -> list[tuple[ThreadRecord, str | None, str | None]]:
        try:
            found = await target.reader.threads(status=status, limit=limit, after=after)
            return [(t.record, t.error, t.continue_with) for t in found]
        finally:
            await target.aclose()

    rows = run(read)
    if as_json:
        echo_json(
            [
                {
                    "thread": r.thread,
                    "status": r.status,
                    "checkpoint_id": r.head_id,
                    "updated_at": r.updated_at,
                    "error": error,
                    "continue_with": command,
                }
                for r, error, command in rows
            ]
        )
        return
    out = out_console()
    if not rows:
        out.print(f"No threads{' with status ' + status if status else ''}.")
        return
    table = new_table(f"{status.capitalize() if status else 'Threads'}, by id")
    for name in ("thread", "status", "updated", "why"):
        table.add_column(name, no_wrap=name != "why", overflow="fold")
    for r, error, _ in rows:
        table.add_row(escape(r.thread), r.status, ago(r.updated_at), escape(error or "-"))
    out.print(table)
    if any(command for *_, command in rows):
        out.print(
            "Once the cause is fixed (a migration registered, say), continue each with "
            f"{again('resume', 'THREAD')}."
        )
    if len(rows) == limit:
        out.print(f"More: {again('threads', '--after', rows[-1][0].thread)}")


@click.command()
@click.argument("thread")
@click.option(
    "--limit",
    type=_LIMIT,
    metavar="N",
    default=20,
    show_default=True,
    help="Checkpoints and audit entries.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (exact times) instead.")
@target_options
def history(
    thread: str, limit: int, as_json: bool, app_spec: str | None, store_url: str | None
) -> None:
    """Show a thread's checkpoints (newest first) and its audit log.

    The nodes that run next are shown with --app (they are read through the app's graph).
    """
    target = open_target(app_spec, store_url, decides=False)

    async def read() -> tuple[
        list[CheckpointRow], list[AuditRecord], str | None, tuple[str | None, str | None]
    ]:
        try:
            entries = await audit_log(target, thread, last=limit)
            head = await target.store.get_thread(thread)
            if head is None and entries:  # deleted: its audit log outlives it
                return [], entries, None, (None, None)
            rows = await checkpoints(target, thread, limit=limit)
            if head is not None and head.status == "failed":
                return rows, entries, head.status, await failure(target, thread, head.head_id)
            return rows, entries, None if head is None else head.status, (None, None)
        finally:
            await target.aclose()

    rows, entries, status, (error, command) = run(read)
    if as_json:
        echo_json(
            {
                "thread": thread,
                "status": status,
                "error": error,
                "continue_with": command,
                "checkpoints": [
                    {
                        "id": r.id,
                        "step": r.step,
                        "status": r.status,
                        "source": r.source,
                        "created_at": r.created_at,
                        "next": None if r.next is None else list(r.next),
                    }
                    for r in rows
                ],
                "audit": [audit_json(e) for e in reversed(entries)],
            }
        )
        return
    out = out_console()
    if status is None:
        out.print(f"Thread {escape(thread)} was deleted; its audit log remains.")
    else:
        since = f", since {stamp(rows[0].created_at)}" if rows else ""
        out.print(f"Thread [bold]{escape(thread)}[/bold] is {status}{since}.")
        if error is not None:
            out.print(f"It failed: {escape(error)}")
        if command is not None:
            out.print(
                f"Once the cause is fixed, continue it with {escape(again('resume', thread))}."
            )
    if rows:
        known = all(r.next is not None for r in rows)
        table = new_table("Checkpoints, newest first")
        for name in ("step", "status", "source", "time", *(("next",) if known else ()), "id"):
            table.add_column(name, no_wrap=name != "next", overflow="fold")
        for r in rows:
            cells = [str(r.step), r.status, r.source, ago(r.created_at)]
            if r.next is not None:
                cells.append(escape(", ".join(r.next) or "-"))
            table.add_row(*cells, r.id)
        out.print(table)
        if not known:
            out.print("(With --app, the nodes each checkpoint runs next are shown too.)")
    table = new_table("Audit log, newest first")
    for name in ("#", "time", "kind", "actor", "details"):
        table.add_column(name, no_wrap=name != "details", overflow="fold")
    for e in reversed(entries):
        table.add_row(
            str(e.seq), ago(e.at), e.kind, escape(e.actor or "-"), escape(entry_details(e))
        )
    out.print(table)


@click.command()
@click.argument("thread")
@click.option("--forced", is_flag=True, help="Also cancel running tasks (they re-run on resume).")
@target_options
def pause(thread: str, forced: bool, app_spec: str | None, store_url: str | None) -> None:
    """Ask whichever process runs a thread to pause it.

    A planned pause stops the run at its next superstep boundary; --forced also cancels the
    tasks running then. A thread that is not running pauses when a run next looks.
    """
    target = open_target(app_spec, store_url, decides=False)

    async def ask() -> tuple[bool, str | None]:
        try:
            if target.app is not None:
                found = await target.app.request_pause(thread, forced=forced)
            else:
                found = await target.store.request_pause(
                    thread, kind="forced" if forced else "planned"
                )
            head = await target.store.get_thread(thread)
            return found, None if head is None else head.status
        finally:
            await target.aclose()

    found, status = run(ask)
    if not found:
        raise Refused(
            f"no thread {thread!r} in this store, so nothing to pause: check its id "
            "(`interlock inbox` lists the threads waiting on people)"
        )
    out = out_console()
    how = (
        "stops at its next superstep boundary, cancelling the tasks still running (they re-run "
        "from their saved inputs on resume)"
        if forced
        else "stops at its next superstep boundary, once its running tasks finish"
    )
    kind = "A forced" if forced else "A planned"
    if status == "ready":
        out.print(
            f"{kind} pause is requested for thread {escape(thread)}: the run that holds it {how}."
        )
    else:
        out.print(
            f"{kind} pause is requested for thread {escape(thread)}, which is {status}, so no "
            f"run holds it now: the next run that looks for requests (one started with "
            f"app.start()) {how}."
        )
    out.print(f"Continue it afterwards with: {escape(again('resume', thread))}")


@click.command()
@click.argument("thread")
@click.option(
    "--actor",
    metavar="NAME",
    help="Who continues it, for the record (default: your user name on this machine).",
)
@target_options
def resume(thread: str, actor: str | None, app_spec: str | None, store_url: str | None) -> None:
    """Continue a thread: run the tasks whose questions are decided, or past a pause."""
    target = open_target(app_spec, store_url, decides=True)
    app = target.app
    assert app is not None  # decides=True: open_target refused the command without one
    who = actor_name(actor)

    async def go() -> RunResult[Any]:
        try:
            return await app.resume(thread, actor=who)
        except InvalidResume as exc:
            # Nothing is decided yet: the thread waits on a person, not on this command.
            raise Refused(
                f"thread {thread!r} waits on questions nobody has answered yet, so there is "
                f"nothing to continue ({exc}). List them with "
                f"{again('inbox', '--thread', thread)} and answer them first"
            ) from exc
        finally:
            await target.aclose()

    print_outcome(out_console(), run(go))


@click.command()
@click.option(
    "--limit",
    type=_LIMIT,
    metavar="N",
    default=100,
    show_default=True,
    help="At most this many questions.",
)
@target_options
def sweep(limit: int, app_spec: str | None, store_url: str | None) -> None:
    """Resolve the questions whose deadline passed, by their on_timeout, and continue them."""
    target = open_target(app_spec, store_url, decides=True)
    app = target.app
    assert app is not None  # decides=True: open_target refused the command without one

    async def go() -> tuple[list[Any], list[RunResult[Any]], bool]:
        try:
            now = time.time()
            due = await pending(target, PendingFilter(deadline_before=now), limit=limit, after=None)
            results = await app.sweep(now=now, limit=limit)
            return due, results, await app.continued_by() == "workers"
        finally:
            await target.aclose()

    due, results, workers = run(go)
    out = out_console()
    if not due and not results:
        out.print("No question is past its deadline.")
        return
    for i in due:
        out.print(
            f"Expired: {i.id} (thread {escape(i.thread)}, asked {ago(i.created_at)}): "
            f"{escape(summary(i, 80))}"
        )
    for result in results:
        print_outcome(out, result)
    if workers:
        out.print("The workers continue these threads (their trigger queued each one).")
    elif not results:
        out.print("No thread was continued (another sweeper may have taken them).")
