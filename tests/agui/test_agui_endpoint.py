"""The AG-UI endpoint over real HTTP: a run's events, its interrupt, answers and refusals."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from _agui_serving import (
    ALREADY,
    CANCELLED,
    RUNS,
    WATCHING,
    agui_only,
    bearer,
    endpoint_alone,
    kinds,
    one,
    ops_app,
    post_run,
    run_input,
    serving,
    user,
)

from interlock import App, Principal
from interlock.agents import conversation


@pytest.fixture(autouse=True)
def _no_runs() -> Iterator[None]:
    RUNS.clear()
    yield
    RUNS.clear()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "agents.db"


@pytest.fixture
def url(db: Path) -> Iterator[str]:
    with serving(agui_only(db)) as base:
        yield base + "/"


@pytest.fixture
def reader(db: Path) -> Iterator[App[Any]]:
    """The same store, read as another process would."""
    app = ops_app(db)
    yield app
    anyio.run(app.store.close)


def _ask(url: str, thread: str, command: str = "rm -rf /tmp/build") -> dict[str, Any]:
    """Start a run whose tool call waits for approval; its one interrupt."""
    events = post_run(url, "ana", run_input(thread, messages=[user(command, f"{thread}-u1")]))
    finished = one(events, "RUN_FINISHED")
    assert finished["outcome"]["type"] == "interrupt", events
    (interrupt,) = finished["outcome"]["interrupts"]
    return interrupt


def _resume(thread: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    return run_input(thread, messages=[user("rm -rf /tmp/build", f"{thread}-u1")], resume=entries)


def _approve(interrupt: dict[str, Any]) -> dict[str, Any]:
    return {"interruptId": interrupt["id"], "status": "resolved", "payload": True}


def test_a_run_streams_its_events_and_ends_with_one_interrupt_per_question(
    url: str, reader: App[Any]
) -> None:
    events = post_run(url, "ana", run_input("t1", messages=[user("rm -rf /tmp/build", "u1")]))

    assert kinds(events) == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "MESSAGES_SNAPSHOT",
        "STATE_SNAPSHOT",
        "RUN_FINISHED",
    ]
    assert events[0]["threadId"] == "t1"
    start = one(events, "TOOL_CALL_START")
    assert start["toolCallName"] == "execute"
    assert one(events, "TOOL_CALL_ARGS")["delta"] == '{"command":"rm -rf /tmp/build"}'
    snapshot = one(events, "MESSAGES_SNAPSHOT")["messages"]
    assert [m["role"] for m in snapshot] == ["user", "assistant"]
    assert snapshot[0]["id"] == "u1"  # the front-end's id is kept
    assert snapshot[1]["toolCalls"][0]["id"] == start["toolCallId"]

    finished = one(events, "RUN_FINISHED")
    (interrupt,) = finished["outcome"]["interrupts"]
    (pending,) = reader.inbox_sync(thread="t1")
    assert interrupt["id"] == pending.id
    assert interrupt["reason"] == "tool_approval"
    assert interrupt["toolCallId"] == start["toolCallId"]
    assert interrupt["responseSchema"] == pending.schema
    shown = interrupt["metadata"]["interlock"]
    assert shown["tool"] == "execute"
    assert shown["arguments"] == {"command": "rm -rf /tmp/build"}
    assert shown["toolSchema"]["required"] == ["command"]
    assert shown["address"] == "node:tools/agent:ops/tool:execute:call_0_0"
    assert shown["authority"]["groups"] == ["ops"]
    assert shown["authority"]["text"] == "needs a member of group ops"
    assert shown["payloadHash"] == reader.payload_hash(pending)
    assert finished["result"] == {"status": "interrupted"}
    assert RUNS == []


@pytest.mark.parametrize(
    ("entry", "ran", "told"),
    [
        (
            {"status": "resolved", "payload": {"action": "approve"}},
            ["rm -rf /tmp/build"],
            "Done: ran: rm -rf /tmp/build",
        ),
        (
            {"status": "resolved", "payload": {"action": "edit", "arguments": {"command": "ls"}}},
            ["ls"],
            "Done: ran: ls",
        ),
        (
            {"status": "resolved", "payload": {"action": "reject", "message": "not today"}},
            [],
            "Done: not today",
        ),
        ({"status": "cancelled"}, [], "Done: The user cancelled this tool call."),
    ],
    ids=["approve", "edit", "reject", "cancel"],
)
def test_a_resume_decides_as_the_caller_and_streams_the_rest(
    url: str, reader: App[Any], entry: dict[str, Any], ran: list[str], told: str
) -> None:
    interrupt = _ask(url, "t2")

    events = post_run(url, "ana", _resume("t2", [{"interruptId": interrupt["id"], **entry}]))

    assert events[0]["type"] == "RUN_STARTED" and events[-1]["type"] == "RUN_FINISHED"
    assert "outcome" not in events[-1]  # done: nothing waits
    assert ran == RUNS
    result = one(events, "TOOL_CALL_RESULT")
    assert result["toolCallId"] == interrupt["toolCallId"]
    # What the tool reported with emit_event, before its result; only when it ran.
    reported = [e["value"] for e in events if e.get("name") == "interlock.event"]
    assert [r["data"] for r in reported] == [{"running": c} for c in ran]
    if ran:
        assert reported[0]["address"].endswith("tool:execute:call_0_0")
        assert kinds(events).index("CUSTOM") < kinds(events).index("TOOL_CALL_RESULT")
    text = [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert text == [told]
    question = reader.question_sync(interrupt["id"])
    assert question is not None and question.decision is not None
    assert question.decision.actor == "ana"


def test_a_resume_sent_again_is_told_who_decided_and_runs_nothing_twice(
    url: str, reader: App[Any]
) -> None:
    interrupt = _ask(url, "t3")
    approve = [{"interruptId": interrupt["id"], "status": "resolved", "payload": True}]
    post_run(url, "ana", _resume("t3", approve))

    again = post_run(url, "olga", _resume("t3", approve))

    told = one(again, "CUSTOM", ALREADY)
    assert told["name"] == "interlock.already_decided"
    assert told["value"]["actor"] == "ana"
    assert told["value"]["message"].startswith("already decided by ana at ")
    assert one(again, "RUN_FINISHED")["result"]["alreadyDecided"][0]["actor"] == "ana"
    assert RUNS == ["rm -rf /tmp/build"]
    assert reader.question_sync(interrupt["id"]).decision.actor == "ana"  # type: ignore[union-attr]


def test_a_question_decided_elsewhere_is_not_decided_again_and_the_rest_streams(
    url: str, reader: App[Any]
) -> None:
    interrupt = _ask(url, "t4")
    olga = Principal(name="olga", groups=("ops",))
    reader.decide_sync("t4", {interrupt["id"]: {"action": "approve"}}, actor=olga)

    events = post_run(
        url, "ana", _resume("t4", [{"interruptId": interrupt["id"], "status": "cancelled"}])
    )

    told = one(events, "CUSTOM", ALREADY)
    assert told["value"]["actor"] == "olga"
    assert one(events, "TOOL_CALL_RESULT")["content"] == "ran: rm -rf /tmp/build"
    assert events.index(told) < kinds(events).index("TOOL_CALL_RESULT")
    assert RUNS == ["rm -rf /tmp/build"]
    assert reader.get_state_sync("t4").status == "done"


def _refused(events: list[dict[str, Any]]) -> dict[str, Any]:
    assert kinds(events) == ["RUN_STARTED", "RUN_ERROR"], events
    return events[-1]


def test_someone_outside_the_questions_authority_is_refused_and_nothing_is_recorded(
    url: str, reader: App[Any]
) -> None:
    interrupt = _ask(url, "t5")
    before = len(reader.history_sync("t5"))

    error = _refused(
        post_run(
            url,
            "ben",
            _resume("t5", [_approve(interrupt)]),
        )
    )

    assert error["code"] == "not_authorized"
    assert "ben may not decide" in error["message"]
    assert "needs a member of group ops" in error["message"]
    question = reader.question_sync(interrupt["id"])
    assert question is not None and question.status == "pending" and question.decision is None
    assert len(reader.history_sync("t5")) == before
    assert RUNS == []


def test_an_answer_that_does_not_fit_is_refused_and_the_question_stays_answerable(
    url: str, reader: App[Any]
) -> None:
    interrupt = _ask(url, "t6")
    bad = {"interruptId": interrupt["id"], "status": "resolved", "payload": {"action": "edit"}}

    error = _refused(post_run(url, "ana", _resume("t6", [bad])))

    assert error["code"] == "invalid_answer"
    assert "arguments" in error["message"]
    assert reader.question_sync(interrupt["id"]).status == "pending"  # type: ignore[union-attr]
    good = {"interruptId": interrupt["id"], "status": "resolved", "payload": True}
    assert one(post_run(url, "ana", _resume("t6", [good])), "TOOL_CALL_RESULT")
    assert RUNS == ["rm -rf /tmp/build"]


def test_refusals_of_the_run_itself(url: str, reader: App[Any]) -> None:
    interrupt = _ask(url, "t7")

    # A viewer may not run the agent, nor answer it.
    assert _refused(post_run(url, "vic", run_input("t8", messages=[user("ls", "v1")])))["code"] == (
        "forbidden"
    )
    # New input while a question waits.
    waiting = run_input("t7", messages=[user("rm -rf /tmp/build", "t7-u1"), user("ls", "t7-u2")])
    assert _refused(post_run(url, "ana", waiting))["code"] == "thread_interrupted"
    # Nothing new to say.
    again = run_input("t7", messages=[user("rm -rf /tmp/build", "t7-u1")])
    assert _refused(post_run(url, "ana", again))["code"] == "no_input"
    # An interrupt of another thread, or none.
    other = [{"interruptId": interrupt["id"], "status": "resolved", "payload": True}]
    assert _refused(post_run(url, "ana", _resume("t9", other)))["code"] == "unknown_interrupt"
    unknown = [{"interruptId": "nope", "status": "resolved", "payload": True}]
    assert _refused(post_run(url, "ana", _resume("t7", unknown)))["code"] == "unknown_interrupt"
    assert reader.question_sync(interrupt["id"]).status == "pending"  # type: ignore[union-attr]
    assert RUNS == []


def test_requests_refused_before_the_stream(url: str) -> None:
    body = run_input("t10", messages=[user("ls", "x1")])

    no_token = httpx.post(url, json=body)
    assert no_token.status_code == 401
    assert no_token.json()["error"] == "unauthenticated"
    assert no_token.headers["www-authenticate"] == "Bearer"
    assert httpx.post(url, json=body, headers={"Authorization": "Bearer wrong"}).status_code == 401

    not_input = httpx.post(url, json={"threadId": "t10"}, headers=bearer("ana"))
    assert not_input.status_code == 422
    assert not_input.json()["error"] == "invalid_input"
    assert "runId" in not_input.json()["message"] or "run_id" in not_input.json()["message"]


def test_streamed_text_arrives_as_text_message_events(db: Path, reader: App[Any]) -> None:
    with serving(agui_only(db, stream=True)) as base:
        interrupt = _ask(base + "/", "t11")
        events = post_run(
            base + "/",
            "ana",
            _resume("t11", [_approve(interrupt)]),
        )

    texts = [e for e in events if e["type"].startswith("TEXT_MESSAGE")]
    assert texts[0]["type"] == "TEXT_MESSAGE_START" and texts[-1]["type"] == "TEXT_MESSAGE_END"
    assert len(texts) > 3  # streamed in pieces
    assert "".join(e.get("delta", "") for e in texts) == "Done: ran: rm -rf /tmp/build"
    assert len({e["messageId"] for e in texts}) == 1


def test_a_resume_retried_as_the_same_run_finds_its_decision_and_decides_nothing_more(
    url: str, reader: App[Any]
) -> None:
    interrupt = _ask(url, "t12")
    body = _resume("t12", [_approve(interrupt)])
    post_run(url, "ana", body)

    again = post_run(url, "ana", body)  # the same runId: a retry of a lost answer

    assert [e for e in again if e.get("name") == ALREADY] == []  # its own, not someone else's
    assert one(again, "RUN_FINISHED")["result"] == {"status": "done"}
    audit = anyio.run(lambda: reader.store.audit_log(thread="t12"))
    assert [e.actor for e in audit if e.kind == "decision"] == ["ana"]
    assert RUNS == ["rm -rf /tmp/build"]


def test_an_answer_to_a_question_that_changed_since_it_was_shown_is_refused(
    url: str, reader: App[Any]
) -> None:
    interrupt = _ask(url, "t13")
    shown = interrupt["metadata"]["interlock"]["payloadHash"]
    stale = {**_approve(interrupt), "metadata": {"interlock": {"payloadHash": "sha256:0"}}}

    error = _refused(post_run(url, "ana", _resume("t13", [stale])))

    assert error["code"] == "question_changed"
    assert reader.question_sync(interrupt["id"]).status == "pending"  # type: ignore[union-attr]
    fresh = {**_approve(interrupt), "metadata": {"interlock": {"payloadHash": shown}}}
    assert one(post_run(url, "ana", _resume("t13", [fresh])), "TOOL_CALL_RESULT")
    assert RUNS == ["rm -rf /tmp/build"]


def test_a_quorum_counts_each_callers_approval_and_runs_the_call_once(db: Path) -> None:
    with serving(agui_only(db, approvals=2)) as base:
        interrupt = _ask(base + "/", "t14")
        assert interrupt["metadata"]["interlock"]["approvals"] == 2

        voted = post_run(base + "/", "ana", _resume("t14", [_approve(interrupt)]))
        (still,) = one(voted, "RUN_FINISHED")["outcome"]["interrupts"]
        assert still["id"] == interrupt["id"]
        assert still["metadata"]["interlock"]["approvedBy"] == ["ana"]
        assert RUNS == []
        again = _refused(post_run(base + "/", "ana", _resume("t14", [_approve(interrupt)])))
        assert again["code"] == "invalid_answer"  # one person, one vote

        done = post_run(base + "/", "olga", _resume("t14", [_approve(interrupt)]))

    assert "outcome" not in one(done, "RUN_FINISHED")
    assert RUNS == ["rm -rf /tmp/build"]


def test_four_eyes_keeps_the_runs_starter_from_deciding_its_questions(db: Path) -> None:
    with serving(agui_only(db, four_eyes=True)) as base:
        interrupt = _ask(base + "/", "t15")  # started by ana
        assert interrupt["metadata"]["interlock"]["startedBy"] == "ana"
        assert "not ana" in interrupt["metadata"]["interlock"]["authority"]["text"]

        mine = _refused(post_run(base + "/", "ana", _resume("t15", [_approve(interrupt)])))
        assert mine["code"] == "four_eyes"
        assert RUNS == []

        other = post_run(base + "/", "olga", _resume("t15", [_approve(interrupt)]))

    assert one(other, "TOOL_CALL_RESULT")["content"] == "ran: rm -rf /tmp/build"
    assert RUNS == ["rm -rf /tmp/build"]


def test_the_bare_endpoint_serves_as_a_whole_application(db: Path) -> None:
    with serving(endpoint_alone(db)) as base:
        assert httpx.get(base + "/").status_code == 405
        interrupt = _ask(base + "/anywhere", "t16")

    assert interrupt["metadata"]["interlock"]["tool"] == "execute"
    bad = run_input("bad\nthread", messages=[user("ls", "b1")])
    with serving(endpoint_alone(db)) as base:
        assert _refused(post_run(base, "ana", bad))["code"] == "invalid_input"


def test_a_front_end_that_leaves_cancels_its_run_and_the_thread_stays_resumable(
    url: str, reader: App[Any]
) -> None:
    WATCHING.clear()
    CANCELLED.clear()
    body = run_input("t17", messages=[user("watch the logs", "w1")])
    with httpx.stream("POST", url, json=body, headers=bearer("ana"), timeout=30) as response:
        # Held, not closed by the loop's end: closing the lines' generator closes the response.
        lines = response.iter_lines()
        for line in lines:
            if '"TOOL_CALL_END"' in line:
                break
        assert WATCHING.wait(10)
        assert not CANCELLED.is_set()  # the run goes on while its reader is there
    # The reader left mid-run: the run is cancelled, not left running.
    assert CANCELLED.wait(10)
    state = reader.get_state_sync("t17")
    assert (state.status, state.next) == ("ready", ("tools",))  # resume continues with the call
    held = conversation(state.values["messages"])
    assert [type(m).__name__ for m in held] == ["UserMessage", "AssistantMessage"]
