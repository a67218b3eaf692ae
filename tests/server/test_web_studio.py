"""The Studio page in a real browser: a thread's graph, its timeline, comparisons and forks.

Each test runs the approval server on loopback (the order graph, a supervisor whose billing
agent's refunds wait for a person, and a 300-turn chat, on SQLite files) and drives Debian's
Chromium through Playwright's sync API; the API is read beside the page to check what the page
did. Waiting is Playwright's: each expectation polls the page until it holds or times out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _serving import serving
from _web_page import CHAT_TURNS, Api, opened, sign_in, studio_server
from playwright.sync_api import Browser, Page, expect

pytestmark = pytest.mark.slow  # a real browser: run on the main Python only

LIVE_MS = 3000
"""How long a change may take to reach an open page through the event stream."""


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    """The URL of a fresh server."""
    with serving(lambda: studio_server(tmp_path)) as served:
        yield served.url


def open_studio(page: Page, thread: str, app: str | None = None) -> None:
    """Go to ``thread``'s Studio and wait until its timeline shows."""
    query = f"?app={app}" if app else ""
    page.goto(page.url.split("#")[0] + f"#/threads/{thread}/studio{query}")
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Studio · {thread}")
    expect(page.locator(".timeline li.entry").first).to_be_visible()


def entry(page: Page, step: int) -> Any:
    """The timeline entry of step ``step``."""
    return page.locator(f".timeline li.entry[data-step='{step}']")


def audit(api: Api, thread: str) -> list[Any]:
    """``thread``'s whole audit log as the API shows it to an admin."""
    items: list[Any] = api.get(f"/v1/threads/{thread}/audit?limit=500")["items"]
    return items


def checkpoints(api: Api, thread: str) -> list[str]:
    """The ids of ``thread``'s checkpoints, newest first."""
    return [c["checkpoint_id"] for c in api.get(f"/v1/threads/{thread}/history?limit=500")["items"]]


def test_a_supervisors_graph_renders_with_the_waiting_tool_marked(
    browser: Browser, url: str
) -> None:
    api = Api(url)
    body = {"input": {"messages": ["Refund order 7, please."]}, "app": "desk", "wait": True}
    status, started = api.call("POST", "/v1/threads/desk-1/runs", "ana", body)
    assert status == 200 and started["thread_view"]["status"] == "interrupted", started
    graph = api.get("/v1/threads/desk-1/graph")
    waiting = [path for path, mark in graph["marks"].items() if mark == "waiting"]
    assert any(path.endswith("billing/tools") for path in waiting), graph["marks"]

    with opened(browser, url) as page:
        sign_in(page, "vic")
        open_studio(page, "desk-1")
        card = page.locator(".studio-graph")
        expect(card.locator(".drawing svg")).to_be_visible()
        # The tools node of the billing agent, inside the supervisor's block, is the one marked.
        marked = card.locator(".drawing svg g.node.waiting")
        expect(marked.filter(has_text="refund")).to_have_count(1)
        expect(card.locator(".drawing svg g.node.waiting").filter(has_text="model")).to_have_count(
            0
        )
        expect(card.locator(".legend li.present")).to_contain_text(["waits for a person"])
        # The text is there too, for a reader or a copy.
        card.get_by_text("The graph as text").click()
        expect(card.get_by_label("The graph as Mermaid text")).to_contain_text("flowchart")


def test_the_graph_falls_back_to_its_text_when_the_renderer_cannot_load(
    browser: Browser, url: str
) -> None:
    api = Api(url)
    api.order("o-1", wait=True)
    with opened(browser, url) as page:
        page.route("**/web/vendor/**", lambda route: route.abort())
        sign_in(page, "ana")
        open_studio(page, "o-1")
        card = page.locator(".studio-graph")
        expect(card.get_by_role("alert")).to_contain_text("The graph could not be drawn")
        expect(card.locator(".drawing pre")).to_contain_text("flowchart")
        expect(card.locator(".drawing svg")).to_have_count(0)


