"""The web inbox in a real browser: signing in, the live list, deciding, conflicts, roles.

Each test runs the approval server on loopback (order graph and mail agent, on SQLite files)
and drives Debian's Chromium through Playwright's sync API; the API is read beside the page
to check what the page did. Waiting is Playwright's: each expectation polls the page until it
holds or times out, with no sleeps.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _serving import TOKENS, WIPE_SECRETS, auth, budget_agent, serving
from _web_page import (
    Api,
    inbox_server,
    open_question,
    opened,
    ops_server,
    refund_server,
    shipping_server,
    sign_in,
)
from playwright.sync_api import Browser, Page, Route, expect

from interlock.server import create_app

LIVE_MS = 3000

pytestmark = pytest.mark.slow  # a real browser: run on the main Python only
"""How long a change may take to reach an open page through the event stream."""


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    """The URL of a fresh server."""
    with serving(lambda: inbox_server(tmp_path)) as served:
        yield served.url


def decisions(api: Api, thread: str) -> list[Any]:
    """The decision entries of a thread's audit log."""
    items = api.get(f"/v1/threads/{thread}/audit")["items"]
    return [a for a in items if a["kind"] in ("decision", "approval")]


def banner(page: Page) -> Any:
    return page.locator(".banner")


def test_sign_in_then_a_new_question_appears_live_and_approving_it_finishes_the_run(
    browser: Browser, url: str
) -> None:
    api = Api(url)
    with opened(browser, url) as page:
        page.get_by_label("Access token").fill("not-a-token")
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("alert")).to_contain_text("That token was not accepted")
        expect(page.locator("#who")).to_be_hidden()

        sign_in(page, "ana")
        expect(page.locator("#who")).to_contain_text("approver")
        expect(page.get_by_text("Nothing waits for a decision.")).to_be_visible()
        page.evaluate("window.stillTheSamePage = true")

        api.order("o-1")
        row = page.locator("tr[data-id]").filter(has_text="Ship order 2?")
        expect(row).to_be_visible(timeout=LIVE_MS)
        expect(row).to_contain_text("orders")
        assert page.evaluate("window.stillTheSamePage") is True  # no reload brought it

        open_question(page, "Ship order 2?")
        expect(page.locator("#thread-status")).to_have_text("waiting for a decision")
        page.get_by_role("button", name="Approve", exact=True).click()
        expect(banner(page)).to_contain_text("Your decision was recorded")
        expect(banner(page)).to_contain_text("The run finished.", timeout=LIVE_MS)
        expect(page.locator("#thread-status")).to_have_text("done")
        expect(page.locator(".audit")).to_contain_text("ana decided: approve")

        thread = api.get("/v1/threads/o-1")
        assert thread["status"] == "done"
        assert thread["values"] == {"n": 2, "approved": True, "done": True}

        page.get_by_role("link", name="← Pending questions").click()
        expect(page.get_by_text("Nothing waits for a decision.")).to_be_visible()

        page.get_by_role("button", name="Log out").click()
        expect(page.get_by_label("Access token")).to_be_visible()
        assert page.evaluate("sessionStorage.length") == 0


def test_a_second_approver_is_told_who_decided_first(browser: Browser, url: str) -> None:
    api = Api(url)
    api.order("o-2", wait=True)
    [question] = api.pending("o-2")
    with opened(browser, url) as ana, opened(browser, url) as ben:
        # Ben's page hears nothing from the event stream, as when two people click at once:
        # only the server's refusal can tell him.
        ben.route("**/v1/events", lambda route: route.abort())
        sign_in(ana, "ana")
        sign_in(ben, "ben", live=False)
        open_question(ana, "Ship order 2?")
        open_question(ben, "Ship order 2?")

        ana.get_by_role("button", name="Approve", exact=True).click()
        expect(banner(ana)).to_contain_text("Your decision was recorded")

        ben.get_by_role("button", name="Approve", exact=True).click()
        expect(banner(ben)).to_contain_text("This question was already decided by ana at")
        expect(banner(ben)).to_contain_text("Your decision was not recorded")
        expect(ben.locator(".card", has_text="Decision").first).to_contain_text("ana decided")

    detail = api.get(f"/v1/interrupts/{question['id']}")
    assert detail["decision"]["actor"] == "ana"
    assert [(d["kind"], d["actor"]) for d in decisions(api, "o-2")] == [("decision", "ana")]


