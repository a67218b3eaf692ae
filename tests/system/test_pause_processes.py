"""Pausing a thread that another OS process runs: through the store, and by SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Annotated, Any, TypedDict

import anyio
import pytest

from interlock import START, Graph, SqliteStore, append

pytestmark = pytest.mark.anyio

# The child runs a -> slow -> c. `slow` prints "started", then either waits for a line on stdin
# ("line") or waits until it is cancelled ("forever"). It prints the run's result as JSON.
CHILD = textwrap.dedent(
    """
    import json, sys
    from typing import Annotated, TypedDict
    import anyio
    from interlock import START, Graph, GracefulShutdown, SqliteStore, append

    class S(TypedDict, total=False):
        log: Annotated[list[str], append]

    async def main(path, mode, shutdown_grace):
        async def slow(s):
            print("started", flush=True)
            if mode == "line":
                await anyio.to_thread.run_sync(sys.stdin.readline)
            else:
                await anyio.Event().wait()
            return {"log": ["slow"]}

        g = Graph(S)
        g.add_node("a", lambda s: {"log": ["a"]}).add_node("slow", slow)
        g.add_node("c", lambda s: {"log": ["c"]})
        g.add_edge(START, "a").add_edge("a", "slow").add_edge("slow", "c")
        async with SqliteStore(path) as store:
            app = g.compile(store=store)
            async with GracefulShutdown(grace=float(shutdown_grace)) as shutdown:
                async with app.start({}, thread="t", poll_interval=0.01) as handle:
                    shutdown.watch(handle)
                    r = await handle.result()
        print(json.dumps({"status": r.status, "info": [i.info for i in r.interrupts]}), flush=True)

    anyio.run(main, *sys.argv[1:])
    """
)


class S(TypedDict, total=False):
    log: Annotated[list[str], append]


def parent_app(store: SqliteStore) -> Any:
    """The same graph (same fingerprint) with a `slow` that does not wait."""
    g = Graph(S)
    g.add_node("a", lambda s: {"log": ["a"]}).add_node("slow", lambda s: {"log": ["slow"]})
    g.add_node("c", lambda s: {"log": ["c"]})
    g.add_edge(START, "a").add_edge("a", "slow").add_edge("slow", "c")
    return g.compile(store=store)


def spawn(tmp_path: Path, mode: str) -> tuple[subprocess.Popen[str], Path]:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    db = tmp_path / "pause.db"
    child = subprocess.Popen(
        [sys.executable, str(script), str(db), mode, "0.05"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline() == "started\n"
    return child, db


def finish(child: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


async def resume_in_parent(db: Path) -> list[str]:
    async with SqliteStore(db) as store:
        done = await parent_app(store).resume("t")
        assert done.status == "done"
        return list(done.values["log"])


async def test_planned_pause_requested_by_another_process(tmp_path: Path) -> None:
    child, db = spawn(tmp_path, "line")
    async with SqliteStore(db) as store:
        assert await parent_app(store).request_pause("t")
    assert child.stdin is not None
    child.stdin.write("go\n")
    child.stdin.flush()
    report = finish(child)
    assert report["status"] == "paused"
    assert report["info"] == [
        {"when": "planned", "finished": ["slow"], "rerun": [], "next": ["c"], "waiting": []}
    ]
    assert await resume_in_parent(db) == ["a", "slow", "c"]


async def test_forced_pause_requested_by_another_process(tmp_path: Path) -> None:
    child, db = spawn(tmp_path, "forever")
    async with SqliteStore(db) as store:
        assert await parent_app(store).request_pause("t", forced=True)
    report = finish(child)
    assert report["status"] == "paused"
    assert report["info"][0]["when"] == "forced" and report["info"][0]["rerun"] == ["slow"]
    assert await resume_in_parent(db) == ["a", "slow", "c"]


def test_sigterm_pauses_the_running_thread_durably(tmp_path: Path) -> None:
    child, db = spawn(tmp_path, "forever")
    child.send_signal(signal.SIGTERM)
    report = finish(child)  # planned first; `slow` never returns, so forced after the grace
    assert report["status"] == "paused"
    assert report["info"][0]["when"] == "forced" and report["info"][0]["rerun"] == ["slow"]
    assert anyio.run(resume_in_parent, db) == ["a", "slow", "c"]