def test_a_300_turn_threads_timeline_opens_on_its_newest_page_and_pages_to_the_start(
    browser: Browser, url: str
) -> None:
    api = Api(url)
    note = "A long note. " * 400  # 5,200 characters: folded in the timeline
    body = {"input": {"note": note}, "app": "chat", "wait": True}
    status, done = api.call("POST", "/v1/threads/chat-1/runs", "ana", body)
    assert status == 200 and done["thread_view"]["status"] == "done", done
    every = checkpoints(api, "chat-1")
    assert len(every) == CHAT_TURNS + 1

    with opened(browser, url) as page:
        sign_in(page, "ana")
        open_studio(page, "chat-1", "chat")
        entries = page.locator(".timeline li.entry")
        expect(entries).to_have_count(20)
        newest = entries.first
        expect(newest).to_have_attribute("data-checkpoint", every[0])
        expect(newest).to_contain_text(f"Step {CHAT_TURNS}")
        expect(newest.locator(".ran")).to_contain_text("turn wrote")
        appended = newest.locator(".state-changes li[data-op='append']")
        expect(appended).to_contain_text("messages")
        expect(appended).to_contain_text(f'"answer {CHAT_TURNS}"')
        expect(newest.locator(".state-changes li[data-op='change']")).to_contain_text(
            f"{CHAT_TURNS - 1}"
        )

        more = page.get_by_role("button", name="Show older")
        for shown in (40, 60, 80):
            more.click()
            expect(entries).to_have_count(shown)
        # All the way down: 301 checkpoints, the button gone after the last page.
        while (count := entries.count()) < len(every):
            more.click()
            expect(entries).to_have_count(min(count + 20, len(every)))
        expect(more).to_be_hidden()
        shown_ids = entries.evaluate_all("els => els.map(e => e.dataset.checkpoint)")
        assert shown_ids == every  # each once, newest first
        first = entries.last
        expect(first).to_contain_text("Step 0")
        expect(first).to_have_attribute("data-source", "input")
        folded = first.locator(".state-changes li", has_text="note").locator(".folded")
        expect(folded).to_contain_text('"A long note. A long note.')
        expect(folded).to_contain_text(f"({len(json.dumps(note)):,} characters)")
        assert len(folded.inner_text()) < 400


def test_two_ticked_entries_are_compared(browser: Browser, url: str) -> None:
    api = Api(url)
    api.order("o-2", wait=True)
    [question] = api.pending("o-2")
    api.decide(question, True)
    with opened(browser, url) as page:
        sign_in(page, "ana")
        open_studio(page, "o-2")
        entries = page.locator(".timeline li.entry")
        compare = page.locator(".studio-compare")
        expect(compare).to_contain_text("Tick two entries")
        # The newest (done) and the oldest (the input).
        entries.first.get_by_role("checkbox").check()
        expect(compare).to_contain_text("Tick one more entry")
        entries.last.get_by_role("checkbox").check()
        changes = compare.locator(".state-changes li")
        expect(changes.filter(has_text="approved")).to_contain_text("added")
        expect(changes.filter(has_text="done")).to_contain_text("true")
        ids = entries.evaluate_all("els => els.map(e => e.dataset.checkpoint)")
        asked = api.get(f"/v1/threads/o-2/compare?from={ids[-1]}&to={ids[0]}")
        expect(changes).to_have_count(len(asked["changes"]))
        compare.get_by_role("button", name="Clear").click()
        expect(compare).to_contain_text("Tick two entries")
        expect(entries.get_by_role("checkbox").locator(":scope:checked")).to_have_count(0)


