"""The approval server across OS processes: questions raised by a worker elsewhere reach its
event stream, and two servers racing on one decision record it once.

Each server is ``interlock serve`` in a process of its own; the worker is a plain Python
process running the graph on the same SQLite file.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from click.testing import CliRunner

from interlock.cli import cli

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
from _serving import serve_process

SERVING = Path(__file__).resolve().parent.parent / "server"

pytestmark = pytest.mark.slow  # server processes: run on the main Python only


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def tokens(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    path = tmp_path / "tokens.toml"
    secrets: dict[str, str] = {}
    for name in ("ana", "ben"):
        made = CliRunner().invoke(cli, ["token", "new", name])
        assert made.exit_code == 0
        secrets[name] = made.stderr.rsplit(": ", 1)[1].strip()
        with path.open("a") as f:
            f.write(made.stdout + "\n")
    return path, secrets


@contextmanager
def server_process(db: Path, tokens: Path) -> Iterator[str]:
    with serve_process(db, tokens) as running:
        yield running.url


def run_worker(db: Path, thread: str) -> None:
    """Start the order graph on ``thread`` in a process of its own; it stops at its question."""
    code = (
        "import sys, anyio; sys.path.insert(0, sys.argv[2]);"
        "from pathlib import Path; from _serving import order_app;"
        "app = order_app(Path(sys.argv[1]));"
        "meta = {'started_by': 'ana'};"
        "r = anyio.run(lambda: app.run({'n': 1}, thread=sys.argv[3], metadata=meta));"
        "assert r.status == 'interrupted', r.status; anyio.run(app.store.close)"
    )
    subprocess.run([sys.executable, "-c", code, str(db), str(SERVING), thread], check=True)


def listen(url: str, token: str, out: list[dict[str, Any]], ready: threading.Event) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    try:
        with httpx.stream("GET", f"{url}/v1/events", headers=headers, timeout=None) as r:
            ready.set()
            for line in r.iter_lines():
                if line.startswith("data: "):
                    out.append(json.loads(line[6:]))
    except httpx.HTTPError:
        return


def wait_for(check: Any, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    return found


def test_a_question_raised_in_another_process_reaches_the_stream_and_is_decided(
    tmp_path: Path, tokens: tuple[Path, dict[str, str]]
) -> None:
    db = tmp_path / "orders.db"
    path, secrets = tokens
    run_worker(db, "warm")  # the file exists before the server opens it
    with server_process(db, path) as url:
        events: list[dict[str, Any]] = []
        ready = threading.Event()
        threading.Thread(
            target=listen, args=(url, secrets["ben"], events, ready), daemon=True
        ).start()
        assert ready.wait(10)
        run_worker(db, "t1")
        created = wait_for(lambda: [e for e in events if e["type"] == "interrupt.created"])[0]
        assert (created["thread"], created["summary"]) == ("t1", "Ship order 2?")
        detail = httpx.get(
            f"{url}/v1/interrupts/{created['interrupt_id']}",
            headers={"Authorization": f"Bearer {secrets['ben']}"},
        ).json()
        r = httpx.post(
            f"{url}/v1/interrupts/{created['interrupt_id']}/decision",
            json={"answer": True, "payload_hash": detail["interrupt"]["payload_hash"]},
            headers={"Authorization": f"Bearer {secrets['ben']}", "Idempotency-Key": "k"},
        )
        assert r.status_code == 201, r.text
        wait_for(lambda: [e for e in events if e["type"] == "run.finished" and e["thread"] == "t1"])
        decided = [e for e in events if e["type"] == "interrupt.decided"]
        assert [(e["thread"], e["actor"]) for e in decided] == [("t1", "ben")]


def test_two_servers_racing_on_one_decision_record_it_once(
    tmp_path: Path, tokens: tuple[Path, dict[str, str]]
) -> None:
    db = tmp_path / "orders.db"
    path, secrets = tokens
    for n in range(8):
        run_worker(db, f"r{n}")
    with server_process(db, path) as one, server_process(db, path) as two:
        pending = httpx.get(
            f"{one}/v1/interrupts", headers={"Authorization": f"Bearer {secrets['ana']}"}
        ).json()["items"]
        assert len(pending) == 8
        results: dict[str, list[tuple[str, int]]] = {p["id"]: [] for p in pending}

        def decide(url: str, who: str) -> None:
            with httpx.Client(timeout=30) as client:
                for p in pending:
                    r = client.post(
                        f"{url}/v1/interrupts/{p['id']}/decision",
                        json={"answer": who == "ana", "payload_hash": p["payload_hash"]},
                        headers={
                            "Authorization": f"Bearer {secrets[who]}",
                            "Idempotency-Key": f"{who}-{p['id']}",
                        },
                    )
                    results[p["id"]].append((who, r.status_code))

        racers = [
            threading.Thread(target=decide, args=(one, "ana")),
            threading.Thread(target=decide, args=(two, "ben")),
        ]
        for t in racers:
            t.start()
        for t in racers:
            t.join(60)
        headers = {"Authorization": f"Bearer {secrets['ana']}"}
        for p in pending:
            codes = sorted(code for _, code in results[p["id"]])
            assert codes == [201, 409], (p["id"], results[p["id"]])
            winner = next(who for who, code in results[p["id"]] if code == 201)
            audit = httpx.get(f"{one}/v1/threads/{p['thread']}/audit", headers=headers).json()
            decisions = [a for a in audit["items"] if a["kind"] == "decision"]
            assert [a["actor"] for a in decisions] == [winner]

            def finished(thread: str = p["thread"]) -> bool:
                view = httpx.get(f"{two}/v1/threads/{thread}", headers=headers).json()
                return bool(view["status"] == "done")

            wait_for(finished)
            view = httpx.get(f"{two}/v1/threads/{p['thread']}", headers=headers).json()
            assert view["values"]["approved"] is (winner == "ana")
