"""A thread's timeline and the comparison of two checkpoints, over real HTTP.

One server for the module serves three apps on SQLite files: ``orders`` (a person approves
each order), ``chat`` (an echo bot; thread ``long`` holds 300 turns, written before the server
starts, and ``big`` a large document) and ``ops`` (an agent whose disk wipes ``auditor`` may not
see).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any, TypedDict

import anyio
import httpx2 as httpx
import pytest
from _serving import WIPE_SECRETS, auth, bearer, ops_agent, order_app, serving

from interlock import START, App, Graph, SqliteStore, append
from interlock.server import create_app
from interlock.server._timeline import _first_at

TURNS = 300
BIG_DOC = "lorem ipsum " * 500
"""6,000 characters: folded."""
BIG_REPLY = "x" * 2500


class Chat(TypedDict, total=False):
    messages: Annotated[list[dict[str, Any]], append]
    doc: str


def chat_app(path: Path) -> App[Any]:
    """Replies to the last message; told "BIG", writes a large document and a long reply."""

    def reply(state: Chat) -> Chat:
        said = state["messages"][-1]["content"]
        if said == "BIG":
            return {
                "doc": BIG_DOC,
                "messages": [
                    {"role": "assistant", "content": BIG_REPLY},
                    {"role": "assistant", "content": "short"},
                ],
            }
        return {"messages": [{"role": "assistant", "content": f"echo: {said}"}]}

    g = Graph(Chat, name="chat")
    g.add_node("reply", reply).add_edge(START, "reply")
    return g.compile(store=SqliteStore(path))


def _user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


async def _long_chat(path: Path) -> None:
    app = chat_app(path)
    try:
        for turn in range(TURNS):
            await app.run(_user(f"turn {turn}"), thread="long")
    finally:
        await app.store.close()


ORDERS = 25


async def _many_orders(path: Path) -> None:
    """Thread ``many``: 25 orders, each asked and approved (an audit entry each)."""
    app = order_app(path)
    try:
        for n in range(ORDERS):
            asked = await app.run({"n": n}, thread="many")
            await app.resume("many", {asked.interrupts[0].id: True}, actor="ben")
    finally:
        await app.store.close()


@dataclass
class Studio:
    client: httpx.Client
    root: Path
    """Where the apps' files are."""


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Studio]:
    root = tmp_path_factory.mktemp("timeline")
    anyio.run(_long_chat, root / "chat.db")
    anyio.run(_many_orders, root / "orders.db")

    def factory() -> Any:
        apps = {
            "orders": order_app(root / "orders.db"),
            "chat": chat_app(root / "chat.db"),
            "ops": ops_agent(root / "ops.db"),
        }
        return create_app(apps, auth=auth())

    with serving(factory) as s, httpx.Client(base_url=s.url, timeout=30) as client:
        yield Studio(client=client, root=root)


def _get(studio: Studio, path: str, who: str = "root", **params: Any) -> Any:
    r = studio.client.get(path, params=params, headers=bearer(who))
    assert r.status_code == 200, r.text
    return r.json()


def _run(studio: Studio, thread: str, body: dict[str, Any], app: str) -> dict[str, Any]:
    r = studio.client.post(
        f"/v1/threads/{thread}/runs",
        json={"input": body, "wait": True, "app": app},
        headers=bearer("root"),
    )
    assert r.status_code == 200, r.text
    view: dict[str, Any] = r.json()["thread_view"]
    return view


def _decide(studio: Studio, item: dict[str, Any], answer: Any, who: str) -> dict[str, Any]:
    body = {"answer": answer, "payload_hash": item["payload_hash"], "wait": True}
    r = studio.client.post(
        f"/v1/interrupts/{item['id']}/decision",
        json=body,
        headers={**bearer(who), "Idempotency-Key": f"{item['id']}-{who}"},
    )
    assert r.status_code == 201, r.text
    view: dict[str, Any] = r.json()["thread_view"]
    return view


