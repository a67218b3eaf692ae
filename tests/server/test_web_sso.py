"""Single sign-on in a real browser, against a real OpenID provider (``oidc-provider``).

A person opens the inbox at a question's link, signs in at the provider, comes back to that
question, sees only what their groups allow, approves, and signs out. Debian's Chromium is
driven headless through Playwright, as in ``test_web_inbox.py``; the provider is the one of
``test_server_sso.py`` (``_sso.py``). The module takes some 7 s, so it is not marked slow: it
runs on every Python of the suite.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _serving import auth, order_app
from _sso import Provider, oidc_provider, serving_at
from _web_page import Api, opened
from playwright.sync_api import Browser, Page, expect
from starlette.types import ASGIApp

from interlock.server import GroupAccess, OIDCConfig, create_app

LIVE_MS = 3000


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    with oidc_provider(tmp_path_factory.mktemp("oidc")) as running:
        yield running


@pytest.fixture
def url(tmp_path: Path, provider: Provider) -> Iterator[str]:
    def factory(url: str) -> ASGIApp:
        client_id, secret = provider.register(f"{url}/auth/callback")
        sso = OIDCConfig(
            issuer=provider.issuer,
            client_id=client_id,
            client_secret=secret,
            scopes=("openid", "email", "groups"),
            name_claim="email",
            roles={
                "approvers": "approver",
                "ops": GroupAccess(role="approver", threads=("ops-",)),
            },
        )
        apps = {"orders": order_app(tmp_path / "orders.db")}
        return create_app(apps, auth=auth(), public_url=url, sso=sso)

    with serving_at(factory) as served:
        yield served.url


def provider_sign_in(page: Page, account: str) -> None:
    """On the inbox's sign-in form: single sign-on, as ``account`` at the provider."""
    page.get_by_role("link", name="Sign in with single sign-on").click()
    page.get_by_label("Account").fill(account)
    page.get_by_role("button", name="Continue").click()


def me_status(page: Page) -> Any:
    """The status of ``GET v1/me`` as the page's own fetch (its cookies) gets it."""
    return page.evaluate("fetch('v1/me').then((r) => r.status)")


def test_sign_in_see_what_the_groups_allow_approve_and_sign_out(browser: Browser, url: str) -> None:
    api = Api(url)
    api.order("o-1", wait=True)
    api.order("ops-1", wait=True)
    [question] = api.pending("ops-1")
    with opened(browser, url) as page:
        expect(page.get_by_role("link", name="Sign in with single sign-on")).to_be_visible()
        expect(page.get_by_label("Access token")).to_be_visible()  # tokens work beside it
        # A link to a question, as a notification sends it: the route survives signing in.
        page.goto(f"{url}/inbox#/interrupts/{question['id']}")
        provider_sign_in(page, "olga@example.com")

        expect(page.locator("#who-name")).to_have_text("olga@example.com")
        expect(page.locator("#who-role")).to_have_text("approver")
        expect(page.get_by_role("heading", level=1)).to_contain_text("Ship order 2?")
        assert page.url.endswith(f"/inbox#/interrupts/{question['id']}")
        assert "interlock_session" not in page.evaluate("document.cookie")  # HttpOnly
        expect(page.locator("#live")).to_have_text("Live")  # the event stream, by cookie

        # Olga's group sees the ops- threads only.
        page.get_by_role("link", name="← Pending questions").click()
        rows = page.locator("tr[data-id]")
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text("ops-1")

        rows.first.get_by_role("link").first.click()
        page.get_by_role("button", name="Approve", exact=True).click()
        expect(page.locator(".banner")).to_contain_text("Your decision was recorded")
        expect(page.locator(".audit")).to_contain_text(
            "olga@example.com decided: approve", timeout=LIVE_MS
        )
        assert api.get("/v1/threads/ops-1")["status"] == "done"
        assert api.get("/v1/threads/o-1")["status"] == "interrupted"

        page.get_by_role("button", name="Log out").click()
        expect(page.get_by_role("link", name="Sign in with single sign-on")).to_be_visible()
        expect(page.locator("#who")).to_be_hidden()
        assert me_status(page) == 401
        page.reload()
        expect(page.get_by_role("link", name="Sign in with single sign-on")).to_be_visible()


def test_a_person_the_groups_give_no_access_is_told_so(browser: Browser, url: str) -> None:
    with opened(browser, url) as page:
        provider_sign_in(page, "nina@example.com")
        expect(page.get_by_role("heading", level=1)).to_have_text("No access")
        expect(page.get_by_text("nina@example.com is in no group")).to_be_visible()
        page.get_by_role("link", name="Back to the inbox").click()
        expect(page.get_by_role("link", name="Sign in with single sign-on")).to_be_visible()
        assert me_status(page) == 401
