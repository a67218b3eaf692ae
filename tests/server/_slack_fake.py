"""A fake of Slack's Web API on a free loopback port, and interactions signed as Slack signs them.

It speaks Slack's wire format: methods at ``/api/<method>``, form or JSON bodies, the bot token
in ``Authorization: Bearer``, answers ``{"ok": true, ...}`` (or ``{"ok": false, "error": ...}``),
messages named by ``ts``. It records each call, answers ``users.info`` from its ``users``,
and can be told to fail the next calls (a 503 with ``Retry-After``, say) to play Slack down.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

from _notify_receiver import serve
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

TOKEN = "xoxb-test-token"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


@dataclass
class Call:
    """One call of a Web API method, as received."""

    method: str
    args: dict[str, Any]
    answer: dict[str, Any] = field(default_factory=dict)
    """What the fake answered."""
    at: float = field(default_factory=time.monotonic)


class FakeSlack:
    """Slack's Web API on loopback; use it as a context manager (``base_url`` then works)."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.users: dict[str, dict[str, Any]] = {}
        """``users.info`` answers: user id → the ``user`` object."""
        self.failures: deque[tuple[int, dict[str, str]]] = deque()
        """The next calls' failures: (HTTP status, headers)."""
        self._ts = itertools.count(1)
        self._lock = threading.Condition()
        routes = [Route("/api/{method}", self._api, methods=["GET", "POST"])]
        self._serving = serve(Starlette(routes=routes))
        self.base_url = ""

    def __enter__(self) -> FakeSlack:
        self.base_url = f"http://127.0.0.1:{self._serving.__enter__()}/api/"
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._serving.__exit__(None, None, None)

    def fail_next(self, count: int, status: int = 503, retry_after: str | None = "0") -> None:
        """Answer the next ``count`` calls with ``status`` (Slack having a bad moment)."""
        headers = {} if retry_after is None else {"Retry-After": retry_after}
        for _ in range(count):
            self.failures.append((status, headers))

    def of(self, method: str) -> list[Call]:
        """The calls of ``method`` so far."""
        with self._lock:
            return [c for c in self.calls if c.method == method]

    def wait_for(self, method: str, count: int = 1, timeout: float = 10.0) -> list[Call]:
        """Wait until ``method`` was called ``count`` times; the calls."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                found = [c for c in self.calls if c.method == method]
                if len(found) >= count:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = [c.method for c in self.calls]
                    raise AssertionError(f"{method} not called {count} times; calls: {seen}")
                self._lock.wait(left)

    async def _api(self, request: Request) -> Response:
        method = request.path_params["method"]
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return JSONResponse({"ok": False, "error": "invalid_auth"})
        raw = await request.body()
        kind = request.headers.get("content-type", "")
        if kind.startswith("application/json"):
            args: dict[str, Any] = json.loads(raw or b"{}")
        else:
            args = dict(parse_qsl(raw.decode()))
        args.update(request.query_params)
        if self.failures:
            status, headers = self.failures.popleft()
            with self._lock:
                self.calls.append(Call(f"failed:{method}", args))
                self._lock.notify_all()
            return Response("upstream connect error", status_code=status, headers=headers)
        answer = self._answer(method, args)
        with self._lock:
            self.calls.append(Call(method, args, answer))
            self._lock.notify_all()
        return JSONResponse(answer)

    def _answer(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        if method == "chat.postMessage":
            if not str(args.get("channel", "")).startswith(("C", "D", "G")):
                return {"ok": False, "error": "channel_not_found"}
            ts = f"{1_800_000_000 + next(self._ts)}.000100"
            return {"ok": True, "channel": args["channel"], "ts": ts, "message": {"ts": ts}}
        if method == "chat.update":
            return {"ok": True, "channel": args["channel"], "ts": args["ts"], "text": args["text"]}
        if method == "chat.postEphemeral":
            return {"ok": True, "message_ts": f"{time.time():.6f}"}
        if method == "views.open":
            if not args.get("trigger_id"):
                return {"ok": False, "error": "invalid_trigger"}
            view = json.loads(args["view"]) if isinstance(args["view"], str) else args["view"]
            return {"ok": True, "view": {**view, "id": f"V{next(self._ts):08d}"}}
        if method == "conversations.open":
            return {"ok": True, "channel": {"id": "D" + str(args["users"])[1:]}}
        if method == "users.info":
            user = self.users.get(str(args.get("user")))
            if user is None:
                return {"ok": False, "error": "user_not_found"}
            return {"ok": True, "user": user}
        return {"ok": False, "error": "unknown_method"}


def signed(
    payload: dict[str, Any], *, at: int | None = None, secret: str = SIGNING_SECRET
) -> tuple[bytes, dict[str, str]]:
    """An interaction's body and headers, signed as Slack signs them."""
    body = urlencode({"payload": json.dumps(payload)}).encode()
    stamp = str(int(time.time()) if at is None else at)
    base = b"v0:" + stamp.encode() + b":" + body
    signature = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": signature,
    }
    return body, headers


_action_ts = itertools.count(1)


def button(message: Call, action_id: str, user: str) -> dict[str, Any]:
    """The ``block_actions`` payload of ``user`` pressing a button of a posted message."""
    blocks = message.args["blocks"]
    if isinstance(blocks, str):
        blocks = json.loads(blocks)
    for block in blocks:
        for element in block.get("elements", ()):
            if element.get("action_id") == action_id:
                return {
                    "type": "block_actions",
                    "team": {"id": "T0TEST"},
                    "user": {"id": user},
                    "channel": {"id": message.args["channel"]},
                    "container": {
                        "type": "message",
                        "channel_id": message.args["channel"],
                        "message_ts": "1.0",
                    },
                    "trigger_id": f"trigger-{next(_action_ts)}",
                    "actions": [
                        {
                            "action_id": action_id,
                            "block_id": block.get("block_id", ""),
                            "value": element.get("value"),
                            "action_ts": f"{time.time():.6f}",
                        }
                    ],
                }
    raise AssertionError(f"no button {action_id} in the message")


def submission(opened: Call, user: str, values: dict[str, Any]) -> dict[str, Any]:
    """The ``view_submission`` payload of ``user`` submitting a modal with ``values``."""
    view = opened.args["view"]
    if isinstance(view, str):
        view = json.loads(view)
    return {
        "type": "view_submission",
        "team": {"id": "T0TEST"},
        "user": {"id": user},
        "view": {
            "id": f"V-{id(opened)}",
            "callback_id": view["callback_id"],
            "private_metadata": view["private_metadata"],
            "state": {"values": values},
            "hash": "1.abc",
        },
    }


@contextmanager
def fake_slack() -> Iterator[FakeSlack]:
    """A running `FakeSlack`."""
    with FakeSlack() as slack:
        yield slack
