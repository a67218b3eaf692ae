"""Microsoft Teams notifications: an Adaptive Card POSTed to a local fake of a Teams webhook."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import jsonschema
import pytest
import standardwebhooks
from _notify_events import event
from _notify_receiver import Receiver, serve
from _serving import serve_process
from click.testing import CliRunner
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from interlock.cli import cli
from interlock.server import Notifier, Webhook

SECRET = "whsec_dGVhbXMgbm90aWZpY2F0aW9ucyBhcmUgc2lnbmVkIHRvbw=="
TEAMS_LIMIT = 28 * 1024
"""The largest message a Teams webhook takes, in bytes."""

_TEXT_RUN = {
    "type": "object",
    "required": ["type", "text"],
    "properties": {
        "type": {"const": "TextRun"},
        "text": {"type": "string", "minLength": 1},
        "weight": {"enum": ["default", "lighter", "bolder"]},
        "size": {"enum": ["default", "small", "medium", "large", "extraLarge"]},
        "isSubtle": {"type": "boolean"},
        "fontType": {"enum": ["default", "monospace"]},
    },
    "additionalProperties": False,
}
_RICH_TEXT = {
    "type": "object",
    "required": ["type", "inlines"],
    "properties": {
        "type": {"const": "RichTextBlock"},
        "inlines": {"type": "array", "minItems": 1, "items": _TEXT_RUN},
        "spacing": {
            "enum": ["default", "none", "small", "medium", "large", "extraLarge", "padding"]
        },
    },
    "additionalProperties": False,
}
_OPEN_URL = {
    "type": "object",
    "required": ["type", "url"],
    "properties": {
        "type": {"const": "Action.OpenUrl"},
        "title": {"type": "string"},
        "url": {"type": "string", "pattern": "^https?://"},
    },
    "additionalProperties": False,
}
CARD_MESSAGE = {
    "type": "object",
    "required": ["type", "attachments"],
    "properties": {
        "type": {"const": "message"},
        "attachments": {
            "type": "array",
            "minItems": 1,
            "maxItems": 1,
            "items": {
                "type": "object",
                "required": ["contentType", "content"],
                "properties": {
                    "contentType": {"const": "application/vnd.microsoft.card.adaptive"},
                    "contentUrl": {"type": "null"},
                    "content": {
                        "type": "object",
                        "required": ["type", "version", "body"],
                        "properties": {
                            "$schema": {
                                "const": "http://adaptivecards.io/schemas/adaptive-card.json"
                            },
                            "type": {"const": "AdaptiveCard"},
                            "version": {"const": "1.4"},
                            "fallbackText": {"type": "string", "minLength": 1},
                            "body": {"type": "array", "minItems": 1, "items": _RICH_TEXT},
                            "actions": {"type": "array", "items": _OPEN_URL},
                            "msteams": {"type": "object"},
                        },
                        "additionalProperties": False,
                    },
                },
                "additionalProperties": False,
            },
        },
    },
    "additionalProperties": False,
}
"""The message envelope and the parts of an Adaptive Card 1.4 that our cards use.

Written from the Adaptive Cards 1.4 schema: an element or property outside it makes the card
invalid here, as a card a Teams client cannot render would be.
"""


class TeamsFake:
    """A Teams workflow webhook on loopback: takes a card message (202), refuses anything else.

    Teams' "When a Teams webhook request is received" trigger answers 202 Accepted, and 400
    with a reason to a body it cannot use.
    """

    def __init__(self) -> None:
        self.cards: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.sizes: list[int] = []
        self._arrived = threading.Condition()

    async def _post(self, request: Request) -> Response:
        raw = await request.body()
        try:
            message = json.loads(raw)
            jsonschema.validate(message, CARD_MESSAGE)
        except (ValueError, jsonschema.ValidationError) as exc:
            return PlainTextResponse(f"Bad payload: {str(exc)[:200]}", status_code=400)
        with self._arrived:
            self.cards.append(message["attachments"][0]["content"])
            self.headers.append(dict(request.headers))
            self.sizes.append(len(raw))
            self._arrived.notify_all()
        return Response(status_code=202)

    def wait_cards(self, count: int) -> list[dict[str, Any]]:
        """Wait until ``count`` cards have arrived (10 s at most); return them all."""
        with self._arrived:
            if not self._arrived.wait_for(lambda: len(self.cards) >= count, 10.0):
                raise AssertionError(f"{len(self.cards)} cards arrived, not {count}")
            return list(self.cards)

    @contextmanager
    def serving(self) -> Iterator[str]:
        """Serve on a loopback port until the block ends; yields the webhook's URL."""
        app = Starlette(
            routes=[Route("/workflows/abc/triggers/manual", self._post, methods=["POST"])]
        )
        with serve(app) as port:
            yield f"http://127.0.0.1:{port}/workflows/abc/triggers/manual"


