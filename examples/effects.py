"""A payment that must never go out twice, even when the process dies mid-call.

Run it: ``python examples/effects.py`` (writes ./effects-example.db).

The ``pay`` node is ``dangerous=True``: interlock records it as started before the call and
done (with its result) after. Here the first attempt "dies" after the bank took the money but
before the answer came back. Continuing the thread does not pay again: it asks a person to
reconcile, who checks the bank and answers with what happened.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import anyio

from interlock import START, Graph, NodeError, SqliteStore, append, verify_audit


class Payment(TypedDict, total=False):
    amount: int
    log: Annotated[list[str], append]


class Bank:
    """The outside world: it keeps its own record of what it paid."""

    def __init__(self) -> None:
        self.paid: list[int] = []
        self.drop_next_reply = True

    def transfer(self, amount: int) -> str:
        self.paid.append(amount)
        if self.drop_next_reply:
            self.drop_next_reply = False
            raise ConnectionError("the connection dropped before the bank answered")
        return f"transfer #{len(self.paid)}"


def build(store: SqliteStore, bank: Bank) -> Any:
    def pay(s: Payment) -> dict[str, Any]:
        return {"log": [f"paid ¥{s['amount']}: {bank.transfer(s['amount'])}"]}

    g = Graph(Payment)
    g.add_node("pay", pay, dangerous=True)
    g.add_edge(START, "pay")
    return g.compile(store=store)


async def main(path: str = "effects-example.db") -> tuple[list[str], list[int]]:
    bank = Bank()
    async with SqliteStore(path) as store:
        app = build(store, bank)
        try:
            await app.run({"amount": 5000}, thread="payment-1")
        except NodeError as exc:
            print("first attempt:", exc)
        # Continuing does not call the bank again: whether it paid is a question for a person.
        question = (await app.resume("payment-1")).interrupt()
        print("reconcile:", question.info["question"])
        # The person looks at the bank's records: the money went out. Say so.
        answer = {"result": {"log": [f"paid ¥5000: confirmed by the bank ({len(bank.paid)})"]}}
        done = await app.resume("payment-1", {question.id: answer})
        print("done:", done.values["log"], "bank paid:", bank.paid)
        report = await verify_audit(store)
        print("audit:", report.entries, "entries, intact" if report.ok else report.problems)
        return list(done.values["log"]), bank.paid


if __name__ == "__main__":
    anyio.run(main)
