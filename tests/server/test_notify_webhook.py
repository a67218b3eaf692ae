"""Webhook notifications, delivered over real HTTP to receivers on loopback."""

from __future__ import annotations

import importlib
import json
import logging
import re
import time
from email.utils import formatdate
from pathlib import Path
from typing import Any

import anyio
import httpx2
import msgspec
import pytest
import standardwebhooks
from _notify_events import event
from _notify_receiver import Answer, Received, Receiver, closed_port, serve

from interlock import InterlockError
from interlock.server import _notify
from interlock.server._events import EventType, ServerEvent
from interlock.server._notify import (
    DeliveryLog,
    DeliveryRecord,
    Notifier,
    SignatureError,
    Webhook,
    sign,
    verify_signature,
)

ROOT = Path(__file__).resolve().parents[2]
SECRET = "s3cret-for-tests"
WHSEC = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def outcomes(log: DeliveryLog, event_id: str, channel: str | None = None) -> list[str]:
    return [e.outcome for e in log.entries(event_id=event_id, channel=channel)]


def verified(request: Received, secret: str | bytes = SECRET) -> None:
    """Check a request's Standard Webhooks signature as a receiver does (raises if wrong)."""
    key = secret.encode() if isinstance(secret, str) else secret  # a plain secret: its bytes
    standardwebhooks.Webhook(key).verify(request.body, request.headers)


# --- the deprecated Interlock-Signature (sent until 0.3.0) ----------------------------------

legacy = pytest.mark.filterwarnings("ignore:.*Interlock-Signature header are deprecated")


@pytest.mark.anyio
@legacy
async def test_a_delivery_is_the_signed_event_and_verifies() -> None:
    with Receiver() as receiver:
        notifier = Notifier([Webhook(receiver.url, secret=SECRET)])
        sent = event("1842")
        async with notifier:
            await notifier.publish(sent)
            await notifier.wait_idle()
        (got,) = receiver.requests

    assert msgspec.json.decode(got.body, type=ServerEvent) == sent
    assert json.loads(got.body)["type"] == "interrupt.created"
    assert got.headers["content-type"] == "application/json"
    assert got.headers["interlock-event-id"] == "1842"
    assert got.headers["interlock-event-type"] == "interrupt.created"
    assert got.headers["interlock-attempt"] == "1"
    header = got.headers["interlock-signature"]
    assert re.fullmatch(r"t=\d+,v1=[0-9a-f]{64}", header)
    verify_signature(SECRET, got.body, header)
    verify_signature(SECRET.encode(), got.body, header)

    (entry,) = notifier.log.entries()
    assert entry.outcome == "delivered" and entry.status == 200 and entry.attempt == 1
    assert entry.event_id == "1842" and entry.channel == "webhook 127.0.0.1"
    assert entry.elapsed_ms is not None and entry.elapsed_ms > 0

    tampered = got.body.replace(b"5000", b"9000")
    with pytest.raises(SignatureError, match="does not match") as caught:
        verify_signature(SECRET, tampered, header)
    assert caught.value.reason == "mismatch" and isinstance(caught.value, InterlockError)
    with pytest.raises(SignatureError) as caught:
        verify_signature("another secret", got.body, header)
    assert caught.value.reason == "mismatch"

    t = int(header.split(",")[0].removeprefix("t="))
    verify_signature(SECRET, got.body, header, now=t + 299)
    with pytest.raises(SignatureError, match="replayed") as caught:
        verify_signature(SECRET, got.body, header, now=t + 301)
    assert caught.value.reason == "expired"
    with pytest.raises(SignatureError) as caught:
        verify_signature(SECRET, got.body, header, now=t + 61, tolerance=60)
    assert caught.value.reason == "expired"


@legacy
def test_signature_headers_that_cannot_be_checked_are_malformed() -> None:
    body = b'{"id":"1"}'
    for header in (None, "", "v1=abc", "t=12", "t=soon,v1=abc", "garbage"):
        with pytest.raises(SignatureError) as caught:
            verify_signature(SECRET, body, header, now=12)
        assert caught.value.reason == "malformed", header
    # A receiver accepts any matching v1 (secret rotation) and ignores keys it does not know.
    good = sign(SECRET, body, timestamp=1000).split(",")[1]
    verify_signature(SECRET, body, f"t=1000,v0=x,v1={'0' * 64},{good}", now=1000)
    with pytest.raises(TypeError, match="raw request bytes"):
        verify_signature(SECRET, body.decode(), sign(SECRET, body))  # type: ignore[arg-type]


