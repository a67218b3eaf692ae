"""Run Python in a fresh interpreter with this tree's `interlock` first on the path.

What a module imports can only be seen from a process that has imported nothing else yet: the
test session itself has long since imported everything.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import interlock

SRC = str(Path(interlock.__file__).parents[1])
"""The source tree the tests run against, put first on the fresh process's path."""


def run_fresh(code: str) -> list[str]:
    """Run ``code`` with ``python -c`` in a new process and return its output lines.

    Fails the test, with the process's standard error, if the code raises.
    """
    env = {**os.environ, "PYTHONPATH": SRC}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()
