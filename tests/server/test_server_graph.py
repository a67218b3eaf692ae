"""A graph's picture over real HTTP: ``GET /v1/graph`` and ``GET /v1/threads/{thread}/graph``,
the drawing marked with where the thread stands, parsed by Mermaid's own parser.

The server serves two apps: ``team``, a supervisor whose ``cleaner`` agent deletes files only
once a person approves, and ``boom``, a graph whose second node raises.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, TypedDict

import anyio
import httpx2 as httpx
import pytest
from _serving import Serving, auth, bearer, serving

from interlock import END, START, App, Graph, SqliteStore
from interlock.agents import (
    ApprovalPolicy,
    ScriptedModel,
    ToolAgent,
    call,
    require_approval,
    supervisor,
    tool,
)
from interlock.runtime import Address, Interrupt
from interlock.server import create_app
from interlock.server._graph import position, ran_in_run
from interlock.stores import Store

MERMAID_DIR = Path(__file__).resolve().parents[1] / "graph" / "mermaid"


@tool
def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: The file.
    """
    return f"deleted {path}"


@tool
def search(query: str) -> str:
    """Search the documents.

    Args:
        query: What to look for.
    """
    return f"found {query}"


def team() -> ToolAgent:
    """A supervisor that hands every request to ``cleaner``, whose deletions wait for a person."""
    cleaner = ToolAgent(
        "cleaner",
        ScriptedModel([call("delete_file", {"path": "/srv/old.log"}), "deleted"], name="cleaner"),
        [delete_file],
        policy=ApprovalPolicy({"delete_file": [require_approval(name="files")]}),
    )
    reader = ToolAgent("reader", ScriptedModel(["nothing"], name="reader"), [search])
    model = ScriptedModel([call("transfer_to_cleaner"), "all tidy"], name="team")
    return supervisor(model, [reader, cleaner], name="team")


class Counter(TypedDict, total=False):
    n: int


def boom() -> Graph[Counter]:
    """prepare → explode (raises), for n = 0; count, for any other n."""

    def prepare(state: Counter) -> Counter:
        return {"n": 1}

    def explode(state: Counter) -> Counter:
        raise RuntimeError("the explode node always fails")

    def count(state: Counter) -> Counter:
        return {"n": state.get("n", 0) + 1}

    def start(state: Counter) -> Literal["prepare", "count"]:
        return "count" if state.get("n") else "prepare"

    g = Graph(Counter, name="boom")
    g.add_node("prepare", prepare).add_node("explode", explode).add_node("count", count)
    g.add_conditional_edges(START, start)
    g.add_edge("prepare", "explode").add_edge("explode", END).add_edge("count", END)
    return g


def _apps(folder: Path) -> dict[str, App[Any]]:
    return {
        "team": team().compile(store=SqliteStore(folder / "team.db")),
        "boom": boom().compile(store=SqliteStore(folder / "boom.db")),
    }


def _write_legacy_thread(path: Path) -> None:
    """Thread ``legacy`` in ``path``, written by an older ``team`` (an agent, no supervisor),
    waiting on its tools node's question."""
    older = ToolAgent(
        "team",
        ScriptedModel([call("delete_file", {"path": "/srv/a.log"}), "ok"], name="team"),
        [delete_file],
        policy=ApprovalPolicy(),
    )
    app = older.compile(store=SqliteStore(path))
    try:
        assert app.run_sync({"messages": ["go"]}, thread="legacy").status == "interrupted"
    finally:
        anyio.run(app.store.close)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    folder = tmp_path_factory.mktemp("graphs")
    _write_legacy_thread(folder / "team.db")
    with serving(lambda: create_app(_apps(folder), auth=auth())) as s:
        yield s


@pytest.fixture(scope="module")
def client(server: Serving) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as c:
        yield c


def _run(client: httpx.Client, app: str, thread: str, values: dict[str, Any]) -> dict[str, Any]:
    body = {"input": values, "app": app, "wait": True}
    r = client.post(f"/v1/threads/{thread}/runs", json=body, headers=bearer("root"))
    assert r.status_code == 200, r.text
    view: dict[str, Any] = r.json()["thread_view"]
    return view


def _ask_team(client: httpx.Client, thread: str) -> None:
    _run(client, "team", thread, {"messages": [{"role": "user", "content": "tidy up"}]})