# --- retries ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_server_errors_are_retried_with_backoff_until_delivered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="interlock.notify")
    with Receiver(Answer(status=500, body=b"database down"), Answer(status=503)) as receiver:
        notifier = Notifier([Webhook(receiver.url, secret=SECRET, backoff=0.1)])
        async with notifier:
            await notifier.publish(event("7"))
            await notifier.wait_idle()
        first, second, third = receiver.requests

    entries = notifier.log.entries(event_id="7")
    assert [(e.attempt, e.outcome, e.status) for e in entries] == [
        (1, "retrying", 500),
        (2, "retrying", 503),
        (3, "delivered", 200),
    ]
    assert entries[0].error is not None and "database down" in entries[0].error
    # Backoff doubles from 0.1 s, jittered down by at most half.
    assert second.at - first.at >= 0.05
    assert third.at - second.at >= 0.1
    # Every attempt is the same event, freshly signed.
    assert first.body == second.body == third.body
    assert {r.headers["interlock-event-id"] for r in (first, second, third)} == {"7"}
    assert [r.headers["interlock-attempt"] for r in (first, second, third)] == ["1", "2", "3"]
    assert {r.headers["webhook-id"] for r in (first, second, third)} == {"7"}
    for request in (first, second, third):
        verified(request)

    levels = [(r.levelname, "retrying" in r.getMessage()) for r in caplog.records]
    assert levels == [("WARNING", True), ("WARNING", True), ("INFO", False)]
    assert isinstance(caplog.records[-1].delivery, DeliveryRecord)  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_a_timeout_is_retried_and_carries_the_same_event_id() -> None:
    with Receiver(Answer(hang=True)) as receiver:
        notifier = Notifier([Webhook(receiver.url, secret=SECRET, timeout=0.3, backoff=0.01)])
        async with notifier:
            await notifier.publish(event("9"))
            await notifier.wait_idle()
        requests = receiver.requests

    # The first attempt hangs; a loaded machine may also let a later one run past 0.3 s, even
    # before the receiver has read it, so the count of retries is not fixed: every attempt but
    # the last timed out (each the receiver saw, and maybe more), the last landed.
    timed_out, *_, retried = requests
    assert timed_out.body == retried.body
    assert {r.headers["interlock-event-id"] for r in requests} == {"9"}
    *failed, delivered = notifier.log.entries(event_id="9")
    assert len(failed) >= len(requests) - 1 >= 1
    for entry in failed:
        assert entry.outcome == "retrying" and entry.status is None
        assert entry.error is not None and "no answer within 0.3 s" in entry.error
    assert delivered.outcome == "delivered"


@pytest.mark.anyio
async def test_a_receiver_that_is_down_is_given_up_after_max_attempts() -> None:
    webhook = Webhook(
        f"http://127.0.0.1:{closed_port()}/hook", secret=SECRET, max_attempts=3, backoff=0.01
    )
    notifier = Notifier([webhook])
    async with notifier:
        await notifier.publish(event("3"))
        await notifier.wait_idle()
    entries = notifier.log.entries(event_id="3")
    assert [(e.attempt, e.outcome) for e in entries] == [
        (1, "retrying"),
        (2, "retrying"),
        (3, "failed"),
    ]
    assert entries[-1].error is not None and entries[-1].error.startswith("gave up after 3")
    assert "ConnectError" in entries[-1].error


@pytest.mark.anyio
@pytest.mark.parametrize("status", [400, 401, 404, 410, 422])
async def test_client_errors_fail_at_once(status: int) -> None:
    with Receiver(Answer(status=status, body=b"no such hook")) as receiver:
        notifier = Notifier([Webhook(receiver.url, secret=SECRET, backoff=0.01)])
        async with notifier:
            await notifier.publish(event("4"))
            await notifier.wait_idle()
        assert len(receiver.requests) == 1
    (entry,) = notifier.log.entries()
    assert entry.outcome == "failed" and entry.status == status and entry.attempt == 1
    assert entry.error == f"HTTP {status}: no such hook"


@pytest.mark.anyio
async def test_a_redirect_is_not_followed() -> None:
    with Receiver(Answer(status=301, headers={"location": "/elsewhere"})) as receiver:
        notifier = Notifier([Webhook(receiver.url, secret=SECRET)])
        async with notifier:
            await notifier.publish(event("5"))
            await notifier.wait_idle()
        assert len(receiver.requests) == 1
    (entry,) = notifier.log.entries()
    assert entry.outcome == "failed" and entry.status == 301
    assert entry.error is not None and "final URL" in entry.error


