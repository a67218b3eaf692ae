"""Processes started together: each says ``ready``, then all are told ``go`` at once."""

from __future__ import annotations

import subprocess


def released(workers: list[subprocess.Popen[str]]) -> list[str]:
    """Let ``workers`` go together once every one is ready; return what each printed.

    A barrier: every worker prints ``ready`` once it has imported and opened what it needs,
    then waits for ``go`` on its standard input. Each must exit 0 with nothing on stderr (a
    warning there is an error). Workers still running when this fails are killed.
    """
    outputs: list[str] = []
    try:
        for worker in workers:
            assert worker.stdout is not None
            assert worker.stdout.readline() == "ready\n"
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        for worker in workers:
            out, err = worker.communicate(timeout=120)
            assert worker.returncode == 0, err
            assert err == ""
            outputs.append(out)
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.communicate()
    return outputs