def test_an_edit_the_schema_refuses_changes_nothing_and_a_valid_one_runs_the_tool(
    browser: Browser, url: str
) -> None:
    api = Api(url)
    api.mail("m-3", "The numbers are attached.")
    with opened(browser, url) as page:
        sign_in(page, "ana")
        open_question(page, "send_email")
        expect(page.get_by_label("The call's arguments")).to_contain_text('"cfo@example.com"')
        [question] = api.pending("m-3")

        page.get_by_role("button", name="Edit…").click()
        form = page.get_by_role("form", name="Edit the arguments")
        submit = form.get_by_role("button", name="Run with the edited arguments")
        expect(form.get_by_text("No changes yet.")).to_be_visible()
        expect(submit).to_be_disabled()

        # `to` as a number: the form cannot say it, the JSON can; the server refuses it.
        form.get_by_label("JSON", exact=True).check()
        arguments = form.get_by_label("Arguments as JSON")
        arguments.fill('{"to": 42, "body": "The numbers are attached."}')
        expect(form.locator(".changes")).to_contain_text("/to")
        expect(form.locator(".changes ins")).to_have_text("42")
        submit.click()
        expect(form.get_by_role("alert")).to_contain_text("42 is not of type 'string'")
        expect(form.get_by_role("alert")).to_contain_text("nothing was recorded")

        # A required field left out: refused too.
        arguments.fill('{"to": "cfo@example.com"}')
        expect(form.locator(".changes")).to_contain_text("removed")
        submit.click()
        expect(form.get_by_role("alert")).to_contain_text("'body' is a required property")

        # Text that is no JSON is never sent, and the fields cannot show it.
        arguments.fill('{"to": ')
        expect(submit).to_be_disabled()
        form.get_by_label("Fields", exact=True).click()
        expect(form.get_by_text("Fix it before switching.")).to_be_visible()
        expect(arguments).to_be_visible()
        arguments.fill('{"to": "cfo@example.com"}')

        assert [q["id"] for q in api.pending("m-3")] == [question["id"]]
        assert api.get(f"/v1/interrupts/{question['id']}")["decision"] is None
        assert decisions(api, "m-3") == []
        expect(page.locator(".interrupt-pending")).to_be_visible()

        # Back to the fields, and a valid edit: the diff first, then the call runs with it.
        form.get_by_label("Fields", exact=True).check()
        form.get_by_label("to (required)").fill("ceo@example.com")
        form.get_by_label("body (required)").fill("The numbers are attached. Call me.")
        changes = form.locator(".changes li")
        expect(changes).to_have_count(2)
        expect(changes.filter(has_text="/to")).to_contain_text('"cfo@example.com"')
        expect(changes.filter(has_text="/to").locator("ins")).to_have_text('"ceo@example.com"')
        expect(changes.filter(has_text="/body").locator("ins")).to_have_text(
            '"The numbers are attached. Call me."'
        )
        form.get_by_label("Reason (optional, kept in the audit trail)").fill("wrong recipient")
        submit.click()
        expect(banner(page)).to_contain_text("Your decision was recorded")
        expect(banner(page)).to_contain_text("The run finished.", timeout=LIVE_MS)
        expect(page.locator(".thread .messages")).to_contain_text("sent to ceo@example.com")
        expect(page.locator(".audit")).to_contain_text("Reason: wrong recipient")

    thread = api.get("/v1/threads/m-3")
    assert thread["status"] == "done"
    [result] = [m for m in thread["messages"] if m["role"] == "tool"]
    assert result["content"] == "sent to ceo@example.com"
    [decided] = decisions(api, "m-3")
    assert decided["actor"] == "ana"
    assert decided["data"]["answer"] == {
        "action": "edit",
        "arguments": {"to": "ceo@example.com", "body": "The numbers are attached. Call me."},
    }
    assert decided["data"]["reason"] == "wrong recipient"


