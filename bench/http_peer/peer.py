"""Start LangGraph's Agent Server locally, measure H1 against it over HTTP, stop it.

The peer side of benchmark H1 (start a run → it stops at an interrupt → POST the decision → the
run is finished; round trips per second). Standard library only, so any interpreter can run it;
the server and the client (``langgraph_h1.py``) run under the LangGraph virtualenv's python
(``bench/.venv-langgraph``, or ``--langgraph-python`` / ``LANGGRAPH_PYTHON``).

    python bench/http_peer/peer.py --iterations 200            # one JSON line
    python bench/http_peer/peer.py --concurrency 1,10          # one line per figure

For each figure: a fresh server (``langgraph dev`` by default, in-memory runtime) on a free
loopback port, with its working directory in a new folder under ``bench/.work`` (that is where
it pickles its state, ``.langgraph_api/``); wait for ``GET /ok``; run the client; stop the
server with SIGTERM (a clean shutdown, so it writes its pickles); list what it wrote; remove the
folder (``--keep`` keeps it). See README.md beside this file.

From Python: ``run_peer(iterations=200, concurrency=1)`` returns the same dict, and
``serve(...)`` is a context manager that yields the base URL of a running server.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
DEFAULT_LANGGRAPH_PYTHON = BENCH / ".venv-langgraph" / "bin" / "python"
DEFAULT_WORKDIR = BENCH / ".work"
GRAPH_ID = "h1"
CLIENT = HERE / "langgraph_h1.py"
WAKE_QUEUE = HERE / "_wake_queue.py"

Server = Literal["dev", "uvicorn"]
# `langgraph dev` without --n-jobs-per-worker sets N_JOBS_PER_WORKER=1 (langgraph_api.cli.
# run_server), although its --help says 10 (the default of langgraph_api.config when the
# variable is unset, e.g. when the ASGI app is started directly).
DEV_DEFAULT_JOBS = 1

# Everything that could make the server call out (LangSmith tracing, license and metadata
# beacons, OTLP exporters, the CLI's analytics, the PyPI version check) is keyed on these; the
# server gets none of the caller's and only the values below.
_SCRUBBED_PREFIXES = ("LANGSMITH_", "LANGCHAIN_", "LANGGRAPH_", "LANGSERVE_", "OTEL_", "DD_")
OFFLINE_ENV = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",  # langgraph-cli: no usage report on each command
    "LANGSMITH_TRACING": "false",  # no tracing (and no LangSmith origin lookup for Studio)
    "LANGGRAPH_NO_VERSION_CHECK": "true",  # no "newer version available" check on PyPI
    "PYTHONUNBUFFERED": "1",
}


def offline_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUBBED_PREFIXES)}
    env.pop("LANGGRAPH_PYTHON", None)
    env.update(OFFLINE_ENV)
    env.update(extra or {})
    return env


def effective_jobs(n_jobs: int | None) -> int:
    """The server's number of concurrent runs: without the flag `langgraph dev` sets 1."""
    return DEV_DEFAULT_JOBS if n_jobs is None else n_jobs


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def langgraph_python(explicit: str | os.PathLike[str] | None = None) -> Path:
    path = Path(explicit or os.environ.get("LANGGRAPH_PYTHON") or DEFAULT_LANGGRAPH_PYTHON)
    if not path.exists():
        raise SystemExit(
            f"no LangGraph interpreter at {path}; see bench/README.md (Setup) and "
            "bench/http_peer/README.md"
        )
    return path


@dataclass
class Running:
    url: str
    workdir: Path
    command: list[str]
    startup_s: float
    info: dict[str, Any] = field(default_factory=dict)


def _write_config(workdir: Path) -> Path:
    # langgraph.json beside this file, with absolute paths (the server runs in `workdir`).
    config = {
        "dependencies": [str(HERE)],
        "graphs": {GRAPH_ID: f"{HERE / 'graph.py'}:graph"},
    }
    path = workdir / "langgraph.json"
    path.write_text(json.dumps(config, indent=2) + "\n")
    return path


