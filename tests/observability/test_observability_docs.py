"""docs/observability.md: its setup code runs as written, in a process of its own (it sets the
process's global tracer provider, which can be set once)."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import interlock

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "observability.md"

# A graph that asks once, run and resumed after the doc's setup; it prints what it saw.
RUN = """
import anyio, prometheus_client
from typing import TypedDict
from interlock import END, START, Graph, approve

class S(TypedDict, total=False):
    ok: bool

def review(s):
    logging.getLogger("shop").info("reviewing order")
    return {"ok": approve("Ship?")}

g = Graph(S)
g.add_node("review", review).add_edge(START, "review").add_edge("review", END)
app = g.compile()
asked = app.run_sync({}, thread="order-42")
app.resume_sync("order-42", {asked.interrupts[0].id: True}, actor="ana")
print("runs done:", prometheus_client.REGISTRY.get_sample_value(
    "interlock_runs_total", {"status": "done"}))
provider.force_flush()
"""


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def block_with(text: str) -> str:
    (found,) = [b for b in blocks() if text in b]
    return found


def test_every_python_block_is_valid_python() -> None:
    for block in blocks():
        compile(block, str(DOC), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_the_setup_code_runs_as_written(tmp_path: Path) -> None:
    script = "\n".join(
        [
            block_with("trace.set_tracer_provider(provider)"),
            block_with("handler.setFormatter(JsonFormatter())"),
            # The metrics block as written, without taking a port of the test machine.
            "import prometheus_client\nprometheus_client.start_http_server = lambda port: None",
            block_with("metrics = PrometheusMetrics()"),
            RUN,
        ]
    )
    src = str(Path(interlock.__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "runs done: 1.0" in out.stdout
    # The console exporter printed the spans (as JSON objects, one after the other).
    names = re.findall(r'"name": "(interlock\.[a-z]+)"', out.stdout)
    assert {"interlock.run", "interlock.step", "interlock.node", "interlock.decision"} <= set(names)
    assert '"service.name": "shop-approvals"' in out.stdout
    # The log went to stderr, one JSON object per line, the node's own record included.
    lines = [json.loads(line) for line in out.stderr.splitlines()]
    (mine, again) = [line for line in lines if line["logger"] == "shop"]
    assert mine["message"] == "reviewing order" and mine["thread_id"] == "order-42"
    assert again["interrupt_id"] is not None and again["run_id"] != mine["run_id"]
    assert any(line["message"].startswith("decision on interrupt") for line in lines)