def _all_pages(studio: Studio, thread: str, limit: int, who: str = "root") -> list[Any]:
    """Every timeline entry of ``thread``, page after page, newest first."""
    items: list[Any] = []
    before = None
    while True:
        params: dict[str, Any] = {"limit": limit}
        if before is not None:
            params["before"] = before
        page = _get(studio, f"/v1/threads/{thread}/timeline", who, **params)
        items += page["items"]
        before = page["next"]
        if before is None:
            return items


def _history_ids(studio: Studio, thread: str) -> list[str]:
    ids: list[str] = []
    before = None
    while True:
        params: dict[str, Any] = {"limit": 500}
        if before is not None:
            params["before"] = before
        page = _get(studio, f"/v1/threads/{thread}/history", **params)
        ids += [c["checkpoint_id"] for c in page["items"]]
        before = page["next"]
        if before is None:
            return ids


# -- a question and its decision ---------------------------------------------------------------


def _decided_order(studio: Studio, thread: str) -> str:
    """An order thread run to its question, then approved by ana; the question's id."""
    view = _run(studio, thread, {"n": 41}, "orders")
    [question] = view["interrupts"]
    done = _decide(studio, question, True, "ana")
    assert done["status"] == "done"
    return str(question["id"])


def test_the_question_is_on_its_checkpoint_and_the_decision_on_the_resume(
    studio: Studio,
) -> None:
    question = _decided_order(studio, "o-1")
    items = _get(studio, "/v1/threads/o-1/timeline", limit=50)["items"]
    by_source = [(c["source"], c["status"]) for c in reversed(items)]
    assert by_source == [
        ("input", "ready"),
        ("loop", "ready"),
        ("loop", "interrupted"),
        ("resume", "ready"),
        ("resume", "ready"),
        ("loop", "ready"),
        ("loop", "done"),
    ]
    start, prepared, asked, resumed, continued, reviewed, finished = reversed(items)
    # The question: pending at the checkpoint that asked it, written in its audit entry.
    assert asked["interrupts"] == [question]
    assert [(e["kind"], e["data"]["interrupt"]) for e in asked["events"]] == [
        ("interrupt", question)
    ]
    # The decision, with its actor, on the checkpoint that recorded it.
    [decision] = resumed["events"]
    assert decision["kind"] == "decision" and decision["actor"] == "ana"
    assert decision["data"]["interrupt"] == question and decision["data"]["answer"] is True
    assert resumed["interrupts"] == [] and resumed["metadata"]["actor"] == "ana"
    # The server's continuation of the thread says who it continues for.
    assert continued["metadata"]["continued_by"] == "ana"
    for entry in (start, prepared, continued, reviewed, finished):
        assert entry["events"] == []
    # What ran and what it wrote.
    steps = (start, prepared, asked, resumed, continued, reviewed, finished)
    assert [e["ran"] for e in steps] == [
        [],
        [{"node": "prepare", "keys": ["n"]}],
        [],
        [],
        [],
        [{"node": "review", "keys": ["approved"]}],
        [{"node": "finish", "keys": ["done"]}],
    ]
    assert start["changes"] == [{"path": ["n"], "op": "add", "old": None, "new": 41}]
    assert prepared["changes"] == [{"path": ["n"], "op": "change", "old": 41, "new": 42}]
    assert asked["changes"] == resumed["changes"] == continued["changes"] == []
    assert reviewed["changes"] == [{"path": ["approved"], "op": "add", "old": None, "new": True}]
    assert finished["changes"] == [{"path": ["done"], "op": "add", "old": None, "new": True}]
    assert finished["next"] == [] and asked["next"] == ["review"]
    assert [c["parent_id"] for c in items[:-1]] == [c["checkpoint_id"] for c in items[1:]]


