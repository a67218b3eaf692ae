"""An interlock agent served over A2A, driven by the SDK's own client over real HTTP.

The server (`_serve_helpers.serving`) runs in a thread of its own with its own App on a SQLite
file; the tests read the same file through Apps of their own, as another process would.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

import httpx
import pytest
from _serve_helpers import (
    RAN,
    client_of,
    data_message,
    ops_agent,
    question_of,
    receiver,
    send,
    serving,
    session,
    text_message,
    text_of,
    wait_for,
)
from a2a.types import (
    GetTaskRequest,
    InvalidParamsError,
    ListTasksRequest,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskNotFoundError,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import A2AError

from interlock import END, START, App, Graph, Principal, SqliteStore, interrupt

pytestmark = pytest.mark.anyio

AUTH = TaskState.TASK_STATE_AUTH_REQUIRED
COMPLETED = TaskState.TASK_STATE_COMPLETED


@pytest.fixture(autouse=True)
def _no_runs_yet() -> None:
    RAN.clear()


def reader(sqlite_files: Callable[[Path], SqliteStore], db: Path) -> App[Any]:
    """An App of the test's own on the server's file."""
    return ops_agent().compile(store=sqlite_files(db))


async def test_a_question_makes_the_task_auth_required_and_approve_runs_the_tool_once(
    tmp_path: Path, sqlite_files: Callable[[Path], SqliteStore]
) -> None:
    db = tmp_path / "a2a.db"
    with serving(db) as served:
        async with client_of(served, "sam") as starter, client_of(served, "ana") as approver:
            task = await send(starter, text_message("deploy web"))
            assert task.status.state == AUTH
            asked = question_of(task)
            assert asked["kind"] == "approval"
            assert asked["tool"] == "deploy" and asked["arguments"] == {"service": "web"}
            assert asked["address"].endswith("/agent:ops/tool:deploy:call_ops_0_0")
            assert asked["who"] == "needs a member of group sre"
            assert asked["schema"]["required"] == ["service"]  # the tool's arguments
            assert "anyOf" in asked["answer_schema"]
            assert "Allow ops to call deploy" in text_of(task)
            assert RAN == []  # nothing runs before the decision

            done = await send(approver, text_message("approve", task))
            assert done.status.state == COMPLETED
            assert RAN == ["web"]
            assert text_of(done) == "Done: deployed web"
            [artifact] = done.artifacts
            assert [p.text for p in artifact.parts] == ["Done: deployed web"]

        # The task is the thread: its decision is recorded with the approver as actor, and
        # the starter is the run's starter (separation of duties can be checked against it).
        app = reader(sqlite_files, db)
        question = await app.question(asked["interrupt"])
        assert question is not None and question.decision is not None
        assert question.decision.actor == "ana"
        assert question.started_by == "sam"
        assert (await app.get_state(task.id)).status == "done"


async def test_the_card_lists_the_tools_as_skills_and_calls_need_a_token(tmp_path: Path) -> None:
    with serving(tmp_path / "a2a.db") as served:
        async with httpx.AsyncClient() as http:
            card = (await http.get(served.url + ".well-known/agent-card.json")).json()
            assert card["name"] == "ops"
            assert [s["id"] for s in card["skills"]] == ["deploy"]
            assert card["capabilities"]["streaming"] is True
            assert "bearer" in card["securitySchemes"]
            refused = await http.post(served.url, json={"jsonrpc": "2.0", "id": 1})
            assert refused.status_code == 401
            assert "Bearer" in refused.json()["error"]


async def test_an_edit_runs_the_tool_with_the_edited_arguments(tmp_path: Path) -> None:
    async with session(tmp_path / "a2a.db", "ana") as client:
        task = await send(client, text_message("deploy web"))
        edit = {
            "interrupt": question_of(task)["interrupt"],
            "decision": "edit",
            "arguments": {"service": "web-canary"},
        }
        done = await send(client, data_message(edit, task))
        assert done.status.state == COMPLETED
        assert RAN == ["web-canary"]
        assert text_of(done) == "Done: deployed web-canary"


async def test_a_rejection_never_runs_the_tool(tmp_path: Path) -> None:
    async with session(tmp_path / "a2a.db", "ana") as client:
        task = await send(client, text_message("deploy web"))
        interrupt = question_of(task)["interrupt"]
        reject = {"interrupt": interrupt, "decision": "reject", "message": "freeze"}
        done = await send(client, data_message(reject, task))
        assert done.status.state == COMPLETED
        assert RAN == []
        assert "freeze" in text_of(done)


async def test_a_decider_outside_the_authority_is_refused_and_nothing_is_recorded(
    tmp_path: Path, sqlite_files: Callable[[Path], SqliteStore]
) -> None:
    db = tmp_path / "a2a.db"
    with serving(db) as served:
        async with client_of(served, "bob") as bob, client_of(served, "vic") as vic:
            task = await send(bob, text_message("deploy web"))
            interrupt = question_of(task)["interrupt"]
            with pytest.raises(InvalidParamsError) as refused:
                await send(bob, text_message("approve", task))
            assert refused.value.data == {"error": "not_authorized", "rule": "who"}
            assert "needs a member of group sre" in refused.value.message
            assert "nothing was recorded" in refused.value.message
            with pytest.raises(InvalidParamsError) as viewer:
                await send(vic, text_message("approve", task))
            assert viewer.value.data == {"error": "not_authorized", "rule": "role"}
            async with client_of(served, "out") as out:  # its threads are x-...: not this one
                with pytest.raises(TaskNotFoundError):
                    await send(out, text_message("approve", task))
                with pytest.raises(TaskNotFoundError):
                    await out.get_task(GetTaskRequest(id=task.id))
            # The task still waits, with the same question, and the thread has no decision.
            again = await bob.get_task(GetTaskRequest(id=task.id))
            assert again.status.state == AUTH
            assert question_of(again)["interrupt"] == interrupt
            pending = await reader(sqlite_files, db).inbox(thread=task.id)
            assert [i.id for i in pending] == [interrupt]
            assert RAN == []

            async with client_of(served, "ana") as ana:
                done = await send(ana, text_message("approve", task))
            assert done.status.state == COMPLETED and RAN == ["web"]


async def test_an_answer_that_is_not_one_is_refused(tmp_path: Path) -> None:
    async with session(tmp_path / "a2a.db", "ana") as client:
        task = await send(client, text_message("deploy web"))
        with pytest.raises(InvalidParamsError) as unclear:
            await send(client, text_message("maybe later", task))
        assert unclear.value.data is not None
        assert unclear.value.data["error"] == "invalid_answer"
        with pytest.raises(InvalidParamsError) as wrong:
            await send(client, data_message({"interrupt": "nope", "decision": "approve"}, task))
        assert wrong.value.data is not None
        assert wrong.value.data["error"] == "unknown_interrupt"
        bad_edit = {"decision": "edit", "arguments": {"port": 1}}
        with pytest.raises(InvalidParamsError) as misfit:
            await send(client, data_message(bad_edit, task))
        assert misfit.value.data == {"error": "invalid_answer"}
        assert "'service' is a required property" in misfit.value.message
        assert RAN == []


async def test_a_question_decided_elsewhere_is_not_decided_twice(
    tmp_path: Path, sqlite_files: Callable[[Path], SqliteStore]
) -> None:
    db = tmp_path / "a2a.db"
    async with session(db, "ana") as client:
        task = await send(client, text_message("deploy web"))
        interrupt = question_of(task)["interrupt"]
        # Someone decides in another surface (the web inbox, the command line): the same
        # store, another App.
        elsewhere = reader(sqlite_files, db)
        await elsewhere.decide(task.id, {interrupt: "approve"}, actor=_sre("sam"))

        done = await send(client, text_message("reject", task))
        assert done.status.state == COMPLETED
        assert RAN == ["web"]  # sam's approval held, and the call ran once
        assert f"Interrupt {interrupt} was already decided by sam (approve)" in text_of(done)
        question = await elsewhere.question(interrupt)
        assert question is not None and question.decision is not None
        assert question.decision.actor == "sam"

        # A second answer on the finished task decides nothing either.
        with pytest.raises(A2AError):
            await send(client, text_message("approve", task))
        assert RAN == ["web"]


async def test_a_restart_between_question_and_answer_loses_nothing(tmp_path: Path) -> None:
    db = tmp_path / "a2a.db"
    async with session(db, "ana") as client:
        task = await send(client, text_message("deploy web"))
        assert task.status.state == AUTH
    # A new server, with a new App, on the same file: it has never seen the task.
    async with session(db, "ana") as client:
        again = await client.get_task(GetTaskRequest(id=task.id))
        assert again.status.state == AUTH
        assert again.context_id == task.context_id
        assert question_of(again) == question_of(task)
        listed = await client.list_tasks(ListTasksRequest(context_id=task.context_id))
        assert [t.id for t in listed.tasks] == [task.id]
        done = await send(client, text_message("approve", task))
        assert done.status.state == COMPLETED
        assert RAN == ["web"]


def _sre(name: str) -> Principal:
    return Principal(name=name, groups=("sre",))


async def test_a_failed_run_fails_the_task_with_why(tmp_path: Path) -> None:
    async with session(tmp_path / "a2a.db", "ana") as client:
        task = await send(client, text_message("deploy BROKEN"))
        failed = await send(client, text_message("approve", task))
        assert failed.status.state == TaskState.TASK_STATE_FAILED
        assert text_of(failed).startswith("The agent failed: ")
        assert "the cluster refused it" in text_of(failed)
        # A server that never saw the task rebuilds it failed, from its thread.
    with serving(tmp_path / "a2a.db") as served:
        async with client_of(served, "ana") as client:
            again = await client.get_task(GetTaskRequest(id=task.id))
            assert again.status.state == TaskState.TASK_STATE_FAILED
            assert "the cluster refused it" in text_of(again)


async def test_streaming_reports_the_task_as_it_goes(tmp_path: Path) -> None:
    with serving(tmp_path / "a2a.db") as served:
        async with client_of(served, "ana", streaming=True) as client:
            events = [
                e
                async for e in client.send_message(
                    SendMessageRequest(message=text_message("deploy web"))
                )
            ]
            kinds = [e.WhichOneof("payload") for e in events]
            assert kinds[0] == "task"
            states = [e.status_update.status.state for e in events if e.HasField("status_update")]
            assert states == [TaskState.TASK_STATE_WORKING, AUTH]
            task = events[0].task
            asked = events[-1].status_update.status.message
            assert any(p.HasField("data") for p in asked.parts)

            events = [
                e
                async for e in client.send_message(
                    SendMessageRequest(message=text_message("approve", task))
                )
            ]
            states = [e.status_update.status.state for e in events if e.HasField("status_update")]
            assert states == [TaskState.TASK_STATE_WORKING, COMPLETED]
            [artifact] = [
                e.artifact_update.artifact for e in events if e.HasField("artifact_update")
            ]
            assert artifact.parts[0].text == "Done: deployed web"
            assert RAN == ["web"]


async def test_push_notifications_tell_a_receiver_the_task_waits_and_ends(tmp_path: Path) -> None:
    with receiver() as hook, serving(tmp_path / "a2a.db", push=True) as served:
        async with client_of(served, "ana") as client:
            push = TaskPushNotificationConfig(url=hook.url, token="hook-secret")
            request = SendMessageRequest(
                message=text_message("deploy web"),
                configuration=SendMessageConfiguration(task_push_notification_config=push),
            )
            [first] = [e async for e in client.send_message(request)]
            task = first.task
            await send(client, text_message("approve", task))

        def states() -> list[str]:
            return [
                body["statusUpdate"]["status"]["state"]
                for _, body in hook.posted
                if "statusUpdate" in body
            ]

        wait_for(lambda: "TASK_STATE_COMPLETED" in states())
        assert "TASK_STATE_AUTH_REQUIRED" in states()
        assert all(h["x-a2a-notification-token"] == "hook-secret" for h, _ in hook.posted)
        assert {
            b["statusUpdate"]["taskId"] for b in (b for _, b in hook.posted) if "statusUpdate" in b
        } == {task.id}


async def test_a_quorum_counts_each_caller_once_and_the_tool_runs_after_the_last(
    tmp_path: Path,
) -> None:
    with serving(tmp_path / "a2a.db", agent=lambda: ops_agent(approvals=2)) as served:
        async with client_of(served, "ana") as ana, client_of(served, "sam") as sam:
            task = await send(ana, text_message("deploy web"))
            assert question_of(task)["approvals"] == 2
            voted = await send(ana, text_message("approve", task))
            assert voted.status.state == AUTH
            assert question_of(voted)["approved_by"] == ["ana"]
            assert "(1 of 2 approvals)" in text_of(voted)
            assert RAN == []
            with pytest.raises(InvalidParamsError):  # ana's second vote is no vote
                await send(ana, text_message("approve", task))
            done = await send(sam, text_message("approve", task))
            assert done.status.state == COMPLETED
            assert RAN == ["web"]


class Ticket(TypedDict, total=False):
    topic: str
    number: str


def ticket_graph() -> Graph[Ticket]:
    """Asks for a ticket number (a question that is not an approval)."""

    def ask_number(state: Ticket) -> Ticket:
        return {"number": interrupt(f"Which ticket is {state['topic']} about?")}

    g = Graph(Ticket, name="tickets")
    g.add_node("ask", ask_number).add_edge(START, "ask").add_edge("ask", END)
    return g


async def test_a_question_that_is_not_an_approval_makes_the_task_input_required(
    tmp_path: Path,
) -> None:
    def topic(context: Any) -> Ticket:
        return {"topic": context.get_user_input()}

    with serving(tmp_path / "a2a.db", graph=ticket_graph, input=topic) as served:
        async with client_of(served, "bob") as client:
            task = await send(client, text_message("the outage"))
            assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            asked = question_of(task)
            assert asked["kind"] == "question"
            assert asked["question"] == "Which ticket is the outage about?"
            assert asked["who"] == "anyone"
            done = await send(client, text_message("OPS-7", task))
            assert done.status.state == COMPLETED
            assert '"number":"OPS-7"' in text_of(done)


async def test_a_thread_continued_elsewhere_is_reported_as_it_ended(
    tmp_path: Path, sqlite_files: Callable[[Path], SqliteStore]
) -> None:
    db = tmp_path / "a2a.db"
    async with session(db, "ana") as client:
        task = await send(client, text_message("deploy web"))
        interrupt = question_of(task)["interrupt"]
        elsewhere = reader(sqlite_files, db)  # the approval server, say: decides and continues
        await elsewhere.resume(task.id, {interrupt: "approve"}, actor=_sre("sam"))
        assert RAN == ["web"]

        done = await send(client, text_message("approve", task))
        assert done.status.state == COMPLETED
        assert text_of(done).endswith("Done: deployed web")
        assert "already decided by sam" in text_of(done)
        assert RAN == ["web"]


async def test_a_refusal_over_a_stream_is_the_same_typed_error(tmp_path: Path) -> None:
    with serving(tmp_path / "a2a.db") as served:
        async with client_of(served, "bob", streaming=True) as client:
            started = SendMessageRequest(message=text_message("deploy web"))
            events = [e async for e in client.send_message(started)]
            task = events[0].task
            answer = SendMessageRequest(message=text_message("approve", task))
            with pytest.raises(InvalidParamsError) as refused:
                [e async for e in client.send_message(answer)]
            assert refused.value.data == {"error": "not_authorized", "rule": "who"}
            assert RAN == []
