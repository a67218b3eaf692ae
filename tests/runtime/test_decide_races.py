"""Two approvers decide one question at once: one decision is recorded, the other is told it.

The loser of the compare-and-set re-reads the thread and reports what was recorded
(`InterruptAlreadyResolved` carrying the winner's `Decision`, or the recorded decisions when it
sent the same nonce); only a run that holds the thread's lease makes a decider wait
(`ThreadBusy`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

import anyio
import pytest

from interlock import (
    START,
    App,
    Decision,
    Graph,
    InterruptAlreadyResolved,
    RunResult,
    SqliteStore,
    Store,
    ThreadBusy,
    append,
    approve,
)

pytestmark = pytest.mark.anyio

ROUNDS = 30


class S(TypedDict, total=False):
    log: Annotated[list[str], append]
    ok: bool


def graph() -> Graph[S]:
    g = Graph(S)
    g.add_node("approve", lambda s: {"ok": approve("refund ¥5000?")})
    g.add_edge(START, "approve")
    return g


async def decide_both(
    apps: Sequence[App[Any]], thread: str, iid: str, answers: Sequence[bool], nonces: Sequence[str]
) -> list[list[Decision] | InterruptAlreadyResolved]:
    """Both apps decide the interrupt at once; what each got back."""
    outcomes: list[list[Decision] | InterruptAlreadyResolved] = []

    async def one(app: App[Any], answer: bool, nonce: str) -> None:
        try:
            outcomes.append(await app.decide(thread, {iid: answer}, nonce=nonce))
        except InterruptAlreadyResolved as exc:
            outcomes.append(exc)

    async with anyio.create_task_group() as tg:
        for app, answer, nonce in zip(apps, answers, nonces, strict=True):
            tg.start_soon(one, app, answer, nonce)
    return outcomes


async def race_rounds(stores: Sequence[Store]) -> None:
    apps = [graph().compile(store=s) for s in stores]
    for n in range(ROUNDS):
        thread = f"round-{n}"
        iid = (await apps[0].run({}, thread=thread)).interrupt().id
        outcomes = await decide_both(apps, thread, iid, [True, False], [f"{n}-a", f"{n}-b"])
        won = [o for o in outcomes if isinstance(o, list)]
        lost = [o for o in outcomes if isinstance(o, InterruptAlreadyResolved)]
        assert len(won) == 1 and len(lost) == 1, outcomes
        assert lost[0].resolved_value == won[0][0]

        # The same decision sent twice at once (a retry racing itself): both get it back.
        thread = f"twice-{n}"
        iid = (await apps[0].run({}, thread=thread)).interrupt().id
        outcomes = await decide_both(apps, thread, iid, [True, True], [f"{n}-same"] * 2)
        assert isinstance(outcomes[0], list) and outcomes[0] == outcomes[1], outcomes


async def test_two_apps_on_one_sqlite_file(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "t.db") as a, SqliteStore(tmp_path / "t.db") as b:
        await race_rounds([a, b])


async def test_two_apps_on_one_postgres_database(dsn: str) -> None:
    from interlock.stores import PostgresStore

    async with PostgresStore(dsn) as a, PostgresStore(dsn) as b:
        await race_rounds([a, b])


async def resume_both(
    apps: Sequence[App[Any]], thread: str, iid: str
) -> list[RunResult[Any] | InterruptAlreadyResolved]:
    """Both apps resume the interrupt at once, one approving, one rejecting."""
    outcomes: list[RunResult[Any] | InterruptAlreadyResolved] = []

    async def one(app: App[Any], answer: bool) -> None:
        try:
            outcomes.append(await app.resume(thread, {iid: answer}))
        except InterruptAlreadyResolved as exc:
            outcomes.append(exc)

    async with anyio.create_task_group() as tg:
        for app, answer in zip(apps, (True, False), strict=True):
            tg.start_soon(one, app, answer)
    return outcomes


async def resume_rounds(stores: Sequence[Store]) -> None:
    apps = [graph().compile(store=s) for s in stores]
    for n in range(ROUNDS):
        thread = f"round-{n}"
        iid = (await apps[n % 2].run({}, thread=thread)).interrupt().id
        outcomes = await resume_both(apps, thread, iid)
        (won,) = [o for o in outcomes if isinstance(o, RunResult)]
        (told,) = [o for o in outcomes if isinstance(o, InterruptAlreadyResolved)]
        assert won.values["ok"] is told.resolved_value.answer


async def test_two_apps_resuming_at_once_on_one_sqlite_file(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "t.db") as a, SqliteStore(tmp_path / "t.db") as b:
        await resume_rounds([a, b])


async def test_two_apps_resuming_at_once_on_one_postgres_database(dsn: str) -> None:
    from interlock.stores import PostgresStore

    async with PostgresStore(dsn) as a, PostgresStore(dsn) as b:
        await resume_rounds([a, b])


def two_questions(entered: anyio.Event, go: anyio.Event) -> Graph[S]:
    g = Graph(S)

    async def slow(s: S) -> dict[str, Any]:
        ok = approve("a?")
        entered.set()
        await go.wait()
        return {"ok": ok}

    g.add_node("a", slow)
    g.add_node("b", lambda s: {"log": [str(approve("b?"))]})
    g.add_edge(START, "a").add_edge(START, "b")
    return g


async def test_a_running_executor_makes_a_decider_wait(tmp_path: Path) -> None:
    entered, go = anyio.Event(), anyio.Event()
    async with SqliteStore(tmp_path / "t.db") as a, SqliteStore(tmp_path / "t.db") as b:
        runner = two_questions(entered, go).compile(store=a)
        decider = two_questions(entered, go).compile(store=b)
        r = await runner.run({}, thread="t")
        qa, qb = sorted(r.interrupts, key=lambda i: str(i.address))
        async with anyio.create_task_group() as tg:
            tg.start_soon(runner.resume, "t", {qa.id: True})
            await entered.wait()
            # A's answer is recorded and its task runs under the runner's lease: deciding B
            # must wait for that run, and deciding A again gets the recorded decision.
            head = await b.get_checkpoint("t")
            with pytest.raises(ThreadBusy) as busy:
                await decider.decide("t", {qb.id: True})
            assert busy.value.holder is not None
            with pytest.raises(InterruptAlreadyResolved) as resolved:
                await decider.decide("t", {qa.id: False})
            assert isinstance(resolved.value.resolved_value, Decision)
            assert resolved.value.resolved_value.answer is True
            assert await b.get_checkpoint("t") == head
            go.set()
        (d,) = await decider.decide("t", {qb.id: False})
        assert d.answer is False
