"""``interlock demo``: an order approval that really stops, persists, and resumes.

The command works in three phases, each a short event loop of its own: start the order (or find
the pending one), ask the person, then commit the answer and finish. The question is asked with
no event loop running, so Ctrl-C there is a plain `KeyboardInterrupt` that commits nothing:
inside a loop, asyncio would turn the first Ctrl-C into a cancellation of whatever runs next,
the very commit the person meant to stop.
"""

from __future__ import annotations

import secrets
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final, TypedDict

import anyio
import click
from click.core import ParameterSource
from rich.console import Console
from rich.panel import Panel

from .._errors import InterlockError
from ..graph import END, START, append
from ..runtime._app import App
from ..runtime._events import Event, NodeOutputEvent
from ..runtime._graph import Graph
from ..runtime._interrupts import choose
from ..runtime._records import Interrupt, RunResult
from ..stores import SqliteStore

__all__ = ["MAX_AMOUNT", "build_demo_app", "demo"]

APPROVAL_KEY: Final = "request_approval"
MAX_AMOUNT: Final = 100_000_000
"""The largest order the demo takes, in ¥: anything above is a typo, not an order."""
INTERRUPTED: Final = 130
"""Exit status after Ctrl-C, as shells report a process ended by SIGINT."""
OPTIONS: Final = ("approve", "reject")


class Order(TypedDict, total=False):
    """State of the demo workflow."""

    order_id: str
    amount: int
    decision: str
    outcome: str
    log: Annotated[list[str], append]


def prepare_order(s: Order) -> dict[str, Any]:
    return {"log": [f"order #{s['order_id']} for ¥{s['amount']} prepared"]}


def request_approval(s: Order) -> dict[str, Any]:
    decision = choose(
        f"Order #{s['order_id']} for ¥{s['amount']} needs approval",
        list(OPTIONS),
        key=APPROVAL_KEY,
    )
    return {"decision": decision, "log": [f"decision: {decision}"]}


def process_order(s: Order) -> dict[str, Any]:
    return {"outcome": "processed", "log": [f"order #{s['order_id']} processed and paid"]}


def cancel_order(s: Order) -> dict[str, Any]:
    return {"outcome": "cancelled", "log": [f"order #{s['order_id']} cancelled"]}


def build_demo_app(store: SqliteStore) -> App[Order]:
    """The demo graph: prepare → request_approval (interrupt) → process or cancel."""
    g = Graph(Order, name="order-approval")
    g.add_node("prepare_order", prepare_order)
    g.add_node("request_approval", request_approval)
    g.add_node("process_order", process_order)
    g.add_node("cancel_order", cancel_order)
    g.add_edge(START, "prepare_order").add_edge("prepare_order", "request_approval")
    g.add_conditional_edges(
        "request_approval",
        lambda s: "process_order" if s["decision"] == "approve" else "cancel_order",
    )
    g.add_edge("process_order", END).add_edge("cancel_order", END)
    return g.compile(store=store)


@click.command()
@click.option(
    "--db",
    "db_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("interlock-demo.db"),
    show_default=True,
    help="SQLite file that holds the checkpoints.",
)
@click.option("--no-wait", is_flag=True, help="Stop at the approval and leave it pending.")
@click.option(
    "--resume", "resume_", is_flag=True, help="Finish a pending approval from an earlier run."
)
@click.option(
    "--decide",
    type=click.Choice(OPTIONS),
    help="Answer without asking (for scripts); not with --no-wait.",
)
@click.option(
    "--amount",
    type=click.IntRange(1, MAX_AMOUNT),
    default=5000,
    show_default=True,
    help="Order amount in ¥ (a new order only).",
)
@click.pass_context
def demo(
    ctx: click.Context,
    db_path: Path,
    no_wait: bool,
    resume_: bool,
    decide: str | None,
    amount: int,
) -> None:
    """Run an order-approval workflow that stops for a person's decision.

    The run stops at request_approval; its state is committed to the SQLite file before you are
    asked. With --no-wait the question stays pending, and `interlock demo --resume` (in a new
    process, or on another day) finishes it. Ctrl-C at the question decides nothing: the order
    stays pending for --resume.
    """
    # Options that would be ignored are refused: a script that passes them means something.
    if no_wait and decide is not None:
        raise click.UsageError(
            "--decide answers the approval and --no-wait leaves it pending: pass one of them."
        )
    if resume_ and ctx.get_parameter_source("amount") is not ParameterSource.DEFAULT:
        raise click.UsageError(
            "--amount sets a new order's amount; --resume finishes an order that has one."
        )
    demo_run = _Demo(
        out=Console(highlight=False, soft_wrap=True),
        err=Console(stderr=True, highlight=False, soft_wrap=True),
        db_path=db_path,
    )
    sys.exit(demo_run.main(no_wait=no_wait, resume_=resume_, decide=decide, amount=amount))