async def post_to_teams(*events: Any, **options: Any) -> tuple[TeamsFake, Notifier]:
    fake = TeamsFake()
    with fake.serving() as url:
        notifier = Notifier(
            [
                Webhook(
                    url,
                    secret=SECRET,
                    format="teams",
                    events=["interrupt.created", "interrupt.decided"],
                    **options,
                )
            ]
        )
        async with notifier:
            for sent in events:
                await notifier.publish(sent)
            await notifier.wait_idle()
    return fake, notifier


def texts(element: object) -> list[str]:
    """Every text in a card's part, in order."""
    if isinstance(element, dict):
        found = [element["text"]] if isinstance(element.get("text"), str) else []
        return found + [t for key, v in element.items() if key != "text" for t in texts(v)]
    if isinstance(element, list):
        return [t for v in element for t in texts(v)]
    return []


def element_types(element: object) -> set[str]:
    if isinstance(element, dict):
        own = {element["type"]} if isinstance(element.get("type"), str) else set()
        return own.union(*(element_types(v) for v in element.values()))
    if isinstance(element, list):
        return set().union(*(element_types(v) for v in element))
    return set()


@pytest.mark.anyio
async def test_a_question_is_posted_to_teams_as_an_adaptive_card() -> None:
    fake, notifier = await post_to_teams(event("1842"))
    (card,) = fake.cards
    assert [(e.outcome, e.status) for e in notifier.log.entries()] == [("delivered", 202)]
    headline, thread, tool, app, context = card["body"]
    assert texts(headline) == ["Decision needed: Refund ¥5000 to ada?"]
    assert headline["inlines"][0]["weight"] == "bolder"
    assert texts(thread) == ["Thread: ", "order-42"]
    assert texts(tool) == ["Tool: ", "refund"]
    assert texts(app) == ["App: ", "payments"]
    assert texts(context) == ["interrupt.created · 2024-06-10 06:13:20 UTC · event 1842"]
    assert card["actions"] == [
        {"type": "Action.OpenUrl", "title": "Open", "url": "https://inbox.example.com/i/7f3a"}
    ]
    assert card["fallbackText"] == "Decision needed: Refund ¥5000 to ada?"
    # Signed like every webhook request, though Teams checks nothing.
    (headers,) = fake.headers
    assert (
        headers["webhook-id"] == "1842" and headers["interlock-event-type"] == "interrupt.created"
    )


@pytest.mark.anyio
async def test_without_a_public_url_or_a_tool_the_card_leaves_them_out() -> None:
    fake, _ = await post_to_teams(event("8", "interrupt.decided", actor="ada", tool=None, url=None))
    (card,) = fake.cards
    assert "actions" not in card
    assert [texts(part)[0] for part in card["body"]] == [
        "Decided by ada: Refund ¥5000 to ada?",
        "Thread: ",
        "App: ",
        "interrupt.decided · 2024-06-10 06:13:20 UTC · event 8",
    ]


