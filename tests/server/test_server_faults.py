"""When the store fails under the server: a closed store, a damaged record."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import httpx2 as httpx
import pytest
from _serving import auth, bearer, order_app

from interlock.server import create_app

pytestmark = pytest.mark.anyio


async def test_a_closed_store_is_503_with_what_to_do_and_not_ready(tmp_path: Path) -> None:
    app = order_app(tmp_path / "o.db")
    api = create_app(app, auth=auth())
    transport = httpx.ASGITransport(app=api)
    async with (
        api.router.lifespan_context(api),
        httpx.AsyncClient(transport=transport, base_url="http://test") as client,
    ):
        assert (await client.get("/readyz")).status_code == 200
        await app.store.close()
        r = await client.get("/v1/interrupts", headers=bearer("vic"))
        assert r.status_code == 503
        assert r.json()["error"] == "store_closed"
        assert "restart the server" in r.json()["message"]
        assert r.headers["retry-after"] == "5"
        assert (await client.get("/readyz")).status_code == 503
        assert (await client.get("/healthz")).status_code == 200


async def test_a_damaged_question_is_named_and_nothing_else_breaks(tmp_path: Path) -> None:
    db = tmp_path / "o.db"
    app = order_app(db)
    api = create_app(app, auth=auth())
    transport = httpx.ASGITransport(app=api)
    async with (
        api.router.lifespan_context(api),
        httpx.AsyncClient(transport=transport, base_url="http://test") as client,
    ):
        r = await client.post(
            "/v1/threads/t1/runs", json={"input": {"n": 1}, "wait": True}, headers=bearer("ana")
        )
        question = r.json()["thread_view"]["interrupts"][0]
        with closing(sqlite3.connect(db)) as conn, conn:
            conn.execute("UPDATE interrupts SET body = x'c1c1c1' WHERE id = ?", (question["id"],))
        listed = await client.get("/v1/interrupts", headers=bearer("vic"))
        assert listed.status_code == 500
        assert listed.json()["error"] == "damaged_record"
        assert question["id"] in listed.json()["message"]
        assert "backup" in listed.json()["message"]
        one = await client.get(f"/v1/interrupts/{question['id']}", headers=bearer("vic"))
        assert (one.status_code, one.json()["error"]) == (500, "damaged_record")
        body = {"answer": True, "payload_hash": question["payload_hash"]}
        refused = await client.post(
            f"/v1/interrupts/{question['id']}/decision",
            json=body,
            headers={**bearer("ana"), "Idempotency-Key": "k"},
        )
        assert refused.status_code == 500
        assert (await client.get("/v1/threads/t1", headers=bearer("vic"))).status_code == 200
    await app.store.close()
