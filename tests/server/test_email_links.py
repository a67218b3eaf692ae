"""One-tap approval links in e-mail, from the mail aiosmtpd received to a phone's browser.

The approval server runs on loopback with an `Email` channel that has `EmailLinks`; each
test starts a run of the desk agent over the API, reads the links from the mail the mailbox
got, and opens them in Debian's Chromium at a phone's viewport (390×844, touch). What the
server recorded is read over the API beside the page.
"""

from __future__ import annotations

import logging
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from _links_server import LinkServer, link_server, links_of
from _web_page import Api
from playwright.sync_api import Browser, BrowserContext, Page, expect

from interlock.server._links import LinkClaims
from interlock.server._redact import RedactTokens

pytestmark = pytest.mark.slow  # a real browser: run on the main Python only

PHONE: dict[str, Any] = {
    "viewport": {"width": 390, "height": 844},
    "is_mobile": True,
    "has_touch": True,
    "device_scale_factor": 3,
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LinkServer]:
    with link_server(tmp_path_factory.mktemp("links")) as running:
        yield running


@pytest.fixture(scope="module")
def signed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LinkServer]:
    with link_server(tmp_path_factory.mktemp("signed"), require_sign_in=True) as running:
        yield running


def phone(browser: Browser, user: str | None = None) -> BrowserContext:
    """A phone's browser; ``user``: signed in through the trusted proxy as them."""
    headers = {"X-Forwarded-User": user} if user else {}
    return browser.new_context(**PHONE, extra_http_headers=headers)


def ask(api: Api, thread: str, text: str) -> dict[str, Any]:
    """Start the desk agent on ``thread`` with ``text``; its pending question."""
    body = {"input": {"messages": [{"role": "user", "content": text}]}, "wait": True}
    status, answer = api.call("POST", f"/v1/threads/{thread}/runs", "root", body)
    assert status == 200, answer
    [question] = answer["thread_view"]["interrupts"]
    return question  # type: ignore[no-any-return]


def decisions(api: Api, thread: str) -> list[Any]:
    return [e for e in api.get(f"/v1/threads/{thread}/audit")["items"] if e["kind"] == "decision"]


def tap(page: Page, url: str) -> None:
    page.goto(url)


def test_approving_from_the_mail_finishes_the_run_and_the_link_works_once(
    browser: Browser, server: LinkServer
) -> None:
    api = Api(server.url)
    question = ask(api, "links-ok", "refund 40")
    mail = server.mail_to("ana@example.com", question["id"])
    assert mail.message["To"] == "ana@example.com"
    links = links_of(mail)
    assert set(links) == {"Approve", "Reject"}, mail.message.get_content()
    assert links["Approve"].startswith(f"{server.url}/links/")
    # Only those who may decide get links: eve is a viewer, zed is nobody the server knows.
    assert links_of(server.mail_to("ben@example.com", question["id"]))
    assert links_of(server.mail_to("eve@example.com", question["id"])) == {}
    assert links_of(server.mail_to("zed@example.com", question["id"])) == {}

    context = phone(browser)
    try:
        page = context.new_page()
        tap(page, links["Approve"])
        expect(page.get_by_role("heading", level=1)).to_have_text("Approve this?")
        for text in ("refund", '"amount": 40', "money", "needs ana or ben", "desk"):
            expect(page.locator("main")).to_contain_text(text)
        # Opening the link recorded nothing.
        assert decisions(api, "links-ok") == []
        assert api.get(f"/v1/interrupts/{question['id']}")["interrupt"]["status"] == "pending"
        page.get_by_role("button", name="Approve").tap()
        expect(page.get_by_role("heading", level=1)).to_have_text("You approved it")
        view = _wait_status(api, "links-ok", "done")
        assert view["status"] == "done"
        [decided] = decisions(api, "links-ok")
        assert decided["actor"] == "ana"

        # The same link again: used, by whom, never a second decision.
        tap(page, links["Approve"])
        expect(page.get_by_role("heading", level=1)).to_have_text("This link was already used")
        expect(page.locator("main")).to_contain_text("by ana at")
        # Its form, posted again from the page it opened before, is a replay.
        assert len(decisions(api, "links-ok")) == 1
    finally:
        context.close()


def test_a_second_post_of_a_used_link_is_a_replay(browser: Browser, server: LinkServer) -> None:
    api = Api(server.url)
    question = ask(api, "links-replay", "refund 7")
    links = links_of(server.mail_to("ben@example.com", question["id"]))
    context = phone(browser)
    try:
        first, second = context.new_page(), context.new_page()
        tap(first, links["Approve"])
        tap(second, links["Approve"])  # both show the form before either posts
        first.get_by_role("button", name="Approve").tap()
        expect(first.get_by_role("heading", level=1)).to_have_text("You approved it")
        second.get_by_role("button", name="Approve").tap()
        expect(second.get_by_role("heading", level=1)).to_have_text("This link was already used")
        assert len(decisions(api, "links-replay")) == 1
    finally:
        context.close()