def test_the_list_pages_and_filters(browser: Browser, url: str) -> None:
    api = Api(url)
    for n in range(52):
        api.order(f"p-{n:02}", wait=True)
    api.mail("m-8", "Hi.")
    api.mail("m-9", "Hello.")
    with opened(browser, url) as page:
        sign_in(page, "ana")
        rows = page.locator("tr[data-id]")
        expect(rows).to_have_count(50)  # a page
        expect(page.locator("h1 .count")).to_have_text("50+ waiting")
        # A new question shows at once, though it sorts before the page still to read.
        api.mail("m-10", "Arrived while pages were left to read.")
        expect(rows).to_have_count(51, timeout=LIVE_MS)
        page.get_by_role("button", name="Load more").click()
        expect(rows).to_have_count(55)
        expect(page.locator("h1 .count")).to_have_text("55 waiting")
        expect(page.get_by_role("button", name="Load more")).to_be_hidden()

        page.get_by_label("Tool").fill("send_email")
        page.get_by_role("button", name="Filter").click()
        expect(page).to_have_url(url + "/inbox#/?tool=send_email")
        expect(rows).to_have_count(3)
        api.mail("m-11", "One more.")
        expect(rows).to_have_count(4, timeout=LIVE_MS)

        page.get_by_label("Thread").fill("p-07")
        page.get_by_role("button", name="Filter").click()
        expect(page.get_by_text("No question matches these filters.")).to_be_visible()
        page.get_by_label("Tool").fill("")
        page.get_by_role("button", name="Filter").click()
        expect(rows).to_have_count(1)
        expect(rows).to_contain_text("p-07")

        page.get_by_role("button", name="Clear").click()
        expect(rows).to_have_count(50)
        expect(page.get_by_label("Thread")).to_have_value("")


def test_a_decision_whose_answer_is_lost_is_sent_again_with_its_key(
    browser: Browser, url: str
) -> None:
    api = Api(url)
    api.order("o-9", wait=True)
    keys: list[str | None] = []

    def lose_the_first_answer(route: Route) -> None:
        keys.append(route.request.headers.get("idempotency-key"))
        if len(keys) == 1:
            route.fetch()  # the server records it; its answer never comes back
            route.abort("connectionreset")
        else:
            route.continue_()

    with opened(browser, url) as page:
        page.route("**/v1/interrupts/*/decision", lose_the_first_answer)
        sign_in(page, "ana")
        open_question(page, "Ship order 2?")
        page.get_by_role("button", name="Approve", exact=True).click()
        expect(banner(page)).to_contain_text("an earlier attempt reached the server")
        expect(banner(page)).to_contain_text("The run finished.", timeout=LIVE_MS)
    assert len(keys) == 2 and keys[0] == keys[1] and keys[0]
    assert [(d["kind"], d["actor"]) for d in decisions(api, "o-9")] == [("decision", "ana")]


def test_a_viewer_reads_but_is_offered_no_decision(browser: Browser, url: str) -> None:
    api = Api(url)
    api.order("o-4", wait=True)
    api.mail("m-4", "Hello.")
    with opened(browser, url) as page:
        sign_in(page, "vic")
        expect(page.locator("#who")).to_contain_text("viewer")
        expect(page.locator("tr[data-id]")).to_have_count(2)
        for text in ("Ship order 2?", "send_email"):
            open_question(page, text)
            expect(page.get_by_text("you can read questions but not decide them")).to_be_visible()
            asked = page.get_by_label("The call's arguments").or_(page.locator(".lead"))
            expect(asked).to_be_visible()
            expect(page.get_by_role("button", name="Approve")).to_have_count(0)
            expect(page.get_by_role("button", name="Reject…")).to_have_count(0)
            page.get_by_role("link", name="← Pending questions").click()
    assert api.pending("o-4")[0]["status"] == "pending"


