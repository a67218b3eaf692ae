"""The HTTP edge as a careless or hostile client meets it: deep bodies, ids that would break a
line, a retried vote, a token the server was not started with; and the server's own failures
answered as its own, with an id to find them in its log."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import httpx2 as httpx
import pytest
from _serving import TOKENS, Serving, auth, bearer, order_app, quorum_app, serving
from starlette.applications import Starlette
from starlette.routing import Mount

from interlock import App
from interlock._args import check_id
from interlock.server import TokenAuth, create_app, hash_token
from interlock.server._api import MAX_BODY_DEPTH
from interlock.server._routes import ROUTES

BODY_ROUTES = [(route.method, route.path) for route in ROUTES if route.body is not None]


@pytest.fixture(scope="module")
def orders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    """One order server for the tests that leave nothing behind."""
    db = tmp_path_factory.mktemp("edge") / "o.db"
    with serving(lambda: create_app(order_app(db), auth=auth())) as s:
        yield s


def _url(path: str) -> str:
    return (
        path.replace("{id}", "0123456789abcdef0123")
        .replace("{thread}", "t-deep")
        .replace("{name}", "ana")
    )


# -- 9: deep bodies ---------------------------------------------------------------------------


def test_every_route_that_takes_a_body_is_in_the_table() -> None:
    assert sorted(p for _, p in BODY_ROUTES) == [
        "/v1/interrupts/{id}/decision",
        "/v1/principals",
        "/v1/principals/{name}",
        "/v1/threads/{thread}/fork",
        "/v1/threads/{thread}/pause",
        "/v1/threads/{thread}/runs",
        "/v1/tokens",
    ]


@pytest.mark.parametrize(("method", "path"), BODY_ROUTES)
def test_a_deeply_nested_body_is_refused_with_400_on_every_route(
    orders: Serving, method: str, path: str
) -> None:
    headers = {**bearer("root"), "Idempotency-Key": "k", "Content-Type": "application/json"}
    with httpx.Client(base_url=orders.url, headers=headers, timeout=30) as client:
        # Past the decoder's recursion limit, and just past the server's own limit.
        for depth in (100_000, MAX_BODY_DEPTH + 1):
            body = '{"answer": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"
            r = client.request(method, _url(path), content=body)
            assert r.status_code == 400, (depth, r.text)
            assert r.json()["error"] == "too_deep"
            assert f"more than {MAX_BODY_DEPTH} deep" in r.json()["message"]
        # At the limit, the body is read and judged on what it says.
        body = '{"answer": ' + "[" * (MAX_BODY_DEPTH - 1) + "]" * (MAX_BODY_DEPTH - 1) + "}"
        r = client.request(method, _url(path), content=body)
        assert r.status_code != 500 and r.json()["error"] != "too_deep", r.text


# -- 10: the server's own failures ------------------------------------------------------------


def _failing(path: Path, error: Exception) -> App[Any]:
    """An app whose inbox fails with ``error``, as a bug in the server's own code would."""
    app = order_app(path)

    async def inbox(**_: Any) -> Any:
        raise error

    app.inbox = inbox  # type: ignore[method-assign]
    return app


@pytest.mark.parametrize(
    "error",
    [
        ValueError("bad value"),
        TypeError("bad type"),
        RuntimeError("the lifespan of something else"),
    ],
)
def test_a_failure_of_the_server_itself_is_a_500_with_the_id_of_its_log_entry(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, error: Exception
) -> None:
    server = serving(lambda: create_app(_failing(tmp_path / "o.db", error), auth=auth()))
    with server as s, caplog.at_level(logging.ERROR, logger="interlock.server"):
        r = httpx.get(f"{s.url}/v1/interrupts", headers=bearer("vic"))
    assert r.status_code == 500, r.text
    body = r.json()
    assert body["error"] == "internal"
    error_id = body["error_id"]
    assert error_id and error_id in body["message"]
    assert str(error) not in body["message"]  # the details stay in the log
    [logged] = [rec for rec in caplog.records if error_id in rec.getMessage()]
    assert logged.exc_info is not None and logged.exc_info[1] is error


def test_a_forged_cursor_is_the_clients_error_not_the_servers(orders: Serving) -> None:
    # A cursor is base64 of JSON the client can write: what it holds is checked as it is read.
    for inside in ({"orders": "a\u0000b"}, {"orders": "x" * 600}):
        forged = base64.urlsafe_b64encode(json.dumps(inside).encode()).decode().rstrip("=")
        r = httpx.get(f"{orders.url}/v1/interrupts?after={forged}", headers=bearer("vic"))
        assert r.status_code == 400, r.text
        assert r.json()["error"] == "bad_parameter"
        assert r.json()["message"].startswith("after ")


def test_a_mounted_server_without_its_lifespan_answers_503_not_started(tmp_path: Path) -> None:
    def outer() -> Starlette:
        api = create_app(order_app(tmp_path / "o.db"), auth=auth())
        return Starlette(routes=[Mount("/approvals", api)])  # its lifespan is forgotten

    with serving(outer) as s:
        api = f"{s.url}/approvals/v1"
        r = httpx.post(f"{api}/threads/t/runs", json={"input": {"n": 1}}, headers=bearer("ana"))
        assert r.status_code == 503, r.text
        assert r.json()["error"] == "not_started"
        assert "pass its lifespan" in r.json()["message"]
        # A decision that nobody would continue is refused before it is recorded.
        waited = {"input": {"n": 1}, "wait": True}
        asked = httpx.post(f"{api}/threads/t/runs", json=waited, headers=bearer("ana"))
        question = asked.json()["thread_view"]["interrupts"][0]
        decided = httpx.post(
            f"{api}/interrupts/{question['id']}/decision",
            json={"answer": True, "payload_hash": question["payload_hash"]},
            headers={**bearer("ben"), "Idempotency-Key": "k"},
        )
        assert decided.status_code == 503, decided.text
        pending = httpx.get(f"{api}/interrupts/{question['id']}", headers=bearer("vic"))
        assert pending.json()["interrupt"]["status"] == "pending"