@dataclass(frozen=True, kw_only=True)
class _Demo:
    """One invocation of the command: where it writes and where it reads."""

    out: Console
    """Progress and the question."""
    err: Console
    """What went wrong."""
    db_path: Path
    """The SQLite file, as given."""

    @property
    def resume_command(self) -> str:
        # The absolute path, so that the command works from any folder.
        return f"interlock demo --resume --db {shlex.quote(str(self.db_path.resolve()))}"

    def main(self, *, no_wait: bool, resume_: bool, decide: str | None, amount: int) -> int:
        where = self.db_path.resolve()
        if resume_ and not self.db_path.exists():
            # SQLite would create an empty file here and report nothing pending in it.
            self.err.print(
                f"[red]error:[/red] no demo database at {where}, so nothing to resume. Run "
                "--resume in the folder where `interlock demo --no-wait` ran, or pass --db PATH."
            )
            return 1
        try:
            if resume_:
                pending = anyio.run(self._find)
                if pending is None:
                    self.out.print(
                        f"Nothing is pending in {where}. Start one with: interlock demo --no-wait"
                    )
                    return 1
            else:
                pending = anyio.run(self._start, amount)
        except InterlockError as exc:
            self.err.print(f"[red]error:[/red] {exc}")
            return 1
        except KeyboardInterrupt:
            self.err.print(f"\nInterrupted. What was committed stays in {where}.")
            return INTERRUPTED
        _show_request(self.out, pending)
        if no_wait:
            self.out.print(
                "The run is stopped and its state is on disk. Finish it later with:\n"
                f"  {self.resume_command}"
            )
            return 0
        if decide is None:
            try:
                # No default: a bare Enter must not move money, so it asks again.
                decide = click.prompt("Your decision", type=click.Choice(OPTIONS))
            except click.Abort as stop:
                # click turns Ctrl-C and end of input into Abort; the cause tells them apart.
                by_signal = isinstance(stop.__context__, KeyboardInterrupt)
                self.err.print(
                    f"\n{'Interrupted' if by_signal else 'No answer'}: nothing was decided. "
                    f"Thread {pending.thread} is still waiting for approval; finish it with:\n"
                    f"  {self.resume_command}"
                )
                return INTERRUPTED if by_signal else 1
        try:
            done = anyio.run(self._finish, pending, decide)
        except InterlockError as exc:
            self.err.print(f"[red]error:[/red] {exc}")
            return 1
        except KeyboardInterrupt:
            self.err.print(
                f"\nInterrupted while recording the decision. See whether it is still "
                f"pending with:\n  {self.resume_command}"
            )
            return INTERRUPTED
        _show_outcome(self.out, done)
        return 0

    def _show(self, event: Event) -> None:
        if isinstance(event, NodeOutputEvent):
            for line in event.update.get("log", []):
                self.out.print(f"  [green]✓[/green] {event.node}: {line}")

    async def _start(self, amount: int) -> Interrupt:
        thread = f"order-{secrets.randbelow(90000) + 10000}"
        self.out.print(f"Starting thread [bold]{thread}[/bold] in {self.db_path}")
        async with SqliteStore(self.db_path) as store:
            result = await build_demo_app(store).run(
                {"order_id": thread.removeprefix("order-"), "amount": amount},
                thread=thread,
                emit=self._show,
            )
        return result.interrupt(APPROVAL_KEY)

    async def _find(self) -> Interrupt | None:
        async with SqliteStore(self.db_path) as store:
            waiting = await build_demo_app(store).inbox(key=APPROVAL_KEY, limit=1)
        if not waiting:
            return None
        self.out.print(f"Resuming thread [bold]{waiting[0].thread}[/bold] from {self.db_path}")
        return waiting[0]

    async def _finish(self, pending: Interrupt, answer: str) -> RunResult[Order]:
        async with SqliteStore(self.db_path) as store:
            return await build_demo_app(store).resume(
                pending.thread, {pending.id: answer}, actor="demo-user", emit=self._show
            )


def _show_request(console: Console, interrupt: Interrupt) -> None:
    info = interrupt.info
    console.print(
        Panel(
            f"{info['question']}\noptions: {', '.join(info['options'])}\n"
            f"interrupt id: {interrupt.id}",
            title=f"approval needed at {interrupt.address}",
            expand=False,
        )
    )


def _show_outcome(console: Console, result: RunResult[Order]) -> None:
    outcome = result.values.get("outcome", "?")
    colour = "green" if outcome == "processed" else "yellow"
    console.print(
        f"[{colour}]Order {outcome}.[/{colour}] Thread {result.thread} is {result.status}."
    )