def test_four_eyes_refusal_is_shown_and_another_approver_may_decide(
    browser: Browser, tmp_path: Path
) -> None:
    with serving(lambda: inbox_server(tmp_path, four_eyes=True)) as served:
        api = Api(served.url)
        api.order("o-5", who="ana", wait=True)
        with opened(browser, served.url) as page:
            sign_in(page, "ana")
            open_question(page, "Ship order 2?")
            # Who may decide is shown with the question: the server's four eyes keeps ana out.
            expect(page.locator(".authority")).to_contain_text("anyone may decide; not ana")
            page.get_by_role("button", name="Approve", exact=True).click()
            expect(banner(page)).to_contain_text(
                "Not allowed: ana started this run and may not approve it"
            )
            expect(page.get_by_role("button", name="Approve", exact=True)).to_be_enabled()
            assert decisions(api, "o-5") == []

            page.get_by_role("button", name="Log out").click()
            sign_in(page, "ben")
            expect(page.get_by_role("heading", level=1)).to_have_text("Ship order 2?")
            page.get_by_role("button", name="Reject…").click()
            page.get_by_label("Reason").fill("not this week")
            page.get_by_role("button", name="Reject", exact=True).click()
            expect(banner(page)).to_contain_text("The run finished.", timeout=LIVE_MS)
        assert api.get("/v1/threads/o-5")["values"]["approved"] is False
        [decided] = decisions(api, "o-5")
        assert (decided["actor"], decided["data"]["reason"]) == ("ben", "not this week")


def test_any_other_question_takes_json_that_only_the_server_checks(
    browser: Browser, tmp_path: Path
) -> None:
    with serving(lambda: refund_server(tmp_path)) as served:
        api = Api(served.url)
        api.refund("r-1", 80)
        with opened(browser, served.url) as page:
            sign_in(page, "ana")
            row = page.locator("tr[data-id]").filter(has_text="How much of the 80 €")
            expect(row.locator("time.soon, time[data-live=deadline]")).to_contain_text("in 59 min")
            open_question(page, "How much of the 80 €")
            countdown = page.locator(".status-line time")
            expect(countdown).to_contain_text("in 59 min")
            shown = countdown.inner_text()
            expect(countdown).not_to_have_text(shown, timeout=LIVE_MS)  # it ticks

            answer = page.get_by_label("Answer (JSON)")
            send = page.get_by_role("button", name="Send the answer")
            answer.fill("fifty")
            send.click()
            expect(page.get_by_role("alert")).to_contain_text("This is not JSON")
            for text, refusal in (('"fifty"', "is not of type 'integer'"), ("500", "maximum")):
                answer.fill(text)
                send.click()
                expect(page.get_by_role("alert")).to_contain_text(refusal)
            assert decisions(api, "r-1") == []

            answer.fill("50")
            send.click()
            expect(banner(page)).to_contain_text("The run finished.", timeout=LIVE_MS)
        assert api.get("/v1/threads/r-1")["values"] == {"amount": 80, "granted": 50}


def test_the_event_stream_resumes_from_the_last_event_id_after_a_drop(
    browser: Browser, url: str
) -> None:
    api = Api(url)
    # One real frame of the stream, taken as a client would have received it.
    request = urllib.request.Request(url + "/v1/events", headers=_auth("root"))
    with urllib.request.urlopen(request, timeout=10) as stream:
        assert stream.readline() == b"retry: 2000\n"
        api.order("o-6a", wait=True)
        frame = b""
        while not frame.endswith(b"\n\n") or b"data:" not in frame:
            line = stream.readline()
            frame = b"" if line.startswith(b":") or frame + line == b"\n" else frame + line
    first_id = frame.split(b"\n")[0].removeprefix(b"id: ").decode()

    asked: list[str | None] = []

    def events(route: Route) -> None:
        asked.append(route.request.headers.get("last-event-id"))
        if len(asked) == 1:
            # That frame, then the connection drops.
            route.fulfill(
                status=200,
                headers={"Content-Type": "text/event-stream"},
                body=b"retry: 100\n\n" + frame,
            )
            return
        if len(asked) == 2:
            api.order("o-6b", n=6, wait=True)  # happens while the page is disconnected
        route.continue_()

    with opened(browser, url) as page:
        page.route("**/v1/events", events)
        sign_in(page, "ana")
        expect(page.locator("tr[data-id]").filter(has_text="Ship order 2?")).to_be_visible()
        expect(page.locator("tr[data-id]").filter(has_text="Ship order 7?")).to_be_visible(
            timeout=LIVE_MS
        )
        assert asked[:2] == [None, first_id]
        expect(page.locator("#live")).to_have_text("Live")


