"""The trusted reverse-proxy mode: identity headers believed from the proxy's address only.

The server runs on loopback under uvicorn with its default settings (which trust
``X-Forwarded-For`` from 127.0.0.1); the proxy is 127.0.0.2. Requests are made from a socket
bound to 127.0.0.2 (the proxy) or 127.0.0.1 (anyone else): the address checked is the real
TCP peer.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from _serving import auth, bearer, order_app, serving

from interlock.server import GroupAccess, TrustedProxy, create_app

PROXY = "127.0.0.2"


def proxy_config(**options: Any) -> TrustedProxy:
    config: dict[str, Any] = {
        "addresses": (PROXY,),
        "roles": {"approvers": "approver", "ops": GroupAccess(role="approver", threads=("ops-",))},
        "sign_out_url": "/oauth2/sign_out",
        **options,
    }
    return TrustedProxy(**config)


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    app = order_app
    with serving(
        lambda: create_app(app(tmp_path / "orders.db"), auth=auth(), proxy=proxy_config())
    ) as served:
        yield served.url


def client(source: str) -> httpx.Client:
    """A client whose connections come from ``source``."""
    return httpx.Client(transport=httpx.HTTPTransport(local_address=source), timeout=10)


def as_user(name: str, groups: str = "approvers") -> dict[str, str]:
    return {"X-Forwarded-User": name, "X-Forwarded-Groups": groups}


def test_the_proxy_names_the_person(url: str) -> None:
    with client(PROXY) as proxy:
        me = proxy.get(f"{url}/v1/me", headers=as_user("ana@example.com"))
        assert me.status_code == 200, me.text
        assert (me.json()["name"], me.json()["role"]) == ("ana@example.com", "approver")
        session = proxy.get(f"{url}/auth/session", headers=as_user("ana@example.com")).json()
        assert session["via"] == "proxy" and session["sign_out"] == "/oauth2/sign_out"
        assert session["identity"]["groups"] == ["approvers"]


def test_the_headers_are_ignored_from_anywhere_else(url: str) -> None:
    with client("127.0.0.1") as anyone:
        refused = anyone.get(f"{url}/v1/me", headers=as_user("ana@example.com"))
        assert refused.status_code == 401
        session = anyone.get(f"{url}/auth/session", headers=as_user("ana@example.com")).json()
        assert session["identity"] is None


def test_a_peer_named_in_x_forwarded_for_is_not_believed(url: str) -> None:
    # uvicorn trusts X-Forwarded-For from 127.0.0.1 by default and reports the client it
    # names: without the server's check, anyone on this machine could pass for the proxy.
    with client("127.0.0.1") as anyone:
        for forwarded in ({"X-Forwarded-For": PROXY}, {"X-Forwarded-For": f"{PROXY}, 127.0.0.1"}):
            headers = {**as_user("root", "approvers"), **forwarded}
            assert anyone.get(f"{url}/v1/me", headers=headers).status_code == 401


def test_two_names_for_one_request_are_not_believed(url: str) -> None:
    with client(PROXY) as proxy:
        headers = [("X-Forwarded-User", "ana"), ("X-Forwarded-User", "root")]
        assert proxy.get(f"{url}/v1/me", headers=headers).status_code == 401


def test_groups_decide_what_is_seen_and_state_changes_need_the_csrf_token(url: str) -> None:
    body = {"input": {"n": 1}, "app": "orders", "wait": True}
    for thread in ("ops-1", "o-1"):
        started = httpx.post(f"{url}/v1/threads/{thread}/runs", json=body, headers=bearer("root"))
        assert started.status_code == 200, started.text
    olga = as_user("olga", "ops, staff")
    with client(PROXY) as proxy:
        items = proxy.get(f"{url}/v1/interrupts", headers=olga).json()["items"]
        assert [i["thread"] for i in items] == ["ops-1"]
        [question] = items
        decision = f"{url}/v1/interrupts/{question['id']}/decision"
        answer = {"answer": True, "payload_hash": question["payload_hash"]}
        headers = {**olga, "Idempotency-Key": "k-1"}
        refused = proxy.post(decision, json=answer, headers=headers)
        assert refused.status_code == 403 and refused.json()["error"] == "csrf_failed"
        csrf = proxy.get(f"{url}/auth/session", headers=olga).json()["csrf"]
        decided = proxy.post(decision, json=answer, headers={**headers, "X-CSRF-Token": csrf})
        assert decided.status_code == 201, decided.text
        assert decided.json()["decision"]["actor"] == "olga"
        # Another person's token does not do.
        ana = proxy.get(f"{url}/auth/session", headers=as_user("ana")).json()["csrf"]
        assert ana != csrf


def test_a_person_in_no_listed_group_is_told_why(url: str) -> None:
    with client(PROXY) as proxy:
        refused = proxy.get(f"{url}/v1/me", headers=as_user("nina", "visitors"))
        assert refused.status_code == 403 and refused.json()["error"] == "no_access"
        assert "in no group this server grants access to" in refused.json()["message"]
        session = proxy.get(f"{url}/auth/session", headers=as_user("nina", "visitors")).json()
        assert session["identity"] is None and "no group" in session["refused"]


def test_bearer_tokens_work_beside_the_proxy(url: str) -> None:
    with client("127.0.0.1") as anyone:
        assert anyone.get(f"{url}/v1/me", headers=bearer("vic")).json()["name"] == "vic"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"addresses": ()}, "at least one proxy address"),
        ({"addresses": ("proxy.example.com",)}, "not an IP address or network"),
        ({"user_header": "Authorization"}, "means something else"),
        ({"role_header": "X-Roles"}, "not both"),
        ({"roles": {"g": "superuser"}}, "role must be one of"),
    ],
)
def test_a_wrong_configuration_is_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        proxy_config(**options)


def test_the_configuration_from_a_file_refuses_unknown_and_missing_keys() -> None:
    with pytest.raises(ValueError, match="unknown field `user`"):
        TrustedProxy.from_config({"addresses": [PROXY], "user": "X-User"})
    with pytest.raises(ValueError, match="missing required field `addresses`"):
        TrustedProxy.from_config({"user_header": "X-User"})
    loaded = TrustedProxy.from_config(
        {"addresses": ["10.0.0.0/24"], "roles": {"ops": {"role": "admin", "threads": ["ops-"]}}}
    )
    assert loaded.roles == {"ops": GroupAccess(role="admin", threads=("ops-",))}
