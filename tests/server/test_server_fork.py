"""Forking a thread over HTTP: the schema, a checkpoint's state, and the fork by an admin."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest
from _serving import auth, bearer, mail_agent, order_app, serving, wait_for

from interlock import SqliteStore
from interlock.agents import AssistantMessage, ToolCall, UserMessage
from interlock.server import create_app


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "orders.db"


@pytest.fixture
def client(db: Path) -> Iterator[httpx.Client]:
    with (
        serving(lambda: create_app(order_app(db), auth=auth())) as s,
        httpx.Client(base_url=s.url, timeout=10) as c,
    ):
        yield c


def start(client: httpx.Client, thread: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run the order graph to its question; return its paused checkpoint and its first."""
    r = client.post(
        f"/v1/threads/{thread}/runs", json={"input": {"n": 1}, "wait": True}, headers=bearer("ana")
    )
    assert r.status_code == 200 and r.json()["thread_view"]["status"] == "interrupted", r.text
    history = client.get(f"/v1/threads/{thread}/history", headers=bearer("vic")).json()
    items: list[dict[str, Any]] = history["items"]
    return items[0], items[-1]


def recorded(db: Path) -> tuple[list[str], list[tuple[str, int, str]]]:
    """Every thread and every audit entry in the file, read by a store of our own."""

    async def read() -> tuple[list[str], list[tuple[str, int, str]]]:
        store = SqliteStore(db)
        try:
            threads = sorted(t.thread for t in await store.threads(limit=100))
            log = [(r.thread, r.seq, r.kind) for r in await store.audit_log()]
            return threads, log
        finally:
            await store.close()

    return anyio.run(read)


def fork(client: httpx.Client, who: str, thread: str, **body: Any) -> httpx.Response:
    return client.post(f"/v1/threads/{thread}/fork", json=body, headers=bearer(who))


def test_an_admin_forks_with_an_edit_and_both_logs_say_who(client: httpx.Client, db: Path) -> None:
    paused, first = start(client, "t1")
    timeline = client.get("/v1/threads/t1/history", headers=bearer("vic")).json()["items"]
    r = fork(
        client,
        "root",
        "t1",
        checkpoint_id=paused["checkpoint_id"],
        new_thread="t1-b",
        values={"n": "41"},  # as a form sends it: converted to the key's type
    )
    assert r.status_code == 201, r.text
    made = r.json()
    assert made == {
        "thread": "t1-b",
        "checkpoint_id": made["checkpoint_id"],
        "app": "orders",
        "source_thread": "t1",
        "source_checkpoint": paused["checkpoint_id"],
        "running": False,
    }
    view = client.get("/v1/threads/t1-b", headers=bearer("vic")).json()
    assert view["values"]["n"] == 41 and view["status"] == "interrupted"
    assert view["checkpoint_id"] == made["checkpoint_id"]
    # The timeline shows where the branch came from.
    (head,) = client.get("/v1/threads/t1-b/history", headers=bearer("vic")).json()["items"]
    assert head["source"] == "fork"
    assert head["metadata"]["forked_from"] == {
        "thread": "t1",
        "checkpoint": paused["checkpoint_id"],
        "step": paused["step"],
    }
    assert head["metadata"]["actor"] == "root" and head["metadata"]["edited"] == ["n"]
    expected = {
        "source": {"thread": "t1", "checkpoint": paused["checkpoint_id"]},
        "branch": {"thread": "t1-b", "checkpoint": made["checkpoint_id"]},
        "as_node": None,
        "edited": ["n"],
    }
    branch_log = client.get("/v1/threads/t1-b/audit", headers=bearer("root")).json()["items"]
    assert (branch_log[0]["kind"], branch_log[0]["actor"]) == ("fork", "root")
    assert branch_log[0]["data"] == expected
    source_log = client.get("/v1/threads/t1/audit", headers=bearer("root")).json()["items"]
    assert (source_log[-1]["kind"], source_log[-1]["actor"]) == ("fork", "root")
    assert source_log[-1]["data"] == expected
    # The source thread is as it was.
    after = client.get("/v1/threads/t1/history", headers=bearer("vic")).json()["items"]
    assert after == timeline and after[-1] == first
    assert client.get("/v1/threads/t1", headers=bearer("vic")).json()["values"]["n"] == 2


