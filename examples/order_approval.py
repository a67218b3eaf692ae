"""An order that needs two sign-offs: a manager's above ¥10000, finance's above ¥50000.

Run it: ``python examples/order_approval.py`` (writes ./order-approval.db; ``--db PATH``).

Two agents in sequence share the conversation: ``sales`` places the order, ``finance`` pays the
supplier. Each tool has a policy with a named rule, so the two questions are told apart by
their rule (``manager``, ``finance``); each person finds theirs in the inbox by its rule and
answers it by id:

* the manager edits the amount (an edit is checked against the tool's argument schema: one
  that does not fit is refused and nothing is recorded), through ``app.decide`` as an approval
  web page would, and a worker continues the run;
* finance approves the payment of the edited amount.

The audit log keeps both decisions; the manager's carries the diff of the arguments. A small
order then goes through with no question at all.

Offline by default (`ScriptedModel`s). With ``INTERLOCK_MODEL`` set to a model's name, that
model drives the same agents, whichever its provider::

    INTERLOCK_MODEL=openai:gpt-4o-mini python examples/order_approval.py
    INTERLOCK_MODEL=anthropic:claude-sonnet-4-5 python examples/order_approval.py
    INTERLOCK_MODEL=gemini:gemini-2.5-flash python examples/order_approval.py
    INTERLOCK_MODEL=langchain:ollama:llama3.1 python examples/order_approval.py

Each provider's SDK reads its key and endpoint from its own variables (``OPENAI_API_KEY`` and
``OPENAI_BASE_URL``, ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL``, ``GEMINI_API_KEY`` and
``GOOGLE_GEMINI_BASE_URL``). Without ``INTERLOCK_MODEL``, ``OPENAI_API_KEY`` or
``OPENAI_BASE_URL`` alone still selects an OpenAI-compatible model (``OPENAI_MODEL``, default
``gpt-4o-mini``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Final

import anyio
import msgspec

from interlock import InterlockError, Interrupt, InvalidResume, SqliteStore
from interlock.agents import (
    Agent,
    AgentEvent,
    AgentInterrupt,
    ApprovalPolicy,
    Approve,
    AssistantTurn,
    ChatModel,
    Message,
    Runner,
    ScriptedModel,
    ToolAgent,
    ToolCall,
    ToolMessage,
    ToolResult,
    ToolSpec,
    UserMessage,
    allow,
    call,
    chat_model_from_env,
    require_approval,
    sequential,
    tool,
)

MANAGER_ABOVE: Final = 10_000
FINANCE_ABOVE: Final = 50_000
NEGOTIATED: Final = 60_000
"""The amount the manager edits the big order down to."""
BIG_ORDER: Final = "Order 8 laptops for ¥80000 from Acme."
SMALL_ORDER: Final = "Order 3 keyboards for ¥4500 from Acme."

Amount = Annotated[int, msgspec.Meta(gt=0, le=1_000_000)]
"""Yen: positive, and at most a million (the schema an edit is checked against)."""


@dataclass
class Supplier:
    """The outside world: what was ordered and paid."""

    orders: list[dict[str, Any]] = field(default_factory=list)
    payments: list[tuple[str, int]] = field(default_factory=list)


def amount_over(limit: int) -> Callable[[dict[str, Any]], bool]:
    """A rule predicate: the call's ``amount`` is above ``limit``."""

    def over(arguments: dict[str, Any]) -> bool:
        return int(arguments.get("amount", 0)) > limit

    return over


# -- the offline models ------------------------------------------------------------------------


def sales_reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str | ToolCall:
    last = messages[-1]
    if isinstance(last, UserMessage):
        order = re.search(r"Order (.+) for ¥(\d+)", last.content)
        assert order is not None, last.content
        return call("place_order", {"item": order[1], "amount": int(order[2])})
    assert isinstance(last, ToolMessage)
    if last.status != "ok":
        return f"The order was not placed: {last.content}"
    placed = json.loads(last.content)
    return f"Order {placed['order_id']} placed: {placed['item']} for ¥{placed['amount']}."


