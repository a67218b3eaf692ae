"""Fixtures the server's tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _web_page import ChromiumMissing, launch
from playwright.sync_api import Browser, sync_playwright


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, headless, for one test module; a test fails without it."""
    with sync_playwright() as playwright:
        try:
            started = launch(playwright)
        except ChromiumMissing as exc:
            pytest.fail(str(exc), pytrace=False)
        try:
            yield started
        finally:
            started.close()