@pytest.mark.anyio
@pytest.mark.parametrize("form", ["seconds", "date"])
async def test_retry_after_is_honoured(form: str) -> None:
    # An HTTP date has whole seconds: three seconds from now is two to three seconds away,
    # which leaves the first attempt a second to be made on a busy machine.
    when = "1" if form == "seconds" else formatdate(time.time() + 3, usegmt=True)
    busy = Answer(status=429, headers={"retry-after": when})
    with Receiver(busy, Answer(status=408)) as receiver:
        notifier = Notifier([Webhook(receiver.url, secret=SECRET, backoff=0.01)])
        async with notifier:
            await notifier.publish(event("6"))
            await notifier.wait_idle()
        limited, timed_out, delivered = receiver.requests

    assert timed_out.at - limited.at >= 0.95  # the receiver's second, not the 0.01 s backoff
    assert delivered.at - timed_out.at < 0.5
    first, second, third = notifier.log.entries(event_id="6")
    assert (first.status, first.outcome) == (429, "retrying")
    assert first.error is not None and "as the receiver asked" in first.error
    assert (second.status, second.outcome, third.outcome) == (408, "retrying", "delivered")


# --- independence, queues and closing -----------------------------------------------------


@pytest.mark.anyio
async def test_a_dead_receiver_does_not_delay_a_live_one() -> None:
    with Receiver(then=Answer(hang=True)) as dead, Receiver() as live:
        notifier = Notifier(
            [
                Webhook(dead.url, secret=SECRET, name="dead"),
                Webhook(live.url, secret=SECRET, name="live"),
            ],
            drain_timeout=0.2,
        )
        async with notifier:
            with anyio.fail_after(2):
                for n in range(3):
                    await notifier.publish(event(str(n)))
                await live.wait_requests(3)
                await dead.wait_requests(3)  # all three hang there, in flight
            assert outcomes(notifier.log, "0", "dead") == []
        # Closing gave the dead receiver drain_timeout more, then dropped its deliveries.
        for n in range(3):
            assert outcomes(notifier.log, str(n), "live") == ["delivered"]
            assert outcomes(notifier.log, str(n), "dead") == ["dropped"]
        (dropped,) = notifier.log.entries(event_id="0", channel="dead")
        assert dropped.attempt == 1 and dropped.error == "the notifier closed during delivery"


@pytest.mark.anyio
async def test_a_full_queue_drops_its_oldest_delivery() -> None:
    with Receiver(then=Answer(hang=True)) as dead:
        notifier = Notifier(
            [Webhook(dead.url, secret=SECRET)], queue_size=2, concurrency=1, drain_timeout=0
        )
        async with notifier:
            await notifier.publish(event("1"))
            await dead.wait_requests(1)  # the one delivery task is busy with event 1
            for n in range(2, 6):
                await notifier.publish(event(str(n)))
            # 2 and 3 filled the queue; 4 and 5 pushed them out.
            assert [e.event_id for e in notifier.log.entries()] == ["2", "3"]
            assert {e.outcome for e in notifier.log.entries()} == {"dropped"}
            assert "queue was full (2 waiting)" in (notifier.log.entries()[0].error or "")
            assert "2 queued, 1 in flight" in repr(notifier)
        # Every delivery ended on the record exactly once.
        final = {e.event_id: e for e in notifier.log.entries()}
        assert sorted(final) == ["1", "2", "3", "4", "5"] and len(notifier.log) == 5
        assert final["1"].error == "the notifier closed during delivery"
        assert final["4"].error == final["5"].error == "the notifier closed before it was sent"
        assert final["4"].attempt == 0 and final["4"].elapsed_ms is None


@pytest.mark.anyio
async def test_closing_finishes_pending_deliveries() -> None:
    with Receiver() as receiver:
        notifier = Notifier([Webhook(receiver.url, secret=SECRET)], concurrency=2)
        async with notifier:
            for n in range(5):
                await notifier.publish(event(str(n)))
            await notifier.aclose()
            assert len(receiver.requests) == 5
            assert [e.outcome for e in notifier.log.entries()] == ["delivered"] * 5
            # The server may still publish while it shuts down: recorded, not raised.
            await notifier.publish(event("late"))
        assert outcomes(notifier.log, "late") == ["dropped"]
        assert len(receiver.requests) == 5
        assert repr(notifier).startswith("<Notifier closed")


