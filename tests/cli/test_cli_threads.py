"""`interlock threads | history | pause | sweep`: threads' records, and moving them on."""

from __future__ import annotations

import json
import re
from pathlib import Path

import _cli_app
import anyio
import pytest
from _cli_run import APP, Approvers

from interlock import GraphChanged, SqliteStore
from interlock.stores import PauseKind


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Approvers:
    return Approvers(tmp_path, monkeypatch)


def pause_request(cli: Approvers, thread: str) -> PauseKind | None:
    async def take() -> PauseKind | None:
        async with SqliteStore(cli.db) as store:
            return await store.take_pause_request(thread)

    return anyio.run(take)


def test_history_shows_checkpoints_newest_first_and_the_audit_log(cli: Approvers) -> None:
    asked = cli.start("refund", "order-1")
    cli.decide("approve", asked, "--actor", "ada", "--reason", "checked")
    result = cli.decide("history", "order-1")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Thread order-1 is done" in out
    steps = re.findall(r"^\s*(-?\d+)\s+(ready|interrupted|done)\s+(input|loop|resume)\s", out, re.M)
    assert steps[0][1] == "done" and steps[-1][2] == "input"  # newest first
    assert ("0", "interrupted", "loop") in steps
    # The node that runs next, read through the app's graph:
    assert re.search(r"interrupted\s+loop\s+(just now|\S+ ago)\s+refund\s", out)
    assert re.search(r"decision\s+ada\s+approve \(true\), reason: checked", out)
    assert re.search(r"interrupt\s+-\s+asked at node:refund", out)
    assert out.index("decision") < out.index("asked at node:refund")  # newest first here too


def test_history_from_the_store_alone(cli: Approvers) -> None:
    cli.start("plan", "signup-1")
    result = cli.read("history", "signup-1")
    assert result.exit_code == 0, result.output
    assert "Thread signup-1 is interrupted" in result.stdout
    assert "With --app, the nodes each checkpoint runs next are shown too." in result.stdout


def test_history_json(cli: Approvers) -> None:
    asked = cli.start("refund", "order-2")
    cli.decide("reject", asked, "--reason", "no", "--actor", "bob")
    shown = cli.decide("history", "order-2", "--json")
    assert shown.exit_code == 0, shown.output
    history = json.loads(shown.stdout)
    assert history["thread"] == "order-2" and history["status"] == "done"
    checkpoints = history["checkpoints"]
    assert checkpoints[0]["status"] == "done" and checkpoints[-1]["source"] == "input"
    times = [c["created_at"] for c in checkpoints]
    assert times == sorted(times, reverse=True) and all(isinstance(t, float) for t in times)
    assert {"id", "step", "status", "source", "created_at", "next"} == set(checkpoints[0])
    interrupted = next(c for c in checkpoints if c["status"] == "interrupted")
    assert interrupted["next"] == ["refund"]
    audit = history["audit"]
    assert [e["kind"] for e in audit] == ["decision", "interrupt"]
    assert audit[0]["actor"] == "bob" and audit[0]["data"]["answer"] is False
    assert audit[0]["seq"] == 2 and len(audit[0]["hash"]) == 64

    alone = cli.json("history", "order-2")
    assert all(c["next"] is None for c in alone["checkpoints"])
    assert [c["id"] for c in alone["checkpoints"]] == [c["id"] for c in checkpoints]


def test_history_limit(cli: Approvers) -> None:
    asked = cli.start("refund", "order-3")
    cli.decide("approve", asked)
    shown = cli.json("history", "order-3", "--limit", "1")
    assert len(shown["checkpoints"]) == 1 and shown["checkpoints"][0]["status"] == "done"
    assert [e["kind"] for e in shown["audit"]] == ["decision"]


def test_history_of_an_unknown_thread_exits_1(cli: Approvers) -> None:
    cli.start("refund", "order-4")
    result = cli.read("history", "order-404")
    assert result.exit_code == 1
    assert "no thread 'order-404' in this store" in result.output


