"""Log records of runs, interrupts and decisions, carrying their thread, run and interrupt ids;
`ContextFilter` on an application's handler; `JsonFormatter`; silence by default."""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

import anyio
import pytest
from _observed import MAIL, broken_graph, failing_charge_app, mail_agent, order_graph, run_python

import interlock
from interlock import END, START, FencedOut, Graph, SqliteStore, effect
from interlock.observability import ContextFilter, JsonFormatter, current_context
from interlock.runtime._keeper import KEEPER
from interlock.testing import FakeClock

pytestmark = pytest.mark.anyio


class Kept(logging.Handler):
    """Keeps the records it is given (the application's handler, in these tests)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def runtime_log() -> Iterator[Kept]:
    """What ``interlock.runtime`` logs at DEBUG and above."""
    logger = logging.getLogger("interlock.runtime")
    kept = Kept()
    logger.addHandler(kept)
    level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        yield kept
    finally:
        logger.setLevel(level)
        logger.removeHandler(kept)


def messages(kept: Kept, level: int = logging.INFO) -> list[str]:
    return [r.getMessage() for r in kept.records if r.levelno == level]


async def test_runs_interrupts_and_decisions_are_logged_with_their_ids(runtime_log: Kept) -> None:
    app = mail_agent().compile()
    asked = await app.run(MAIL, thread="m1")
    (question,) = asked.interrupts
    started, raised, stopped = [r for r in runtime_log.records if r.levelno == logging.INFO]
    assert started.getMessage() == "run of thread 'm1' started"
    assert raised.getMessage() == (
        f"interrupt {question.id} (dynamic on tool 'send_email') raised on thread 'm1'"
    )
    assert stopped.getMessage().startswith("run of thread 'm1' stopped: interrupted after ")
    for r in (started, raised, stopped):
        assert r.thread_id == "m1"  # type: ignore[attr-defined]
        assert r.run_id == started.run_id  # type: ignore[attr-defined]
    assert started.interrupt_id is None  # type: ignore[attr-defined]
    assert (raised.interrupt_id, raised.tool, raised.kind) == (  # type: ignore[attr-defined]
        question.id,
        "send_email",
        "dynamic",
    )
    assert stopped.status == "interrupted"  # type: ignore[attr-defined]

    runtime_log.records.clear()
    await app.decide("m1", {question.id: True}, actor="ana")
    (decided,) = [r for r in runtime_log.records if r.levelno == logging.INFO]
    assert (
        decided.getMessage()
        == f"decision on interrupt {question.id} of thread 'm1' recorded by ana"
    )
    assert (decided.thread_id, decided.interrupt_id) == ("m1", question.id)  # type: ignore[attr-defined]
    assert (decided.actor, decided.final, decided.tool) == ("ana", True, "send_email")  # type: ignore[attr-defined]
    assert decided.waited_seconds >= 0  # type: ignore[attr-defined]

    runtime_log.records.clear()
    await app.resume("m1")
    infos = [r for r in runtime_log.records if r.levelno == logging.INFO]
    assert [r.getMessage().split(":")[0] for r in infos] == [
        "resume of thread 'm1' started",
        "resume of thread 'm1' stopped",
    ]
    assert infos[-1].status == "done"  # type: ignore[attr-defined]
    assert {r.run_id for r in infos} == {infos[0].run_id} != {started.run_id}  # type: ignore[attr-defined]


async def test_steps_are_logged_at_debug(runtime_log: Kept) -> None:
    await order_graph().compile().run({"n": 1}, thread="t")
    assert messages(runtime_log, logging.DEBUG) == [
        "step 0 of thread 't' runs prepare",
        "step 1 of thread 't' runs review",
    ]
    assert all(r.thread_id == "t" for r in runtime_log.records)  # type: ignore[attr-defined]


async def test_a_failed_run_says_why(runtime_log: Kept) -> None:
    g = broken_graph()
    with pytest.raises(interlock.NodeError):
        await g.compile().run({}, thread="t")
    stopped = runtime_log.records[-1]
    assert stopped.status == "failed"  # type: ignore[attr-defined]
    assert "NodeError" in stopped.getMessage() and "no stock" in stopped.getMessage()


async def test_the_context_filter_gives_a_nodes_own_records_the_ids() -> None:
    class S(TypedDict, total=False):
        ok: bool

    mine = logging.getLogger("tests.observability.shop")
    seen: list[Any] = []

    def review(s: S) -> S:
        mine.info("reviewing")
        seen.append(current_context())
        return {"ok": interlock.approve("Ship?")}

    g = Graph(S)
    g.add_node("review", review).add_edge(START, "review").add_edge("review", END)
    app = g.compile()
    kept = Kept()
    kept.addFilter(ContextFilter())
    mine.addHandler(kept)
    mine.setLevel(logging.INFO)
    try:
        asked = await app.run({}, thread="shop-1")
        (question,) = asked.interrupts
        await app.resume("shop-1", {question.id: True}, actor="ana")
        mine.info("outside")
    finally:
        mine.removeHandler(kept)
    first, again, outside = kept.records
    assert (first.thread_id, first.interrupt_id) == ("shop-1", None)  # type: ignore[attr-defined]
    # The re-run that answers the question: its records name the interrupt.
    assert (again.thread_id, again.interrupt_id) == ("shop-1", question.id)  # type: ignore[attr-defined]
    assert first.run_id != again.run_id  # type: ignore[attr-defined]
    assert (outside.thread_id, outside.run_id, outside.interrupt_id) == (None, None, None)  # type: ignore[attr-defined]
    assert [(c.call, c.thread_id, c.run_id) for c in seen] == [
        ("run", "shop-1", first.run_id),  # type: ignore[attr-defined]
        ("resume", "shop-1", again.run_id),  # type: ignore[attr-defined]
    ]
    assert current_context() is None


def test_the_context_filter_keeps_what_the_record_was_given() -> None:
    record = logging.makeLogRecord({"msg": "x", "thread_id": "given"})
    assert ContextFilter().filter(record) is True
    assert (record.thread_id, record.run_id) == ("given", None)  # type: ignore[attr-defined]


def test_the_json_formatter_writes_one_object_per_line() -> None:
    class Odd:
        def __str__(self) -> str:
            return "odd"

    formatter = JsonFormatter()
    record = logging.makeLogRecord(
        {
            "name": "shop",
            "levelno": logging.WARNING,
            "levelname": "WARNING",
            "msg": "order %s\nis late",
            "args": (42,),
            "created": 1_700_000_000.25,
            "thread_id": "t1",
            "interrupt_id": None,
            "odd": Odd(),
        }
    )
    line = formatter.format(record)
    assert "\n" not in line
    assert json.loads(line) == {
        "time": "2023-11-14T22:13:20.250+00:00",
        "level": "WARNING",
        "logger": "shop",
        "message": "order 42\nis late",
        "thread_id": "t1",
        "interrupt_id": None,
        "odd": "odd",
    }
    try:
        raise KeyError("lost")
    except KeyError:
        failed = logging.makeLogRecord({"msg": "boom", "exc_info": sys.exc_info()})
    parsed = json.loads(formatter.format(failed))
    assert parsed["message"] == "boom" and "KeyError: 'lost'" in parsed["exception"]


async def test_runtime_records_through_the_json_formatter_parse(tmp_path: Path) -> None:
    out = tmp_path / "log.jsonl"
    handler = logging.FileHandler(out)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("interlock.runtime")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        asked = await order_graph().compile().run({"n": 1}, thread="t")
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)
        handler.close()
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["message"].split(" ")[0] for line in lines] == ["run", "interrupt", "run"]
    assert {line["thread_id"] for line in lines} == {"t"}
    assert lines[1]["interrupt_id"] == asked.interrupts[0].id
    assert {line["logger"] for line in lines} == {"interlock.runtime"}


async def test_a_reconcile_question_is_a_warning(runtime_log: Kept) -> None:
    app = failing_charge_app()
    with pytest.raises(interlock.NodeError):
        await app.run({}, thread="e")
    (question,) = (await app.resume("e")).interrupts
    (warning,) = [r for r in runtime_log.records if r.levelno == logging.WARNING]
    assert warning.getMessage().startswith("effect 'charge' of thread 'e' needs reconciling")
    assert (warning.thread_id, warning.interrupt_id) == ("e", question.id)  # type: ignore[attr-defined]


class S(TypedDict, total=False):
    who: str


def _take_over(path: Path, graph: Graph[S], clock: FakeClock) -> None:
    async def main() -> None:
        async with SqliteStore(path, clock=clock) as store:
            await graph.compile(store=store, lease_ttl=5).resume("t")

    anyio.run(main)


async def test_a_lost_lease_is_a_warning(
    runtime_log: Kept, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The executor stalls past its lease and another one takes the thread over (see
    # tests/runtime/test_leases.py): its next write is refused.
    monkeypatch.setattr(KEEPER, "_renew", lambda watch: None)
    path, clock, world = tmp_path / "a.db", FakeClock(), Counter[str]()
    g = Graph(S)
    stalled = threading.Event()

    async def work(s: S) -> S:
        if not stalled.is_set():
            stalled.set()
            clock.advance(31)
            other = threading.Thread(target=_take_over, args=(path, g, clock))
            other.start()
            other.join()
        await effect("pay", lambda: world.update(["paid"]))
        return {"who": "x"}

    g.add_node("work", work).add_edge(START, "work")
    async with SqliteStore(path, clock=clock) as store:
        with pytest.raises(FencedOut):
            await g.compile(store=store, lease_ttl=30).run({}, thread="t")
    lost = [r for r in runtime_log.records if r.levelno == logging.WARNING]
    assert [r.getMessage().split(":")[0] for r in lost] == [
        "lost the lease of thread 't' to another executor"
    ]
    assert lost[0].thread_id == "t"  # type: ignore[attr-defined]


def test_nothing_is_printed_by_default(tmp_path: Path) -> None:
    # A reconcile question is a WARNING; with logging not configured it goes nowhere (no
    # "last resort" output on stderr).
    code = (
        "from typing import TypedDict\n"
        "import logging\n"
        "from interlock import END, START, Graph, NodeError, effect\n"
        "class S(TypedDict, total=False):\n"
        "    r: str\n"
        "def charge():\n"
        "    raise ConnectionError('down')\n"
        "async def pay(s):\n"
        "    return {'r': await effect('charge', charge)}\n"
        "g = Graph(S)\n"
        "g.add_node('pay', pay).add_edge(START, 'pay').add_edge('pay', END)\n"
        "app = g.compile()\n"
        "try:\n"
        "    app.run_sync({}, thread='e')\n"
        "except NodeError:\n"
        "    pass\n"
        "assert app.resume_sync('e').interrupts[0].kind == 'reconcile'\n"
        "handlers = logging.getLogger('interlock.runtime').handlers\n"
        "assert [type(h).__name__ for h in handlers] == ['NullHandler'], handlers\n"
    )
    out = run_python(code)
    assert out.stderr == ""