def test_a_link_after_someone_else_decided_says_who_and_when(
    browser: Browser, server: LinkServer
) -> None:
    api = Api(server.url)
    question = ask(api, "links-other", "refund 9")
    links = links_of(server.mail_to("ana@example.com", question["id"]))
    ben = links_of(server.mail_to("ben@example.com", question["id"]))
    context = phone(browser)
    try:
        page = context.new_page()
        tap(page, links["Approve"])  # ana opens hers, then ben decides with his
        other = context.new_page()
        tap(other, ben["Reject"])
        other.get_by_role("button", name="Reject").tap()
        expect(other.get_by_role("heading", level=1)).to_have_text("You rejected it")
        page.get_by_role("button", name="Approve").tap()
        expect(page.get_by_role("heading", level=1)).to_have_text("Someone else decided")
        expect(page.locator("main")).to_contain_text("already decided by ben at")
        tap(page, links["Approve"])
        expect(page.get_by_role("heading", level=1)).to_have_text("Someone else decided")
        expect(page.locator("main")).to_contain_text("Decided by ben at")
        expect(page.get_by_role("link", name="Open the inbox")).to_be_visible()
        [decided] = decisions(api, "links-other")
        assert decided["actor"] == "ben"
    finally:
        context.close()


def test_a_reject_link_asks_a_reason_and_records_it(browser: Browser, server: LinkServer) -> None:
    api = Api(server.url)
    question = ask(api, "links-reject", "refund 900")
    links = links_of(server.mail_to("ben@example.com", question["id"]))
    context = phone(browser)
    try:
        page = context.new_page()
        tap(page, links["Reject"])
        expect(page.get_by_role("heading", level=1)).to_have_text("Reject this?")
        page.get_by_label("Reason (optional)").fill("Too much for one order")
        page.get_by_role("button", name="Reject").tap()
        expect(page.get_by_role("heading", level=1)).to_have_text("You rejected it")
        [decided] = decisions(api, "links-reject")
        assert decided["actor"] == "ben"
        assert decided["data"]["reason"] == "Too much for one order", decided
        assert decided["data"]["answer"] == {
            "action": "reject",
            "message": "Too much for one order",
        }
        _wait_status(api, "links-reject", "done")
    finally:
        context.close()


def test_a_question_that_asks_confirmation_takes_the_extra_step(
    browser: Browser, server: LinkServer
) -> None:
    api = Api(server.url)
    question = ask(api, "links-wipe", "wipe it")
    assert question["confirm"] is True
    links = links_of(server.mail_to("ana@example.com", question["id"]))
    context = phone(browser)
    try:
        page = context.new_page()
        tap(page, links["Approve"])
        box = page.get_by_label("I have checked what will run")
        expect(box).to_be_visible()
        page.get_by_role("button", name="Approve").tap()  # the browser keeps the form: required
        expect(page.get_by_role("heading", level=1)).to_have_text("Approve this?")
        assert decisions(api, "links-wipe") == []
        box.check()
        page.get_by_role("button", name="Approve").tap()
        expect(page.get_by_role("heading", level=1)).to_have_text("You approved it")
        _wait_status(api, "links-wipe", "done")
    finally:
        context.close()


def test_expired_tampered_and_stale_links_decide_nothing(
    browser: Browser, server: LinkServer
) -> None:
    api = Api(server.url)
    question = ask(api, "links-bad", "refund 3")
    approve = links_of(server.mail_to("ana@example.com", question["id"]))["Approve"]
    token = approve.rpartition("/")[2]
    claims = server.links.read(token)
    base = f"{server.url}/links/"
    # A link signed by the server, whose time is over; and one for a question that changed
    # since the mail (its payload hash is not the question's any more).
    expired = base + server.links.mint(_with(claims, expires=time.time() - 1))
    stale = base + server.links.mint(_with(claims, payload_hash="sha256:" + "0" * 64))
    body, _, signature = token.partition(".")
    tampered = base + body[:-2] + ("A" if body[-2] != "A" else "B") + body[-1] + "." + signature
    context = phone(browser)
    try:
        page = context.new_page()
        for url, heading in (
            (expired, "This link has expired"),
            (tampered, "This link is not valid"),
            (stale, "The question has changed"),
        ):
            tap(page, url)
            expect(page.get_by_role("heading", level=1)).to_have_text(heading)
            expect(page.get_by_role("button")).to_have_count(0)
            expect(page.get_by_role("link", name="Open the inbox")).to_be_visible()
        assert decisions(api, "links-bad") == []
        # A POST of a stale link with a good form is refused by the decision path as well.
        page.goto(approve)
        csrf = page.locator("input[name=csrf]").get_attribute("value")
        status = _post(server.url, stale, {"csrf": csrf or ""}, cookie=_cookie(page))
        assert status == 409  # the question_changed refusal of decide_as
        assert decisions(api, "links-bad") == []
    finally:
        context.close()


