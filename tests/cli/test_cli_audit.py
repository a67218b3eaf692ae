"""`interlock audit verify`: the hash chains, intact and broken."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import anyio
import pytest
from _cli_run import Approvers

from interlock import SqliteStore, verify_audit
from interlock.stores import AuditReport


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Approvers:
    approvers = Approvers(tmp_path, monkeypatch)
    for n in range(3):
        asked = approvers.start("refund", f"order-{n}")
        assert approvers.decide("approve", asked, "--actor", "ada").exit_code == 0
    approvers.start("ops", "ticket-1", messages=["ls"])
    return approvers


def report(cli: Approvers) -> AuditReport:
    async def verify() -> AuditReport:
        async with SqliteStore(cli.db) as store:
            return await verify_audit(store)

    return anyio.run(verify)


def test_verify_an_intact_log_prints_the_heads(cli: Approvers) -> None:
    result = cli.read("audit", "verify")
    assert result.exit_code == 0, result.output
    expected = report(cli)
    assert f"{expected.entries} entries in 4 thread(s), every link intact" in result.stdout
    for thread, head in expected.heads.items():
        assert f" {thread} " in result.stdout and head in result.stdout


def test_verify_json(cli: Approvers) -> None:
    shown = cli.json("audit", "verify")
    expected = report(cli)
    assert shown == {
        "ok": True,
        "entries": expected.entries,
        "threads": 4,
        "problems": [],
        "heads": expected.heads,
    }


def test_verify_one_thread(cli: Approvers) -> None:
    shown = cli.json("audit", "verify", "--thread", "order-1")
    assert shown["threads"] == 1 and list(shown["heads"]) == ["order-1"]
    assert shown["entries"] == 2  # the question and its decision


def test_a_tampered_row_breaks_the_chain_and_exits_1(cli: Approvers) -> None:
    # Someone with write access rewrites who decided.
    with closing(sqlite3.connect(cli.db)) as db, db:
        changed = db.execute(
            "UPDATE audit SET actor = 'mallory' WHERE thread = 'order-1' AND kind = 'decision'"
        ).rowcount
    assert changed == 1
    result = cli.read("audit", "verify")
    assert result.exit_code == 1
    assert "The audit log does not hold: 1 problem(s) in 1 of 4 thread(s)" in result.stdout
    assert "order-1" in result.stdout
    assert "its content does not match its hash: the entry was edited" in result.stdout
    assert "Compare the store with a backup" in result.stdout

    shown = cli.read("audit", "verify", "--json")
    assert shown.exit_code == 1
    verdict = json.loads(shown.stdout)
    assert verdict["ok"] is False
    assert verdict["problems"] == [
        {
            "thread": "order-1",
            "seq": 2,
            "problem": "its content does not match its hash: the entry was edited",
        }
    ]
    assert cli.read("audit", "verify", "--thread", "order-2").exit_code == 0  # others hold


def test_a_removed_row_is_found(cli: Approvers) -> None:
    with closing(sqlite3.connect(cli.db)) as db, db:
        db.execute("DELETE FROM audit WHERE thread = 'order-2' AND seq = 1")
    result = cli.read("audit", "verify", "--thread", "order-2")
    assert result.exit_code == 1
    assert "entries are missing" in result.stdout
