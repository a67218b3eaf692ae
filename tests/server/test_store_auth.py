"""`StoreAuth`: tokens let in from the principals and tokens of a store, as a stranger and an
admin meet them; what a token is worth, revocations made elsewhere, uses recorded, a store
that stops answering, and importing a tokens file."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from interlock import SqliteStore, StoreUnavailable
from interlock.server import (
    Identity,
    StoreAuth,
    TokenAuth,
    hash_token,
    import_tokens,
    issue_token,
    parse_expiry,
)
from interlock.stores import IdentityChange, MemoryStore, Store
from interlock.testing import FakeClock

pytestmark = pytest.mark.anyio


def bearer(token: str) -> str:
    return f"Bearer {token}"


async def until(check: Callable[[], Any], within: float) -> float:
    """Poll ``check`` until it holds; the seconds it took (fails after ``within``)."""
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < within, f"not within {within}s"
        await anyio.sleep(0.01)
    return time.monotonic() - started


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with SqliteStore(tmp_path / "ids.db") as opened:
        yield opened


async def test_a_token_speaks_for_its_principal_narrowed_never_widened(store: Store) -> None:
    await store.add_principal("Ana", role="approver", groups=["finance"])
    plain = await issue_token(store, "ana")
    narrow = await issue_token(
        store, "ANA", role="viewer", tools=["send_*"], threads=["ops-"], expires_at=None
    )
    with pytest.raises(ValueError, match="at most what its principal may"):
        await issue_token(store, "ana", role="admin")
    async with StoreAuth(store) as auth:
        assert auth.authenticate(bearer(plain.token)) == Identity(
            name="Ana", role="approver", groups=("finance",)
        )
        assert auth.authenticate(bearer(narrow.token)) == Identity(
            name="Ana", role="viewer", tools=("send_*",), threads=("ops-",), groups=("finance",)
        )
        # The role is the principal's: lowered there, every token of it is lowered too, and a
        # token's own role never lifts it back.
        await store.update_principal("ana", role="viewer")
        await auth.refresh()
        found = auth.authenticate(bearer(plain.token))
        assert found is not None and found.role == "viewer"
        await store.update_principal("ana", role="admin")
        await auth.refresh()
        found = auth.authenticate(bearer(narrow.token))
        assert found is not None and found.role == "viewer"
        found = auth.authenticate(bearer(plain.token))
        assert found is not None and found.role == "admin"
        assert found.principal().in_group("FINANCE")
    assert plain.token not in repr(plain)  # shown once, never in a log line


async def test_revoked_expired_and_disabled_are_refused(store: Store) -> None:
    clock = FakeClock(start=time.time())
    await store.add_principal("ana", role="approver")
    await store.add_principal("ben", role="approver")
    ana = await issue_token(store, "ana")
    other = await issue_token(store, "ana")
    soon = await issue_token(store, "ben", expires_at=clock.now + 60)
    async with StoreAuth(store, clock=clock) as auth:
        for header in (None, "", "Bearer", "Basic x", "Bearer nope", f"Token {ana.token}"):
            assert auth.authenticate(header) is None
        assert auth.authenticate(bearer(ana.token)) is not None
        assert auth.authenticate(bearer(soon.token)) is not None
        clock.advance(60)
        assert auth.authenticate(bearer(soon.token)) is None  # expired, with no change needed
        await store.revoke_tokens(id=ana.record.id)
        await auth.refresh()
        assert auth.authenticate(bearer(ana.token)) is None
        assert auth.authenticate(bearer(other.token)) is not None
        await store.update_principal("ana", disabled=True)
        await auth.refresh()
        assert auth.authenticate(bearer(other.token)) is None
        await store.update_principal("ana", disabled=False)
        await auth.refresh()
        assert auth.authenticate(bearer(other.token)) is not None
        assert auth.authenticate(bearer(ana.token)) is None  # enabling revives no revoked token


async def test_changes_made_through_another_store_arrive_within_the_refresh(
    tmp_path: Path,
) -> None:
    # Two handles on one file, as two processes have: the change is made through one and
    # followed through the other.
    async with (
        SqliteStore(tmp_path / "shared.db") as here,
        SqliteStore(tmp_path / "shared.db") as there,
    ):
        await here.add_principal("ana", role="approver")
        async with StoreAuth(there, refresh=0.05) as auth:
            made = await issue_token(here, "ana")
            took = await until(lambda: auth.authenticate(bearer(made.token)) is not None, 1.0)
            await here.revoke_tokens(principal="ana")
            took = max(
                took, await until(lambda: auth.authenticate(bearer(made.token)) is None, 1.0)
            )
        assert took < 1.0


async def test_a_use_is_recorded_at_most_once_a_minute(store: Store) -> None:
    clock = FakeClock(start=time.time())
    await store.add_principal("ana", role="approver")
    made = await issue_token(store, "ana")

    async def used() -> float | None:
        (token,) = await store.tokens()
        return token.last_used_at

    async with StoreAuth(store, clock=clock, refresh=0.02) as auth:
        first = clock.now
        assert auth.authenticate(bearer(made.token)) is not None
        for _ in range(100):
            if await used() is not None:
                break
            await anyio.sleep(0.02)
        assert await used() == first
        clock.advance(59)
        assert auth.authenticate(bearer(made.token)) is not None
        await anyio.sleep(0.1)
        assert await used() == first
        clock.advance(1)
        assert auth.authenticate(bearer(made.token)) is not None
    # Leaving records what is left to record.
    assert await used() == first + 60


class Outage(MemoryStore):
    """A store whose identity reads fail while ``down``."""

    down = False

    async def identity_changes(self, *, after: int = 0, limit: int = 1000) -> list[IdentityChange]:
        if self.down:
            raise StoreUnavailable("the test cut the store off")
        return await super().identity_changes(after=after, limit=limit)


async def test_a_store_that_stops_answering_makes_every_token_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = Outage()
    await store.add_principal("ana", role="approver")
    made = await issue_token(store, "ana")
    async with StoreAuth(store, refresh=0.02, stale_after=0.2) as auth:
        assert auth.authenticate(bearer(made.token)) is not None
        store.down = True
        await until(lambda: auth.authenticate(bearer(made.token)) is None, 2.0)
        assert "every token is refused" in caplog.text
        store.down = False
        await until(lambda: auth.authenticate(bearer(made.token)) is not None, 2.0)


class Restorable(MemoryStore):
    """A store whose identities can be put back as an older copy had them."""

    older: MemoryStore | None = None

    async def identity_changes(self, *, after: int = 0, limit: int = 1000) -> list[IdentityChange]:
        if self.older is not None:
            return await self.older.identity_changes(after=after, limit=limit)
        return await super().identity_changes(after=after, limit=limit)


async def test_a_store_restored_from_an_older_copy_is_read_anew(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = Restorable()
    await store.add_principal("ana", role="approver")
    kept = await issue_token(store, "ana")
    async with StoreAuth(store) as auth:
        gone = await issue_token(store, "ana")
        await auth.refresh()
        assert auth.authenticate(bearer(gone.token)) is not None
        # Put back as it was before `gone` was made: its revision is behind the follower's.
        store.older = MemoryStore()
        await store.older.add_principal("ana", role="approver")
        await store.older.add_token(kept.record.id, hash=kept.record.hash, principal="ana")
        await auth.refresh()
        assert auth.authenticate(bearer(kept.token)) is not None
        assert auth.authenticate(bearer(gone.token)) is None
    assert "restored from a backup" in caplog.text


async def test_it_must_run_to_authenticate(store: Store) -> None:
    auth = StoreAuth(store)
    with pytest.raises(RuntimeError, match="async with auth"):
        auth.authenticate("Bearer x")
    assert "stopped" in repr(auth)
    async with auth:
        assert "following" in repr(auth)
        with pytest.raises(RuntimeError, match="once"):
            await auth.__aenter__()
    with pytest.raises(ValueError, match="shorter than stale_after"):
        StoreAuth(store, refresh=5, stale_after=1)
    with pytest.raises(TypeError, match="Store"):
        StoreAuth("sqlite:///x.db")  # type: ignore[arg-type]


async def test_a_warm_lookup_costs_microseconds(store: Store) -> None:
    await store.add_principal("ana", role="approver")
    tokens = [(await issue_token(store, "ana")).token for _ in range(200)]
    async with StoreAuth(store) as auth:
        headers = [bearer(t) for t in tokens]
        started = time.perf_counter()
        for _ in range(25):
            for header in headers:
                assert auth.authenticate(header) is not None
        each = (time.perf_counter() - started) / (25 * len(headers))
    assert each < 100e-6, f"{each * 1e6:.1f} µs per lookup"


async def test_a_tokens_file_seeds_the_store_once(tmp_path: Path, store: Store) -> None:
    path = tmp_path / "tokens.toml"
    path.write_text(
        f'[[identity]]\nname = "ana"\nrole = "approver"\ntoken_sha256 = "{hash_token("a")}"\n'
        'tools = ["send_*"]\ngroups = ["finance"]\n\n'
        f'[[identity]]\nname = "ben"\nrole = "admin"\ntoken_sha256 = "{hash_token("b")}"\n'
    )
    seed = TokenAuth.from_file(path)
    report = await import_tokens(store, seed)
    assert (report.principals, len(report.tokens), report.kept) == (("ana", "ben"), 2, ())
    async with StoreAuth(store) as auth:
        assert auth.authenticate("Bearer a") == seed.authenticate("Bearer a")
        assert auth.authenticate("Bearer b") == seed.authenticate("Bearer b")
    await store.revoke_tokens(principal="ben")
    await store.update_principal("ana", role="viewer")
    again = await import_tokens(store, seed)
    assert (again.principals, again.tokens) == ((), ())  # a revoked token is not brought back
    assert again.kept and "ana is a viewer in the store" in again.kept[0]
    async with StoreAuth(store) as auth:
        assert auth.authenticate("Bearer b") is None
        found = auth.authenticate("Bearer a")
        assert found is not None and found.role == "viewer" and found.tools == ("send_*",)


def test_an_expiry_is_a_duration_or_a_zoned_timestamp() -> None:
    assert parse_expiry("12h", now=1000.0) == 1000.0 + 12 * 3600
    assert parse_expiry("30d", now=0.0) == 30 * 86400
    assert parse_expiry(" 1h30m ", now=0.0) == 5400
    assert parse_expiry("2030-01-01T00:00:00Z") == 1893456000.0
    assert parse_expiry("2030-01-01T01:00:00+01:00") == 1893456000.0
    with pytest.raises(ValueError, match="time zone"):
        parse_expiry("2030-01-01T00:00:00")
    for wrong in ("", "soon", "12", "-1d", "1y"):
        with pytest.raises(ValueError, match="not an expiry"):
            parse_expiry(wrong)
