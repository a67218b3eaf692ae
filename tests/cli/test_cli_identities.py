"""``interlock principal`` and ``interlock token``: principals and tokens kept in the store, and
how ``interlock serve`` chooses between the store and a tokens file."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import click
import pytest
from click.testing import CliRunner, Result

from interlock.cli import cli
from interlock.cli._identities import serve_auth
from interlock.server import StoreAuth, TokenAuth, hash_token
from interlock.stores import SqliteStore


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'app.db'}"


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env={"COLUMNS": "200"})


def ok(*args: str) -> Result:
    done = run(*args)
    assert done.exit_code == 0, done.output
    return done


def test_principals_are_added_listed_disabled_and_enabled(store_url: str) -> None:
    added = ok("principal", "add", "Ana", "--role", "admin", "--group", "ops", "--store", store_url)
    assert "added Ana (admin)" in added.stderr
    ok("principal", "add", "ben", "--display-name", "Ben B.", "--store", store_url)
    taken = run("principal", "add", "ANA", "--store", store_url)
    assert taken.exit_code == 1 and "exists already as 'Ana'" in taken.stderr
    spaced = run("principal", "add", "eve ", "--store", store_url)
    assert spaced.exit_code == 1 and "white space" in spaced.stderr
    table = ok("principal", "list", "--store", store_url).stdout
    assert "Ana" in table and "ops" in table and "Ben B." in table
    ok("principal", "disable", "ana", "--store", store_url)
    listed = json.loads(ok("principal", "list", "--json", "--store", store_url).stdout)
    assert [(p["name"], p["disabled"], p["groups"]) for p in listed] == [
        ("Ana", True, ["ops"]),
        ("ben", False, []),
    ]
    ok("principal", "enable", "ANA", "--store", store_url)
    listed = json.loads(ok("principal", "list", "--json", "--store", store_url).stdout)
    assert not listed[0]["disabled"]
    unknown = run("principal", "disable", "carla", "--store", store_url)
    assert unknown.exit_code == 1 and "no principal 'carla'" in unknown.stderr


def test_a_token_is_printed_once_listed_by_id_and_revoked(store_url: str) -> None:
    ok("principal", "add", "ana", "--store", store_url)
    made = ok(
        "token", "create", "ana", "--tool", "send_*", "--thread", "ops-", "--expires", "30d",
        "--store", store_url,
    )  # fmt: skip
    secret = made.stdout.strip()
    assert len(secret) >= 43 and "shown only this once" in made.stderr
    token_id = made.stderr.split()[1]
    listed = json.loads(ok("token", "list", "--json", "--store", store_url).stdout)
    assert [(t["id"], t["principal"], t["tools"], t["threads"], t["status"]) for t in listed] == [
        (token_id, "ana", ["send_*"], ["ops-"], "active")
    ]
    assert secret not in json.dumps(listed) and hash_token(secret) not in json.dumps(listed)
    as_json = json.loads(ok("token", "create", "ana", "--json", "--store", store_url).stdout)
    assert as_json["token"] and as_json["status"] == "active" and as_json["expires_at"] is None

    table = ok("token", "list", "--store", store_url).stdout
    assert token_id in table and "tools send_*; threads ops-*" in table
    ok("token", "revoke", token_id, "--store", store_url)
    again = ok("token", "revoke", token_id, "--store", store_url)
    assert "revoked already" in again.stderr
    everything = ok("token", "revoke", "--principal", "ANA", "--store", store_url)
    assert f"revoked {as_json['id']} of ana" in everything.stderr
    statuses = [
        t["status"] for t in json.loads(ok("token", "list", "--json", "--store", store_url).stdout)
    ]
    assert statuses == ["revoked", "revoked"]


def test_token_commands_refuse_what_cannot_be(store_url: str) -> None:
    ok("principal", "add", "vic", "--role", "viewer", "--store", store_url)
    wider = run("token", "create", "vic", "--role", "admin", "--store", store_url)
    assert wider.exit_code == 2 and "at most what its principal may" in wider.output
    past = run("token", "create", "vic", "--expires", "2001-01-01T00:00:00Z", "--store", store_url)
    assert past.exit_code == 2 and "expire before" in past.output
    vague = run("token", "create", "vic", "--expires", "soon", "--store", store_url)
    assert vague.exit_code == 2 and "--expires" in vague.output
    for args in ([], ["someid", "--principal", "vic"]):
        refused = run("token", "revoke", *args, "--store", store_url)
        assert refused.exit_code == 2 and "--principal NAME" in refused.output
    nobody = run("token", "create", "nobody", "--store", store_url)
    assert nobody.exit_code == 1 and "no principal 'nobody'" in nobody.stderr
    assert run("token", "list", "--store", store_url).stdout.startswith("No token yet")


def test_serve_authenticates_with_the_store_once_it_has_a_principal(tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    path.write_text(
        f'[[identity]]\nname = "ana"\nrole = "approver"\ntoken_sha256 = "{hash_token("a")}"\n'
    )
    from_file = TokenAuth.from_file(path)

    def choose(tokens: TokenAuth | None, in_store: bool) -> object:
        # serve_auth runs its own event loop (as `interlock serve` does before it serves).
        store = SqliteStore(tmp_path / "app.db")
        try:
            return serve_auth(store, tokens, in_store)
        finally:
            anyio.run(store.close)

    with pytest.raises(click.UsageError, match="nobody could sign in"):
        choose(None, False)
    assert choose(from_file, False) is from_file  # an empty store: the file, as before
    chosen = choose(from_file, True)  # asked for: the file is imported into the store
    assert isinstance(chosen, StoreAuth)

    async def principals() -> list[str]:
        async with SqliteStore(tmp_path / "app.db") as store:
            return [p.name for p in await store.principals()]

    assert anyio.run(principals) == ["ana"]
    assert isinstance(choose(None, False), StoreAuth)  # it has a principal now


def test_serve_refuses_a_tokens_file_with_a_key_it_does_not_have(tmp_path: Path) -> None:
    bad = tmp_path / "tokens.toml"
    bad.write_text(
        f'[[identity]]\nname = "ops"\ntoken_sha256 = "{hash_token("t")}"\nthread = ["ops-"]\n'
    )
    refused = run("serve", "--app", "x:y", "--tokens", str(bad))
    assert refused.exit_code == 2
    assert "unknown key 'thread'" in refused.output and "line 4" in refused.output


def test_a_principal_gets_its_contact_addresses_and_changes_them(store_url: str) -> None:
    ok(
        "principal", "add", "Ana", "--email", " Ana@Example.com", "--slack-user", "U024BE7LH",
        "--store", store_url,
    )  # fmt: skip
    ok("principal", "add", "ben", "--group", "ops", "--store", store_url)
    table = ok("principal", "list", "--store", store_url).stdout
    assert "Ana@Example.com, slack U024BE7LH" in table
    listed = json.loads(ok("principal", "list", "--json", "--store", store_url).stdout)
    assert [(p["name"], p["email"], p["slack_user"]) for p in listed] == [
        ("Ana", "Ana@Example.com", "U024BE7LH"),
        ("ben", None, None),
    ]
    taken = run("principal", "update", "ben", "--email", "ana@EXAMPLE.com", "--store", store_url)
    assert taken.exit_code == 1
    assert "belongs to principal 'Ana' already" in taken.stderr
    taken = run("principal", "add", "carla", "--slack-user", "U024BE7LH", "--store", store_url)
    assert taken.exit_code == 1 and "Slack user 'U024BE7LH'" in taken.stderr
    moved = ok(
        "principal", "update", "ana", "--email", "", "--role", "admin", "--store", store_url
    )  # fmt: skip
    assert "updated Ana (admin; Slack user U024BE7LH)" in moved.stderr
    ok(
        "principal", "update", "BEN", "--email", "ana@example.com", "--slack-user", "W0BEN",
        "--no-groups", "--display-name", "Ben B.", "--store", store_url,
    )  # fmt: skip
    listed = json.loads(ok("principal", "list", "--json", "--store", store_url).stdout)
    assert [
        (p["name"], p["role"], p["email"], p["slack_user"], p["groups"], p["display_name"])
        for p in listed
    ] == [
        ("Ana", "admin", None, "U024BE7LH", [], ""),
        ("ben", "approver", "ana@example.com", "W0BEN", [], "Ben B."),
    ]

    async def lookup() -> None:
        async with SqliteStore(store_url.removeprefix("sqlite:///")) as store:
            found = await store.principal_by_contact(email="ANA@example.com")
            assert found is not None and found.name == "ben"

    anyio.run(lookup)


def test_contact_options_refuse_what_is_not_one(store_url: str) -> None:
    ok("principal", "add", "ana", "--store", store_url)
    bad_mail = run("principal", "add", "ben", "--email", "ben at example", "--store", store_url)
    assert bad_mail.exit_code == 2 and "one e-mail address such as" in bad_mail.stderr
    bad_slack = run("principal", "update", "ana", "--slack-user", "ana", "--store", store_url)
    assert bad_slack.exit_code == 2 and "Slack user id" in bad_slack.stderr
    nothing = run("principal", "update", "ana", "--store", store_url)
    assert nothing.exit_code == 2 and "nothing to change" in nothing.stderr
    both = run(
        "principal", "update", "ana", "--group", "ops", "--no-groups", "--store", store_url
    )  # fmt: skip
    assert both.exit_code == 2 and "not both" in both.stderr
    unknown = run("principal", "update", "carla", "--email", "c@example.com", "--store", store_url)
    assert unknown.exit_code == 1 and "no principal 'carla'" in unknown.stderr
    listed = json.loads(ok("principal", "list", "--json", "--store", store_url).stdout)
    assert [(p["name"], p["email"], p["slack_user"]) for p in listed] == [("ana", None, None)]