def test_each_audit_entry_lands_on_one_checkpoint_whatever_the_page_size(
    studio: Studio,
) -> None:
    _decided_order(studio, "o-2")
    _run(studio, "o-2", {"n": 7}, "orders")  # a second turn asks again
    log = _get(studio, "/v1/threads/o-2/audit", limit=500)["items"]
    assert [e["kind"] for e in log] == ["interrupt", "decision", "interrupt"]
    wide = _all_pages(studio, "o-2", 50)
    for size in (1, 2, 3):
        paged = _all_pages(studio, "o-2", size)
        assert [c["checkpoint_id"] for c in paged] == [c["checkpoint_id"] for c in wide]
        assert [c["events"] for c in paged] == [c["events"] for c in wide]
        assert [c["changes"] for c in paged] == [c["changes"] for c in wide]
    # Every entry of the log is on exactly one checkpoint, in the log's order.
    placed = [e for c in reversed(wide) for e in c["events"]]
    assert placed == log
    # The newest question is on the thread's latest checkpoint.
    assert [e["kind"] for e in wide[0]["events"]] == ["interrupt"]
    assert wide[0]["interrupts"] == [log[-1]["data"]["interrupt"]]


def test_the_entries_of_a_long_log_are_found_page_by_page(studio: Studio) -> None:
    log = _get(studio, "/v1/threads/many/audit", limit=500)["items"]
    assert [e["kind"] for e in log] == ["interrupt", "decision"] * ORDERS
    for size in (4, 7, 500):
        items = _all_pages(studio, "many", size)
        placed = [e for c in reversed(items) for e in c["events"]]
        assert placed == log, size
        for c in items:
            for e in c["events"]:
                if e["kind"] == "interrupt":
                    assert c["interrupts"] == [e["data"]["interrupt"]]
                    assert c["status"] == "interrupted"
                else:
                    assert c["source"] == "resume" and e["actor"] == "ben"


@pytest.mark.anyio
async def test_the_first_entry_of_a_page_is_found_by_bisection(
    studio: Studio, sqlite_files: Callable[[Path], SqliteStore]
) -> None:
    store = sqlite_files(studio.root / "orders.db")
    log = await store.audit_log(thread="many")
    assert len(log) == 2 * ORDERS
    reads: list[int] = []
    read = store.audit_log

    async def counted(**kwargs: Any) -> Any:
        rows = await read(**kwargs)
        reads.append(len(rows))
        return rows

    store.audit_log = counted  # type: ignore[method-assign]
    served = SimpleNamespace(store=store)
    moments = [log[0].at - 1, *(e.at for e in log), log[-1].at + 1]
    for moment in moments:
        reads.clear()
        found = await _first_at(served, "many", moment)  # type: ignore[arg-type]
        expected = next((e.seq for e in log if e.at >= moment), None)
        assert found == expected, moment
        # One entry per read, about 2 * log2(50) reads: the log is never read whole.
        assert max(reads) <= 1 and len(reads) <= 14, reads


# -- a long chat -------------------------------------------------------------------------------


def test_a_300_turn_chat_opens_at_once_and_pages_over_every_checkpoint(studio: Studio) -> None:
    started = time.perf_counter()
    first = _get(studio, "/v1/threads/long/timeline")
    elapsed = time.perf_counter() - started
    # Well under a second on a quiet machine (bench/timeline.py); a shared one gets slack.
    assert elapsed < 2.0, elapsed
    assert len(first["items"]) == 20 and first["next"] == first["items"][-1]["checkpoint_id"]
    newest = first["items"][0]
    assert newest["ran"] == [{"node": "reply", "keys": ["messages"]}]
    assert newest["changes"] == [
        {
            "path": ["messages"],
            "op": "append",
            "old": 2 * TURNS - 1,
            "new": [{"role": "assistant", "content": f"echo: turn {TURNS - 1}"}],
        }
    ]
    items = _all_pages(studio, "long", 64)
    ids = [c["checkpoint_id"] for c in items]
    assert len(ids) == len(set(ids)) == 2 * TURNS
    assert ids == _history_ids(studio, "long")
    # Each turn: its input appends the user's message, its step the reply.
    for turn, (replied, said) in enumerate(zip(items[::2], items[1::2], strict=True)):
        turn = TURNS - 1 - turn
        assert said["source"] == "input" and said["ran"] == []
        assert said["changes"][0]["new"] == [{"role": "user", "content": f"turn {turn}"}]
        assert replied["source"] == "loop"
        assert replied["changes"][0]["new"][0]["content"] == f"echo: turn {turn}"
    # The oldest checkpoint is compared with nothing.
    assert items[-1]["changes"] == [
        {
            "path": ["messages"],
            "op": "add",
            "old": None,
            "new": [{"role": "user", "content": "turn 0"}],
        }
    ]