@pytest.mark.anyio
async def test_text_from_a_run_is_shown_as_typed_and_cut_to_fit() -> None:
    summary = (
        "[Approve](https://evil.example) **now** {{DATE(2024-01-01T00:00:00Z)}}\n" + "x" * 60_000
    )
    thread = "order\n42\u2028" + "t" * 5000
    fake, notifier = await post_to_teams(
        event("9", summary=summary, thread=thread, tool="<script>" * 100)
    )
    (card,) = fake.cards
    (size,) = fake.sizes
    assert notifier.log.entries()[0].outcome == "delivered"
    assert size < TEAMS_LIMIT / 4
    # Every text is in a TextRun, which renders no Markdown: the link stays literal text.
    assert element_types(card["body"]) == {"RichTextBlock", "TextRun"}
    headline = texts(card["body"][0])[0]
    assert headline.startswith("Decision needed: [Approve](https://evil.example) **now** {{DATE(")
    assert len(headline) == 1000 and headline.endswith("x…")
    assert "\n" not in headline  # the summary's lines are joined into one
    thread_value = texts(card["body"][1])[1]
    assert thread_value.startswith("order\\x0a42\\u2028ttt") and thread_value.endswith("t…")
    assert len(thread_value) == 200
    assert texts(card["body"][2])[1] == ("<script>" * 100)[:199] + "…"
    assert card["fallbackText"] == headline


@pytest.mark.anyio
async def test_the_fake_refuses_what_teams_cannot_show() -> None:
    fake = TeamsFake()
    with fake.serving() as url:
        notifier = Notifier([Webhook(url, secret=SECRET, format="slack", max_attempts=1)])
        async with notifier:
            await notifier.publish(event("1"))
            await notifier.wait_idle()
    (entry,) = notifier.log.entries()
    assert (entry.outcome, entry.status) == ("failed", 400)
    assert entry.error is not None and "Bad payload" in entry.error
    assert fake.cards == []


def test_serve_posts_to_teams_and_signs_json_for_a_receiver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokens = tmp_path / "tokens.toml"
    made = CliRunner().invoke(cli, ["token", "new", "ana"])
    tokens.write_text(made.stdout)
    token = made.stderr.rsplit(": ", 1)[1].strip()
    monkeypatch.setenv("INTERLOCK_WEBHOOK_SECRET", SECRET)
    fake = TeamsFake()
    with fake.serving() as teams, Receiver() as receiver:
        options = [
            "--public-url", "https://approvals.example.com",
            "--webhook", f"teams:{teams}",
            "--webhook", receiver.url,
        ]  # fmt: skip
        with serve_process(tmp_path / "o.db", tokens, extra=options) as running:
            r = httpx.post(
                f"{running.url}/v1/threads/t1/runs",
                json={"input": {"n": 1}},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert r.status_code == 202, r.text
            (got,) = anyio.run(receiver.wait_requests, 1)
            (card,) = fake.wait_cards(1)
        event_json = standardwebhooks.Webhook(SECRET).verify(got.body, got.headers)
    assert event_json["type"] == "interrupt.created"
    assert texts(card["body"][0]) == [f"Decision needed: {event_json['summary']}"]
    (action,) = card["actions"]
    assert action["url"] == event_json["url"]
    assert action["url"].startswith("https://approvals.example.com/inbox#/interrupts/")


@pytest.mark.parametrize(
    ("options", "env", "message"),
    [
        (
            ["--webhook", "ftp://example.com/hook"],
            {"INTERLOCK_WEBHOOK_SECRET": "s"},
            "is not [FORMAT:]URL",
        ),
        (
            ["--webhook", "matrix:https://example.com/hook"],
            {"INTERLOCK_WEBHOOK_SECRET": "s"},
            "teams:",
        ),
        (["--webhook", "https://example.com/hook"], {}, "set INTERLOCK_WEBHOOK_SECRET"),
        (
            ["--webhook", "teams:https://example.com/hook"],
            {"INTERLOCK_WEBHOOK_SECRET": "whsec_!"},
            "$INTERLOCK_WEBHOOK_SECRET: a webhook secret starting with 'whsec_'",
        ),
        (["--webhook", "teams:ftp://example.com/hook"], {}, "http:// or https://"),
    ],
)
def test_serve_refuses_a_webhook_it_cannot_send_to(
    options: list[str], env: dict[str, str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("INTERLOCK_WEBHOOK_SECRET", raising=False)
    result = CliRunner().invoke(cli, ["serve", "--app", "nowhere:app", *options], env=env)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
