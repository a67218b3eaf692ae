"""A thread paused by one OS process is resumed by another, from the checkpoints on disk."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

WORKER = textwrap.dedent(
    """
    import json, sys
    from typing import Annotated, TypedDict
    import anyio
    from interlock import Graph, SqliteStore, START, END, append, approve

    class S(TypedDict, total=False):
        log: Annotated[list[str], append]
        ok: bool

    def build(store):
        g = Graph(S)
        g.add_node("agent", lambda s: {"log": ["agent"]})
        g.add_node("approve", lambda s: {"ok": approve("ship it?", key="ship")})
        g.add_node("execute", lambda s: {"log": ["executed"]})
        g.add_edge(START, "agent").add_edge("agent", "approve")
        g.add_conditional_edges("approve", lambda s: "execute" if s["ok"] else END)
        return g.compile(store=store)

    async def main(path, mode):
        store = SqliteStore(path)
        app = build(store)
        if mode == "start":
            r = await app.run({}, thread="order-1")
        else:
            r = await app.resume("order-1", {"ship": True})
        await store.close()
        print(json.dumps({"status": r.status, "log": r.values.get("log"),
                          "interrupts": [i.id for i in r.interrupts]}))

    anyio.run(main, sys.argv[1], sys.argv[2])
    """
)


def test_a_thread_paused_by_one_process_is_resumed_by_another(tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    db = str(tmp_path / "shared.db")

    def run(mode: str) -> dict[str, Any]:
        out = subprocess.run(
            [sys.executable, str(script), db, mode], capture_output=True, text=True, check=True
        )
        return json.loads(out.stdout)  # type: ignore[no-any-return]

    first = run("start")
    assert first["status"] == "interrupted" and len(first["interrupts"]) == 1
    second = run("resume")
    assert second == {"status": "done", "log": ["agent", "executed"], "interrupts": []}