def _graph(client: httpx.Client, thread: str, who: str = "vic", **params: str) -> httpx.Response:
    return client.get(f"/v1/threads/{thread}/graph", params=params, headers=bearer(who))


def _parse(texts: list[str]) -> list[dict[str, Any]]:
    """What Mermaid's own parser says of each text (its packages installed from the lock file
    by the drawing tests' fixture, ``npm ci`` in tests/graph/mermaid)."""
    node = shutil.which("node")
    if node is None or not (MERMAID_DIR / "node_modules" / "mermaid").is_dir():
        raise RuntimeError(
            f"Mermaid's parser is not installed: run `npm ci` in {MERMAID_DIR} (Node.js 20 or "
            "later), or run tests/graph/test_draw.py first, which does"
        )
    done = subprocess.run(
        [node, str(MERMAID_DIR / "parse.mjs")],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    parsed: list[dict[str, Any]] = json.loads(done.stdout)
    return parsed


def test_a_thread_waiting_on_a_gated_tool_marks_that_node_waiting(client: httpx.Client) -> None:
    _ask_team(client, "w1")
    r = _graph(client, "w1")
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"app", "thread", "status", "mermaid", "marks"}
    assert (body["app"], body["thread"], body["status"]) == ("team", "w1", "interrupted")
    # The cleaner's tools node asks; the cleaner's block holds it; the boss's model ran.
    assert body["marks"] == {"cleaner/tools": "waiting", "cleaner": "waiting", "model": "done"}
    text = body["mermaid"]
    assert text == team().draw(marks=body["marks"])
    # model n0, tools n1, reader n2, cleaner n3 (its tools n3_n1).
    assert text.endswith("    class n0 done\n    class n3,n3_n1 waiting\n")
    assert '        n3_n1["tools<br>🔒 delete_file"]\n' in text
    assert _parse([text]) == [{"ok": True, "type": "flowchart-v2"}]


def test_once_decided_and_finished_the_nodes_that_ran_are_done(client: httpx.Client) -> None:
    _ask_team(client, "w2")
    (item,) = client.get("/v1/interrupts", params={"thread": "w2"}, headers=bearer("vic")).json()[
        "items"
    ]
    decided = client.post(
        f"/v1/interrupts/{item['id']}/decision",
        json={"answer": {"action": "approve"}, "payload_hash": item["payload_hash"], "wait": True},
        headers={**bearer("ana"), "Idempotency-Key": "w2"},
    )
    assert decided.status_code == 201, decided.text
    body = _graph(client, "w2").json()
    assert body["status"] == "done"
    assert body["marks"] == {"model": "done", "cleaner": "done"}
    assert body["mermaid"].endswith("    class n0,n3 done\n")


def test_a_failed_thread_marks_the_node_that_failed(client: httpx.Client) -> None:
    view = _run(client, "boom", "f1", {"n": 0})
    assert view["status"] == "failed"
    body = _graph(client, "f1", app="boom").json()
    assert (body["app"], body["status"]) == ("boom", "failed")
    assert body["marks"] == {"explode": "failed", "prepare": "done"}
    assert body["mermaid"].endswith("    class n0 done\n    class n1 failed\n")
    assert _parse([body["mermaid"]]) == [{"ok": True, "type": "flowchart-v2"}]


def test_a_new_turn_starts_the_done_marks_again(client: httpx.Client) -> None:
    assert _run(client, "boom", "f2", {"n": 0})["status"] == "failed"
    again = _run(client, "boom", "f2", {"n": 5})
    assert again["status"] == "done"
    # Read back to the new input only: the nodes of the first turn are not counted.
    body = _graph(client, "f2").json()
    assert body["marks"] == {"count": "done"}
    assert body["mermaid"].endswith("    class n2 done\n")


def test_a_thread_written_by_an_older_graph_shows_its_questions_where_they_still_fit(
    client: httpx.Client,
) -> None:
    # Its state cannot be read with this graph; its pending question can: asked in "tools",
    # which the supervisor has too. Nothing else is known of its position.
    body = _graph(client, "legacy").json()
    assert (body["app"], body["status"], body["marks"]) == (
        "team",
        "interrupted",
        {"tools": "waiting"},
    )
    assert body["mermaid"].endswith("    class n1 waiting\n")