def test_a_large_value_is_folded_in_the_timeline_and_in_a_comparison(studio: Studio) -> None:
    _run(studio, "big", _user("hello"), "chat")
    _run(studio, "big", _user("BIG"), "chat")
    newest = _get(studio, "/v1/threads/big/timeline", limit=1)["items"][0]
    changes = {c["path"][0]: c for c in newest["changes"]}
    doc = changes["doc"]
    assert doc["op"] == "add" and doc["new"]["$folded"] is True
    assert doc["new"]["chars"] == len(BIG_DOC) + 2  # its JSON: quoted
    assert doc["new"]["preview"] == '"' + BIG_DOC[:299]
    appended = changes["messages"]
    assert appended["op"] == "append" and appended["old"] == 3
    long_reply, short = appended["new"]
    assert long_reply["$folded"] is True and long_reply["chars"] > 2500
    assert long_reply["preview"].startswith('{"role":"assistant","content":"xxx')
    assert len(long_reply["preview"]) == 300
    assert short == {"role": "assistant", "content": "short"}
    assert BIG_REPLY not in str(newest)
    # A comparison folds the same way.
    first = _get(studio, "/v1/threads/big/timeline", limit=50)["items"][-1]
    compared = _get(
        studio,
        "/v1/threads/big/compare",
        **{"from": first["checkpoint_id"], "to": newest["checkpoint_id"]},
    )
    doc = next(c for c in compared["changes"] if c["path"] == ["doc"])
    assert doc["new"]["$folded"] is True


# -- comparing ---------------------------------------------------------------------------------


def test_two_checkpoints_compare_either_way(studio: Studio) -> None:
    _run(studio, "c-1", _user("one"), "chat")
    _run(studio, "c-1", _user("two"), "chat")
    items = _get(studio, "/v1/threads/c-1/timeline", limit=50)["items"]
    oldest, newest = items[-1], items[0]
    forward = _get(
        studio,
        "/v1/threads/c-1/compare",
        **{"from": oldest["checkpoint_id"], "to": newest["checkpoint_id"]},
    )
    assert forward["from_checkpoint"] == {
        k: oldest[k] for k in ("checkpoint_id", "step", "status", "source", "created_at")
    }
    assert forward["to_checkpoint"]["checkpoint_id"] == newest["checkpoint_id"]
    assert forward["changes"] == [
        {
            "path": ["messages"],
            "op": "append",
            "old": 1,
            "new": [
                {"role": "assistant", "content": "echo: one"},
                {"role": "user", "content": "two"},
                {"role": "assistant", "content": "echo: two"},
            ],
        }
    ]
    backward = _get(
        studio,
        "/v1/threads/c-1/compare",
        **{"from": newest["checkpoint_id"], "to": oldest["checkpoint_id"]},
    )
    assert backward["changes"] == [
        {
            "path": ["messages"],
            "op": "change",
            "old": [
                {"role": "user", "content": "one"},
                {"role": "assistant", "content": "echo: one"},
                {"role": "user", "content": "two"},
                {"role": "assistant", "content": "echo: two"},
            ],
            "new": [{"role": "user", "content": "one"}],
        }
    ]
    # Without from: from the thread's first checkpoint; without to: to its latest.
    whole = _get(studio, "/v1/threads/c-1/compare")
    assert whole == forward
    first = _get(studio, "/v1/threads/c-1/compare", to=oldest["checkpoint_id"])
    assert first["from_checkpoint"] == first["to_checkpoint"] and first["changes"] == []
    back = _get(studio, "/v1/threads/c-1/compare", **{"from": newest["checkpoint_id"]})
    assert back["to_checkpoint"] == back["from_checkpoint"] and back["changes"] == []