def _command(
    python: Path,
    server: Server,
    *,
    port: int,
    config: Path,
    n_jobs: int | None,
    file_persistence: bool,
    wake_queue: bool,
) -> tuple[list[str], dict[str, str]]:
    check_options(server, file_persistence=file_persistence, wake_queue=wake_queue)
    if server == "dev":
        langgraph = python.parent / "langgraph"
        head = (
            [str(python), str(WAKE_QUEUE)]
            if wake_queue
            else ([str(langgraph)] if langgraph.exists() else [str(python), "-m", "langgraph_cli"])
        )
        cmd = [
            *head,
            "dev",
            "--no-browser",
            "--no-reload",
            "--host", "127.0.0.1",
            "--port", str(port),
            "--config", str(config),
            *(["--n-jobs-per-worker", str(n_jobs)] if n_jobs is not None else []),
            "--server-log-level", "warning",
        ]  # fmt: skip
        return cmd, offline_env()
    # The ASGI app started directly: the variables `langgraph dev` (langgraph_api.cli.run_server)
    # would set for the in-memory runtime.
    settings = json.loads(config.read_text())
    env = offline_env(
        {
            "LANGGRAPH_RUNTIME_EDITION": "inmem",
            "DATABASE_URI": ":memory:",
            "REDIS_URI": "fake",
            "MIGRATIONS_PATH": "__inmem",
            "LANGSERVE_GRAPHS": json.dumps(settings["graphs"]),
            "N_JOBS_PER_WORKER": str(effective_jobs(n_jobs)),
            "LANGGRAPH_DISABLE_FILE_PERSISTENCE": str(not file_persistence).lower(),
            "LANGGRAPH_ALLOW_BLOCKING": "false",
            "LANGSMITH_LANGGRAPH_API_VARIANT": "local_dev",
            "LANGGRAPH_API_URL": f"http://127.0.0.1:{port}",
            "PYTHONPATH": str(HERE),
        }
    )
    cmd = [
        str(python), "-m", "uvicorn", "langgraph_api.server:app",
        "--host", "127.0.0.1",
        "--port", str(port),
        "--no-access-log",
        "--log-level", "warning",
    ]  # fmt: skip
    return cmd, env


def check_options(server: Server, *, file_persistence: bool, wake_queue: bool) -> None:
    if server == "dev" and not file_persistence:
        # run_server() always sets LANGGRAPH_DISABLE_FILE_PERSISTENCE from its argument, which
        # `langgraph dev` takes from langgraph.json's "disable_persistence" only after its config
        # validation has dropped that key: it is always false (langgraph-cli 0.4.40).
        raise ValueError("`langgraph dev` cannot turn file persistence off: use --server uvicorn")
    if server != "dev" and wake_queue:
        raise ValueError("--wake-queue needs --server dev")


def _get_json(url: str, timeout: float = 2.0) -> Any:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy
    with opener.open(url, timeout=timeout) as response:
        return json.load(response)


def _stop(proc: subprocess.Popen[bytes], grace_s: float = 20.0) -> int:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)  # our own process group (start_new_session)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode


def persisted_files(workdir: Path) -> dict[str, int] | None:
    """What the server left in ``.langgraph_api/`` (name → bytes), or None without the folder."""
    folder = workdir / ".langgraph_api"
    if not folder.is_dir():
        return None
    return {p.name: p.stat().st_size for p in sorted(folder.iterdir()) if p.is_file()}


@contextlib.contextmanager
def serve(
    *,
    server: Server = "dev",
    python: str | os.PathLike[str] | None = None,
    n_jobs_per_worker: int | None = None,
    file_persistence: bool = True,
    wake_queue: bool = False,
    workdir: str | os.PathLike[str] | None = None,
    keep: bool = False,
    ready_timeout_s: float = 90.0,
) -> Iterator[Running]:
    """Run a fresh in-memory LangGraph Agent Server; yield where it listens; stop it after."""
    check_options(server, file_persistence=file_persistence, wake_queue=wake_queue)
    py = langgraph_python(python)
    base = Path(workdir) if workdir else DEFAULT_WORKDIR
    base.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="http_peer-", dir=base))
    config = _write_config(folder)
    port = free_port()
    cmd, env = _command(
        py,
        server,
        port=port,
        config=config,
        n_jobs=n_jobs_per_worker,
        file_persistence=file_persistence,
        wake_queue=wake_queue,
    )
    log = (folder / "server.log").open("wb")
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    running = Running(url=url, workdir=folder, command=cmd, startup_s=0.0)
    try:
        deadline = started + ready_timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"server exited with {proc.returncode} before it was ready:\n"
                    + _tail(folder / "server.log")
                )
            with contextlib.suppress(OSError, ValueError):
                if _get_json(f"{url}/ok").get("ok"):
                    break
            if time.perf_counter() > deadline:
                raise RuntimeError(
                    f"server not ready after {ready_timeout_s:g}s:\n" + _tail(folder / "server.log")
                )
            time.sleep(0.1)
        running.startup_s = time.perf_counter() - started
        running.info = _get_json(f"{url}/info")
        yield running
    finally:
        _stop(proc)
        log.close()
        running.info["persisted_files"] = persisted_files(folder)
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def run_client(
    url: str,
    *,
    python: str | os.PathLike[str] | None = None,
    iterations: int = 200,
    warmup: int = 20,
    concurrency: int = 1,
    client: str = "lean",
) -> dict[str, Any]:
    cmd = [
        str(langgraph_python(python)), str(CLIENT),
        "--url", url,
        "--assistant", GRAPH_ID,
        "--iterations", str(iterations),
        "--warmup", str(warmup),
        "--concurrency", str(concurrency),
        "--client", client,
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, env=offline_env(), check=False)
    lines = done.stdout.strip().splitlines()
    if not lines:
        raise RuntimeError(f"client printed nothing (exit {done.returncode}):\n{done.stderr}")
    result: dict[str, Any] = json.loads(lines[-1])
    if done.returncode != 0:
        raise RuntimeError(f"client failed (exit {done.returncode}): {result}\n{done.stderr}")
    return result