def test_a_viewer_and_an_approver_are_refused_and_nothing_is_written(
    client: httpx.Client, db: Path
) -> None:
    paused, _ = start(client, "t1")
    before = recorded(db)
    for who in ("vic", "ana"):
        r = fork(client, who, "t1", checkpoint_id=paused["checkpoint_id"], new_thread="t1-x")
        assert r.status_code == 403, r.text
        assert r.json()["error"] == "forbidden" and "needs the admin role" in r.json()["message"]
    assert recorded(db) == before


def test_a_scoped_admin_forks_only_within_its_scopes(client: httpx.Client, db: Path) -> None:
    paused, _ = start(client, "t1")
    other, _ = start(client, "other-1")
    before = recorded(db)
    # outsider: an admin limited to threads starting with "other-".
    r = fork(client, "outsider", "t1", checkpoint_id=paused["checkpoint_id"], new_thread="other-2")
    assert r.status_code == 403 and r.json()["error"] == "out_of_scope", r.text
    r = fork(client, "outsider", "other-1", checkpoint_id=other["checkpoint_id"], new_thread="t9")
    assert r.status_code == 403 and r.json()["error"] == "out_of_scope", r.text
    # auditor: an admin who sees the questions of one tool only; a fork copies every call.
    r = fork(client, "auditor", "t1", checkpoint_id=paused["checkpoint_id"], new_thread="t2")
    assert r.status_code == 403 and r.json()["error"] == "out_of_scope", r.text
    assert recorded(db) == before
    r = fork(client, "outsider", "other-1", checkpoint_id=other["checkpoint_id"])
    assert r.status_code == 201, r.text
    assert re.fullmatch(r"other-1-fork-[0-9a-f]{6}", r.json()["thread"])


def test_an_edit_that_breaks_the_schema_is_refused_with_its_problems(
    client: httpx.Client, db: Path
) -> None:
    paused, _ = start(client, "t1")
    before = recorded(db)
    r = fork(
        client,
        "root",
        "t1",
        checkpoint_id=paused["checkpoint_id"],
        new_thread="t1-bad",
        values={"n": "many", "colour": "red"},
    )
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["error"] == "invalid_state" and "fork again" in body["message"]
    assert sorted(body["problems"], key=lambda p: p["path"]) == [
        {
            "path": "/colour",
            "message": "not a key of the state; its keys: ['approved', 'done', 'n']",
        },
        {"path": "/n", "message": "Expected `int`, got `str`"},
    ]
    assert recorded(db) == before
    assert client.get("/v1/threads/t1-bad", headers=bearer("root")).status_code == 404
    # Other refusals carry no problems.
    r = fork(client, "root", "t1", checkpoint_id=paused["checkpoint_id"], as_node="nope")
    assert r.status_code == 422 and r.json()["error"] == "unknown_node", r.text
    assert "problems" not in r.json()
    r = fork(client, "root", "t1", checkpoint_id=paused["checkpoint_id"], colour="red")
    assert r.status_code == 422 and r.json()["error"] == "invalid_body", r.text
    r = fork(client, "root", "t1", checkpoint_id="0000000009-nope", new_thread="t1-c")
    assert r.status_code == 404 and r.json()["error"] == "unknown_checkpoint", r.text
    r = fork(client, "root", "t404", checkpoint_id=paused["checkpoint_id"])
    assert r.status_code == 404 and r.json()["error"] == "unknown_thread", r.text
    r = fork(client, "root", "t1", checkpoint_id=paused["checkpoint_id"], new_thread="t1")
    assert r.status_code == 409 and r.json()["error"] == "thread_exists", r.text
    assert recorded(db) == before


def test_run_continues_the_branch_to_its_next_stop(client: httpx.Client) -> None:
    paused, _ = start(client, "t1")
    r = fork(
        client,
        "root",
        "t1",
        checkpoint_id=paused["checkpoint_id"],
        new_thread="t1-run",
        values={"approved": True},
        as_node="review",
        run=True,
    )
    assert r.status_code == 201 and r.json()["running"] is True, r.text

    def finished() -> Any:
        view = client.get("/v1/threads/t1-run", headers=bearer("vic")).json()
        return view if view["status"] == "done" else None

    view = wait_for(finished)
    assert view["values"] == {"n": 2, "approved": True, "done": True}
    history = client.get("/v1/threads/t1-run/history", headers=bearer("vic")).json()["items"]
    assert history[0]["metadata"]["started_by"] == "root"
    # The source still waits on its question.
    assert client.get("/v1/threads/t1", headers=bearer("vic")).json()["status"] == "interrupted"