def test_event_stream_frames_are_parsed_however_the_text_is_cut(browser: Browser, url: str) -> None:
    text = (
        "retry: 1500\r\n: a comment\r\n\r\n"
        'id: one\r\nevent: interrupt.created\r\ndata: {"a":\r\ndata: 1}\r\n\r\n'
        "data: no id of its own\n\n"
        "id: two\revent: run.finished\rdata:x\r\r"
        "event: ignored, no data\n\n"
    )
    expected = [
        {"id": "one", "type": "interrupt.created", "data": '{"a":\n1}'},
        {"id": "one", "type": "message", "data": "no id of its own"},
        {"id": "two", "type": "run.finished", "data": "x"},
    ]
    with opened(browser, url) as page:
        results = page.evaluate(
            """async (text) => {
                const { FrameParser } = await import("./web/events.js");
                const out = [];
                for (let cut = 0; cut <= text.length; cut++) {
                    const parser = new FrameParser();
                    const events = parser.push(text.slice(0, cut));
                    events.push(...parser.push(text.slice(cut)));
                    out.push({ events, retry: parser.retry });
                }
                return out;
            }""",
            text,
        )
    for result in results:
        assert result == {"events": expected, "retry": 1500}


def test_on_a_narrow_screen_nothing_scrolls_sideways(browser: Browser, url: str) -> None:
    api = Api(url)
    api.mail("m-7", "A rather long message body " * 8)
    with opened(browser, url, width=390, height=844) as page:
        sign_in(page, "ana")
        expect(page.locator("tr[data-id]")).to_have_count(1)
        assert _fits(page)
        open_question(page, "send_email")
        page.get_by_role("button", name="Edit…").click()
        expect(page.get_by_role("button", name="Run with the edited arguments")).to_be_visible()
        assert _fits(page)


def _fits(page: Page) -> bool:
    width: int = page.evaluate("document.documentElement.scrollWidth")
    return width <= 390


def _auth(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[who][0]}", "Accept": "text/event-stream"}


def test_the_page_is_served_with_its_content_security_policy(url: str) -> None:
    with urllib.request.urlopen(url + "/inbox", timeout=10) as page:
        policy = page.headers["Content-Security-Policy"]
        html = page.read().decode()
    assert "script-src 'self'" in policy and "style-src 'self'" in policy
    assert "<script>" not in html and "<style" not in html and " style=" not in html
    assert '<script type="module" src="web/inbox.js"></script>' in html


def test_a_quorum_question_shows_its_approvals_and_waits_for_the_second(
    browser: Browser, tmp_path: Path
) -> None:
    from _serving import auth, quorum_app

    from interlock.server import create_app

    factory = lambda: create_app(quorum_app(tmp_path / "pay.db"), auth=auth())  # noqa: E731
    with serving(factory) as served:
        api = Api(served.url)
        status, _ = api.call("POST", "/v1/threads/pay-1/runs", "root", {"input": {}, "wait": True})
        assert status == 200
        with opened(browser, served.url) as ana, opened(browser, served.url) as ben:
            sign_in(ana, "ana")
            open_question(ana, "Pay 9,000 EUR?")
            expect(ana.locator(".status-line")).to_contain_text("0 of 2 distinct approvals")
            ana.get_by_role("button", name="Approve", exact=True).click()
            expect(banner(ana)).to_contain_text("The question waits for more approvals.")

            sign_in(ben, "ben")
            row = ben.locator("tr[data-id]").filter(has_text="Pay 9,000 EUR?")
            expect(row).to_contain_text("1 of 2 approvals (ana)")
            open_question(ben, "Pay 9,000 EUR?")
            ben.get_by_role("button", name="Approve", exact=True).click()
            expect(banner(ben)).to_contain_text("The run finished.", timeout=LIVE_MS)
        assert api.get("/v1/threads/pay-1")["values"] == {"approved": True}
        kinds = [(d["kind"], d["actor"]) for d in decisions(api, "pay-1")]
        assert kinds == [("approval", "ana"), ("approval", "ben"), ("decision", "ben")]