def test_an_unknown_thread_and_one_outside_the_prefixes_answer_404_alike(
    client: httpx.Client,
) -> None:
    _ask_team(client, "w3")
    unknown = _graph(client, "nope")
    assert unknown.status_code == 404
    assert unknown.json()["error"] == "unknown_thread"
    outside = _graph(client, "w3", who="ops")  # ops sees threads starting with "ops-" only
    assert outside.status_code == 404
    assert outside.text.replace("w3", "ID") == _graph(client, "nope", who="ops").text.replace(
        "nope", "ID"
    )
    assert _graph(client, "w3", app="nope").status_code == 404


def test_an_identity_with_a_tool_scope_sees_neither_the_tools_nor_their_questions(
    client: httpx.Client,
) -> None:
    _ask_team(client, "w4")
    body = _graph(client, "w4", who="clerk").json()  # clerk's tools: refund
    assert "delete_file" not in body["mermaid"] and "search" not in body["mermaid"]
    assert body["marks"] == {"cleaner": "next", "model": "done"}
    assert '        n3_n1["tools"]\n' in body["mermaid"]
    everything = _graph(client, "w4", who="root").json()
    assert everything["marks"]["cleaner/tools"] == "waiting"


def test_an_apps_graph_needs_the_app_when_several_are_served(client: httpx.Client) -> None:
    r = client.get("/v1/graph", headers=bearer("vic"))
    assert r.status_code == 400
    assert r.json()["error"] == "app_required"
    assert "['boom', 'team']" in r.json()["message"]
    r = client.get("/v1/graph", params={"app": "team"}, headers=bearer("vic"))
    assert r.status_code == 200
    assert r.json() == {"app": "team", "mermaid": team().draw()}
    assert client.get("/v1/graph", params={"app": "x"}, headers=bearer("vic")).status_code == 404
    assert client.get("/v1/graph", params={"app": "team"}).status_code == 401
    # Limited to thread prefixes: the app's tools are not its to read.
    refused = client.get("/v1/graph", params={"app": "team"}, headers=bearer("ops"))
    assert refused.status_code == 403
    assert "GET /v1/threads/{thread}/graph" in refused.json()["message"]


def test_the_routes_are_in_the_openapi_document(client: httpx.Client) -> None:
    document = client.get("/openapi.json").json()
    assert "get" in document["paths"]["/v1/threads/{thread}/graph"]
    assert "get" in document["paths"]["/v1/graph"]
    schemas = document["components"]["schemas"]
    assert set(schemas["ThreadGraph"]["properties"]) == {
        "app",
        "thread",
        "status",
        "mermaid",
        "marks",
    }
    assert set(schemas["AppGraph"]["properties"]) == {"app", "mermaid"}


class _Asked:
    """What `position` reads of an interrupt: its address."""

    def __init__(self, address: str) -> None:
        self.address = Address.parse(address)


def _position(status: str, nxt: list[str], asked: list[str], ran: list[str]) -> Mapping[str, str]:
    interrupts: list[Any] = [_Asked(a) for a in asked]
    typed: list[Interrupt] = interrupts
    return position(status, nxt, typed, ran)


def test_the_marks_of_a_position() -> None:
    assert _position("ready", ["b", "c"], [], ["a", "b"]) == {"b": "next", "c": "next", "a": "done"}
    assert _position("failed", ["b"], [], ["a", "b"]) == {"b": "failed", "a": "done"}
    asked = ["node:tools/agent:o/tool:helper:c1/node:tools/agent:h/tool:rm:c2", "agent:x"]
    assert _position("interrupted", ["tools"], asked, ["model"]) == {
        "tools/helper/tools": "waiting",
        "tools/helper": "waiting",
        "tools": "waiting",
        "model": "done",
    }


@pytest.mark.anyio
async def test_the_done_marks_of_a_run_are_read_from_metadata_alone(store: Store) -> None:
    class N(TypedDict, total=False):
        n: int

    g = Graph(N)
    g.add_node("a", lambda s: {"n": 1}).add_node("b", lambda s: {"n": 2})
    g.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    app = g.compile(store=store)
    await app.run({"n": 0}, thread="t")
    await app.run({"n": 5}, thread="t")  # a second run: only its nodes are done

    async def rebuilt(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("every checkpoint says what ran: no state needs rebuilding")

    app.history = rebuilt  # type: ignore[method-assign]
    assert await ran_in_run(app, "t") == {"a", "b"}
