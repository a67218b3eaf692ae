"""The browser sessions' table and the rules that turn groups into an identity."""

from __future__ import annotations

import pytest
from _serving import auth, order_graph

from interlock import MemoryStore
from interlock.server import GroupAccess, Identity, OIDCConfig, create_app
from interlock.server._access import AccessRules, NoAccess
from interlock.server._sessions import SIGN_IN_SECONDS, Sessions


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


ANA = Identity(name="ana", role="approver")


def test_a_session_ends_when_it_expires_or_is_closed() -> None:
    clock = Clock()
    sessions = Sessions(lifetime=60, clock=clock)
    secret, session = sessions.open(ANA)
    assert sessions.find(secret) == session
    assert sessions.find(secret + "x") is None
    clock.now += 59
    assert sessions.find(secret) is not None
    clock.now += 1
    assert sessions.find(secret) is None
    secret, _ = sessions.open(ANA)
    assert sessions.close(secret) and not sessions.close(secret)
    assert sessions.find(secret) is None


def test_a_sign_in_is_taken_once_by_the_browser_that_started_it_and_in_time() -> None:
    clock = Clock()
    sessions = Sessions(lifetime=60, clock=clock)
    state, pending = sessions.begin("browser-a", next="#/x")
    assert sessions.finish(state, "browser-a") == pending
    assert sessions.finish(state, "browser-a") is None  # once
    state, _ = sessions.begin("browser-a")
    assert sessions.finish(state, "browser-b") is None
    assert sessions.finish(state, "browser-a") is None  # spent by the wrong browser's try
    state, _ = sessions.begin("browser-a")
    clock.now += SIGN_IN_SECONDS
    assert sessions.finish(state, "browser-a") is None


def test_the_tables_stay_within_their_limits() -> None:
    clock = Clock()
    sessions = Sessions(lifetime=60, clock=clock, max_sessions=3, max_pending=2)
    secrets = [sessions.open(ANA)[0] for _ in range(4)]
    assert sessions.find(secrets[0]) is None  # the oldest made room
    assert all(sessions.find(s) is not None for s in secrets[1:])
    states = [sessions.begin("b")[0] for _ in range(3)]
    assert sessions.finish(states[0], "b") is None
    assert sessions.finish(states[2], "b") is not None


def test_the_csrf_token_of_a_proxied_person_is_theirs_and_this_servers() -> None:
    one, other = Sessions(lifetime=60), Sessions(lifetime=60)
    assert one.csrf_for("ana") == one.csrf_for("ana") != one.csrf_for("ben")
    assert one.csrf_for("ana") != other.csrf_for("ana")


def test_groups_combine_into_the_highest_role_and_every_scope() -> None:
    rules = AccessRules(
        {
            "ops": GroupAccess(role="approver", threads=("ops-",), tools=("deploy",)),
            "payments": GroupAccess(role="viewer", threads=("pay-",)),
            "admins": "admin",
        },
        default_role=None,
        by_role=False,
    )
    ana = rules.identity("ana", ["ops", "payments", "other"])
    assert ana.role == "approver"
    assert ana.threads == ("ops-", "pay-") and ana.tools == ("deploy", "*")
    assert ana.groups == ("ops", "payments", "other")
    assert ana.principal().groups == ("ops", "payments", "other")
    assert rules.identity("root", "admins").role == "admin"  # one group as a string
    with pytest.raises(NoAccess, match="no group this server grants"):
        rules.identity("nina", [])
    with pytest.raises(NoAccess, match="not a list of names"):
        rules.identity("nina", [1, 2])
    with pytest.raises(NoAccess, match="white space"):
        rules.identity(" ana", ["ops"])
    viewer = AccessRules({}, default_role="viewer", by_role=False).identity("vic", None)
    assert (viewer.role, viewer.threads) == ("viewer", ("",))


def test_a_role_claim_gives_the_highest_role_it_names() -> None:
    rules = AccessRules({}, default_role=None, by_role=True)
    assert rules.identity("ana", [], ["viewer", "approver", "other"]).role == "approver"
    with pytest.raises(NoAccess, match="holds none of the roles"):
        rules.identity("ana", ["approvers"], ["superuser"])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"issuer": "http://login.example.com"}, "must be https"),
        ({"issuer": "https://login.example.com/?x=1"}, "without query or fragment"),
        ({"scopes": ("email",)}, "must include 'openid'"),
        ({"redirect_url": "https://a.example.com/callback"}, "must end in /auth/callback"),
        ({"role_claim": "roles", "roles": {"g": "viewer"}}, "not both"),
        ({"default_role": "root"}, "default_role must be one of"),
        ({"session_seconds": 1}, "session_seconds must be a number of at least 60"),
        ({"client_secret": ""}, "client_secret must be a non-empty"),
    ],
)
def test_a_wrong_sso_configuration_is_refused(options: dict[str, object], message: str) -> None:
    config: dict[str, object] = {
        "issuer": "https://login.example.com",
        "client_id": "interlock",
        "client_secret": "s3cret",
        **options,
    }
    with pytest.raises(ValueError, match=message):
        OIDCConfig(**config)  # type: ignore[arg-type]


def test_the_client_secret_is_not_shown() -> None:
    config = OIDCConfig(issuer="https://l.example.com", client_id="c", client_secret="s3cret")
    assert "s3cret" not in repr(config)


def test_the_server_needs_to_know_where_the_provider_sends_people_back() -> None:
    app = order_graph().compile(store=MemoryStore())
    config = OIDCConfig(issuer="https://l.example.com", client_id="c", client_secret="s")
    with pytest.raises(ValueError, match="needs the URL the provider sends people back to"):
        create_app(app, auth=auth(), sso=config)
    with pytest.raises(TypeError, match="sso must be an OIDCConfig"):
        create_app(app, auth=auth(), sso={"issuer": "x"})  # type: ignore[arg-type]
