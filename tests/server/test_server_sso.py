"""Single sign-on over HTTP, against a real OpenID provider (``oidc-provider`` on Node.js).

Each test runs the approval server on loopback with single sign-on, and walks the
authorization code flow as a browser would (a cookie jar, one redirect at a time), so that it
can stop at the provider's answer and send it again, from elsewhere, or after making the
provider's next ID token a bad one. What a person sees in a real browser is in
``test_web_sso.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from _serving import auth, bearer, order_app
from _sso import Provider, oidc_provider, serving_at, to_callback
from starlette.types import ASGIApp

from interlock.server import GroupAccess, OIDCConfig, create_app

ROLES: dict[str, Any] = {
    "approvers": "approver",
    "ops": GroupAccess(role="approver", threads=("ops-",)),
    "auditors": "viewer",
}


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    with oidc_provider(tmp_path_factory.mktemp("oidc")) as running:
        yield running


def sso_server(folder: Path, provider: Provider, **options: Any) -> Any:
    """A server for the order graph with single sign-on (``options`` go to `OIDCConfig`)."""

    def factory(url: str) -> ASGIApp:
        client_id, secret = provider.register(f"{url}/auth/callback")
        config: dict[str, Any] = {
            "issuer": provider.issuer,
            "client_id": client_id,
            "client_secret": secret,
            "scopes": ("openid", "email", "groups", "roles"),
            "name_claim": "email",
            "roles": ROLES,
            **options,
        }
        return create_app(
            {"orders": order_app(folder / "orders.db")},
            auth=auth(),
            public_url=url,
            sso=OIDCConfig(**config),
        )

    return serving_at(factory)


@pytest.fixture
def url(tmp_path: Path, provider: Provider) -> Iterator[str]:
    with sso_server(tmp_path, provider) as served:
        yield served.url


def browser() -> httpx.Client:
    """A client that keeps cookies and follows no redirect by itself."""
    return httpx.Client(follow_redirects=False, timeout=10)


@contextmanager
def signed_in(url: str, account: str) -> Iterator[httpx.Client]:
    """A browser signed in as ``account``."""
    with browser() as client:
        back = client.get(to_callback(client, url, account))
        assert back.status_code == 303, back.text
        yield client


def start_order(url: str, thread: str) -> dict[str, Any]:
    """Start the order graph on ``thread`` (as root, with a token); its pending question."""
    body = {"input": {"n": 1}, "app": "orders", "wait": True}
    answer = httpx.post(f"{url}/v1/threads/{thread}/runs", json=body, headers=bearer("root"))
    assert answer.status_code == 200, answer.text
    [question] = answer.json()["thread_view"]["interrupts"]
    return dict(question)


def test_signing_in_opens_a_session_that_calls_the_api(url: str) -> None:
    with browser() as client:
        assert client.get(f"{url}/v1/me").status_code == 401
        callback = to_callback(client, url, "ana@example.com", next="%23/interrupts/x")
        back = client.get(callback)
        assert back.status_code == 303
        assert back.headers["location"] == "../inbox#/interrupts/x"
        cookie = next(
            v for k, v in back.headers.multi_items() if k == "set-cookie" and "session" in v
        )
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/;" in cookie
        assert "Secure" not in cookie  # plain http on loopback; see the https test below

        me = client.get(f"{url}/v1/me").json()
        assert (me["name"], me["role"]) == ("ana@example.com", "approver")
        session = client.get(f"{url}/auth/session").json()
        assert session["via"] == "session" and session["sign_out"] == "auth/logout"
        assert session["identity"]["groups"] == ["approvers", "staff"]
        assert len(session["csrf"]) >= 32


def test_the_session_cookie_is_secure_behind_tls(tmp_path: Path, provider: Provider) -> None:
    # The server as people reach it is https (a proxy ends TLS in front of it).
    def factory(url: str) -> ASGIApp:
        client_id, secret = provider.register(f"{url}/auth/callback")
        sso = OIDCConfig(
            issuer=provider.issuer,
            client_id=client_id,
            client_secret=secret,
            scopes=("openid", "email", "groups"),
            name_claim="email",
            roles=ROLES,
        )
        return create_app(order_app(tmp_path / "o.db"), auth=auth(), public_url=url, sso=sso)

    with serving_at(factory) as served, browser() as client:
        callback = to_callback(client, served.url, "ana@example.com")
        back = client.get(callback, headers={"X-Forwarded-Proto": "https"})
        assert back.status_code == 303
        assert "Secure" in back.headers["set-cookie"]


def test_an_answer_of_the_provider_works_once(url: str) -> None:
    with browser() as client:
        callback = to_callback(client, url, "ana@example.com")
        assert client.get(callback).status_code == 303
        again = client.get(callback)
        assert again.status_code == 400
        assert "This sign-in is over" in again.text


def test_an_answer_of_the_provider_brought_to_another_browser_is_refused(url: str) -> None:
    # Someone signs in and sends the callback link to a victim: the victim's browser did not
    # start that sign-in, so it is not signed in as them.
    with browser() as attacker, browser() as victim:
        callback = to_callback(attacker, url, "ana@example.com")
        refused = victim.get(callback)
        assert refused.status_code == 400
        assert "session" not in refused.headers.get("set-cookie", "")
        assert victim.get(f"{url}/v1/me").status_code == 401
        # The state was spent by that attempt: its own browser cannot use it either.
        assert attacker.get(callback).status_code == 400


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("forged", "bad_signature"),  # signed by another key, under the provider's key id
        ("expired", "The token is expired"),  # signed by the provider, an hour too old
        ("wrong-audience", "Invalid claim: &#x27;aud&#x27;"),  # the provider's, for another client
    ],
)
def test_a_bad_id_token_is_refused(url: str, provider: Provider, mode: str, reason: str) -> None:
    with browser() as client:
        callback = to_callback(client, url, "ana@example.com")
        provider.tamper_next_id_token(mode)
        refused = client.get(callback)
        assert refused.status_code == 401, refused.text
        assert f"the ID token was refused: {reason}" in refused.text
        assert "interlock_session" not in refused.headers.get("set-cookie", "")
        assert client.get(f"{url}/v1/me").status_code == 401


def test_state_changing_requests_with_the_cookie_need_the_csrf_token(url: str) -> None:
    question = start_order(url, "o-1")
    with signed_in(url, "ana@example.com") as client:
        csrf = client.get(f"{url}/auth/session").json()["csrf"]
        decision = f"{url}/v1/interrupts/{question['id']}/decision"
        body = {"answer": True, "payload_hash": question["payload_hash"]}
        for csrf_header in ({}, {"X-CSRF-Token": "not-the-token"}):
            headers = {"Idempotency-Key": "k-1", **csrf_header}
            refused = client.post(decision, json=body, headers=headers)
            assert refused.status_code == 403
            assert refused.json()["error"] == "csrf_failed"
        assert client.get(f"{url}/v1/interrupts/{question['id']}").status_code == 200
        headers = {"Idempotency-Key": "k-1", "X-CSRF-Token": csrf}
        decided = client.post(decision, json=body, headers=headers)
        assert decided.status_code == 201, decided.text
        assert decided.json()["decision"]["actor"] == "ana@example.com"


def test_signing_out_ends_the_session_for_every_copy_of_the_cookie(url: str) -> None:
    with signed_in(url, "ana@example.com") as client:
        session = client.get(f"{url}/auth/session").json()
        cookie = client.cookies["interlock_session"]
        assert client.post(f"{url}/auth/logout").status_code == 403  # no CSRF token
        out = client.post(f"{url}/auth/logout", headers={"X-CSRF-Token": session["csrf"]})
        assert out.status_code == 200 and out.json() == {"signed_out": True}
        assert 'interlock_session=""' in out.headers["set-cookie"]
        assert client.get(f"{url}/v1/me").status_code == 401
        kept = httpx.get(f"{url}/v1/me", cookies={"interlock_session": cookie})
        assert kept.status_code == 401
        assert client.get(f"{url}/auth/session").json()["identity"] is None


def test_groups_decide_the_role_and_what_is_seen(url: str) -> None:
    ops_question = start_order(url, "ops-1")
    start_order(url, "o-2")
    with signed_in(url, "olga@example.com") as olga:
        items = olga.get(f"{url}/v1/interrupts").json()["items"]
        assert [i["thread"] for i in items] == ["ops-1"]
        assert olga.get(f"{url}/v1/threads/o-2").status_code in (403, 404)
        assert olga.get(f"{url}/v1/threads/ops-1").status_code == 200
    with signed_in(url, "vera@example.com") as vera:
        assert len(vera.get(f"{url}/v1/interrupts").json()["items"]) == 2
        csrf = vera.get(f"{url}/auth/session").json()["csrf"]
        body = {"answer": True, "payload_hash": ops_question["payload_hash"]}
        refused = vera.post(
            f"{url}/v1/interrupts/{ops_question['id']}/decision",
            json=body,
            headers={"X-CSRF-Token": csrf, "Idempotency-Key": "k-2"},
        )
        assert refused.status_code == 403 and refused.json()["error"] == "forbidden"


def test_a_person_in_no_listed_group_is_not_signed_in(url: str) -> None:
    with browser() as client:
        refused = client.get(to_callback(client, url, "nina@example.com"))
        assert refused.status_code == 403
        assert "in no group this server grants access to" in refused.text
        assert client.get(f"{url}/v1/me").status_code == 401


def test_a_role_claim_can_decide_the_role(tmp_path: Path, provider: Provider) -> None:
    with sso_server(tmp_path, provider, roles={}, role_claim="roles") as served:
        with signed_in(served.url, "root@example.com") as root:
            assert root.get(f"{served.url}/v1/me").json()["role"] == "admin"
        with browser() as client:
            refused = client.get(to_callback(client, served.url, "ana@example.com"))
            assert refused.status_code == 403
            assert "holds none of the roles" in refused.text


def test_a_bearer_token_decides_when_it_is_sent(url: str) -> None:
    with signed_in(url, "ana@example.com") as client:
        assert client.get(f"{url}/v1/me", headers=bearer("vic")).json()["name"] == "vic"
        wrong = client.get(f"{url}/v1/me", headers={"Authorization": "Bearer wrong"})
        assert wrong.status_code == 401  # not the cookie's identity instead
        # A bearer token needs no CSRF token: a browser cannot be made to send one.
        start_order(url, "o-3")


def test_signing_in_is_answered_when_the_provider_is_down(tmp_path: Path) -> None:
    def factory(url: str) -> ASGIApp:
        sso = OIDCConfig(issuer="http://127.0.0.1:9", client_id="interlock", client_secret="s3cret")
        return create_app(order_app(tmp_path / "o.db"), auth=auth(), public_url=url, sso=sso)

    with serving_at(factory) as served, browser() as client:
        answer = client.get(f"{served.url}/auth/login")
        assert answer.status_code == 502
        assert "The sign-in provider did not answer" in answer.text
        assert client.get(f"{served.url}/v1/me", headers=bearer("ana")).status_code == 200
