"""A refund that waits for a person, resumed from a second "process" (a fresh App).

Run it: ``python examples/approval.py`` (writes ./approval-example.db).
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import anyio

from interlock import END, START, Graph, SqliteStore, append, approve, step


class Refund(TypedDict, total=False):
    customer: str
    amount: int
    approved: bool
    log: Annotated[list[str], append]


async def lookup_history(customer: str) -> str:
    # Stands in for an expensive call (an LLM, a CRM); step() runs it once per task.
    return f"{customer} has 3 orders, no earlier refunds"


async def review(s: Refund) -> dict[str, Any]:
    summary = await step("history", lookup_history, s["customer"])
    ok = approve(f"Refund ¥{s['amount']} to {s['customer']}? ({summary})", key="refund")
    return {"approved": ok, "log": [f"reviewed: {'approved' if ok else 'rejected'}"]}


def pay(s: Refund) -> dict[str, Any]:
    return {"log": [f"paid ¥{s['amount']} to {s['customer']}"]}


def build(store: SqliteStore) -> Any:
    g = Graph(Refund)
    g.add_node("review", review)
    g.add_node("pay", pay)
    g.add_edge(START, "review")
    g.add_conditional_edges("review", lambda s: "pay" if s["approved"] else END)
    return g.compile(store=store)


async def main(path: str = "approval-example.db") -> list[str]:
    async with SqliteStore(path) as store:
        first = await build(store).run({"customer": "ada", "amount": 5000}, thread="refund-1")
        question = first.interrupt("refund")
        print("waiting:", question.info["question"])
    # Later, anywhere: open the same file with the same graph and answer.
    async with SqliteStore(path) as store:
        done = await build(store).resume("refund-1", {question.id: "approve"})
        print("done:", done.values["log"])
        return list(done.values["log"])


if __name__ == "__main__":
    anyio.run(main)
