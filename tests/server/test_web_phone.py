"""The web inbox on a phone, and the confirmation step before a risky approval.

Each test runs the approval server on loopback (the order graph, the mail agent, the shell
agent whose ``rm`` commands ask for a confirmation step, and a release graph whose approve()
asks for one), opens the inbox in Debian's Chromium as a phone (390x844 CSS pixels, touch,
device scale factor 3) and taps. Every view is measured: nothing wider than the screen, every
control at least 44 px high, no text under 12 px.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _serving import TOKENS, serving
from _web_page import Api, opened, phone_server
from playwright.sync_api import Browser, Page, Route, expect

pytestmark = pytest.mark.slow  # a real browser: run on the main Python only

LIVE_MS = 3000
"""How long a change may take to reach an open page through the event stream."""

WIDTH = 390
TAP_PX = 44
"""The least height of a control a finger hits (Apple's guideline, WCAG 2.5.5)."""
TEXT_PX = 12
"""The least size of text (Apple's smallest text style is 11 pt, Android's 12 sp)."""

LONG_THREAD = "invoice-2026-03-customer-" + "7f3a9c" * 16
"""A thread id far wider than the screen, with nowhere to break a line."""
LONG_BODY = (
    "Dear Dana, the March invoice is attached. The statement is at "
    "https://billing.example.com/statements/" + "a1b2c3d4" * 30 + " and is due on 15 April."
)
"""An argument far wider than the screen, with a word that has nowhere to break."""

MEASURE = (Path(__file__).parent / "_phone_measure.js").read_text(encoding="utf-8")
"""The script that measures a page (`fits`)."""


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    """The URL of a fresh server."""
    with serving(lambda: phone_server(tmp_path)) as served:
        yield served.url


def fits(page: Page, view: str) -> None:
    """Fail unless ``view``, as the page shows it now, fits a phone: no horizontal scrolling,
    controls a finger can hit, text that can be read."""
    m = page.evaluate(MEASURE, {"tap": TAP_PX, "text": TEXT_PX})
    assert m["innerWidth"] == WIDTH, f"{view}: the page was zoomed out to {m['innerWidth']} px"
    assert m["scrollWidth"] <= WIDTH and m["bodyWidth"] <= WIDTH, (
        f"{view} scrolls sideways ({m['scrollWidth']} px): {m['wide']}"
    )
    assert not m["small"], f"{view}: controls under {TAP_PX} px high: {m['small']}"
    assert not m["tiny"], f"{view}: text under {TEXT_PX} px: {m['tiny']}"


def reachable(page: Page, name: str) -> None:
    """Fail unless the button ``name`` lies within the screen's width, without zooming."""
    box = page.get_by_role("button", name=name, exact=True).bounding_box()
    assert box is not None, name
    assert box["x"] >= 0 and box["x"] + box["width"] <= WIDTH, (name, box)
    assert box["height"] >= TAP_PX, (name, box)


def tap_sign_in(page: Page, who: str) -> None:
    """Sign in as ``who`` by tapping, and wait until the event stream is open."""
    page.get_by_label("Access token").fill(TOKENS[who][0])
    page.get_by_role("button", name="Sign in").tap()
    expect(page.locator("#who-name")).to_have_text(who)
    expect(page.locator("#live")).to_have_text("Live")


def tap_open(page: Page, text: str) -> None:
    """Open the pending question whose text contains ``text`` from the list, by tapping."""
    page.locator("tr[data-id]").filter(has_text=text).locator("td.question a").tap()
    expect(page.get_by_role("heading", level=1)).to_contain_text(text)


def decisions(api: Api, thread: str) -> list[Any]:
    """The decision entries of a thread's audit log."""
    items = api.get(f"/v1/threads/{thread}/audit")["items"]
    return [a for a in items if a["kind"] in ("decision", "approval")]


def banner(page: Page) -> Any:
    return page.locator(".banner")


def test_every_view_fits_a_phone_screen_with_long_arguments_and_thread_ids(
    browser: Browser, url: str
) -> None:
    api = Api(url)
    api.mail(LONG_THREAD, LONG_BODY)
    api.order("o-1", wait=True)
    api.shell("ops-1", "rm -rf /tmp/x")
    with opened(browser, url, phone=True) as page:
        expect(page.get_by_label("Access token")).to_be_visible()
        fits(page, "the sign-in form")
        tap_sign_in(page, "ana")

        expect(page.locator("tr[data-id]")).to_have_count(3)
        fits(page, "the pending list")

        tap_open(page, "send_email")
        expect(page.get_by_label("The call's arguments")).to_contain_text("a1b2c3d4a1b2c3d4")
        expect(page.locator(".thread .messages")).to_be_visible()
        fits(page, "a question's page")
        for name in ("Approve", "Reject…", "Edit…", "Respond…"):
            reachable(page, name)

        page.get_by_role("button", name="Reject…").tap()
        expect(page.get_by_label("Reason", exact=True)).to_be_visible()
        fits(page, "the reject form")

        page.get_by_role("button", name="Edit…").tap()
        form = page.get_by_role("form", name="Edit the arguments")
        form.get_by_label("to (required)").fill("accounts@example.com")
        expect(form.locator(".changes li")).to_have_count(1)
        fits(page, "the argument editor")
        form.get_by_label("JSON", exact=True).tap()
        expect(form.get_by_label("Arguments as JSON")).to_be_visible()
        fits(page, "the argument editor as JSON")

        page.get_by_role("button", name="Respond…").tap()
        expect(page.get_by_label("Answer", exact=True)).to_be_visible()
        fits(page, "the respond form")

        page.locator(".facts a", has_text=LONG_THREAD).first.tap()
        expect(page.get_by_role("heading", level=1)).to_contain_text(LONG_THREAD)
        expect(page.locator(".messages")).to_contain_text("a1b2c3d4")
        fits(page, "a thread's page")

        page.get_by_role("link", name="← Pending questions").tap()
        tap_open(page, "rm -rf /tmp/x")
        page.get_by_role("button", name="Approve…").tap()
        expect(page.get_by_role("alertdialog")).to_be_visible()
        fits(page, "the confirmation step")
        reachable(page, "Yes, approve")
        reachable(page, "Cancel")

        page.goto(url + "/inbox#/failed")
        expect(page.get_by_text("No thread has failed.")).to_be_visible()
        fits(page, "the failed threads")


def test_a_question_without_confirm_is_approved_in_one_tap(browser: Browser, url: str) -> None:
    api = Api(url)
    api.order("o-2", wait=True)
    api.shell("ops-2", "ls /tmp")
    with opened(browser, url, phone=True) as page:
        tap_sign_in(page, "ana")
        tap_open(page, "Ship order 2?")
        page.get_by_role("button", name="Approve", exact=True).tap()
        expect(banner(page)).to_contain_text("Your decision was recorded")
        expect(banner(page)).to_contain_text("The run finished.", timeout=LIVE_MS)
        expect(page.get_by_role("alertdialog")).to_have_count(0)

        page.get_by_role("link", name="← Pending questions").tap()
        tap_open(page, "ls /tmp")
        page.get_by_role("button", name="Approve", exact=True).tap()
        expect(banner(page)).to_contain_text("The run finished.", timeout=LIVE_MS)

    assert api.get("/v1/threads/o-2")["values"] == {"n": 2, "approved": True, "done": True}
    assert [(d["kind"], d["actor"]) for d in decisions(api, "o-2")] == [("decision", "ana")]
    messages = api.get("/v1/threads/ops-2")["messages"]
    assert messages[-1]["content"] == "Done: ran: ls /tmp"


def test_rejecting_with_a_reason_by_tapping(browser: Browser, url: str) -> None:
    api = Api(url)
    api.shell("ops-3", "rm -rf /var/lib/db")
    with opened(browser, url, phone=True) as page:
        tap_sign_in(page, "ana")
        tap_open(page, "rm -rf /var/lib/db")
        page.get_by_role("button", name="Reject…").tap()
        page.get_by_label("Reason", exact=True).fill("Not the production database.")
        page.get_by_role("button", name="Reject", exact=True).tap()
        # A rejection runs nothing: no confirmation step, even on a question that asks for one.
        expect(banner(page)).to_contain_text("Your decision was recorded")
        expect(page.get_by_role("alertdialog")).to_have_count(0)
        expect(page.locator(".audit")).to_contain_text("Reason: Not the production database.")

    [decision] = decisions(api, "ops-3")
    why = "Not the production database."
    assert decision["data"]["answer"] == {"action": "reject", "message": why}
    assert api.get("/v1/threads/ops-3")["messages"][-1]["content"].startswith("Done: ")
    assert "ran:" not in json.dumps(api.get("/v1/threads/ops-3")["messages"])


def test_editing_the_arguments_by_tapping(browser: Browser, url: str) -> None:
    api = Api(url)
    api.mail("m-4", "The numbers are attached.")
    with opened(browser, url, phone=True) as page:
        tap_sign_in(page, "ana")
        tap_open(page, "send_email")
        page.get_by_role("button", name="Edit…").tap()
        form = page.get_by_role("form", name="Edit the arguments")
        form.get_by_label("to (required)").fill("ceo@example.com")
        expect(form.locator(".changes ins")).to_have_text('"ceo@example.com"')
        form.get_by_role("button", name="Run with the edited arguments").tap()
        expect(banner(page)).to_contain_text("Your decision was recorded")
        expect(page.locator(".thread .messages")).to_contain_text(
            "sent to ceo@example.com", timeout=LIVE_MS
        )

    [decision] = decisions(api, "m-4")
    assert decision["data"]["answer"]["arguments"]["to"] == "ceo@example.com"


def test_responding_instead_of_the_tool_by_tapping(browser: Browser, url: str) -> None:
    api = Api(url)
    api.shell("ops-5", "rm -rf /tmp/cache")
    with opened(browser, url, phone=True) as page:
        tap_sign_in(page, "ana")
        tap_open(page, "rm -rf /tmp/cache")
        page.get_by_role("button", name="Respond…").tap()
        page.get_by_label("Answer", exact=True).fill("The cache was emptied by hand.")
        page.get_by_role("button", name="Send the answer").tap()
        expect(banner(page)).to_contain_text("Your decision was recorded")
        expect(banner(page)).to_contain_text("The run finished.", timeout=LIVE_MS)

    messages = api.get("/v1/threads/ops-5")["messages"]
    assert messages[-1]["content"] == "Done: The cache was emptied by hand."


def test_a_confirm_question_asks_again_cancel_records_nothing_and_yes_approves(
    browser: Browser, url: str
) -> None:
    api = Api(url)
    api.shell("ops-6", "rm -rf /tmp/x")
    [question] = api.pending("ops-6")
    assert question["confirm"] is True
    sent: list[Any] = []
    with opened(browser, url, phone=True) as page:
        page.on(
            "request",
            lambda r: (
                sent.append(json.loads(r.post_data or "null"))
                if r.url.endswith("/decision")
                else None
            ),
        )
        tap_sign_in(page, "ana")
        tap_open(page, "rm -rf /tmp/x")

        approve = page.get_by_role("button", name="Approve…")
        approve.tap()
        step = page.get_by_role("alertdialog", name="Confirm before it runs")
        expect(step).to_be_visible()
        expect(step).to_contain_text("Run execute(rm -rf /tmp/x)?")
        expect(approve).to_have_attribute("aria-expanded", "true")
        # The step holds the focus on Cancel: a second tap where Approve was approves nothing.
        expect(step.get_by_role("button", name="Cancel")).to_be_focused()
        assert sent == []

        step.get_by_role("button", name="Cancel").tap()
        expect(step).to_be_hidden()
        expect(approve).to_be_focused()
        expect(page.locator(".interrupt-pending")).to_be_visible()
        assert sent == []
        assert api.get(f"/v1/interrupts/{question['id']}")["decision"] is None
        assert decisions(api, "ops-6") == []

        approve.tap()
        step.get_by_role("button", name="Yes, approve").tap()
        expect(banner(page)).to_contain_text("Your decision was recorded")
        expect(banner(page)).to_contain_text("The run finished.", timeout=LIVE_MS)
        expect(page.locator(".audit")).to_contain_text("ana decided: approve")

    assert [body["confirmed"] for body in sent] == [True]
    assert [(d["kind"], d["actor"]) for d in decisions(api, "ops-6")] == [("decision", "ana")]
    assert api.get("/v1/threads/ops-6")["messages"][-1]["content"] == "Done: ran: rm -rf /tmp/x"


def test_an_edit_of_a_confirm_question_names_the_edited_call_before_it_runs(
    browser: Browser, url: str
) -> None:
    api = Api(url)
    api.shell("ops-7", "rm -rf /")
    with opened(browser, url, phone=True) as page:
        tap_sign_in(page, "ana")
        tap_open(page, "rm -rf /")
        page.get_by_role("button", name="Edit…").tap()
        form = page.get_by_role("form", name="Edit the arguments")
        form.get_by_label("command (required)").fill("rm -rf /tmp/build")
        form.get_by_role("button", name="Run with the edited arguments…").tap()
        step = form.get_by_role("alertdialog")
        expect(step).to_contain_text("Run execute(rm -rf /tmp/build)?")
        step.get_by_role("button", name="Cancel").tap()
        expect(step).to_be_hidden()
        assert decisions(api, "ops-7") == []

        form.get_by_role("button", name="Run with the edited arguments…").tap()
        # Changing the arguments while the step is open closes it: it names another call.
        form.get_by_label("command (required)").fill("rm -rf /tmp/build/cache")
        expect(step).to_be_hidden()
        form.get_by_role("button", name="Run with the edited arguments…").tap()
        expect(step).to_contain_text("Run execute(rm -rf /tmp/build/cache)?")
        step.get_by_role("button", name="Yes, run it").tap()
        expect(banner(page)).to_contain_text("Your decision was recorded")
        expect(page.locator(".thread .messages")).to_contain_text(
            "ran: rm -rf /tmp/build/cache", timeout=LIVE_MS
        )

    [decision] = decisions(api, "ops-7")
    assert decision["data"]["answer"] == {
        "action": "edit",
        "arguments": {"command": "rm -rf /tmp/build/cache"},
    }


def test_an_approve_question_with_confirm_names_the_question(browser: Browser, url: str) -> None:
    api = Api(url)
    api.release("r-8", 3)
    with opened(browser, url, phone=True) as page:
        tap_sign_in(page, "ana")
        tap_open(page, "Publish release 3?")
        page.get_by_role("button", name="Approve…").tap()
        step = page.get_by_role("alertdialog")
        expect(step).to_contain_text("Approve “Publish release 3?”?")
        step.get_by_role("button", name="Yes, approve").tap()
        expect(banner(page)).to_contain_text("The run finished.", timeout=LIVE_MS)

    assert api.get("/v1/threads/r-8")["values"]["approved"] is True


def test_the_servers_refusal_of_an_unconfirmed_approval_is_shown_and_opens_the_step(
    browser: Browser, url: str
) -> None:
    api = Api(url)
    api.shell("ops-9", "rm -rf /tmp/y")
    [question] = api.pending("ops-9")

    def unmarked(route: Route) -> None:
        # A page that read the question before it asked for a confirmation step.
        response = route.fetch()
        body = response.json()
        body["interrupt"]["confirm"] = False
        route.fulfill(response=response, json=body)

    with opened(browser, url, phone=True) as page:
        page.route(f"**/v1/interrupts/{question['id']}", unmarked)
        tap_sign_in(page, "ana")
        tap_open(page, "rm -rf /tmp/y")
        page.get_by_role("button", name="Approve", exact=True).tap()
        alert = page.locator(".decide > .error")
        expect(alert).to_contain_text("Not recorded: this question must be confirmed")
        step = page.get_by_role("alertdialog")
        expect(step).to_contain_text("Run execute(rm -rf /tmp/y)?")
        assert decisions(api, "ops-9") == []

        step.get_by_role("button", name="Yes, approve").tap()
        expect(banner(page)).to_contain_text("Your decision was recorded")
        # Reads still under way when the page closes are left unanswered.
        page.unroute_all(behavior="ignoreErrors")

    assert [(d["kind"], d["actor"]) for d in decisions(api, "ops-9")] == [("decision", "ana")]