def test_failed_threads_are_listed_with_their_error_and_command_in_the_identity_s_scope(
    browser: Browser, tmp_path: Path
) -> None:
    with serving(lambda: shipping_server(tmp_path)) as served:
        api = Api(served.url)
        failed = api.ship("s-1")
        api.ship("ops-1")
        with opened(browser, served.url) as page:
            sign_in(page, "ana")
            expect(page.locator("#failed-link + .badge")).to_have_text("2")
            page.get_by_role("link", name="Failed threads").click()
            expect(page.get_by_role("heading", level=1)).to_contain_text("2 failed")
            rows = page.locator("tr[data-thread]")
            expect(rows).to_have_count(2)
            row = page.locator('tr[data-thread="s-1"]')
            expect(row).to_contain_text("shipping")
            expect(row.locator(".failure-error")).to_have_text(failed["error"])
            assert failed["error"].startswith("InvalidUpdate: ")
            command = "interlock resume s-1 --app MODULE:ATTR"
            expect(row.locator("code.continue-with")).to_have_text(command)
            expect(row.locator(".failure-error")).to_contain_text("<b>no_such_key</b>")
            expect(row.locator(".failure-error b")).to_have_count(0)
            page.context.grant_permissions(["clipboard-read", "clipboard-write"])
            row.get_by_role("button", name="Copy: Command that continues s-1").click()
            expect(row.get_by_role("status")).to_have_text("Copied")
            assert page.evaluate("navigator.clipboard.readText()") == command

            # A thread that fails while the list is open joins it.
            api.ship("s-2")
            expect(rows).to_have_count(3, timeout=LIVE_MS)

            # The thread's own page says why it failed and how to continue it.
            row.get_by_role("link", name="s-1").click()
            expect(page.locator("#thread-status")).to_have_attribute("data-status", "failed")
            why = page.get_by_role("region", name="Why the thread failed")
            expect(why.locator("pre")).to_have_text(failed["error"])
            expect(why.locator("code.continue-with")).to_have_text(command)

        # An identity scoped to the ops- threads sees only those.
        with opened(browser, served.url) as page:
            sign_in(page, "ops")
            expect(page.locator("#failed-link + .badge")).to_have_text("1")
            page.get_by_role("link", name="Failed threads").click()
            expect(page.locator("tr[data-thread]")).to_have_count(1)
            expect(page.locator("tr[data-thread]")).to_contain_text("ops-1")
            # A thread outside its prefixes is, to it, a thread that does not exist.
            page.goto(f"{served.url}/inbox#/threads/s-1")
            expect(page.get_by_role("alert")).to_have_text("There is no such thread.")
            expect(page.locator(".failure")).to_have_count(0)


def test_an_edited_call_is_marked_with_the_arguments_asked_for_and_those_it_ran_with(
    browser: Browser, url: str
) -> None:
    api = Api(url)
    message = {"role": "user", "content": "The numbers are attached."}
    body = {"input": {"messages": [message]}, "app": "mailer", "wait": True}
    status, started = api.call("POST", "/v1/threads/m-9/runs", "ana", body)
    assert status == 200, started
    [question] = started["thread_view"]["interrupts"]
    edited = {"to": "ceo@example.com", "body": "The numbers are attached."}
    view = api.decide(question, {"action": "edit", "arguments": edited})
    assert view["status"] == "done"
    with opened(browser, url) as page:
        sign_in(page, "vic")
        page.goto(f"{url}/inbox#/threads/m-9")
        call = page.locator(".messages .call.edited")
        expect(call).to_have_count(1)
        expect(call.locator(".badge")).to_have_text("edited by ben")
        expect(call.get_by_label("Arguments send_email was asked with")).to_contain_text(
            '"cfo@example.com"'
        )
        expect(call.get_by_label("Edited arguments of send_email")).to_contain_text(
            '"ceo@example.com"'
        )
        expect(call.locator(".diff li")).to_have_count(1)
        expect(call.locator(".diff li ins")).to_have_text('"ceo@example.com"')
        expect(page.locator(".messages")).to_contain_text("sent to ceo@example.com")

        # The question's own page marks the call it asked about, and its thread's message.
        page.goto(f"{url}/inbox#/interrupts/{question['id']}")
        expect(page.locator(".badge.edited")).to_have_text(["edited by ben", "edited by ben"])
        expect(page.get_by_label("The call's arguments")).to_contain_text('"cfo@example.com"')
        expect(page.get_by_label("The edited arguments")).to_contain_text('"ceo@example.com"')


