"""The web inbox under test: the server with both test apps, a real Chromium, and the API.

Chromium is Debian's (``/usr/bin/chromium``, the ``chromium`` package), driven by Playwright;
Playwright's own browser downloads are not used.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

from _serving import (
    TOKENS,
    auth,
    failing_update_graph,
    mail_agent,
    ops_agent,
    order_app,
    order_graph,
    refund,
    release_app,
    shell_agent,
)
from playwright.sync_api import Browser, Page, Playwright, expect
from starlette.types import ASGIApp

from interlock import END, START, App, Graph, SqliteStore, append, interrupt
from interlock.agents import (
    ApprovalPolicy,
    ScriptedModel,
    ToolAgent,
    ToolMessage,
    UserMessage,
    call,
    require_approval,
    supervisor,
)
from interlock.server import create_app

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


class ChromiumMissing(RuntimeError):
    """Raised when Debian's Chromium is not installed."""


def launch(playwright: Playwright) -> Browser:
    """Debian's Chromium, headless."""
    if not CHROMIUM.exists():
        raise ChromiumMissing(
            f"the web inbox tests drive a real browser and need {CHROMIUM}: install the "
            "`chromium` package (apt-get install chromium)"
        )
    return playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)


def inbox_server(folder: Path, **options: Any) -> ASGIApp:
    """The approval server for the order graph (``orders``) and the mail agent (``mailer``)."""
    apps = {"orders": order_app(folder / "orders.db"), "mailer": mail_agent(folder / "mail.db")}
    return create_app(apps, auth=auth(), **options)


class Refund(TypedDict, total=False):
    amount: int
    granted: int


def refund_app(path: Path) -> App[Any]:
    """A question that is neither a tool call nor approve(): how much to refund, within the hour."""

    def decide(state: Refund) -> Refund:
        amount = state["amount"]
        granted = interrupt(
            {"question": f"How much of the {amount} € should be refunded?", "amount": amount},
            schema={"type": "integer", "minimum": 0, "maximum": amount},
            deadline=3600,
        )
        return {"granted": granted}

    g = Graph(Refund, name="refunds")
    g.add_node("decide", decide).add_edge(START, "decide").add_edge("decide", END)
    return g.compile(store=SqliteStore(path))


def refund_server(folder: Path) -> ASGIApp:
    """The approval server for the refund graph alone."""
    return create_app({"refunds": refund_app(folder / "refunds.db")}, auth=auth())


def shipping_server(folder: Path) -> ASGIApp:
    """The approval server for the shipping graph (``shipping``: its continuation after a
    decision fails, see `failing_update_graph`) and the order graph."""
    apps = {
        "shipping": failing_update_graph("shipping").compile(
            store=SqliteStore(folder / "shipping.db")
        ),
        "orders": order_app(folder / "orders.db"),
    }
    return create_app(apps, auth=auth())


def phone_server(folder: Path) -> ASGIApp:
    """The approval server for the order graph (``orders``), the mail agent (``mailer``), the
    shell agent (``shell``: a command with ``rm`` asks for a confirmation step) and the release
    graph (``releases``: its approve() question asks for one)."""
    apps = {
        "orders": order_app(folder / "orders.db"),
        "mailer": mail_agent(folder / "mail.db"),
        "shell": shell_agent(folder / "shell.db"),
        "releases": release_app(folder / "releases.db"),
    }
    return create_app(apps, auth=auth())


def ops_server(folder: Path) -> ASGIApp:
    """The approval server for the ops agent alone (it wipes disks and refunds)."""
    return create_app({"ops": ops_agent(folder / "ops.db")}, auth=auth())


def desk_supervisor(path: Path) -> App[Any]:
    """A supervisor (``desk``) that hands every request to its ``billing`` agent, whose
    ``refund`` calls wait for a person (the supervisor's policy gates them)."""

    def desk_reply(messages: Any, tools: Any) -> Any:
        if isinstance(messages[-1], UserMessage):
            return call("transfer_to_billing")
        return "Done."

    def billing_reply(messages: Any, tools: Any) -> Any:
        last = messages[-1]
        if isinstance(last, ToolMessage) and last.name == "refund":
            return last.content
        return call("refund", {"amount": 5})

    billing = ToolAgent("billing", ScriptedModel(billing_reply, name="billing"), [refund])
    policy = ApprovalPolicy({"refund": [require_approval(name="money")]})
    desk = supervisor(ScriptedModel(desk_reply, name="desk"), [billing], name="desk", policy=policy)
    return desk.compile(store=SqliteStore(path))


class Chat(TypedDict, total=False):
    messages: Annotated[list[str], append]
    turns: int
    note: str


def chat_graph() -> Graph[Chat]:
    """One turn per step, a question and its echo appended, until ``turns`` reaches 300."""

    def turn(state: Chat) -> Chat:
        n = state.get("turns", 0) + 1
        return {"messages": [f"question {n}", f"answer {n}"], "turns": n}

    g = Graph(Chat, name="chat")
    g.add_node("turn", turn).add_edge(START, "turn")
    g.add_conditional_edges("turn", lambda s: END if s["turns"] >= CHAT_TURNS else "turn")
    return g


CHAT_TURNS = 300
"""How many turns `chat_graph` runs."""


def studio_server(folder: Path) -> ASGIApp:
    """The approval server for the order graph (``orders``; ``shipments``: the same, which
    pauses before ``finish``), the supervisor ``desk`` (see `desk_supervisor`) and the 300-turn
    chat (``chat``), on SQLite files in ``folder``."""
    apps = {
        "orders": order_app(folder / "orders.db"),
        "shipments": order_graph().compile(
            store=SqliteStore(folder / "shipments.db"), interrupt_before=["finish"]
        ),
        "desk": desk_supervisor(folder / "desk.db"),
        "chat": chat_graph().compile(
            store=SqliteStore(folder / "chat.db"), recursion_limit=CHAT_TURNS + 10
        ),
    }
    return create_app(apps, auth=auth())


