"""What an identity reads is bounded by its scopes, on every read path, tried as a stranger would.

One server runs `ops_agent` for the whole module: thread ``t1`` asked to wipe a disk, root
approved it with an edit, the disk was wiped (a dangerous call, audited) and the agent now asks
for a refund; ``t2`` waits on a wipe; ``t3``'s wipe failed in the tool, and the run with it. Its
notifier's receiver refuses every event, quoting it back, so the delivery log holds them too.
``auditor`` (an admin whose tools are ``refund``) and ``outsider`` (an admin whose threads start
with ``other-``) must learn nothing of the wipes: not the tool's name, not its devices.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2 as httpx
import msgspec
import pytest
from _serving import WIPE_SECRETS, auth, bearer, ops_agent, serving, wait_for

from interlock.server import EVENT_TYPES, EventType, Identity, Notifier, ServerEvent, create_app
from interlock.server._notify import Receipt, RetryPolicy, Sender
from interlock.server._routes import ROUTES, Route
from interlock.server._scopes import effect_tool, strip_calls

IDENTITY_ROUTES = frozenset({"list_principals", "list_tokens"})
"""Admin routes about principals and tokens, which hold nothing of a thread (tested with the
store's identities, where they answer; on a server that reads a tokens file they answer 409)."""
GET_ROUTES = [
    route for route in ROUTES if route.method == "GET" and route.name not in IDENTITY_ROUTES
]
THREADS = ("t1", "t2", "t3")
SCOPED = ("auditor", "outsider")
"""Admins (every route is theirs to call) whose scopes leave the wipes out."""
FROM_START = base64.urlsafe_b64encode(b"{}").decode().rstrip("=")
"""A Last-Event-ID that replays every app's change feed from its start."""


@dataclass
class Sink:
    """A notification channel whose receiver refuses every event and quotes it back."""

    name: str = "sink"
    events: frozenset[EventType] = frozenset(EVENT_TYPES)
    retry: RetryPolicy = field(default_factory=lambda: RetryPolicy(max_attempts=1))

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[Sender]:
        async def send(event: ServerEvent, attempt: int) -> Receipt:
            return Receipt(outcome="failed", status=400, detail=f"no {event.tool}: {event.summary}")

        yield send


@dataclass
class Ops:
    """The module's server (a client of it) and what its threads asked."""

    client: httpx.Client
    wiped: str
    """t1's wipe (decided with an edit)."""
    waiting: str
    """t2's wipe (pending)."""
    broken: str
    """t3's wipe (approved; the tool raised)."""
    refund: str
    """t1's refund (pending)."""

    @property
    def wipes(self) -> tuple[str, str, str]:
        return (self.wiped, self.waiting, self.broken)


def _run(client: httpx.Client, thread: str, text: str) -> dict[str, Any]:
    body = {"input": {"messages": [{"role": "user", "content": text}]}, "wait": True}
    r = client.post(f"/v1/threads/{thread}/runs", json=body, headers=bearer("root"))
    assert r.status_code == 200, r.text
    view: dict[str, Any] = r.json()["thread_view"]
    return view


def _decide(
    client: httpx.Client, item: dict[str, Any], answer: Any, who: str = "root", key: str = "k"
) -> httpx.Response:
    body = {"answer": answer, "payload_hash": item["payload_hash"], "wait": True}
    headers = {**bearer(who), "Idempotency-Key": key}
    return client.post(f"/v1/interrupts/{item['id']}/decision", json=body, headers=headers)


def events(client: httpx.Client, who: str, **params: str) -> tuple[int, str]:
    """The event stream from its start, as ``who`` reads it, up to the first keep-alive."""
    headers = {**bearer(who), "Last-Event-ID": FROM_START}
    lines: list[str] = []
    with client.stream("GET", "/v1/events", headers=headers, params=params) as r:
        if r.status_code == 200:
            for line in r.iter_lines():
                if line == ": ping":
                    break
                lines.append(line)
        else:
            r.read()
            return r.status_code, r.text
    return r.status_code, "\n".join(lines)


def read(client: httpx.Client, path: str, who: str, **params: Any) -> Any:
    """The JSON of a GET made as ``who``."""
    return client.get(path, params=params, headers=bearer(who)).json()


def frames(text: str) -> list[dict[str, Any]]:
    """The events of a stream's text."""
    return [json.loads(line[len("data: ") :]) for line in text.split("\n") if line[:6] == "data: "]


@pytest.fixture(scope="module")
def ops(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ops]:
    db = tmp_path_factory.mktemp("scopes") / "ops.db"

    def factory() -> Any:
        notifier = Notifier([Sink()])
        return create_app(ops_agent(db), auth=auth(), notifier=notifier, heartbeat=0.2)

    with serving(factory) as s, httpx.Client(base_url=s.url, timeout=10) as client:
        [wiped] = _run(client, "t1", "go")["interrupts"]
        edit = {"action": "edit", "arguments": {"device": "/dev/EDITED-SECRET"}}
        decided = _decide(client, wiped, edit)
        assert decided.status_code == 201, decided.text
        [refund] = decided.json()["thread_view"]["interrupts"]
        assert refund["tool"] == "refund"
        [waiting] = _run(client, "t2", "go")["interrupts"]
        [broken] = _run(client, "t3", "break")["interrupts"]
        failed = _decide(client, broken, {"action": "approve"})
        assert failed.json()["thread_view"]["status"] == "failed", failed.text
        # Every event delivered (and refused) before anything reads the log.
        ids = {e["id"] for e in frames(events(client, "root")[1])}

        def delivered() -> bool:
            log = client.get("/v1/deliveries", headers=bearer("root")).json()["items"]
            return ids <= {d["event_id"] for d in log}

        wait_for(delivered)
        yield Ops(
            client=client,
            wiped=wiped["id"],
            waiting=waiting["id"],
            broken=broken["id"],
            refund=refund["id"],
        )


def _requests(route: Route, ops: Ops) -> list[tuple[str, dict[str, str]]]:
    """Every path of ``route`` over the module's ids and threads, with the query values that
    name them."""
    paths = [route.path]
    if "{id}" in route.path:
        paths = [route.path.replace("{id}", i) for i in (*ops.wipes, ops.refund)]
    if "{thread}" in route.path:
        paths = [p.replace("{thread}", t) for p in paths for t in THREADS]
    if "{checkpoint}" in route.path:  # every checkpoint of the thread the path names
        paths = [
            p.replace("{checkpoint}", c["checkpoint_id"])
            for p in paths
            for c in ops.client.get(
                p.split("/checkpoints/")[0] + "/history", headers=bearer("root")
            ).json()["items"]
        ]
    names = {f.name for f in msgspec.structs.fields(route.query)} if route.query else set()
    queries: list[dict[str, str]] = [{}]
    if "thread" in names:
        queries += [{"thread": t} for t in THREADS]
    if "tool" in names:
        queries.append({"tool": "wipe_disk"})
    if "app" in names:
        queries.append({"app": "ops"})
    if "status" in names:
        queries.append({"status": "failed"})
    return [(p, q) for p in paths for q in queries]


def _bodies(ops: Ops, route: Route, who: str) -> list[tuple[str, int, str]]:
    """``(request, status, body)`` of every request of `_requests` made as ``who``."""
    out = []
    for path, query in _requests(route, ops):
        if route.name == "get_events":
            status, text = events(ops.client, who, **query)
        else:
            r = ops.client.get(path, params=query, headers=bearer(who))
            status, text = r.status_code, r.text
        out.append((f"{path}?{query}", status, text))
    return out


@pytest.mark.parametrize("who", SCOPED)
@pytest.mark.parametrize("route", GET_ROUTES, ids=lambda r: r.name)
def test_no_get_route_shows_a_tool_or_thread_outside_the_scopes(
    ops: Ops, route: Route, who: str
) -> None:
    for request, status, body in _bodies(ops, route, who):
        assert status in (200, 403, 404), (request, status, body)
        for secret in WIPE_SECRETS:
            assert secret not in body, (request, body)


@pytest.mark.parametrize("route", GET_ROUTES, ids=lambda r: r.name)
def test_every_get_route_shows_the_wipes_to_an_identity_that_sees_everything(
    ops: Ops, route: Route
) -> None:
    # The test above proves something only where the data reaches: here, on every route that
    # shows anything of a thread.
    shown = " ".join(body for _, status, body in _bodies(ops, route, "root") if status == 200)
    # The state's schema is the app's, not a thread's: it shows nothing of one.
    assert ("wipe_disk" in shown) is (route.name not in ("get_me", "get_state_schema")), route.name


def _same_answer(a: httpx.Response, b: httpx.Response, a_id: str, b_id: str) -> None:
    assert a.status_code == b.status_code
    assert a.text.replace(a_id, "ID") == b.text.replace(b_id, "ID")
    assert {k: v for k, v in a.headers.items() if k != "date"} == {
        k: v for k, v in b.headers.items() if k != "date"
    }


def test_a_question_outside_the_scopes_answers_exactly_as_an_unknown_id(ops: Ops) -> None:
    client = ops.client
    unknown = "0" * len(ops.waiting)
    cases = [(who, q) for who in ("clerk", "auditor") for q in ops.wipes]
    cases += [("outsider", q) for q in (*ops.wipes, ops.refund)]
    for who, question in cases:
        seen = client.get(f"/v1/interrupts/{question}", headers=bearer(who))
        assert seen.status_code == 404, (who, seen.text)
        _same_answer(
            seen, client.get(f"/v1/interrupts/{unknown}", headers=bearer(who)), question, unknown
        )
        body = {"answer": {"action": "approve"}, "payload_hash": "x"}
        posted = [
            client.post(
                f"/v1/interrupts/{i}/decision",
                json=body,
                headers={**bearer(who), "Idempotency-Key": "same"},
            )
            for i in (question, unknown)
        ]
        assert posted[0].status_code == 404, (who, posted[0].text)
        _same_answer(*posted, question, unknown)
    # The pending wipe is still pending: nothing was recorded.
    pending = client.get("/v1/interrupts", params={"thread": "t2"}, headers=bearer("root"))
    assert [i["id"] for i in pending.json()["items"]] == [ops.waiting]
    # In scope, the same identity reads its question.
    mine = client.get(f"/v1/interrupts/{ops.refund}", headers=bearer("clerk"))
    assert mine.status_code == 200


def test_the_role_is_checked_before_the_question_is_looked_up(ops: Ops) -> None:
    unknown = "0" * len(ops.waiting)
    answers = []
    for question in (ops.waiting, ops.refund, unknown):
        r = ops.client.post(
            f"/v1/interrupts/{question}/decision",
            json={"answer": True, "payload_hash": "x"},
            headers={**bearer("vic"), "Idempotency-Key": "k"},
        )
        assert r.status_code == 403
        answers.append((r.text, {k: v for k, v in r.headers.items() if k != "date"}))
    assert answers[0] == answers[1] == answers[2]
    assert "approver role" in answers[0][0]


THREAD_READS = [
    (suffix, query)
    for suffix in ("", "/history", "/audit")
    for query in ({}, {"app": "ops"}, {"app": "nope"}, *([{"limit": "0"}] if suffix else []))
]
"""Each route that reads a thread, with no query, its app, an unknown app, a bad parameter."""


@pytest.mark.parametrize(("suffix", "query"), THREAD_READS)
def test_a_thread_outside_the_prefixes_answers_exactly_as_an_unknown_thread(
    ops: Ops, suffix: str, query: dict[str, str]
) -> None:
    for thread in THREADS:
        outside = ops.client.get(
            f"/v1/threads/{thread}{suffix}", params=query, headers=bearer("outsider")
        )
        unknown = ops.client.get(
            f"/v1/threads/t9{suffix}", params=query, headers=bearer("outsider")
        )
        assert outside.status_code in (400, 404), outside.text
        _same_answer(outside, unknown, thread, "t9")
        # The same unknown thread answers an identity that sees every thread the same way.
        _same_answer(
            outside,
            ops.client.get(f"/v1/threads/t9{suffix}", params=query, headers=bearer("root")),
            thread,
            "t9",
        )


def test_the_inbox_and_its_counts_hold_only_the_questions_in_scope(ops: Ops) -> None:
    client = ops.client

    def inbox(who: str, **params: str) -> list[str]:
        page = client.get("/v1/interrupts", params=params, headers=bearer(who)).json()
        return [i["id"] for i in page["items"]]

    def counts(who: str, **params: str) -> Any:
        return client.get("/v1/interrupts/counts", params=params, headers=bearer(who)).json()

    assert inbox("root") == [ops.refund, ops.waiting]
    assert inbox("auditor") == [ops.refund]
    assert inbox("auditor", tool="wipe_disk") == inbox("auditor", tool="no_such_tool") == []
    assert inbox("outsider") == inbox("outsider", thread="t2") == []
    assert counts("auditor") == {"by_tool": [{"tool": "refund", "pending": 1}], "total": 1}
    nothing = {"by_tool": [], "total": 0}
    assert counts("auditor", tool="wipe_disk") == counts("auditor", tool="no_such_tool") == nothing
    assert counts("outsider", thread="t2") == counts("outsider", thread="t9") == nothing


def test_a_thread_shows_its_calls_in_scope_and_leaves_the_others_out(ops: Ops) -> None:
    client = ops.client
    full = client.get("/v1/threads/t1", headers=bearer("root")).json()
    assert [m["role"] for m in full["messages"]] == ["user", "assistant", "tool", "assistant"]
    view = client.get("/v1/threads/t1", headers=bearer("auditor")).json()
    assert view["status"] == "interrupted"
    assert [i["id"] for i in view["interrupts"]] == [ops.refund]
    assert view["messages"] == [full["messages"][0], full["messages"][3]]
    assert view["messages"][1]["tool_calls"][0]["name"] == "refund"
    # The question's page reads the same thread.
    detail = client.get(f"/v1/interrupts/{ops.refund}", headers=bearer("auditor")).json()
    assert detail["messages"] == view["messages"]
    assert [(a["kind"], a["data"]["interrupt"]) for a in detail["audit"]] == [
        ("interrupt", ops.refund)
    ]
    # A failed run's reason may quote the call that failed: it is left out too.
    assert client.get("/v1/threads/t3", headers=bearer("root")).json()["error"]
    failed = client.get("/v1/threads/t3", headers=bearer("auditor")).json()
    assert (failed["status"], failed["error"]) == ("failed", None)
    listed = client.get("/v1/threads", params={"status": "failed"}, headers=bearer("auditor"))
    assert [(t["thread"], t["error"]) for t in listed.json()["items"]] == [("t3", None)]


def test_the_audit_log_leaves_out_the_decisions_and_calls_of_tools_out_of_scope(ops: Ops) -> None:
    client = ops.client
    kinds = [a["kind"] for a in read(client, "/v1/threads/t1/audit", "root")["items"]]
    assert kinds == ["interrupt", "decision", "effect_started", "effect_done", "interrupt"]
    trail = read(client, "/v1/threads/t1/audit", "auditor")
    assert [(a["kind"], a["data"]["interrupt"]) for a in trail["items"]] == [
        ("interrupt", ops.refund)
    ]
    assert trail["next"] is None
    # Paged one entry at a time, the pages skip what is left out and end where the log does.
    seen, after = [], None
    for _ in range(10):
        params = {"limit": "1", **({"after": str(after)} if after is not None else {})}
        page = read(client, "/v1/threads/t1/audit", "auditor", **params)
        seen += page["items"]
        after = page["next"]
        if after is None:
            break
    assert seen == trail["items"]
    assert read(client, "/v1/threads/t2/audit", "auditor") == {"items": [], "next": None}


def test_the_event_stream_and_the_deliveries_hold_the_same_events_in_scope(ops: Ops) -> None:
    client = ops.client
    everything = frames(events(client, "root")[1])
    assert {(e["type"], e["tool"]) for e in everything} >= {("interrupt.created", "wipe_disk")}
    mine = frames(events(client, "auditor")[1])
    assert [(e["type"], e["thread"], e["interrupt_id"]) for e in mine] == [
        ("interrupt.created", "t1", ops.refund),
        ("run.failed", "t3", None),
    ]
    assert mine[1]["summary"] == "The run failed."
    delivered = read(client, "/v1/deliveries", "auditor")["items"]
    assert [d["event_id"] for d in delivered] == [e["id"] for e in mine]
    assert read(client, "/v1/deliveries", "auditor", limit=1)["items"] == delivered[-1:]
    wipe = next(e["id"] for e in everything if e["tool"] == "wipe_disk")
    assert read(client, "/v1/deliveries", "auditor", event_id=wipe)["items"] == []
    assert frames(events(client, "outsider")[1]) == []
    assert read(client, "/v1/deliveries", "outsider")["items"] == []


# -- the filter itself ---------------------------------------------------------------------------


CLERK = Identity(name="clerk", tools=("refund",))


def test_strip_calls_leaves_out_calls_answers_and_edits_of_tools_out_of_scope() -> None:
    openai_call = {"id": "c1", "type": "function", "function": {"name": "wipe_disk"}}
    state = {
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": "Two calls.",
                "tool_calls": [openai_call, {"id": "c2", "name": "refund", "arguments": {}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "wiped /dev/x"},
            {"role": "tool", "tool_call_id": "c2", "name": "refund", "content": "ok"},
            {"type": "replace", "id": "m", "message": {"role": "tool", "tool_call_id": "c1"}},
            {"role": "assistant", "tool_calls": ({"id": "c3", "name": "wipe_disk"},)},
            {"role": "assistant", "tool_calls": [{"id": "c4"}]},
        ],
        "last": {"role": "tool", "name": "wipe_disk", "tool_call_id": "c9", "content": "x"},
        "count": 2,
    }
    assert strip_calls(CLERK, state) == {
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": "Two calls.",
                "tool_calls": [{"id": "c2", "name": "refund", "arguments": {}}],
            },
            {"role": "tool", "tool_call_id": "c2", "name": "refund", "content": "ok"},
        ],
        "count": 2,
    }
    everyone = Identity(name="all")
    assert strip_calls(everyone, state) is state


def test_an_effect_is_the_tools_whose_call_it_was_made_in() -> None:
    key = "run1/task2/node:tools/agent:ops/tool:wipe_disk:call_1|tool:wipe_disk"
    assert effect_tool({"effect": key, "name": "tool:wipe_disk"}) == "wipe_disk"
    nested = "r/t/node:tools/agent:a/tool:helper:c1/agent:helper/tool:refund:c2|charge"
    assert effect_tool({"effect": nested}) == "refund"
    assert effect_tool({"effect": "r/t/node:charge|charge"}) is None
    assert effect_tool({"effect": "r/t"}) is None
    assert effect_tool("not an object") is None
