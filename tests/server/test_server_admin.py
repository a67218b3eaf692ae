"""Principals and tokens managed over HTTP while servers run: an admin adds, changes and
revokes; the server that made the change and every other one that follows the store act on
it at once or within a second, without a restart."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest
from _serving import Serving, auth, bearer, order_app, order_graph, serving

from interlock.server import StoreAuth, create_app, issue_token
from interlock.stores import PostgresStore, SqliteStore


def header(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def refused_within(client: httpx.Client, token: str, seconds: float) -> float:
    """Poll ``GET /v1/me`` with ``token`` until it is refused; how long that took."""
    started = time.monotonic()
    while client.get("/v1/me", headers=header(token)).status_code != 401:
        took = time.monotonic() - started
        assert took < seconds, f"still let in after {took:.2f}s"
        time.sleep(0.01)
    return time.monotonic() - started


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "orders.db"

    async def create() -> None:
        async with SqliteStore(path):
            pass

    anyio.run(create)
    return path


@pytest.fixture
def root(db: Path) -> str:
    async def go() -> str:
        async with SqliteStore(db) as store:
            await store.add_principal("root", role="admin")
            return (await issue_token(store, "root")).token

    return anyio.run(go)


@pytest.fixture
def served(db: Path, root: str) -> Iterator[Serving]:
    def factory() -> Any:
        app = order_app(db)
        return create_app(app, auth=StoreAuth(app.store))

    with serving(factory) as s:
        yield s


@pytest.fixture
def client(served: Serving) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served.url, timeout=10) as c:
        yield c


def test_an_admin_manages_principals_and_tokens_while_the_server_runs(
    client: httpx.Client, root: str
) -> None:
    admin = header(root)
    made = client.post(
        "/v1/principals",
        json={"name": "Ana", "role": "approver", "groups": ["finance"]},
        headers=admin,
    )
    assert made.status_code == 201, made.text
    assert made.json() | {"created_at": 0} == {
        "name": "Ana",
        "display_name": "",
        "role": "approver",
        "groups": ["finance"],
        "disabled": False,
        "email": None,
        "slack_user": None,
        "created_at": 0,
    }
    again = client.post("/v1/principals", json={"name": "ANA"}, headers=admin)
    assert again.status_code == 409 and again.json()["error"] == "principal_exists"

    issued = client.post(
        "/v1/tokens",
        json={"principal": "ana", "threads": ["ops-"], "expires": "30d"},
        headers=admin,
    )
    assert issued.status_code == 201, issued.text
    token = issued.json()["token"]
    assert issued.json()["status"] == "active" and issued.json()["principal"] == "Ana"
    assert issued.json()["expires_at"] == pytest.approx(time.time() + 30 * 86400, abs=60)
    # Taken at once by the server that made it, without a restart.
    me = client.get("/v1/me", headers=header(token))
    assert me.status_code == 200, me.text
    assert me.json() | {"four_eyes": False} == {
        "name": "Ana",
        "role": "approver",
        "tools": ["*"],
        "threads": ["ops-"],
        "four_eyes": False,
    }

    listed = client.get("/v1/tokens", params={"principal": "ana"}, headers=admin).json()
    assert [t["id"] for t in listed["items"]] == [issued.json()["id"]]
    assert "token" not in listed["items"][0] and "hash" not in listed["items"][0]
    names = client.get("/v1/principals", params={"limit": 1}, headers=admin).json()
    assert [p["name"] for p in names["items"]] == ["Ana"] and names["next"] == "Ana"
    rest = client.get("/v1/principals", params={"after": names["next"]}, headers=admin).json()
    assert [p["name"] for p in rest["items"]] == ["root"] and rest["next"] is None

    off = client.post("/v1/principals/ana", json={"disabled": True}, headers=admin)
    assert off.status_code == 200 and off.json()["disabled"] is True
    refused = client.get("/v1/me", headers=header(token))
    assert refused.status_code == 401
    # The refusal says where tokens come from on this server: the store, not a file.
    assert "interlock token create" in refused.json()["message"]
    assert "tokens file" not in refused.json()["message"]
    on = client.post("/v1/principals/ana", json={"disabled": False}, headers=admin)
    assert on.status_code == 200
    assert client.get("/v1/me", headers=header(token)).status_code == 200

    revoked = client.post(f"/v1/tokens/{issued.json()['id']}/revoke", headers=admin)
    assert revoked.status_code == 200
    assert [t["status"] for t in revoked.json()["items"]] == ["revoked"]
    assert client.get("/v1/me", headers=header(token)).status_code == 401
    twice = client.post(f"/v1/tokens/{issued.json()['id']}/revoke", headers=admin)
    assert twice.json() == {"items": []}


def test_a_token_narrows_its_principal_and_refusals_name_what_is_wrong(
    client: httpx.Client, root: str
) -> None:
    admin = header(root)
    client.post("/v1/principals", json={"name": "vic", "role": "viewer"}, headers=admin)
    wider = client.post("/v1/tokens", json={"principal": "vic", "role": "admin"}, headers=admin)
    assert wider.status_code == 422 and "at most what its principal may" in wider.text
    # The attack of the tokens file, over HTTP: a misspelt scope is refused, not dropped.
    typo = client.post("/v1/tokens", json={"principal": "vic", "thread": ["ops-"]}, headers=admin)
    assert typo.status_code == 422 and "thread" in typo.json()["message"], typo.text
    for body, wrong in [
        ({"principal": "vic", "expires": "someday"}, "not an expiry"),
        ({"principal": "vic", "expires": "2000-01-01T00:00:00Z"}, "expire before"),
        ({"principal": "vic", "tools": []}, "tools"),
    ]:
        answer = client.post("/v1/tokens", json=body, headers=admin)
        assert answer.status_code == 422 and wrong in answer.json()["message"], answer.text
    spaced = client.post("/v1/principals", json={"name": "eve "}, headers=admin)
    assert spaced.status_code == 422 and "white space" in spaced.text
    nobody = client.post("/v1/tokens", json={"principal": "nobody"}, headers=admin)
    assert nobody.status_code == 404 and nobody.json()["error"] == "unknown_principal"
    unknown = client.post("/v1/tokens/nope/revoke", headers=admin)
    assert unknown.status_code == 404 and unknown.json()["error"] == "unknown_token"
    bad_after = client.get("/v1/principals", params={"after": " x"}, headers=admin)
    assert bad_after.status_code == 400 and bad_after.json()["error"] == "bad_parameter"

    viewer = client.post("/v1/tokens", json={"principal": "vic"}, headers=admin).json()["token"]
    for method, path in [
        ("GET", "/v1/principals"),
        ("GET", "/v1/tokens"),
        ("POST", "/v1/principals/vic/tokens/revoke"),
    ]:
        assert client.request(method, path, headers=header(viewer)).status_code == 403
    everything = client.post("/v1/principals/vic/tokens/revoke", headers=admin)
    assert [t["principal"] for t in everything.json()["items"]] == ["vic"]
    assert client.get("/v1/me", headers=header(viewer)).status_code == 401


def test_an_admin_gives_principals_contact_addresses_and_only_an_admin(
    client: httpx.Client, root: str, db: Path
) -> None:
    admin = header(root)
    made = client.post(
        "/v1/principals",
        json={"name": "ana", "email": " Ana@Example.com ", "slack_user": "U024BE7LH"},
        headers=admin,
    )
    assert made.status_code == 201, made.text
    assert (made.json()["email"], made.json()["slack_user"]) == ("Ana@Example.com", "U024BE7LH")
    ben = client.post("/v1/principals", json={"name": "ben", "role": "approver"}, headers=admin)
    assert ben.status_code == 201 and ben.json()["email"] is None
    taken = client.post("/v1/principals/ben", json={"email": "ANA@example.com"}, headers=admin)
    assert taken.status_code == 409, taken.text
    assert taken.json()["error"] == "contact_taken" and "'ana'" in taken.json()["message"]
    taken = client.post(
        "/v1/principals", json={"name": "carla", "slack_user": "U024BE7LH"}, headers=admin
    )
    assert taken.status_code == 409 and taken.json()["error"] == "contact_taken"
    for wrong in (
        {"email": "ana"},
        {"slack_user": "u024"},
        {"email": 42},
        {"slack_user": "U" * 30},
    ):
        bad = client.post("/v1/principals/ben", json=wrong, headers=admin)
        assert bad.status_code == 422, (wrong, bad.text)
    cleared = client.post("/v1/principals/ana", json={"email": ""}, headers=admin)
    assert cleared.status_code == 200, cleared.text
    assert (cleared.json()["email"], cleared.json()["slack_user"]) == (None, "U024BE7LH")
    moved = client.post(
        "/v1/principals/ben",
        json={"email": "ana@example.com", "slack_user": "W0BEN"},
        headers=admin,
    )
    assert moved.status_code == 200, moved.text
    listed = client.get("/v1/principals", headers=admin).json()["items"]
    assert [(p["name"], p["email"], p["slack_user"]) for p in listed] == [
        ("ana", None, "U024BE7LH"),
        ("ben", "ana@example.com", "W0BEN"),
        ("root", None, None),
    ]
    # Who acts in Slack is read from slack_user: an approver may not point it at itself.
    ben_token = client.post("/v1/tokens", json={"principal": "ben"}, headers=admin).json()["token"]
    for path, body in (
        ("/v1/principals/ben", {"slack_user": "U024BE7LH"}),
        ("/v1/principals/ana", {"slack_user": ""}),
        ("/v1/principals", {"name": "eve", "slack_user": "U9EVE"}),
    ):
        refused = client.post(path, json=body, headers=header(ben_token))
        assert refused.status_code == 403, refused.text

    async def lookup() -> None:
        async with SqliteStore(db) as store:
            found = await store.principal_by_contact(slack_user="U024BE7LH")
            assert found is not None and found.name == "ana"
            assert await store.principal_by_contact(slack_user="U9EVE") is None

    anyio.run(lookup)


def test_a_server_with_a_tokens_file_answers_the_admin_routes_409(tmp_path: Path) -> None:
    with serving(lambda: create_app(order_app(tmp_path / "o.db"), auth=auth())) as s:
        answer = httpx.post(s.url + "/v1/principals", json={"name": "x"}, headers=bearer("root"))
        assert answer.status_code == 409 and answer.json()["error"] == "identities_in_file"
        assert "tokens file" in answer.json()["message"]


@pytest.mark.slow
def test_a_token_revoked_through_one_server_is_refused_by_another_within_a_second(
    dsn: str,
) -> None:
    # Two servers on one PostgreSQL, each with its own App, store and StoreAuth (each in a
    # thread of its own, with its own event loop, as two processes would be).
    def factory() -> Any:
        app = order_graph().compile(store=PostgresStore(dsn))
        return create_app(app, auth=StoreAuth(app.store))

    async def seed() -> str:
        async with PostgresStore(dsn) as store:
            await store.add_principal("root", role="admin")
            return (await issue_token(store, "root")).token

    root = anyio.run(seed)
    with (
        serving(factory) as one,
        serving(factory) as two,
        httpx.Client(base_url=one.url, timeout=10) as first,
        httpx.Client(base_url=two.url, timeout=10) as second,
    ):
        admin = header(root)
        assert first.post("/v1/principals", json={"name": "ana"}, headers=admin).status_code == 201
        times = []
        for _ in range(3):
            made = first.post("/v1/tokens", json={"principal": "ana"}, headers=admin).json()
            # Made through the first, taken by the second within a second.
            started = time.monotonic()
            while second.get("/v1/me", headers=header(made["token"])).status_code != 200:
                assert time.monotonic() - started < 1.0, "the new token is still refused"
                time.sleep(0.01)
            revoked = first.post(f"/v1/tokens/{made['id']}/revoke", headers=admin)
            assert revoked.status_code == 200
            assert first.get("/v1/me", headers=header(made["token"])).status_code == 401
            times.append(refused_within(second, made["token"], 1.0))
        # And the other way round: a principal disabled through the second.
        kept = first.post("/v1/tokens", json={"principal": "ana"}, headers=admin).json()["token"]
        assert first.get("/v1/me", headers=header(kept)).status_code == 200
        assert second.post("/v1/principals/ana", json={"disabled": True}, headers=admin).is_success
        times.append(refused_within(first, kept, 1.0))
        assert max(times) < 1.0