def finance_reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str | ToolCall:
    last = messages[-1]
    if isinstance(last, ToolMessage) and last.name == "pay_supplier":
        return last.content if last.status == "ok" else f"Not paid: {last.content}"
    placed = [
        json.loads(m.content)
        for m in messages
        if isinstance(m, ToolMessage) and m.name == "place_order" and m.status == "ok"
    ]
    if not placed:
        return "There is no order to pay."
    order = placed[-1]
    return call("pay_supplier", {"order_id": order["order_id"], "amount": order["amount"]})


# -- the agents --------------------------------------------------------------------------------


def openai_model() -> str | None:
    """The OpenAI-compatible model ``OPENAI_*`` asks for, if they name an endpoint or a key."""
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        return f"openai:{os.environ.get('OPENAI_MODEL', 'gpt-4o-mini')}"
    return None


def models() -> tuple[ChatModel, ChatModel]:
    """A real model for each agent when the environment names one, else the scripted ones."""
    fallback = openai_model()
    if os.environ.get("INTERLOCK_MODEL", "").strip() or fallback is not None:
        # INTERLOCK_MODEL, else the OPENAI_* model; the provider's package is imported only now.
        return chat_model_from_env(fallback), chat_model_from_env(fallback)
    return ScriptedModel(sales_reply, name="sales"), ScriptedModel(finance_reply, name="finance")


def build(sales_model: ChatModel, finance_model: ChatModel, supplier: Supplier) -> Agent:
    @tool
    def place_order(item: str, amount: Amount) -> dict[str, Any]:
        """Place an order with the supplier.

        Args:
            item: What to order, with the quantity ("8 laptops").
            amount: The order's total, in yen.
        """
        order = {"order_id": f"PO-{1001 + len(supplier.orders)}", "item": item, "amount": amount}
        supplier.orders.append(order)
        return order

    @tool
    def pay_supplier(order_id: str, amount: Amount) -> str:
        """Pay the supplier for an order.

        Args:
            order_id: The order, as place_order named it.
            amount: How much to pay, in yen.
        """
        supplier.payments.append((order_id, amount))
        return f"Paid ¥{amount} for {order_id}."

    sales = ToolAgent(
        "sales",
        sales_model,
        [place_order],
        policy=ApprovalPolicy(
            {
                "place_order": [
                    require_approval(when=amount_over(MANAGER_ABOVE), name="manager"),
                    allow(name="small order"),
                ]
            }
        ),
        system="Place the order the user asks for with place_order; then report it.",
    )
    finance = ToolAgent(
        "finance",
        finance_model,
        [pay_supplier],
        policy=ApprovalPolicy(
            {
                "pay_supplier": [
                    require_approval(when=amount_over(FINANCE_ABOVE), name="finance"),
                    allow(name="small payment"),
                ]
            }
        ),
        system="Pay the supplier for the order just placed, with pay_supplier; then report it.",
    )
    return sequential([sales, finance], name="order")


@asynccontextmanager
async def open_runner(db: Path, supplier: Supplier) -> AsyncIterator[Runner]:
    """A new store connection and new agents on it (what a new process would build)."""
    sales_model, finance_model = models()
    async with AsyncExitStack() as stack:
        for model in (sales_model, finance_model):
            aclose = getattr(model, "aclose", None)
            if aclose is not None:
                stack.push_async_callback(aclose)
        store = await stack.enter_async_context(SqliteStore(db))
        yield Runner(build(sales_model, finance_model, supplier), store)


# -- the people --------------------------------------------------------------------------------


def show(event: AgentEvent) -> None:
    """Print one event of the run, readably."""
    if isinstance(event, AssistantTurn):
        for c in event.message.tool_calls:
            print(f"  {event.agent} calls {c.name}({c.arguments})")
        if event.message.content:
            print(f"  {event.agent}: {event.message.content}")
    elif isinstance(event, ToolResult):
        print(f"  {event.tool} -> {event.status}: {event.content}")
    elif isinstance(event, AgentInterrupt):
        info = event.interrupt.info
        print(f"  ? needs the {info['rule']!r} sign-off: {info['question']}")


