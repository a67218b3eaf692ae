"""Make the picture of an e-mail link's confirmation page in docs/images/ again.

Run from the repository's root, in its venv (the dev extras and Playwright installed)::

    python docs/link_screenshot.py

It needs Debian's Chromium at /usr/bin/chromium. It serves the test suite's desk agent with
e-mail links (an aiosmtpd mailbox on loopback catches the mail), asks for a refund, opens the
approve link of ana's mail at a phone's viewport and saves ``docs/images/email-link.png``
(390x844).
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
from _serving import TOKENS  # noqa: E402
from _web_page import launch  # noqa: E402
from playwright.sync_api import expect, sync_playwright  # noqa: E402


def main() -> None:
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
    print(f"saved {IMAGES / 'email-link.png'}")


if __name__ == "__main__":
    main()
