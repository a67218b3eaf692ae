"""Make the web inbox's pictures in docs/images/ again.

Run from the repository's root, in its venv (the dev extras and Playwright installed)::

    python docs/screenshots.py          # all of them
    python docs/screenshots.py phone    # only the phone's (or: desktop, email, studio)

It needs Debian's Chromium at /usr/bin/chromium (the ``chromium`` package). It serves the test
suite's two apps (an order graph with an approve() question, a mail agent whose send_email
calls wait for approval) on loopback, asks a few questions of each and saves:

- ``docs/images/inbox.png``: the pending list, at 1280x800;
- ``docs/images/detail.png``: one send_email call, its edit form filled in and the diff of
  the edit, the whole page at 1280 wide.

and, in a phone's browser context (390x844 CSS pixels, touch, 3 pixels a CSS pixel), with a
shell agent beside them whose ``rm`` commands ask for a confirmation step:

- ``docs/images/phone-list.png``: the pending list;
- ``docs/images/phone-detail.png``: a send_email call, scrolled to the decision's buttons;
- ``docs/images/phone-confirm.png``: the confirmation step of an ``rm`` command;
- ``docs/images/email-link.png``: the page an e-mail's approve link opens (a desk agent's
  refund, its mail caught by an aiosmtpd mailbox on loopback).

and, from the Studio (1200 wide; a supervisor whose billing agent's refunds wait for a person,
and the order graph):

- ``docs/images/studio-graph.png``: the supervisor's graph, its waiting refund marked;
- ``docs/images/studio-timeline.png``: the timeline of an order whose question was approved;
- ``docs/images/studio-fork.png``: the fork form from that order's question, its state edited.
"""

from __future__ import annotations

import json
import sys
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "images"
sys.path.insert(0, str(ROOT / "tests" / "server"))  # the test apps and the browser set-up

from _links_server import link_server, links_of  # noqa: E402
from _serving import TOKENS, serving  # noqa: E402
from _web_page import (  # noqa: E402
    Api,
    inbox_server,
    launch,
    open_question,
    opened,
    phone_server,
    sign_in,
    studio_server,
)
from playwright.sync_api import expect, sync_playwright  # noqa: E402


def desktop() -> None:
    """The desktop's pictures: the list and a question's page, 1280 wide."""
    with tempfile.TemporaryDirectory() as folder, serving(lambda: inbox_server(Path(folder))) as s:
        api = Api(s.url)
        api.order("order-1042", n=1041, wait=True)
        api.mail("invoice-march", "Dear Dana, the March invoice is attached. Kind regards, Sam")
        api.order("order-1043", n=1042, wait=True)
        api.mail("welcome-ravi", "Welcome aboard, Ravi! Your first day is Monday at 9.")
        with sync_playwright() as playwright:
            browser = launch(playwright)
            with opened(browser, s.url) as page:
                sign_in(page, "ana")
                expect(page.locator("tr[data-id]")).to_have_count(4)
                page.screenshot(path=str(IMAGES / "inbox.png"))

                open_question(page, "the March invoice")
                page.get_by_role("button", name="Edit…").click()
                form = page.get_by_role("form", name="Edit the arguments")
                form.get_by_label("to (required)").fill("accounts@example.com")
                form.get_by_label("body (required)").fill(
                    "Dear Dana, the March invoice is attached; it is due on 15 April. "
                    "Kind regards, Sam"
                )
                form.get_by_label("Reason (optional, kept in the audit trail)").fill(
                    "Invoices go to the accounts address."
                )
                expect(form.locator(".changes li")).to_have_count(2)
                page.locator(":focus").blur()
                page.screenshot(path=str(IMAGES / "detail.png"), full_page=True)
            browser.close()
    print(f"wrote {IMAGES / 'inbox.png'} and {IMAGES / 'detail.png'}")


def phone() -> None:
    """The phone's pictures: the list, a question's page and the confirmation step."""
    names = ["phone-list.png", "phone-detail.png", "phone-confirm.png"]
    with tempfile.TemporaryDirectory() as folder, serving(lambda: phone_server(Path(folder))) as s:
        api = Api(s.url)
        api.mail("invoice-march", "Dear Dana, the March invoice is attached. Kind regards, Sam")
        api.order("order-1042", n=1041, wait=True)
        api.shell("cleanup-tmp", "rm -rf /tmp/build-cache")
        with sync_playwright() as playwright:
            browser = launch(playwright)
            with opened(browser, s.url, phone=True) as page:
                sign_in(page, "ana")
                expect(page.locator("tr[data-id]")).to_have_count(3)
                page.screenshot(path=str(IMAGES / names[0]))

                open_question(page, "the March invoice")
                decide = page.locator(".card.decide")
                expect(decide.get_by_role("button", name="Approve", exact=True)).to_be_visible()
                # The call, then the decision's buttons under it.
                page.evaluate("document.querySelector('.main-column .card').scrollIntoView()")
                page.screenshot(path=str(IMAGES / names[1]))

                page.get_by_role("link", name="← Pending questions").tap()
                open_question(page, "rm -rf /tmp/build-cache")
                page.get_by_role("button", name="Approve…").tap()
                step = page.get_by_role("alertdialog")
                expect(step).to_be_visible()
                page.evaluate("document.querySelector('.card.decide').scrollIntoView()")
                page.screenshot(path=str(IMAGES / names[2]))
            browser.close()
    print("wrote " + ", ".join(str(IMAGES / name) for name in names))