def test_what_lies_outside_the_identity_s_tool_scope_is_not_shown(
    browser: Browser, tmp_path: Path
) -> None:
    with serving(lambda: ops_server(tmp_path)) as served:
        api = Api(served.url)

        def run(thread: str) -> Any:
            body = {"input": {"messages": [{"role": "user", "content": "go"}]}, "wait": True}
            status, started = api.call("POST", f"/v1/threads/{thread}/runs", "root", body)
            assert status == 200, started
            return started["thread_view"]["interrupts"][0]

        wipe = run("t-1")
        edit = {"action": "edit", "arguments": {"device": "/dev/EDITED-SECRET"}}
        [refund] = api.decide(wipe, edit, who="root")["interrupts"]
        waiting = run("t-2")

        def shown(page: Page) -> str:
            text: str = page.locator("body").inner_text()
            return text

        # Root sees the wipes: the page would show them if the server sent them.
        with opened(browser, served.url) as page:
            sign_in(page, "root")
            expect(page.locator("tr[data-id]")).to_have_count(2)
            page.goto(f"{served.url}/inbox#/threads/t-1")
            expect(page.locator(".messages")).to_contain_text("wipe_disk")

        # clerk decides refunds only.
        with opened(browser, served.url) as page:
            sign_in(page, "clerk")
            rows = page.locator("tr[data-id]")
            expect(rows).to_have_count(1)
            expect(rows).to_contain_text("refund")
            assert all(secret not in shown(page) for secret in WIPE_SECRETS)

            # A wipe's page, reached by its id, is a question that does not exist.
            for question in (wipe, waiting):
                page.goto(f"{served.url}/inbox#/interrupts/{question['id']}")
                expect(page.get_by_role("heading", level=1)).to_have_text("Question not found")
                expect(page.get_by_role("alert")).to_contain_text("There is no such question.")
                assert all(secret not in shown(page) for secret in WIPE_SECRETS)

            # The thread shows the refund's call and question, and nothing of the wipe.
            page.goto(f"{served.url}/inbox#/threads/t-1")
            messages = page.locator(".messages")
            expect(messages).to_contain_text("refund")
            expect(messages.locator("li")).to_have_count(2)
            expect(page.locator(".audit li")).to_have_count(1)
            assert all(secret not in shown(page) for secret in WIPE_SECRETS)

            # The refund's own page shows the same conversation.
            page.goto(f"{served.url}/inbox#/interrupts/{refund['id']}")
            expect(page.get_by_role("heading", level=1)).to_contain_text("refund")
            expect(page.locator(".messages li")).to_have_count(2)
            assert all(secret not in shown(page) for secret in WIPE_SECRETS)


def test_a_budget_question_is_raised_from_the_page_and_the_thread_shows_its_usage(
    browser: Browser, tmp_path: Path
) -> None:
    factory = lambda: create_app({"adder": budget_agent(tmp_path / "b.db")}, auth=auth())  # noqa: E731
    with serving(factory) as served:
        api = Api(served.url)
        body = {"input": {"messages": ["add"]}, "app": "adder", "wait": True}
        status, started = api.call("POST", "/v1/threads/b-1/runs", "ana", body)
        assert status == 200, started
        with opened(browser, served.url) as page:
            sign_in(page, "ana")
            open_question(page, "This run has used 40,000 tokens")
            expect(page.get_by_label("The call's arguments")).to_contain_text('"tokens": 60000')
            page.get_by_role("button", name="Edit…").click()
            form = page.get_by_role("form", name="Edit the arguments")
            form.get_by_label("tokens").fill("100000")
            form.get_by_role("button", name="Run with the edited arguments").click()
            expect(banner(page)).to_contain_text("Your decision was recorded")
            expect(banner(page)).to_contain_text("The run finished.", timeout=LIVE_MS)

            page.goto(f"{served.url}/inbox#/threads/b-1")
            usage = page.locator("#usage")
            expect(usage.locator(".usage-run")).to_contain_text("60,000 in · 20,000 out")
            expect(usage.locator(".usage-run")).to_contain_text("(4,000 cached)")
            expect(usage.locator(".usage-run")).to_contain_text("4 calls · $0.3450")
            expect(usage.locator(".usage-models")).to_contain_text("gpt-4o")
        thread = api.get("/v1/threads/b-1")
        assert thread["status"] == "done" and thread["usage"]["run"]["calls"] == 4