@pytest.mark.anyio
async def test_closing_waits_for_a_pending_retry() -> None:
    with Receiver(Answer(status=503)) as receiver:
        notifier = Notifier([Webhook(receiver.url, secret=SECRET, backoff=0.1)])
        async with notifier:
            await notifier.publish(event("1"))
            await receiver.wait_requests(1)  # failed once: the retry is still to come
        assert len(receiver.requests) == 2
    assert outcomes(notifier.log, "1") == ["retrying", "delivered"]


@pytest.mark.anyio
async def test_cancelling_the_notifier_records_its_deliveries_as_dropped() -> None:
    with Receiver(then=Answer(hang=True)) as dead:
        notifier = Notifier([Webhook(dead.url, secret=SECRET)])
        with anyio.CancelScope() as scope:
            async with notifier:
                await notifier.publish(event("1"))
                await dead.wait_requests(1)
                scope.cancel()
                await anyio.sleep_forever()
        assert scope.cancelled_caught
    (entry,) = notifier.log.entries()
    assert entry.outcome == "dropped" and entry.error == "the notifier closed during delivery"


@pytest.mark.anyio
async def test_a_notifier_runs_once_and_only_takes_server_events() -> None:
    notifier = Notifier([])
    with pytest.raises(RuntimeError, match="async with notifier"):
        await notifier.publish(event())
    async with notifier:
        with pytest.raises(TypeError, match="ServerEvent"):
            await notifier.publish({"id": "1"})  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="create a new one"):
        await notifier.__aenter__()


# --- bodies and filters ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_slack_format_is_a_message_for_people() -> None:
    with Receiver() as receiver:
        notifier = Notifier(
            [Webhook(receiver.url, secret=SECRET, format="slack", events=["interrupt.decided"])]
        )
        async with notifier:
            await notifier.publish(
                event("8", "interrupt.decided", actor="ada", summary="Pay <Acme & Co>?")
            )
            await notifier.publish(event("9", "interrupt.decided", tool=None, url=None))
            await notifier.wait_idle()
        # Deliveries run concurrently: they may arrive in either order.
        got = {r.headers["interlock-event-id"]: r for r in receiver.requests}
        verified(got["8"])
        with_link, bare = json.loads(got["8"].body), json.loads(got["9"].body)

    assert set(with_link) == {"text", "blocks"}
    assert with_link["text"] == (
        "Decided by ada: Pay &lt;Acme &amp; Co&gt;? (thread order-42) "
        "<https://inbox.example.com/i/7f3a|Open>"
    )
    headline, facts, actions, context = with_link["blocks"]
    assert headline == {
        "type": "section",
        "text": {"type": "mrkdwn", "text": "*Decided by ada: Pay &lt;Acme &amp; Co&gt;?*"},
    }
    assert [f["text"] for f in facts["fields"]] == [
        "*Thread*\n`order-42`",
        "*Tool*\n`refund`",
        "*App*\npayments",
    ]
    (button,) = actions["elements"]
    assert button["type"] == "button" and button["url"] == "https://inbox.example.com/i/7f3a"
    assert "interrupt.decided" in context["elements"][0]["text"]
    assert "event 8" in context["elements"][0]["text"]

    assert [b["type"] for b in bare["blocks"]] == ["section", "section", "context"]
    assert [f["text"] for f in bare["blocks"][1]["fields"]] == [
        "*Thread*\n`order-42`",
        "*App*\npayments",
    ]


@pytest.mark.anyio
async def test_each_channel_gets_only_the_event_types_it_asked_for() -> None:
    with Receiver() as first, Receiver() as second:
        notifier = Notifier(
            [
                Webhook(first.url, secret=SECRET, events=["interrupt.created"], name="first"),
                Webhook(
                    second.url,
                    secret=SECRET,
                    events=[*_notify.INTERRUPT_EVENTS, "run.finished"],
                    name="second",
                ),
            ]
        )
        async with notifier:
            published: list[EventType] = [
                "interrupt.created",
                "interrupt.decided",
                "run.finished",
                "run.failed",
            ]
            for n, type in enumerate(published):
                await notifier.publish(event(str(n), type))
            await notifier.wait_idle()
        got_first = [r.headers["interlock-event-type"] for r in first.requests]
        got_second = sorted(r.headers["interlock-event-type"] for r in second.requests)
    assert got_first == ["interrupt.created"]
    assert got_second == ["interrupt.created", "interrupt.decided", "run.finished"]
    assert {e.channel for e in notifier.log.entries(event_id="3")} == set()


@pytest.mark.anyio
async def test_extra_headers_are_sent() -> None:
    with Receiver() as receiver:
        webhook = Webhook(receiver.url, secret=SECRET, headers={"Authorization": "Bearer t0k"})
        async with Notifier([webhook]) as notifier:
            await notifier.publish(event())
            await notifier.wait_idle()
        assert receiver.requests[0].headers["authorization"] == "Bearer t0k"