def test_an_unknown_checkpoint_is_404(studio: Studio) -> None:
    _run(studio, "c-2", _user("one"), "chat")
    _run(studio, "c-3", _user("one"), "chat")
    other = _get(studio, "/v1/threads/c-3/timeline")["items"][0]["checkpoint_id"]
    for path, params in [
        ("/v1/threads/c-2/timeline", {"before": "no-such-checkpoint"}),
        ("/v1/threads/c-2/compare", {"from": "no-such-checkpoint"}),
        ("/v1/threads/c-2/compare", {"to": "no-such-checkpoint"}),
        ("/v1/threads/c-2/compare", {"to": other}),  # another thread's
    ]:
        r = studio.client.get(path, params=params, headers=bearer("vic"))
        assert r.status_code == 404, (path, params, r.text)
        assert r.json()["error"] == "unknown_checkpoint"
        assert "GET .../history" in r.json()["message"]
    r = studio.client.get("/v1/threads/nobody/timeline", headers=bearer("vic"))
    assert r.status_code == 404 and r.json()["error"] == "unknown_thread"
    r = studio.client.get("/v1/threads/c-2/timeline", params={"limit": 0}, headers=bearer("vic"))
    assert r.status_code == 400 and "limit" in r.json()["message"]
    # The parameter is named as the query spells it, not as the field that holds it.
    r = studio.client.get("/v1/threads/c-2/compare", params={"from": "a\0b"}, headers=bearer("vic"))
    assert r.status_code == 400, r.text
    assert r.json()["message"].startswith("from ") and "from_" not in r.json()["message"]


# -- scopes --------------------------------------------------------------------------------------


def test_a_scoped_identity_sees_no_hidden_call_through_a_diff_or_an_event(
    studio: Studio,
) -> None:
    [wipe] = _run(studio, "w-1", _user("go"), "ops")["interrupts"]
    edit = {"action": "edit", "arguments": {"device": "/dev/EDITED-SECRET"}}
    [refund] = _decide(studio, wipe, edit, "root")["interrupts"]
    assert refund["tool"] == "refund"

    def bodies(who: str) -> tuple[str, list[Any]]:
        items = _all_pages(studio, "w-1", 3, who)
        oldest, newest = items[-1]["checkpoint_id"], items[0]["checkpoint_id"]
        texts = [
            studio.client.get(
                "/v1/threads/w-1/timeline", params={"limit": 100}, headers=bearer(who)
            ).text,
            studio.client.get("/v1/threads/w-1/compare", headers=bearer(who)).text,
        ]
        for a, b in ((oldest, newest), (newest, oldest)):
            r = studio.client.get(
                "/v1/threads/w-1/compare", params={"from": a, "to": b}, headers=bearer(who)
            )
            assert r.status_code == 200, r.text
            texts.append(r.text)
        return " ".join(texts), items

    everything, full = bodies("root")
    for secret in WIPE_SECRETS:
        assert secret in everything  # the test shows something only where the data is
    hidden, scoped = bodies("auditor")
    for secret in WIPE_SECRETS:
        assert secret not in hidden
    # The same checkpoints; the refund's question and its audit entry are shown.
    assert [c["checkpoint_id"] for c in scoped] == [c["checkpoint_id"] for c in full]
    assert scoped[0]["interrupts"] == [refund["id"]]
    events = [e for c in scoped for e in c["events"]]
    assert [e["data"]["interrupt"] for e in events] == [refund["id"]]
    assert len([e for c in full for e in c["events"]]) > len(events)
    # The wipe's question is pending at a checkpoint root sees it at; the auditor does not.
    asked = next(c for c in full if wipe["id"] in c["interrupts"])
    assert (
        next(c for c in scoped if c["checkpoint_id"] == asked["checkpoint_id"])["interrupts"] == []
    )
