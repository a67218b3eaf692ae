"""Several OS processes run approval round trips on one SQLite file at once."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

WORKER = textwrap.dedent(
    """
    import json, sys
    from typing import Annotated, TypedDict
    import anyio
    from interlock import Graph, SqliteStore, START, END, append, approve

    class S(TypedDict, total=False):
        log: Annotated[list[str], append]
        ok: bool

    async def main(path, who, n):
        async with SqliteStore(path) as store:
            g = Graph(S)
            g.add_node("agent", lambda s: {"log": ["agent"]})
            g.add_node("approve", lambda s: {"ok": approve("go?")})
            g.add_node("execute", lambda s: {"log": ["executed"]})
            g.add_edge(START, "agent").add_edge("agent", "approve")
            g.add_conditional_edges("approve", lambda s: "execute" if s["ok"] else END)
            app = g.compile(store=store)
            done = 0
            for i in range(n):
                t = f"{who}-{i}"
                r = await app.run({}, thread=t)
                r = await app.resume(t, {r.interrupt().id: True})
                done += r.values["log"] == ["agent", "executed"]
            print(json.dumps({"done": done}))

    anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]))
    """
)


def test_four_processes_share_one_file_without_lock_errors(tmp_path: Path) -> None:
    script = tmp_path / "w.py"
    script.write_text(WORKER)
    db = str(tmp_path / "shared.db")
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), db, f"p{k}", "25"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(4)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert "locked" not in err
        assert json.loads(out) == {"done": 25}
