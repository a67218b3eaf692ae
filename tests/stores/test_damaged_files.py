"""Byte flips and truncations in copies of a real SQLite store: typed errors or the right data.

A database is built through the public API (threads with pending and decided interrupts, an
effect, the audit log), copied, and each copy damaged at one place. Every public reader must
then answer exactly as on the intact copy, or raise an `InterlockError`: never another
thread's state, a made-up status, or any other exception.
"""

from __future__ import annotations

import contextlib
import random
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

import anyio
import pytest

from interlock import (
    START,
    CheckpointCorrupt,
    CheckpointNotFound,
    Graph,
    InterlockError,
    SqliteStore,
    StoreError,
    UnknownInterrupt,
    append,
    approve,
    interrupt,
    verify_audit,
)

pytestmark = pytest.mark.anyio

THREADS = [f"th-{n:03x}" for n in range(0, 40, 3)]
FLIPS = 420
SEED = 20261201


class S(TypedDict, total=False):
    log: Annotated[list[str], append]
    ok: bool
    note: str


def graph() -> Graph[S]:
    g = Graph(S)
    g.add_node("ask", lambda s: {"ok": approve("pay?"), "log": ["asked"]})
    g.add_node("pay", lambda s: {"log": ["paid"]}, dangerous=True)
    g.add_node("note", lambda s: {"note": interrupt("why?", key="why"), "log": ["noted"]})
    g.add_edge(START, "ask").add_edge("ask", "pay").add_edge("pay", "note")
    return g


async def build(path: Path) -> None:
    async with SqliteStore(path, synchronous="OFF") as store:
        app = graph().compile(store=store)
        for n, thread in enumerate(THREADS):
            await app.run({"log": [f"start {n}"] * (n % 4)}, thread=thread)
            if n % 3 == 0:
                continue  # left pending at the approval
            pending = (await app.get_state(thread)).interrupts[0].id
            await app.resume(thread, {pending: n % 2 == 0})
            if n % 3 == 2:
                why = (await app.get_state(thread)).interrupts
                if why:
                    await app.resume(thread, {why[0].id: f"because {n}"})


def snap(s: Any) -> object:
    return (
        s.thread,
        s.checkpoint_id,
        s.parent_id,
        s.step,
        s.status,
        s.source,
        s.values,
        s.next,
        [(i.id, i.key, i.kind, i.status, str(i.address), i.info) for i in s.interrupts],
    )


Reader = Callable[[Any], Awaitable[object]]


def readers(pending: dict[str, str]) -> dict[str, Reader]:
    out: dict[str, Reader] = {}
    for thread in THREADS:
        out[f"get_state {thread}"] = lambda app, t=thread: _state(app, t)
        out[f"history {thread}"] = lambda app, t=thread: _history(app, t)
    out["inbox"] = lambda app: _inbox(app)
    out["inbox by key"] = lambda app: _inbox(app, key="why")
    out["verify_audit"] = lambda app: _audit(app)
    thread, target = next(iter(pending.items()))
    out[f"resume {thread}"] = lambda app: _resume(app, thread, target)
    return out


async def _state(app: Any, thread: str) -> object:
    return snap(await app.get_state(thread))


async def _history(app: Any, thread: str) -> object:
    return [snap(s) for s in await app.history(thread, limit=100)]


async def _inbox(app: Any, **filters: Any) -> object:
    return [(i.id, i.thread, i.key, i.status, i.info) for i in await app.inbox(**filters)]


async def _audit(app: Any) -> object:
    report = await verify_audit(app.store)
    if not report.ok:
        raise _Detected  # the log says it was damaged: a right answer
    return (report.entries, report.threads, report.heads)


async def _resume(app: Any, thread: str, target: str) -> object:
    result = await app.resume(thread, {target: False})
    return (result.status, result.values, [i.key for i in result.interrupts])


class _Detected(Exception):
    pass


async def answers(path: Path, pending: dict[str, str]) -> dict[str, object]:
    """What each reader says about the database at ``path`` (an exception is an answer too)."""
    out: dict[str, object] = {}
    store = SqliteStore(path, synchronous="OFF")
    try:
        app = graph().compile(store=store)
        for name, read in readers(pending).items():
            try:
                out[name] = await read(app)
            except (InterlockError, _Detected) as exc:
                out[name] = exc
    finally:
        with anyio.CancelScope(shield=True):
            with contextlib.suppress(InterlockError):
                await store.close()
    return out


def wrong(name: str, got: object, right: object) -> bool:
    """A damaged copy answered wrongly: not the intact answer, and not a typed refusal."""
    if isinstance(got, CheckpointNotFound | UnknownInterrupt) and not isinstance(
        right, BaseException
    ):
        return True  # "there is no such thing" about something that is there
    if isinstance(got, InterlockError | _Detected):
        return False
    return got != right


@pytest.fixture(scope="module")
def intact(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, dict[str, str]]:
    path = tmp_path_factory.mktemp("intact") / "store.db"

    async def make() -> dict[str, str]:
        await build(path)
        async with SqliteStore(path) as store:
            app = graph().compile(store=store)
            return {i.thread: i.id for i in await app.inbox(limit=1)}

    pending = anyio.run(make)
    for leftover in ("-wal", "-shm"):
        assert not Path(f"{path}{leftover}").exists() or leftover == "-shm"
    return path.read_bytes(), pending


def remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def damaged_copies(data: bytes) -> list[tuple[str, bytes]]:
    rng = random.Random(SEED)
    size = len(data)
    page = 4096
    positions = set(rng.sample(range(size), FLIPS - 60))
    positions |= set(range(0, 100, 2))  # the header
    positions |= {rng.randrange(p, min(p + page, size)) for p in range(0, size, page)}
    copies = []
    for at in sorted(positions):
        flipped = bytearray(data)
        flipped[at] ^= 1 << rng.randrange(8)
        copies.append((f"bit flip at byte {at}", bytes(flipped)))
    # (Not 0 bytes: an empty file is a new database, see test_sqlite.py.)
    for length in (1, 99, 100, 511, 512, page, 2 * page, size // 2, size - page, size - 1):
        copies.append((f"truncated to {length} bytes", data[:length]))
    return copies


@pytest.mark.slow  # some 40 damaged copies on two event loops: the main leg runs them
async def test_a_damaged_copy_answers_rightly_or_raises_a_typed_error(
    intact: tuple[bytes, dict[str, str]], tmp_path: Path
) -> None:
    data, pending = intact
    assert len(data) > 20 * 4096, "the database should span many pages"
    reference = tmp_path / "reference.db"
    reference.write_bytes(data)
    right = await answers(reference, pending)
    assert not any(isinstance(a, BaseException) for a in right.values()), right
    assert len(right["inbox"]) >= 5  # type: ignore[arg-type]

    copies = damaged_copies(data)
    assert len(copies) >= 400
    silent: list[str] = []
    detected = 0
    for n, (damage, content) in enumerate(copies):
        path = tmp_path / f"copy{n}.db"
        path.write_bytes(content)
        got = await answers(path, pending)
        for name, answer in got.items():
            if wrong(name, answer, right[name]):
                silent.append(f"{damage}: {name} -> {answer!r:.200}")
            elif isinstance(answer, BaseException):
                detected += 1
        remove(path)
    assert silent == [], f"{len(silent)} silent wrong answers:\n" + "\n".join(silent[:40])
    assert detected > 0


async def test_a_truncated_file_is_refused_not_started_over(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    await build(path)
    path.write_bytes(path.read_bytes()[:1])
    store = SqliteStore(path)
    with pytest.raises(StoreError, match="holds 1 bytes, which is not a SQLite database"):
        await store.get_thread(THREADS[0])
    await store.close()
    assert path.stat().st_size == 1  # left as it was, for whoever restores it


async def test_a_file_whose_tables_are_gone_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    await build(path)
    conn = sqlite3.connect(path)
    try:
        for table in ("threads", "checkpoints", "interrupts"):
            conn.execute(f"DROP TABLE {table}")
        conn.commit()
    finally:
        conn.close()
    store = SqliteStore(path)
    with pytest.raises(StoreError, match="tables of that schema are gone"):
        await store.get_checkpoint(THREADS[0])
    await store.close()


async def test_a_schema_damaged_into_invalid_text_is_a_store_error(tmp_path: Path) -> None:
    # SQLite quotes the damaged schema in its message, whose bytes are then not UTF-8.
    path = tmp_path / "store.db"
    await build(path)
    data = bytearray(path.read_bytes())
    at = data.index(b"CREATE TABLE threads")
    data[at + 6 : at + 8] = b"\xff\xfe"
    path.write_bytes(bytes(data))
    store = SqliteStore(path)
    with pytest.raises(StoreError, match="corrupted") as caught:
        await store.get_thread(THREADS[0])
    assert isinstance(caught.value.__cause__, UnicodeDecodeError)
    await store.close()


async def test_an_audit_row_of_the_wrong_type_is_corrupt_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    await build(path)
    conn = sqlite3.connect(path)
    try:
        conn.execute("UPDATE audit SET at = 'x\x045' WHERE seq = 2 AND thread = ?", (THREADS[1],))
        conn.commit()
    finally:
        conn.close()
    async with SqliteStore(path) as store:
        with pytest.raises(CheckpointCorrupt, match="wrong type"):
            await verify_audit(store)


@pytest.mark.parametrize(
    ("removed", "named"),
    [
        (("-wal",), "('{db}-wal')"),  # SQLite makes a new, empty log: the file is there again
        (("-wal", "-shm"), "('{db}-wal', with its index '{db}-shm')"),
    ],
)
async def test_a_write_ahead_log_removed_under_a_running_store_is_named(
    tmp_path: Path, removed: tuple[str, ...], named: str
) -> None:
    path = tmp_path / "app.db"
    async with SqliteStore(path) as running:
        app = graph().compile(store=running)
        await app.run({}, thread="before")
        for suffix in removed:
            await anyio.Path(f"{path}{suffix}").unlink()
        other = SqliteStore(path)
        try:
            with pytest.raises(StoreError) as caught:
                await other.get_thread("before")
        finally:
            await other.close()
        message = str(caught.value)
        assert f"its write-ahead log {named.format(db=path)} was removed while the store" in message
        assert "Never delete the -wal or -shm files of an open database" in message
        assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
        # The running store still has the removed log open, and goes on.
        await app.run({}, thread="after")