def test_webhook_and_notifier_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="http:// or https://"):
        Webhook("ftp://example.com/hook", secret=SECRET)
    with pytest.raises(ValueError, match="non-empty secret"):
        Webhook("https://example.com/hook", secret="")
    with pytest.raises(ValueError, match=r"unknown event types \['interrupt.made'\]"):
        Webhook("https://example.com/hook", secret=SECRET, events=["interrupt.made"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="not the string"):
        Webhook("https://example.com/hook", secret=SECRET, events="run.failed")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'json', 'slack' or 'teams'"):
        Webhook("https://example.com/hook", secret=SECRET, format="xml")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="set by the webhook itself"):
        Webhook("https://example.com/hook", secret=SECRET, headers={"Interlock-Event-Id": "x"})
    with pytest.raises(ValueError, match="max_attempts must be 1 or more"):
        Webhook("https://example.com/hook", secret=SECRET, max_attempts=0)
    with pytest.raises(ValueError, match="timeout must be a positive"):
        Webhook("https://example.com/hook", secret=SECRET, timeout=0)
    twins = [
        Webhook("https://example.com/a", secret=SECRET),
        Webhook("https://example.com/b", secret=SECRET),
    ]
    with pytest.raises(ValueError, match="pass name= to tell them apart"):
        Notifier(twins)
    with pytest.raises(TypeError, match="not a notification channel"):
        Notifier(["https://example.com/hook"])  # type: ignore[list-item]
    hook = Webhook("https://hooks.example.com/services/T0/B0/SECRETPATH", secret=SECRET)
    assert "SECRETPATH" not in repr(hook) and "SECRETPATH" not in hook.name


# --- the guide -------------------------------------------------------------------------------


def guide_blocks() -> list[str]:
    text = (ROOT / "docs" / "notifications.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, re.S)


@pytest.fixture
def server_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """The names the guide imports from `interlock.server`, until its __init__ exports them."""
    server = importlib.import_module("interlock.server")
    for name in _notify.__all__:
        if not hasattr(server, name):
            monkeypatch.setattr(server, name, getattr(_notify, name), raising=False)


@pytest.mark.usefixtures("server_names")
def test_the_guides_setup_builds_a_notifier() -> None:
    setup = guide_blocks()[0]
    scope: dict[str, Any] = {}
    exec(compile(setup, "notifications.md", "exec"), scope)
    notifier = scope["notifier"]
    assert isinstance(notifier, Notifier)
    assert [c.name for c in notifier.channels] == [
        "webhook ops.example.com",
        "slack #approvals",
        "teams approvals",
        "email smtp.example.com:587",
    ]


@pytest.mark.anyio
@pytest.mark.usefixtures("server_names")
@pytest.mark.parametrize("secret", [WHSEC, SECRET], ids=["whsec", "plain"])
async def test_the_guides_receiver_checks_signatures_and_deduplicates(
    secret: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("INTERLOCK_WEBHOOK_SECRET", secret)
    (receiver,) = [block for block in guide_blocks() if "Starlette(" in block]
    scope: dict[str, Any] = {}
    exec(compile(receiver, "notifications.md", "exec"), scope)
    with serve(scope["app"]) as port:
        url = f"http://127.0.0.1:{port}/hooks/interlock"
        notifier = Notifier([Webhook(url, secret=secret)])
        async with notifier:
            await notifier.publish(event("1842"))
            await notifier.publish(event("1842"))  # a duplicate, as a retry would be
            await notifier.wait_idle()
        other = Notifier([Webhook(url, secret="whsec_" + "A" * 32, max_attempts=1)])
        async with other:
            await other.publish(event("1843"))  # signed with another secret
            await other.wait_idle()
        async with httpx2.AsyncClient() as client:
            body = Webhook(url, secret=secret).body(event("1843"))
            unsigned = await client.post(url, content=body)
    assert [(e.outcome, e.status) for e in notifier.log.entries()] == [("delivered", 204)] * 2
    assert scope["handled"] == {"1842"}
    assert capsys.readouterr().out == "interrupt.created on order-42: Refund ¥5000 to ada?\n"
    (forged,) = other.log.entries()
    assert (forged.outcome, forged.status) == ("failed", 400)
    assert forged.error is not None and "No matching signature" in forged.error
    assert unsigned.status_code == 400 and "Missing required headers" in unsigned.text