class Api:
    """The server's HTTP API, as the tests call it beside the browser."""

    def __init__(self, url: str) -> None:
        self.url = url

    def call(
        self,
        method: str,
        path: str,
        who: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        """``(status, JSON body)`` of one request made as ``who`` (a name in TOKENS)."""
        request = urllib.request.Request(
            self.url + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {TOKENS[who][0]}",
                **(headers or {}),
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as refused:
            with refused:
                return refused.code, json.loads(refused.read() or b"null")

    def get(self, path: str, who: str = "root") -> Any:
        """The JSON of a GET that must succeed."""
        status, body = self.call("GET", path, who)
        assert status == 200, (path, status, body)
        return body

    def order(self, thread: str, n: int = 1, who: str = "ana", *, wait: bool = False) -> None:
        """Start the order graph on ``thread``; it stops at its approve() question.

        With ``wait``, return once it has stopped there (else as soon as it is accepted).
        """
        body = {"input": {"n": n}, "app": "orders", "wait": wait}
        status, answer = self.call("POST", f"/v1/threads/{thread}/runs", who, body)
        assert status == (200 if wait else 202), answer

    def mail(self, thread: str, text: str, who: str = "ana") -> None:
        """Start the mail agent on ``thread``; it stops before sending ``text``."""
        message = {"role": "user", "content": text}
        body = {"input": {"messages": [message]}, "app": "mailer"}
        status, answer = self.call("POST", f"/v1/threads/{thread}/runs", who, body)
        assert status == 202, answer

    def shell(self, thread: str, command: str, who: str = "ana") -> None:
        """Start the shell agent on ``thread`` and wait until it asks to run ``command``."""
        body = {"input": {"messages": [f"run {command}"]}, "app": "shell", "wait": True}
        status, answer = self.call("POST", f"/v1/threads/{thread}/runs", who, body)
        assert status == 200, answer

    def release(self, thread: str, n: int, who: str = "ana") -> None:
        """Start the release graph on ``thread`` and wait until it asks to publish ``n``."""
        body = {"input": {"n": n}, "app": "releases", "wait": True}
        status, answer = self.call("POST", f"/v1/threads/{thread}/runs", who, body)
        assert status == 200, answer

    def refund(self, thread: str, amount: int, who: str = "ana") -> None:
        """Start the refund graph on ``thread`` and wait until it asks."""
        body = {"input": {"amount": amount}, "app": "refunds", "wait": True}
        status, answer = self.call("POST", f"/v1/threads/{thread}/runs", who, body)
        assert status == 200, answer

    def decide(self, interrupt: Any, answer: Any, who: str = "ben") -> Any:
        """Decide ``interrupt`` (its view) with ``answer``; the request continues the thread."""
        body = {"answer": answer, "payload_hash": interrupt["payload_hash"], "wait": True}
        key = {"Idempotency-Key": f"{who}-{interrupt['id']}"}
        status, decided = self.call(
            "POST", f"/v1/interrupts/{interrupt['id']}/decision", who, body, key
        )
        assert status == 201, decided
        return decided["thread_view"]

    def ship(self, thread: str) -> Any:
        """Start the shipping graph on ``thread`` and approve its question: the thread fails."""
        body = {"input": {"n": 1}, "app": "shipping", "wait": True}
        status, started = self.call("POST", f"/v1/threads/{thread}/runs", "ana", body)
        assert status == 200, started
        [question] = started["thread_view"]["interrupts"]
        view = self.decide(question, True)
        assert view["status"] == "failed", view
        return view

    def pending(self, thread: str) -> list[Any]:
        """The pending interrupts of ``thread``."""
        items: list[Any] = self.get(f"/v1/interrupts?thread={thread}")["items"]
        return items


PHONE: dict[str, Any] = {
    "viewport": {"width": 390, "height": 844},
    "is_mobile": True,
    "has_touch": True,
    "device_scale_factor": 3,
}
"""A phone's browser context: 390x844 CSS pixels (an iPhone 12 to 15), touch, 3 pixels a CSS
pixel."""


@contextmanager
def opened(
    browser: Browser, url: str, *, width: int = 1280, height: int = 800, phone: bool = False
) -> Iterator[Page]:
    """A page of the inbox in a browser context of its own (its own session storage).

    With ``phone``, the context is a phone's (`PHONE`) instead of a ``width`` x ``height``
    window. On leaving, fails if the page threw an uncaught error or broke its Content
    Security Policy (an inline script or style would).
    """
    options = PHONE if phone else {"viewport": {"width": width, "height": height}}
    context = browser.new_context(**options)
    problems: list[str] = []
    try:
        page = context.new_page()
        page.on("pageerror", lambda error: problems.append(f"uncaught: {error}"))
        page.on(
            "console",
            lambda message: (
                problems.append(message.text) if "Content Security Policy" in message.text else None
            ),
        )
        page.goto(url + "/inbox")
        yield page
    finally:
        context.close()
    assert not problems, problems


def sign_in(page: Page, who: str, *, live: bool = True) -> None:
    """Sign in as ``who`` and (``live``) wait until the event stream is open."""
    page.get_by_label("Access token").fill(TOKENS[who][0])
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#who-name")).to_have_text(who)
    if live:
        expect(page.locator("#live")).to_have_text("Live")


def open_question(page: Page, text: str) -> None:
    """Open the pending question whose text contains ``text`` from the list."""
    page.locator("tr[data-id]").filter(has_text=text).get_by_role("link").first.click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(text)