# -- 12: ids that would break a line ---------------------------------------------------------


@pytest.mark.parametrize(
    "thread", ["a\r\nb", "a\nX-Injected: 1", "a\x00b", "a\x1bb", "inv\u202egpj"]
)
def test_a_new_thread_id_with_a_control_character_is_refused_over_http(
    orders: Serving, thread: str
) -> None:
    r = httpx.post(
        f"{orders.url}/v1/threads/{quote(thread, safe='')}/runs",
        json={"input": {"n": 1}, "wait": True},
        headers=bearer("ana"),
    )
    assert r.status_code == 400, r.text
    assert r.json()["error"] == "bad_parameter"
    assert r.json()["message"].startswith("thread holds ")
    assert httpx.get(f"{orders.url}/v1/interrupts", headers=bearer("vic")).json()["items"] == []


def test_a_thread_stored_before_the_rule_is_read_and_decided_over_http(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = "legacy\r\nthread"
    db = tmp_path / "o.db"

    async def start() -> None:
        app = order_app(db)
        with monkeypatch.context() as m:  # as an earlier version, which only refused NUL
            m.setattr("interlock.runtime._app.check_name", check_id)
            await app.run({"n": 1}, thread=old)
        await app.store.close()

    anyio.run(start)
    with serving(lambda: create_app(order_app(db), auth=auth())) as s:
        path = f"{s.url}/v1/threads/{quote(old, safe='')}"
        view = httpx.get(path, headers=bearer("vic"))
        assert view.status_code == 200, view.text
        [asked] = view.json()["interrupts"]
        decided = httpx.post(
            f"{s.url}/v1/interrupts/{asked['id']}/decision",
            json={"answer": True, "payload_hash": asked["payload_hash"], "wait": True},
            headers={**bearer("ana"), "Idempotency-Key": "k"},
        )
        assert decided.status_code == 201, decided.text
        assert decided.json()["thread_view"]["status"] == "done"
        assert httpx.get(f"{path}/history", headers=bearer("vic")).status_code == 200
        # New input would be a new turn on it: refused, as for a new thread.
        again = httpx.post(f"{path}/runs", json={"input": {"n": 2}}, headers=bearer("ana"))
        assert again.status_code == 400


# -- 13: a retried vote -----------------------------------------------------------------------


def test_a_retried_quorum_vote_is_answered_200_replayed(tmp_path: Path) -> None:
    with serving(lambda: create_app(quorum_app(tmp_path / "q.db"), auth=auth())) as s:
        started = httpx.post(
            f"{s.url}/v1/threads/p/runs", json={"input": {}, "wait": True}, headers=bearer("root")
        )
        asked = started.json()["thread_view"]["interrupts"][0]
        url = f"{s.url}/v1/interrupts/{asked['id']}/decision"
        body = {"answer": True, "payload_hash": asked["payload_hash"]}

        def vote(who: str, key: str) -> httpx.Response:
            return httpx.post(url, json=body, headers={**bearer(who), "Idempotency-Key": key})

        first = vote("ana", "a-1")
        assert (first.status_code, first.json()["replayed"]) == (201, False)
        assert first.json()["decision"]["final"] is False
        again = vote("ana", "a-1")
        assert (again.status_code, again.json()["replayed"]) == (200, True), again.text
        assert again.json()["decision"] == first.json()["decision"]
        assert vote("ana", "a-2").status_code == 422  # a second vote of ana's is not a replay
        last = vote("ben", "b-1")
        assert (last.status_code, last.json()["decision"]["final"]) == (201, True)
        # ana's retry after the quorum was reached is still her vote, replayed.
        late = vote("ana", "a-1")
        assert (late.status_code, late.json()["replayed"]) == (200, True), late.text
        assert late.json()["decision"] == first.json()["decision"]
        assert vote("ben", "b-1").json()["replayed"] is True


# -- 18: a token added after the start --------------------------------------------------------


def test_a_token_the_server_does_not_know_is_refused_with_a_hint_to_restart(
    tmp_path: Path,
) -> None:
    tokens = tmp_path / "tokens.json"
    ana_token, ana = TOKENS["ana"]
    entry = {"name": ana.name, "role": ana.role, "token_sha256": hash_token(ana_token)}
    tokens.write_text(f'{{"identity": [{json.dumps(entry)}]}}')

    def factory() -> Any:
        return create_app(order_app(tmp_path / "o.db"), auth=TokenAuth.from_file(tokens))

    with serving(factory) as s:
        added = {"name": "ben", "role": "approver", "token_sha256": hash_token("ben-new")}
        tokens.write_text(f'{{"identity": [{json.dumps(entry)}, {json.dumps(added)}]}}')
        r = httpx.get(f"{s.url}/v1/me", headers={"Authorization": "Bearer ben-new"})
        assert r.status_code == 401
        message = r.json()["message"]
        assert "token not recognised" in message
        assert "restart it after editing the tokens file" in message
        assert httpx.get(f"{s.url}/v1/me", headers=bearer("ana")).json()["name"] == "ana"
    # Started again, the server reads the file again.
    with serving(factory) as s:
        me = httpx.get(f"{s.url}/v1/me", headers={"Authorization": "Bearer ben-new"})
        assert me.json()["name"] == "ben"