def test_a_fork_whose_edit_breaks_the_schema_is_refused_and_changes_nothing(
    browser: Browser, url: str
) -> None:
    api = Api(url)
    api.order("o-3", wait=True)
    before_audit = audit(api, "o-3")
    before_checkpoints = checkpoints(api, "o-3")
    threads_before = api.get("/v1/threads?limit=100")["items"]
    with opened(browser, url) as page:
        sign_in(page, "root")
        open_studio(page, "o-3")
        page.locator(".timeline li.entry").first.get_by_role("button", name="Fork from").click()
        form = page.get_by_role("form", name="Fork from step")
        editor = form.get_by_label("State (JSON)")
        expect(editor).to_have_value(re.compile('"n": 2'))
        expect(
            form.get_by_text("No changes: the branch starts with the same state.")
        ).to_be_visible()

        # Not JSON: said at once, never sent.
        editor.fill('{"n": ')
        expect(form.get_by_text("This is not JSON")).to_be_visible()
        expect(form.get_by_role("button", name="Fork", exact=True)).to_be_disabled()

        # JSON the state's schema refuses: the server says why, under the editor.
        editor.fill(json.dumps({"n": "two"}, indent=2))
        expect(form.get_by_text("Changed: n")).to_be_visible()
        form.get_by_label("New thread").fill("o-3-broken")
        form.get_by_role("button", name="Fork", exact=True).click()
        problems = form.get_by_role("list", name="What the state's schema refused")
        expect(problems).to_contain_text("/n")
        expect(form.locator(".problems")).to_contain_text("nothing was written")
        expect(page.get_by_role("heading", level=1)).to_have_text("Studio · o-3")

        # A valid edit into a thread that exists: refused too, the id pointed out.
        editor.fill(json.dumps({"n": 3}, indent=2))
        form.get_by_label("New thread").fill("o-3")
        form.get_by_role("button", name="Fork", exact=True).click()
        expect(form.locator(".problems")).to_contain_text("a thread named o-3 exists already")
        expect(form.get_by_label("New thread")).to_be_focused()

    assert api.call("GET", "/v1/threads/o-3-broken", "root")[0] == 404
    assert api.get("/v1/threads?limit=100")["items"] == threads_before
    assert audit(api, "o-3") == before_audit
    assert checkpoints(api, "o-3") == before_checkpoints


def test_a_fork_runs_and_both_branches_show_where_they_meet(browser: Browser, url: str) -> None:
    api = Api(url)
    api.order("o-4", wait=True)
    source_head = checkpoints(api, "o-4")
    with opened(browser, url) as page:
        sign_in(page, "root")
        open_studio(page, "o-4")
        page.locator(".timeline li.entry").first.get_by_role("button", name="Fork from").click()
        form = page.get_by_role("form", name="Fork from step")
        editor = form.get_by_label("State (JSON)")
        expect(editor).to_have_value(re.compile('"n": 2'))
        editor.fill(json.dumps({"n": 41}, indent=2))
        expect(form.get_by_text("Changed: n")).to_be_visible()
        expect(form.get_by_label("New thread")).to_have_value(re.compile(r"^o-4-fork-[0-9a-f]{6}$"))
        form.get_by_label("New thread").fill("o-4-b")
        form.get_by_label("As node").select_option("prepare")
        form.get_by_label("Run it after forking").check()
        form.get_by_role("button", name="Fork", exact=True).click()

        # The branch's Studio: where it came from, and (run) its own question.
        expect(page.get_by_role("heading", level=1)).to_have_text("Studio · o-4-b")
        forked = page.locator(".timeline .forked-from")
        expect(forked).to_contain_text("Forked from o-4 at step")
        expect(forked).to_contain_text("by root")
        expect(page.locator(".timeline li.entry").first).to_contain_text(
            "Waits on a question", timeout=LIVE_MS
        )

        # Back to the source: its timeline has the fork, with a link to the branch.
        forked.get_by_role("link", name="o-4").click()
        expect(page.get_by_role("heading", level=1)).to_have_text("Studio · o-4")
        fork_event = page.locator(".timeline li[data-kind='fork']")
        expect(fork_event).to_contain_text("root forked a branch from here")
        fork_event.get_by_role("link", name="o-4-b").click()
        expect(page.get_by_role("heading", level=1)).to_have_text("Studio · o-4-b")

    branch = api.get("/v1/threads/o-4-b")
    assert branch["values"]["n"] == 41
    assert [i["summary"] for i in branch["interrupts"]] == ["Ship order 41?"]
    assert checkpoints(api, "o-4") == source_head  # the source keeps its history
    [fork] = [e for e in audit(api, "o-4") if e["kind"] == "fork"]
    assert fork["actor"] == "root" and fork["data"]["branch"]["thread"] == "o-4-b"


@pytest.mark.parametrize("who", ["vic", "ana", "auditor"])
def test_a_viewer_an_approver_or_a_scoped_admin_sees_the_studio_but_no_fork(
    browser: Browser, url: str, who: str
) -> None:
    api = Api(url)
    api.order("o-5", wait=True)
    with opened(browser, url) as page:
        sign_in(page, who)
        page.goto(url + "/inbox#/threads/o-5")
        page.get_by_role("link", name="Open in Studio").click()
        expect(page.get_by_role("heading", level=1)).to_have_text("Studio · o-5")
        entries = page.locator(".timeline li.entry")
        expect(entries.first).to_be_visible()
        expect(page.locator(".studio-graph .drawing svg")).to_be_visible()
        expect(entries.first.get_by_role("checkbox")).to_be_visible()
        expect(page.get_by_role("button", name="Fork from")).to_have_count(0)
        expect(page.locator(".studio-fork")).to_be_hidden()
    # The server agrees: forking is for admins who see every tool (auditor sees refunds only).
    head = checkpoints(api, "o-5")[0]
    status, refused = api.call(
        "POST", "/v1/threads/o-5/fork", who, {"checkpoint_id": head, "new_thread": "o-5-x"}
    )
    assert status == 403, refused


