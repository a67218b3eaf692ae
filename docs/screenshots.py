"""Make the web inbox's pictures in docs/images/ again.

Run from the repository's root, in its venv (the dev extras and Playwright installed)::

    python docs/screenshots.py

It needs Debian's Chromium at /usr/bin/chromium (the ``chromium`` package). It serves the test
suite's two apps (an order graph with an approve() question, a mail agent whose send_email
calls wait for approval) on loopback, asks a few questions of each and saves:

- ``docs/images/inbox.png``: the pending list, at 1280x800;
- ``docs/images/detail.png``: one send_email call, its edit form filled in and the diff of
  the edit, the whole page at 1280 wide.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "images"
sys.path.insert(0, str(ROOT / "tests" / "server"))  # the test apps and the browser set-up

from _serving import serving  # noqa: E402
from _web_page import Api, inbox_server, launch, open_question, opened, sign_in  # noqa: E402
from playwright.sync_api import expect, sync_playwright  # noqa: E402


def main() -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)
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


if __name__ == "__main__":
    main()
