"""``interlock demo``: an order approval that really stops, persists, and resumes."""

from __future__ import annotations

import secrets
import sys
from pathlib import Path
from typing import Annotated, Any, TypedDict

import anyio
import click
from rich.console import Console
from rich.panel import Panel

from .._errors import InterlockError
from ..graph import END, START, Graph, append
from ..runtime._app import App
from ..runtime._events import Event, NodeOutputEvent
from ..runtime._interrupts import choose
from ..runtime._records import Interrupt, RunResult
from ..stores import SqliteStore

__all__ = ["build_demo_app", "demo"]

APPROVAL_KEY = "request_approval"


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
        ["approve", "reject"],
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
    type=click.Choice(["approve", "reject"]),
    help="Answer without asking (for scripts).",
)
@click.option("--amount", type=int, default=5000, show_default=True, help="Order amount in ¥.")
def demo(db_path: Path, no_wait: bool, resume_: bool, decide: str | None, amount: int) -> None:
    """Run an order-approval workflow that stops for a person's decision.

    The run stops at request_approval; its state is committed to the SQLite file before you are
    asked. With --no-wait the question stays pending, and `interlock demo --resume` (in a new
    process, or on another day) finishes it.
    """
    console = Console(highlight=False)
    try:
        code = anyio.run(_demo, console, db_path, no_wait, resume_, decide, amount)
    except InterlockError as exc:
        console.print(f"[red]error:[/red] {exc}")
        code = 1
    sys.exit(code)


async def _demo(
    console: Console, db_path: Path, no_wait: bool, resume_: bool, decide: str | None, amount: int
) -> int:
    store = SqliteStore(db_path)
    try:
        app = build_demo_app(store)

        def show(event: Event) -> None:
            if isinstance(event, NodeOutputEvent):
                for line in event.update.get("log", []):
                    console.print(f"  [green]✓[/green] {event.node}: {line}")

        if resume_:
            waiting = await app.inbox(key=APPROVAL_KEY, limit=1)
            if not waiting:
                console.print("Nothing is pending. Start one with: interlock demo --no-wait")
                return 1
            interrupt = waiting[0]
            thread = interrupt.thread
            console.print(f"Resuming thread [bold]{thread}[/bold] from {db_path}")
        else:
            thread = f"order-{secrets.randbelow(90000) + 10000}"
            console.print(f"Starting thread [bold]{thread}[/bold] in {db_path}")
            result = await app.run(
                {"order_id": thread.removeprefix("order-"), "amount": amount},
                thread=thread,
                emit=show,
            )
            interrupt = result.interrupt(APPROVAL_KEY)
        _show_request(console, interrupt)
        if no_wait:
            console.print(
                "The run is stopped and its state is on disk. Finish it later with:\n"
                f"  interlock demo --resume --db {db_path}"
            )
            return 0
        answer = decide or click.prompt(
            "Your decision", type=click.Choice(["approve", "reject"]), default="approve"
        )
        done = await app.resume(thread, {interrupt.id: answer}, actor="demo-user", emit=show)
        _show_outcome(console, done)
        return 0
    finally:
        await store.close()


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