def test_opening_a_link_records_nothing_and_a_post_needs_the_form_token(
    server: LinkServer,
) -> None:
    api = Api(server.url)
    question = ask(api, "links-csrf", "refund 5")
    approve = links_of(server.mail_to("ana@example.com", question["id"]))["Approve"]
    for _ in range(3):  # a mail scanner, a link preview, the person
        with urllib.request.urlopen(approve, timeout=10) as opened:
            assert opened.status == 200
            page = opened.read().decode()
            cookie = opened.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert decisions(api, "links-csrf") == []
    jar = cookie.split(";")[0]
    csrf = page.split('name="csrf" value="')[1].split('"')[0]
    # No form token; the token with another browser's cookie; the right pair from elsewhere.
    assert _post(server.url, approve, {}, cookie=jar) == 403
    assert _post(server.url, approve, {"csrf": csrf}, cookie="interlock_link=" + "x" * 43) == 403
    assert _post(server.url, approve, {"csrf": csrf}, cookie=jar, origin="https://evil") == 403
    assert _post(server.url, approve, {"csrf": csrf}, cookie=jar, origin=None) == 403
    assert decisions(api, "links-csrf") == []
    assert api.get(f"/v1/interrupts/{question['id']}")["interrupt"]["status"] == "pending"
    assert _post(server.url, approve, {"csrf": csrf}, cookie=jar) == 200
    assert len(decisions(api, "links-csrf")) == 1


def test_with_sign_in_required_a_forwarded_link_is_refused(
    browser: Browser, signed_server: LinkServer
) -> None:
    api = Api(signed_server.url)
    question = ask(api, "links-fwd", "refund 12")
    links = links_of(signed_server.mail_to("ana@example.com", question["id"]))
    for user, heading in ((None, "Sign in first"), ("ben", "This link is someone else's")):
        context = phone(browser, user)
        try:
            page = context.new_page()
            tap(page, links["Approve"])
            page.get_by_role("button", name="Approve").tap()
            expect(page.get_by_role("heading", level=1)).to_have_text(heading)
        finally:
            context.close()
    assert decisions(api, "links-fwd") == []
    context = phone(browser, "ana")
    try:
        page = context.new_page()
        tap(page, links["Approve"])
        page.get_by_role("button", name="Approve").tap()
        expect(page.get_by_role("heading", level=1)).to_have_text("You approved it")
    finally:
        context.close()
    [decided] = decisions(api, "links-fwd")
    assert decided["actor"] == "ana"


def test_the_access_log_never_shows_a_link_token() -> None:
    redact = RedactTokens(lambda value: False)
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", "/approvals/links/eyJ2IjoxfQ.c2ln?x=1", "1.1", 200),
        None,
    )
    redact.filter(record)
    assert isinstance(record.args, tuple)
    assert record.args[2] == "/approvals/links/[redacted]?x=1"
    assert "eyJ2" not in record.getMessage()


# -- helpers --------------------------------------------------------------------------------------


def _with(claims: LinkClaims, **changes: Any) -> LinkClaims:
    import msgspec

    return msgspec.structs.replace(claims, **changes)


def _cookie(page: Page) -> str:
    [cookie] = [c for c in page.context.cookies() if c["name"] == "interlock_link"]
    return f"interlock_link={cookie['value']}"


def _post(
    base: str, url: str, form: dict[str, str], *, cookie: str, origin: str | None = "same"
) -> int:
    from urllib.parse import urlencode

    headers = {"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie}
    if origin is not None:
        headers["Origin"] = base if origin == "same" else origin
    request = urllib.request.Request(
        url, data=urlencode(form).encode(), method="POST", headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        with refused:
            return int(refused.code)


def _wait_status(api: Api, thread: str, status: str) -> Any:
    deadline = time.monotonic() + 10
    while True:
        view = api.get(f"/v1/threads/{thread}")
        if view["status"] == status:
            return view
        if time.monotonic() > deadline:
            raise AssertionError(f"thread {thread} is {view['status']}, not {status}")
        time.sleep(0.05)
