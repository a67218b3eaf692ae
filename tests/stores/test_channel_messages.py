"""Channel messages claimed across connections and processes: of every claimer of one
message, in any process, exactly one is told True.

`interlock.testing.StoreConformance` checks each store on its own
(`ChannelMessageConformance`), with the claimers sharing one store object.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from _processes import released

import interlock.stores
from interlock.stores import PostgresStore, SqliteStore, Store

MESSAGES = 40
WORKERS = 4
CHANNEL = "slack #approvals"

# Each worker claims every message, in its own order, and reports those it was told True for.
WORKER = """
import json, sys
import anyio
from interlock.stores import SqliteStore

path, me, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])


async def main():
    won = []
    async with SqliteStore(path) as store:
        print("ready", flush=True)
        sys.stdin.readline()
        order = list(range(count))
        order = order[me:] + order[:me]
        for n in order:
            if await store.claim_channel_message("slack #approvals", f"i{n}", thread="t"):
                won.append(n)
    print(json.dumps(won), flush=True)


anyio.run(main)
"""


def test_processes_claiming_one_sqlite_file_each_message_is_won_once(tmp_path: Path) -> None:
    path = tmp_path / "claims.db"
    anyio.run(_create, path)
    src = Path(interlock.stores.__file__).parents[2]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")]),
    }
    workers = [
        subprocess.Popen(
            [sys.executable, "-W", "error", "-c", WORKER, str(path), str(n), str(MESSAGES)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        for n in range(WORKERS)
    ]
    won = [n for out in released(workers) for n in json.loads(out)]
    assert sorted(won) == list(range(MESSAGES))
    anyio.run(_check_rows, path)


async def _create(path: Path) -> None:
    async with SqliteStore(path):
        pass


async def _check_rows(path: Path) -> None:
    async with SqliteStore(path) as store:
        for n in range(MESSAGES):
            message = await store.get_channel_message(CHANNEL, f"i{n}")
            assert message is not None and (message.ref, message.thread) == (None, "t")


async def claim_from_many(stores: list[Store]) -> None:
    """Every store claims every message at once; each message is won exactly once."""
    won: dict[int, list[int]] = {n: [] for n in range(MESSAGES)}

    async def claim(who: int, store: Store) -> None:
        for n in range(MESSAGES):
            if await store.claim_channel_message(CHANNEL, f"i{n}", thread="t"):
                won[n].append(who)

    async with anyio.create_task_group() as group:
        for who, store in enumerate(stores):
            group.start_soon(claim, who, store)
    assert all(len(winners) == 1 for winners in won.values()), won


@pytest.mark.anyio
async def test_postgres_connections_claiming_at_once_each_message_is_won_once(dsn: str) -> None:
    stores: list[Store] = [PostgresStore(dsn) for _ in range(WORKERS)]
    try:
        await claim_from_many(stores)
    finally:
        for store in stores:
            await store.close()


@pytest.mark.anyio
async def test_sqlite_connections_claiming_at_once_each_message_is_won_once(
    tmp_path: Path,
) -> None:
    stores: list[Store] = [SqliteStore(tmp_path / "claims.db") for _ in range(WORKERS)]
    try:
        await claim_from_many(stores)
    finally:
        for store in stores:
            await store.close()