@pytest.mark.parametrize(("flags", "kind"), [([], "planned"), (["--forced"], "forced")])
def test_pause_requests_a_pause_through_the_store(
    cli: Approvers, flags: list[str], kind: PauseKind
) -> None:
    cli.start("ops", "ticket-1", messages=["ls"])
    result = cli.read("pause", "ticket-1", *flags)
    assert result.exit_code == 0, result.output
    assert f"A {kind} pause is requested for thread ticket-1, which is interrupted" in result.stdout
    assert "interlock resume ticket-1" in result.stdout
    assert pause_request(cli, "ticket-1") == kind


def test_pause_an_unknown_thread_exits_1(cli: Approvers) -> None:
    cli.start("refund", "order-5")
    result = cli.read("pause", "nope")
    assert result.exit_code == 1
    assert "no thread 'nope' in this store, so nothing to pause" in result.output


def test_sweep_resolves_expired_questions_and_continues_their_threads(cli: Approvers) -> None:
    late = cli.start("refund", "late-1", deadline_in=-60)  # its deadline already passed
    waiting = cli.start("refund", "on-time", deadline_in=3600)
    result = cli.decide("sweep")
    assert result.exit_code == 0, result.output
    assert f"Expired: {late} (thread late-1" in result.stdout
    assert "Thread late-1 is done." in result.stdout
    assert "on-time" not in result.stdout
    assert cli.values("late-1")["refunded"] is False  # on_timeout="reject"
    assert cli.interrupt(late).status == "expired"
    assert cli.interrupt(waiting).status == "pending"

    again = cli.decide("sweep")
    assert again.exit_code == 0
    assert "No question is past its deadline." in again.stdout


def test_sweep_and_resume_need_the_app(cli: Approvers) -> None:
    cli.start("refund", "order-6")
    for args in (["sweep"], ["resume", "order-6"]):
        result = cli.read(*args)
        assert result.exit_code == 2
        assert f"`interlock {args[0]}` needs your app" in result.output


def test_resume_a_thread_that_is_not_waiting_on_anything_new(cli: Approvers) -> None:
    asked = cli.start("refund", "order-7")
    cli.decide("approve", asked)
    result = cli.invoke("resume", "order-7", "--app", APP)
    assert result.exit_code == 0, result.output
    assert "Thread order-7 is done." in result.stdout


def test_threads_lists_the_failed_ones_with_why_until_they_are_resumed(cli: Approvers) -> None:
    asked = cli.start("refund", "order-9")
    cli.start("refund", "order-8")

    async def decide_and_fail() -> None:
        # A continuation that could not run (here: told so) records the thread failed.
        app = _cli_app.make_app()
        try:
            await app.decide("order-9", {asked: True}, actor="ada")
            changed = GraphChanged(thread="order-9", stored="f-old", current="f-new")
            assert await app.record_failure("order-9", changed) is not None
        finally:
            await app.store.close()

    anyio.run(decide_and_fail)
    listed = cli.read("threads", "--status", "failed")
    assert listed.exit_code == 0, listed.output
    assert re.search(r"order-9\s+failed\s+\S.*GraphChanged: thread 'order-9'", listed.stdout)
    assert "order-8" not in listed.stdout
    assert "continue each with interlock resume THREAD" in listed.stdout
    everything = cli.json("threads")
    assert [(t["thread"], t["status"]) for t in everything] == [
        ("order-8", "interrupted"),
        ("order-9", "failed"),
    ]
    assert everything[1]["continue_with"] == "interlock resume order-9 --app MODULE:ATTR"
    history = cli.read("history", "order-9").stdout
    assert "It failed: GraphChanged: thread 'order-9'" in history
    assert "continue it with interlock resume order-9" in history

    resumed = cli.decide("resume", "order-9")  # the cause fixed: the decided task runs
    assert resumed.exit_code == 0, resumed.output
    assert cli.thread("order-9").status == "done"
    assert "No threads with status failed." in cli.read("threads", "--status", "failed").stdout
