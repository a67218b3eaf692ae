"""The approvers' commands on a PostgreSQL store, named with --store postgresql://..."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import anyio
import pytest
from _cli_app import build
from _cli_run import APP, Approvers
from psycopg.conninfo import conninfo_to_dict

from interlock.stores import PostgresStore


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Approvers:
    return Approvers(tmp_path, monkeypatch)


def as_url(dsn: str) -> str:
    """The test server's DSN (libpq key=value form) as a postgresql:// URL."""
    parts = conninfo_to_dict(dsn)
    query = f"?options={quote(str(parts['options']), safe='')}" if parts.get("options") else ""
    return f"postgresql://{parts['user']}@{parts['host']}:{parts['port']}/{parts['dbname']}{query}"


def ask(dsn: str, thread: str, **input: object) -> str:
    """Start a thread on the PostgreSQL store; return the id of its question."""
    app = build().compile(store=PostgresStore(dsn))

    async def go() -> str:
        try:
            return (await app.run(input, thread=thread)).interrupt().id
        finally:
            await app.store.close()

    return anyio.run(go)


def test_inbox_decide_history_and_verify_on_postgres(cli: Approvers, dsn: str) -> None:
    url = as_url(dsn)
    asked = ask(dsn, "pg-ticket", kind="ops", messages=["ls"])

    listed = cli.invoke("inbox", "--json", "--store", url)
    assert listed.exit_code == 0, listed.output
    assert [(i["id"], i["tool"]) for i in json.loads(listed.stdout)] == [(asked, "execute")]

    # The app's own store is a SQLite file; --store puts its graph on PostgreSQL instead.
    done = cli.invoke("approve", asked, "--app", APP, "--store", url, "--actor", "ada")
    assert done.exit_code == 0, done.output
    assert "Thread pg-ticket is done." in done.stdout
    assert not cli.db.exists()  # nothing went to the app's own store

    history = json.loads(cli.invoke("history", "pg-ticket", "--json", "--store", url).stdout)
    assert history["status"] == "done"
    decision = next(e for e in history["audit"] if e["kind"] == "decision")
    assert decision["actor"] == "ada" and decision["data"]["answer"] == {"action": "approve"}

    verified = cli.invoke("audit", "verify", "--json", "--store", url)
    assert verified.exit_code == 0, verified.output
    report = json.loads(verified.stdout)
    assert report["ok"] is True and list(report["heads"]) == ["pg-ticket"]

    again = cli.invoke("reject", asked, "--reason", "late", "--app", APP, "--store", url)
    assert again.exit_code == 1
    assert "ada decided" in again.output
