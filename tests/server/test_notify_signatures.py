"""Webhook signatures per Standard Webhooks, checked by the `standardwebhooks` package over HTTP."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import anyio
import pytest
import standardwebhooks
from _notify_events import event
from _notify_receiver import Answer, Received, Receiver, serve
from standardwebhooks import WebhookVerificationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from interlock.server import Notifier, SignatureError, Webhook, sign, verify_signature

KEY = b"thirty-two bytes of key material"
WHSEC = "whsec_" + base64.b64encode(KEY).decode()
PLAIN = "a plain secret from before"


class VerifyingReceiver:
    """A receiver on loopback that checks every request with `standardwebhooks`, as a user's does.

    It answers 204 to a request that verifies and 400 (with the package's reason) to one that
    does not, and keeps what it got.
    """

    def __init__(self, secret: str | bytes, *answers: Answer) -> None:
        self.verifier = standardwebhooks.Webhook(secret)
        self.requests: list[Received] = []
        self.refusals: list[str] = []
        self._answers = list(answers)

    async def _hook(self, request: Request) -> Response:
        body = await request.body()
        self.requests.append(Received(body=body, headers=dict(request.headers), at=0.0))
        try:
            self.verifier.verify(body, dict(request.headers))
        except (WebhookVerificationError, ValueError) as exc:
            self.refusals.append(str(exc))
            return Response(str(exc), status_code=400)
        if self._answers:
            answer = self._answers.pop(0)
            return Response(answer.body, status_code=answer.status)
        return Response(status_code=204)

    @contextmanager
    def serving(self) -> Iterator[str]:
        """Serve on a loopback port until the block ends; yields the URL."""
        with serve(Starlette(routes=[Route("/hook", self._hook, methods=["POST"])])) as port:
            yield f"http://127.0.0.1:{port}/hook"


async def deliver(webhook: Webhook, *events: str) -> Notifier:
    notifier = Notifier([webhook])
    async with notifier:
        for id in events:
            await notifier.publish(event(id))
        await notifier.wait_idle()
    return notifier


def hand_made_signature(key: bytes, id: str, timestamp: str, body: bytes) -> str:
    """The specification's signature, computed with the standard library alone."""
    digest = hmac.new(key, f"{id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("secret", "receivers_secret"),
    [(WHSEC, WHSEC), (PLAIN, PLAIN.encode()), (KEY, KEY)],
    ids=["whsec", "plain", "bytes"],
)
async def test_a_receiver_verifies_each_delivery_with_the_standardwebhooks_package(
    secret: str | bytes, receivers_secret: str | bytes
) -> None:
    receiver = VerifyingReceiver(receivers_secret)
    with receiver.serving() as url:
        before = int(time.time())
        notifier = await deliver(Webhook(url, secret=secret), "1842")
        after = int(time.time())

    (got,) = receiver.requests
    assert receiver.refusals == []
    (entry,) = notifier.log.entries()
    assert (entry.outcome, entry.status) == ("delivered", 204)
    headers = got.headers
    assert headers["webhook-id"] == headers["interlock-event-id"] == "1842"
    assert before <= int(headers["webhook-timestamp"]) <= after
    assert re.fullmatch(r"v1,[A-Za-z0-9+/]{43}=", headers["webhook-signature"])
    # The key is the whsec_ secret decoded, or a plain secret's own bytes.
    key = KEY if secret in (WHSEC, KEY) else PLAIN.encode()
    assert headers["webhook-signature"] == hand_made_signature(
        key, "1842", headers["webhook-timestamp"], got.body
    )


@pytest.mark.anyio
async def test_a_plain_secret_given_to_the_package_as_a_string_does_not_verify() -> None:
    # The package reads a string as base64: a plain secret must be given as its bytes.
    receiver = VerifyingReceiver(PLAIN)
    with receiver.serving() as url:
        notifier = await deliver(Webhook(url, secret=PLAIN, max_attempts=1), "1")
    assert receiver.refusals == ["No matching signature found"]
    assert [e.outcome for e in notifier.log.entries()] == ["failed"]


@pytest.mark.anyio
async def test_the_deprecated_header_still_verifies_on_the_same_request() -> None:
    receiver = VerifyingReceiver(WHSEC)
    with receiver.serving() as url:
        await deliver(Webhook(url, secret=WHSEC), "5")
    (got,) = receiver.requests
    assert receiver.refusals == []
    header = got.headers["interlock-signature"]
    assert header.startswith(f"t={got.headers['webhook-timestamp']},v1=")
    # Keyed with the secret as given, as receivers of the old header were configured.
    with pytest.warns(DeprecationWarning, match=r"deprecated and go in 0\.3\.0"):
        verify_signature(WHSEC, got.body, header)
    with (
        pytest.warns(DeprecationWarning, match="Interlock-Signature"),
        pytest.raises(SignatureError, match="does not match"),
    ):
        verify_signature(KEY, got.body, header)
    with pytest.warns(DeprecationWarning, match="standardwebhooks"):
        sign(WHSEC, got.body)


@pytest.mark.anyio
async def test_a_retry_carries_the_same_id_and_body_and_a_fresh_signature() -> None:
    receiver = VerifyingReceiver(WHSEC, Answer(status=503), Answer(status=500))
    with receiver.serving() as url:
        notifier = await deliver(Webhook(url, secret=WHSEC, backoff=1.0), "7")
    first, second, third = receiver.requests
    assert receiver.refusals == []
    assert [e.outcome for e in notifier.log.entries()] == ["retrying", "retrying", "delivered"]
    assert {r.headers["webhook-id"] for r in receiver.requests} == {"7"}
    assert first.body == second.body == third.body
    # Signed at each attempt: the waits (0.5 to 1 s, then 1 to 2 s) put the last attempt in a
    # later second than the first.
    stamps = [int(r.headers["webhook-timestamp"]) for r in receiver.requests]
    assert stamps == sorted(stamps) and stamps[2] > stamps[0]
    assert third.headers["webhook-signature"] != first.headers["webhook-signature"]


@pytest.mark.anyio
async def test_a_changed_request_or_another_secret_fails_verification() -> None:
    receiver = VerifyingReceiver(WHSEC)
    with receiver.serving() as url:
        await deliver(Webhook(url, secret=WHSEC), "9")
    (got,) = receiver.requests
    verifier = standardwebhooks.Webhook(WHSEC)
    verifier.verify(got.body, got.headers)

    def refused(body: bytes, headers: dict[str, str]) -> str:
        with pytest.raises((WebhookVerificationError, ValueError)) as caught:
            verifier.verify(body, headers)
        return str(caught.value)

    tampered = got.body.replace(b"5000", b"9000")
    assert tampered != got.body
    assert refused(tampered, got.headers) == "No matching signature found"
    # The id is signed: the same request under another id (to pass deduplication) fails.
    assert refused(got.body, {**got.headers, "webhook-id": "10"}) == "No matching signature found"
    other = standardwebhooks.Webhook("whsec_" + base64.b64encode(b"x" * 32).decode())
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        other.verify(got.body, got.headers)
    assert refused(got.body, {"webhook-id": "9"}) == "Missing required headers"


def test_a_signature_older_than_five_minutes_fails_verification() -> None:
    # A request signed as the webhook signs, ten minutes ago: a replay.
    body = Webhook("https://example.com/hook", secret=WHSEC).body(event("11"))
    verifier = standardwebhooks.Webhook(WHSEC)
    for minutes, reason in ((-10, "too old"), (10, "too new")):
        at = datetime.fromtimestamp(time.time() + minutes * 60, UTC)
        headers = {
            "webhook-id": "11",
            "webhook-timestamp": str(int(at.timestamp())),
            "webhook-signature": verifier.sign("11", at, body.decode()),
        }
        with pytest.raises(WebhookVerificationError, match=reason):
            verifier.verify(body, headers)
    fresh = datetime.now(UTC)
    verifier.verify(
        body,
        {
            "webhook-id": "11",
            "webhook-timestamp": str(int(fresh.timestamp())),
            "webhook-signature": verifier.sign("11", fresh, body.decode()),
        },
    )


def test_secrets_are_checked_when_the_webhook_is_made() -> None:
    url = "https://example.com/hook"
    for bad in ("whsec_not base64!", "whsec_", "whsec_===="):
        with pytest.raises(ValueError, match=r"whsec_|non-empty secret"):
            Webhook(url, secret=bad)
    with pytest.raises(ValueError, match="non-empty secret"):
        Webhook(url, secret=b"")
    with pytest.raises(TypeError, match="string or bytes"):
        Webhook(url, secret=42)  # type: ignore[arg-type]
    # Unpadded base64, as some providers print it, is accepted.
    Webhook(url, secret=WHSEC.rstrip("="))
    with pytest.raises(ValueError, match="set by the webhook itself"):
        Webhook(url, secret=WHSEC, headers={"Webhook-Signature": "v1,forged"})


@pytest.mark.anyio
async def test_an_unpadded_whsec_secret_signs_with_the_same_key() -> None:
    with Receiver() as receiver:
        notifier = Notifier([Webhook(receiver.url, secret=WHSEC.rstrip("="))])
        async with notifier:
            await notifier.publish(event("12"))
            await notifier.wait_idle()
        with anyio.fail_after(10):
            (got,) = await receiver.wait_requests(1)
    standardwebhooks.Webhook(WHSEC).verify(got.body, got.headers)