async def run(db: Path, supplier: Supplier, session: str, request: str) -> None:
    """Send the user's request; the run goes until a question stops it, or to the end."""
    async with open_runner(db, supplier) as runner, runner.run(request, session=session) as ev:
        async for event in ev:
            show(event)


async def waiting_for(runner: Runner, session: str, rule: str) -> Interrupt | None:
    """The session's question for the person who signs off under ``rule``, if one waits."""
    for question in await runner.app.inbox(thread=session):
        if question.info["rule"] == rule:
            print(f"  inbox: rule {rule!r}, {question.info['arguments']}, id {question.id}")
            return question
    print(f"  nothing waits for the {rule!r} sign-off")
    return None


async def manager(db: Path, supplier: Supplier, session: str) -> None:
    """The manager's approval page: find the order, lower its amount, record the decision."""
    async with open_runner(db, supplier) as runner:
        question = await waiting_for(runner, session, "manager")
        if question is None:
            return
        print(f"  at {question.address}")
        # The plain-JSON form a web page sends; the amount is checked against the tool's schema.
        asked = question.info["arguments"]
        too_much = {"action": "edit", "arguments": {**asked, "amount": 2_000_000}}
        try:
            await runner.app.decide(session, {question.id: too_much}, actor="manager")
        except InvalidResume as exc:
            print(f"  refused: {exc}")
        edit = {"action": "edit", "arguments": {**asked, "amount": NEGOTIATED}}
        (decision,) = await runner.app.decide(
            session, {question.id: edit}, actor="manager", reason="the negotiated price"
        )
        print(f"  recorded: {decision.answer} by {decision.actor}")
        print(f"  details: {json.dumps(decision.details)}")


async def worker(db: Path, supplier: Supplier, session: str) -> None:
    """Continue the run with the decisions already recorded."""
    async with open_runner(db, supplier) as runner, runner.resume(session) as ev:
        async for event in ev:
            show(event)


async def finance(db: Path, supplier: Supplier, session: str) -> None:
    """Finance's turn: find the payment, approve it by id, and the run goes on."""
    async with open_runner(db, supplier) as runner:
        question = await waiting_for(runner, session, "finance")
        if question is None:
            return
        decisions = {question.id: Approve()}
        async with runner.resume(session, decisions, actor="finance") as ev:
            async for event in ev:
                show(event)


async def audit(db: Path, session: str) -> None:
    """Print the session's decisions as the audit log keeps them."""
    async with SqliteStore(db) as store:
        for entry in await store.audit_log(thread=session):
            if entry.kind == "decision":
                data = json.loads(entry.data)
                print(f"  #{entry.seq} decision by {entry.actor}: {json.dumps(data['answer'])}")
                if data.get("reason"):
                    print(f"      reason: {data['reason']}")
                if data.get("details"):
                    print(f"      diff: {json.dumps(data['details']['diff'])}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=Path("order-approval.db"))
    args = parser.parse_args(argv)
    supplier = Supplier()
    big, small = f"order-{secrets.token_hex(3)}", f"order-{secrets.token_hex(3)}"
    try:
        print(f"session {big} in {args.db}\n\nuser: {BIG_ORDER}")
        anyio.run(run, args.db, supplier, big, BIG_ORDER)
        print("\nthe manager decides (a new Runner):")
        anyio.run(manager, args.db, supplier, big)
        print("\na worker continues the run (a new Runner):")
        anyio.run(worker, args.db, supplier, big)
        print("\nfinance decides (a new Runner):")
        anyio.run(finance, args.db, supplier, big)
        print("\naudit log:")
        anyio.run(audit, args.db, big)
        print(f"\nsession {small}\nuser: {SMALL_ORDER}")
        anyio.run(run, args.db, supplier, small, SMALL_ORDER)
    except (InterlockError, ImportError) as exc:  # ImportError: the model's extra is missing
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"\norders: {supplier.orders}\npayments: {supplier.payments}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
