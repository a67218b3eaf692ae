"""The server hands its events to a notifier: a webhook hears of a question and its decision."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import httpx2 as httpx
import standardwebhooks
from _notify_receiver import Receiver
from _serving import auth, bearer, order_app, serving

from interlock.server import Notifier, Webhook, create_app


def test_a_webhook_hears_of_the_question_and_of_who_decided(tmp_path: Path) -> None:
    db = tmp_path / "orders.db"
    with Receiver() as receiver:

        def factory() -> object:
            hook = Webhook(receiver.url, secret="s3cret", backoff=0.05)
            return create_app(
                order_app(db),
                auth=auth(),
                notifier=Notifier([hook]),
                public_url="https://approvals.example.com",
            )

        with serving(factory) as s, httpx.Client(base_url=s.url, timeout=10) as client:
            r = client.post("/v1/threads/t1/runs", json={"input": {"n": 1}}, headers=bearer("ana"))
            assert r.status_code == 202
            first = anyio.run(receiver.wait_requests, 1)[0]
            standardwebhooks.Webhook(b"s3cret").verify(first.body, first.headers)
            created = json.loads(first.body)
            assert created["type"] == "interrupt.created"
            assert created["summary"] == "Ship order 2?"
            assert created["url"] == (
                f"https://approvals.example.com/inbox#/interrupts/{created['interrupt_id']}"
            )
            detail = client.get(f"/v1/interrupts/{created['interrupt_id']}", headers=bearer("ana"))
            body = {"answer": True, "payload_hash": detail.json()["interrupt"]["payload_hash"]}
            headers = {**bearer("ben"), "Idempotency-Key": "k"}
            decided = client.post(
                f"/v1/interrupts/{created['interrupt_id']}/decision", json=body, headers=headers
            )
            assert decided.status_code == 201
            second = anyio.run(receiver.wait_requests, 2)[1]
            event = json.loads(second.body)
            assert (event["type"], event["actor"]) == ("interrupt.decided", "ben")
            assert second.headers["interlock-event-id"] == event["id"]
            time.sleep(0.2)  # run.finished is not among the webhook's events
            assert len(receiver.requests) == 2
            log = client.get("/v1/deliveries", headers=bearer("root")).json()["items"]
            assert [(d["event_id"], d["outcome"], d["status"]) for d in log] == [
                (created["id"], "delivered", 200),
                (event["id"], "delivered", 200),
            ]
            assert client.get("/v1/deliveries", headers=bearer("ana")).status_code == 403