def email() -> None:
    """The page an e-mail's approve link opens, at a phone's viewport."""
    with tempfile.TemporaryDirectory() as tmp, link_server(Path(tmp)) as server:
        body = {"input": {"messages": [{"role": "user", "content": "refund 40"}]}, "wait": True}
        request = urllib.request.Request(
            f"{server.url}/v1/threads/order-1842/runs",
            data=json.dumps(body).encode(),
            method="POST",
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {TOKENS['root'][0]}",
            },
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            [question] = json.loads(answer.read())["thread_view"]["interrupts"]
        links = links_of(server.mail_to("ana@example.com", question["id"]))
        with sync_playwright() as playwright:
            browser = launch(playwright)
            context = browser.new_context(
                viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True
            )
            page = context.new_page()
            page.goto(links["Approve"])
            expect(page.get_by_role("button", name="Approve")).to_be_visible()
            page.screenshot(path=str(IMAGES / "email-link.png"))
            browser.close()
    print(f"wrote {IMAGES / 'email-link.png'}")


def studio() -> None:
    """The Studio's pictures: a graph, a timeline and the fork form, 1200 wide."""
    names = ["studio-graph.png", "studio-timeline.png", "studio-fork.png"]
    with tempfile.TemporaryDirectory() as folder, serving(lambda: studio_server(Path(folder))) as s:
        api = Api(s.url)
        body = {"input": {"messages": ["Refund order 7, please."]}, "app": "desk", "wait": True}
        status, started = api.call("POST", "/v1/threads/refund-order-7/runs", "ana", body)
        assert status == 200, started
        api.order("order-1042", n=1041, wait=True)
        [question] = api.pending("order-1042")
        api.decide(question, True)
        with sync_playwright() as playwright:
            browser = launch(playwright)
            with opened(browser, s.url, width=1200, height=900) as page:
                sign_in(page, "root")
                page.goto(s.url + "/inbox#/threads/refund-order-7/studio")
                graph = page.locator(".studio-graph")
                expect(graph.locator(".drawing svg g.node.waiting").first).to_be_visible()
                graph.screenshot(path=str(IMAGES / names[0]))

                page.goto(s.url + "/inbox#/threads/order-1042/studio")
                entries = page.locator(".timeline li.entry")
                expect(entries.first).to_contain_text("done")
                entries.first.get_by_role("checkbox").check()
                entries.last.get_by_role("checkbox").check()
                expect(page.locator(".studio-compare .state-changes")).to_be_visible()
                page.locator(".columns").screenshot(path=str(IMAGES / names[1]))

                entries.filter(has_text="waiting for a decision").get_by_role(
                    "button", name="Fork from"
                ).click()
                form = page.get_by_role("form", name="Fork from step")
                editor = form.get_by_label("State (JSON)")
                expect(editor).not_to_have_value("")
                editor.fill(json.dumps({"n": 2000}, indent=2))
                form.get_by_label("New thread").fill("order-1042-bigger")
                form.get_by_label("Run it after forking").check()
                expect(form.get_by_text("Changed: n")).to_be_visible()
                page.locator(":focus").blur()
                page.locator(".columns").screenshot(path=str(IMAGES / names[2]))
            browser.close()
    print("wrote " + ", ".join(str(IMAGES / name) for name in names))


def main() -> None:
    """Make the pictures named on the command line (desktop, phone, email, studio), or all."""
    IMAGES.mkdir(parents=True, exist_ok=True)
    makers = {"desktop": desktop, "phone": phone, "email": email, "studio": studio}
    wanted = sys.argv[1:] or list(makers)
    unknown = [name for name in wanted if name not in makers]
    if unknown:
        sys.exit(f"no such pictures: {', '.join(unknown)}; choose from {', '.join(makers)}")
    for name in wanted:
        makers[name]()


if __name__ == "__main__":
    main()