def test_the_timeline_follows_the_thread_live(browser: Browser, url: str) -> None:
    api = Api(url)
    api.order("o-6", wait=True)
    with opened(browser, url) as page:
        sign_in(page, "ana")
        open_studio(page, "o-6")
        entries = page.locator(".timeline li.entry")
        expect(entries.first).to_contain_text("waiting for a decision")
        count = entries.count()
        page.evaluate("window.stillTheSamePage = true")

        [question] = api.pending("o-6")
        api.decide(question, True, who="ben")
        expect(entries.first).to_contain_text("done", timeout=LIVE_MS)
        expect(page.locator(".timeline li[data-kind='decision']")).to_contain_text(
            "ben decided: approve"
        )
        assert entries.count() > count
        expect(page.locator("#studio-status")).to_have_text("done")
        assert page.evaluate("window.stillTheSamePage") is True  # no reload brought it


def test_a_pause_at_a_breakpoint_shows_where_the_run_stopped(browser: Browser, url: str) -> None:
    api = Api(url)
    body = {"input": {"n": 1}, "app": "shipments", "wait": True}
    status, started = api.call("POST", "/v1/threads/s-1/runs", "ana", body)
    assert status == 200, started
    [question] = started["thread_view"]["interrupts"]
    assert api.decide(question, True)["status"] == "paused"
    with opened(browser, url) as page:
        sign_in(page, "vic")
        open_studio(page, "s-1")
        newest = page.locator(".timeline li.entry").first
        expect(newest.locator(".paused")).to_have_text("Paused before finish")
        expect(newest.locator("li[data-kind='interrupt']")).to_contain_text(
            "The run paused at a breakpoint"
        )
        decided = page.locator(".timeline li[data-kind='decision']")
        expect(decided).to_contain_text("ben decided: approve")


def test_an_admin_limited_to_some_threads_is_told_why_a_fork_outside_them_is_refused(
    browser: Browser, url: str
) -> None:
    api = Api(url)
    api.order("other-1", wait=True)
    with opened(browser, url) as page:
        sign_in(page, "outsider")  # an admin of the threads whose ids start with "other-"
        open_studio(page, "other-1")
        page.locator(".timeline li.entry").first.get_by_role("button", name="Fork from").click()
        form = page.get_by_role("form", name="Fork from step")
        expect(form.get_by_label("New thread")).to_have_value(re.compile(r"^other-1-fork-"))
        form.get_by_label("New thread").fill("mine-1")
        form.get_by_role("button", name="Fork", exact=True).click()
        expect(form.locator(".problems")).to_contain_text("Not forked:")
        expect(form.locator(".problems")).to_contain_text("other-")
        assert api.call("GET", "/v1/threads/mine-1", "root")[0] == 404

        form.get_by_label("New thread").fill("other-1-b")
        form.get_by_role("button", name="Fork", exact=True).click()
        expect(page.get_by_role("heading", level=1)).to_have_text("Studio · other-1-b")
    assert api.get("/v1/threads/other-1-b")["values"] == api.get("/v1/threads/other-1")["values"]


def test_on_a_phone_the_studio_does_not_scroll_sideways(browser: Browser, url: str) -> None:
    api = Api(url)
    body = {"input": {"messages": ["Refund order 7, please."]}, "app": "desk", "wait": True}
    assert api.call("POST", "/v1/threads/desk-2/runs", "ana", body)[0] == 200
    with opened(browser, url, phone=True) as page:
        sign_in(page, "root")
        open_studio(page, "desk-2")
        expect(page.locator(".studio-graph .drawing svg")).to_be_visible()
        page.locator(".timeline li.entry").first.get_by_role("button", name="Fork from").tap()
        expect(page.get_by_label("State (JSON)")).not_to_have_value("")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