def run_peer(
    *,
    iterations: int = 200,
    warmup: int = 20,
    concurrency: int = 1,
    server: Server = "dev",
    python: str | os.PathLike[str] | None = None,
    n_jobs_per_worker: int | None = None,
    file_persistence: bool = True,
    wake_queue: bool = False,
    workdir: str | os.PathLike[str] | None = None,
    keep: bool = False,
    client: str = "lean",
) -> dict[str, Any]:
    """One H1 figure against a fresh server: the client's JSON plus how the server ran.

    ``client`` is ``lean`` (`lean_http.LeanClient`, as interlock's H1 uses) or ``httpx``."""
    with serve(
        server=server,
        python=python,
        n_jobs_per_worker=n_jobs_per_worker,
        file_persistence=file_persistence,
        wake_queue=wake_queue,
        workdir=workdir,
        keep=keep,
    ) as running:
        result = run_client(
            running.url,
            python=python,
            iterations=iterations,
            warmup=warmup,
            concurrency=concurrency,
            client=client,
        )
    result["server"] = {
        "command": "langgraph dev" if server == "dev" else "uvicorn langgraph_api.server:app",
        "runtime": "inmem",
        "n_jobs_per_worker": effective_jobs(n_jobs_per_worker),
        "file_persistence": file_persistence,
        "queue": "woken on each new run (patched, diagnostic)" if wake_queue else "as shipped",
        "startup_s": round(running.startup_s, 3),
        "persisted_files": running.info.get("persisted_files"),
    }
    if keep:
        result["server"]["workdir"] = str(running.workdir)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument(
        "--concurrency", default="1", help="clients in parallel; a comma list gives one line each"
    )
    parser.add_argument("--server", choices=("dev", "uvicorn"), default="dev")
    parser.add_argument(
        "--n-jobs-per-worker",
        type=int,
        default=None,
        help="runs the server executes at once (default: langgraph dev's, which is 1)",
    )
    parser.add_argument(
        "--no-file-persistence",
        action="store_true",
        help="LANGGRAPH_DISABLE_FILE_PERSISTENCE=true (with --server uvicorn only): checkpoints "
        "are then not pickled; threads and runs still are, at shutdown",
    )
    parser.add_argument(
        "--wake-queue",
        action="store_true",
        help="diagnostic: replace the queue's 0.5 s poll by a wake-up (not LangGraph as shipped)",
    )
    parser.add_argument("--langgraph-python", default=None)
    parser.add_argument("--workdir", default=None, help=f"default {DEFAULT_WORKDIR}")
    parser.add_argument("--keep", action="store_true", help="keep the server's folder and log")
    parser.add_argument(
        "--client",
        choices=("lean", "httpx"),
        default="lean",
        help="the client's HTTP library: lean_http.LeanClient (default) or httpx",
    )
    args = parser.parse_args(argv)
    try:
        levels = [int(c) for c in args.concurrency.split(",") if c.strip()]
    except ValueError:
        parser.error("--concurrency takes integers, e.g. 1 or 1,10")
    try:
        check_options(
            args.server, file_persistence=not args.no_file_persistence, wake_queue=args.wake_queue
        )
    except ValueError as exc:
        parser.error(str(exc))
    for concurrency in levels:
        result = run_peer(
            iterations=args.iterations,
            warmup=args.warmup,
            concurrency=concurrency,
            server=args.server,
            python=args.langgraph_python,
            n_jobs_per_worker=args.n_jobs_per_worker,
            file_persistence=not args.no_file_persistence,
            wake_queue=args.wake_queue,
            workdir=args.workdir,
            keep=args.keep,
            client=args.client,
        )
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
