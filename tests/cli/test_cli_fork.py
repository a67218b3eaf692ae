"""`interlock fork`: a thread copied at a checkpoint, maybe edited, maybe run, by an admin."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from _cli_run import Approvers


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Approvers:
    return Approvers(tmp_path, monkeypatch)


def checkpoints(cli: Approvers, thread: str) -> list[dict[str, Any]]:
    """The thread's checkpoints, newest first."""
    found: list[dict[str, Any]] = cli.json("history", thread)["checkpoints"]
    return found


def audit(cli: Approvers, thread: str) -> list[tuple[str, str | None, dict[str, Any]]]:
    return [(e.kind, e.actor, json.loads(e.data)) for e in cli.audit(thread)]


def test_fork_with_an_edit_as_a_node_records_who_in_both_logs(cli: Approvers) -> None:
    cli.start("refund", "order-1")
    first = checkpoints(cli, "order-1")[-1]["id"]
    before = checkpoints(cli, "order-1")
    result = cli.decide(
        "fork",
        "order-1",
        "--at",
        first,
        "--to",
        "order-1b",
        "--update",
        '{"refunded": true}',
        "--as-node",
        "refund",
        "--actor",
        "ada",
        "--json",
    )
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown == {
        "thread": "order-1b",
        "checkpoint_id": shown["checkpoint_id"],
        "source_thread": "order-1",
        "source_checkpoint": first,
        "as_node": "refund",
        "edited": ["refunded"],
        "run": None,
    }
    assert cli.values("order-1b") == {"kind": "refund", "messages": [], "refunded": True}
    assert cli.thread("order-1b").status == "done"  # refund "ran": nothing is planned after it
    expected = {
        "source": {"thread": "order-1", "checkpoint": first},
        "branch": {"thread": "order-1b", "checkpoint": shown["checkpoint_id"]},
        "as_node": "refund",
        "edited": ["refunded"],
    }
    assert audit(cli, "order-1b")[0] == ("fork", "ada", expected)
    assert audit(cli, "order-1")[-1] == ("fork", "ada", expected)
    # The source is as it was, still waiting on its question.
    assert checkpoints(cli, "order-1") == before
    assert cli.thread("order-1").status == "interrupted"
    history = cli.decide("history", "order-1b")
    assert re.search(r"fork\s+ada\s+\{\"source\"", history.stdout), history.stdout


def test_fork_and_run_prints_how_the_new_thread_stopped(cli: Approvers) -> None:
    cli.start("refund", "order-2")
    first = checkpoints(cli, "order-2")[-1]["id"]
    result = cli.decide("fork", "order-2", "--at", first, "--run", "--actor", "ada")
    assert result.exit_code == 0, result.output
    (to,) = re.findall(r"into (order-2-fork-[0-9a-f]{6}) \(checkpoint", result.stdout)
    assert f"Thread {to} is waiting on 1 new question(s)" in result.stdout
    assert cli.thread(to).status == "interrupted"
    # Without --run, the command says how to continue it.
    again = cli.decide("fork", "order-2", "--at", first, "--to", "order-2c", "--actor", "ada")
    assert again.exit_code == 0, again.output
    assert "Continue it with: interlock resume order-2c --app" in again.stdout
    assert cli.thread("order-2c").status == "ready"


def test_an_edit_that_breaks_the_schema_is_refused_and_writes_nothing(cli: Approvers) -> None:
    cli.start("refund", "order-3")
    first = checkpoints(cli, "order-3")[-1]["id"]
    log = cli.audit("order-3")
    result = cli.decide(
        "fork", "order-3", "--at", first, "--to", "x1", "--update", '{"refunded": "maybe", "n": 1}'
    )
    assert result.exit_code == 1, result.output
    assert "/refunded: Expected `bool`, got `str`" in result.output
    assert "/n: not a key of the state" in result.output
    assert "Nothing was written" in result.output
    assert cli.audit("x1") == [] and cli.audit("order-3") == log
    assert cli.json("threads")[0]["thread"] == "order-3" and len(cli.json("threads")) == 1


@pytest.mark.parametrize(
    ("update", "said"),
    [
        ("{refunded: true}", "is not JSON"),
        ('["refunded"]', "give a JSON object of the state keys"),
    ],
)
def test_update_must_be_a_json_object(cli: Approvers, update: str, said: str) -> None:
    cli.start("refund", "order-4")
    first = checkpoints(cli, "order-4")[-1]["id"]
    result = cli.decide("fork", "order-4", "--at", first, "--update", update)
    assert result.exit_code == 2, result.output
    assert said in result.output and '{"amount": 120}' in result.output
    assert len(cli.json("threads")) == 1


def test_only_an_enabled_admin_principal_forks(cli: Approvers) -> None:
    cli.start("refund", "order-5")
    first = checkpoints(cli, "order-5")[-1]["id"]
    for args in (["val"], ["root", "--role", "admin"], ["old", "--role", "admin"]):
        added = cli.invoke("principal", "add", *args, "--store", cli.store_url)
        assert added.exit_code == 0, added.output
    assert cli.invoke("principal", "disable", "old", "--store", cli.store_url).exit_code == 0
    log = cli.audit("order-5")
    for who, said in (("val", "needs the 'admin' role"), ("old", "is disabled")):
        result = cli.decide("fork", "order-5", "--at", first, "--to", "b", "--actor", who)
        assert result.exit_code == 1, result.output
        assert said in result.output and "othing was written" in result.output
    assert cli.audit("order-5") == log and len(cli.json("threads")) == 1
    # An admin forks; so does a name the store does not know (the machine's operator).
    for n, who in enumerate(("ROOT", "operator")):
        result = cli.decide("fork", "order-5", "--at", first, "--to", f"b{n}", "--actor", who)
        assert result.exit_code == 0, result.output
        assert audit(cli, f"b{n}")[0][:2] == ("fork", who)


def test_an_unknown_checkpoint_or_node_is_refused(cli: Approvers) -> None:
    cli.start("refund", "order-6")
    first = checkpoints(cli, "order-6")[-1]["id"]
    result = cli.decide("fork", "order-6", "--at", "0000000009-nope", "--to", "b")
    assert result.exit_code == 1, result.output
    assert "has no checkpoint '0000000009-nope'" in result.output
    assert "interlock history order-6" in result.output
    result = cli.decide("fork", "order-6", "--at", first, "--to", "b", "--as-node", "nope")
    assert result.exit_code == 1 and "'nope' is not a node" in result.output, result.output
    result = cli.decide("fork", "order-6", "--at", first, "--to", "order-6")
    assert result.exit_code == 1 and "already exists" in result.output, result.output
    assert len(cli.json("threads")) == 1
    needs_app = cli.read("fork", "order-6", "--at", first)
    assert needs_app.exit_code != 0 and "--app" in needs_app.output