def test_a_viewer_reads_the_schema_and_any_checkpoint(client: httpx.Client) -> None:
    paused, first = start(client, "t1")
    r = client.get("/v1/threads/t1/schema", headers=bearer("vic"))
    assert r.status_code == 200, r.text
    shown = r.json()
    assert shown["app"] == "orders" and shown["nodes"] == ["prepare", "review", "finish"]
    assert shown["schema"]["properties"]["n"] == {"type": "integer"}
    r = client.get(f"/v1/threads/t1/checkpoints/{first['checkpoint_id']}", headers=bearer("vic"))
    assert r.status_code == 200, r.text
    assert r.json() == {
        "checkpoint_id": first["checkpoint_id"],
        "parent_id": None,
        "step": first["step"],
        "status": first["status"],
        "source": "input",
        "created_at": first["created_at"],
        "next": ["prepare"],
        "values": {"n": 1},
    }
    r = client.get(f"/v1/threads/t1/checkpoints/{paused['checkpoint_id']}", headers=bearer("vic"))
    assert r.json()["next"] == ["review"] and r.json()["values"] == {"n": 2}
    r = client.get("/v1/threads/t1/checkpoints/nope", headers=bearer("vic"))
    assert r.status_code == 404 and r.json()["error"] == "unknown_checkpoint", r.text
    # A thread outside the identity's prefixes is as unknown as one that does not exist.
    r = client.get("/v1/threads/t1/schema", headers=bearer("outsider"))
    assert r.status_code == 404 and r.json()["error"] == "unknown_thread", r.text


def test_the_openapi_document_lists_the_fork_routes(client: httpx.Client) -> None:
    doc = client.get("/openapi.json").json()
    assert set(doc["paths"]["/v1/threads/{thread}/fork"]["post"]["responses"]) >= {
        "201",
        "403",
        "404",
        "409",
        "422",
    }
    assert "get" in doc["paths"]["/v1/threads/{thread}/schema"]
    assert "get" in doc["paths"]["/v1/threads/{thread}/checkpoints/{checkpoint}"]
    assert {"ForkRequest", "ForkResult", "CheckpointState", "StateSchemaView"} <= set(
        doc["components"]["schemas"]
    )


def test_agent_messages_are_typed_in_the_branch_and_hidden_calls_stay_hidden(
    tmp_path: Path,
) -> None:
    db = tmp_path / "mail.db"
    with (
        serving(lambda: create_app(mail_agent(db), auth=auth())) as s,
        httpx.Client(base_url=s.url, timeout=10) as client,
    ):
        r = client.post(
            "/v1/threads/m1/runs",
            json={"input": {"messages": [{"role": "user", "content": "hi"}]}, "wait": True},
            headers=bearer("ana"),
        )
        assert r.json()["thread_view"]["status"] == "interrupted", r.text
        head = client.get("/v1/threads/m1/history", headers=bearer("vic")).json()["items"][0]
        url = f"/v1/threads/m1/checkpoints/{head['checkpoint_id']}"
        whole = client.get(url, headers=bearer("root")).json()["values"]["messages"]
        assert any(m.get("tool_calls") for m in whole)
        # clerk sees the questions of the refund tool only: the send_email call is left out.
        clerk = client.get(url, headers=bearer("clerk")).json()["values"]["messages"]
        assert not any(m.get("tool_calls") for m in clerk) and len(clerk) < len(whole)
        edited = [
            {"role": "user", "content": "hello"},
            {
                "role": "assistant",
                "tool_calls": [{"id": "c9", "name": "send_email", "arguments": {"to": "a"}}],
            },
        ]
        r = fork(
            client,
            "root",
            "m1",
            checkpoint_id=head["checkpoint_id"],
            new_thread="m2",
            values={"messages": edited},
        )
        assert r.status_code == 201, r.text

    async def read() -> list[Any]:
        app = mail_agent(db)
        try:
            return list((await app.get_state("m2")).values["messages"])
        finally:
            await app.store.close()

    assert anyio.run(read) == [
        UserMessage(content="hello"),
        AssistantMessage(tool_calls=(ToolCall(id="c9", name="send_email", arguments={"to": "a"}),)),
    ]
