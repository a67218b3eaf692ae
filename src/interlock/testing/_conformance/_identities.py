"""Principals and tokens: names unique in normal form, tokens kept by hash, revocation, and a
change order no follower can miss (`IdentityConformance`)."""

from __future__ import annotations

import hashlib

import anyio
import pytest

from ..._errors import (
    InvalidId,
    PrincipalExists,
    StoreClosed,
    StoreError,
    UnknownPrincipal,
    UnknownToken,
)
from ...stores._base import Store
from ...stores._identities import PrincipalRecord, TokenRecord
from .._clock import FakeClock
from ._common import ConformanceGroup

__all__ = ["IdentityConformance"]


def token_hash(secret: str) -> str:
    """The form a token is kept in (what `interlock.server.hash_token` returns)."""
    return "sha256:" + hashlib.sha256(secret.encode()).hexdigest()


class IdentityConformance(ConformanceGroup):
    """Principals and tokens: names unique in normal form, tokens kept by hash, revocation,
    and a change order no follower can miss.

    A principal's name is unique in normal form (``Ana``, ``ana`` and ``ＡＮＡ`` are one); a
    token names an existing principal, and its id and its hash are unique; a token's hash is
    all the store keeps, and it refuses anything that is not one. Revoking is once per token.
    Every write of a principal or a token takes the next identity revision, and
    `Store.identity_changes` lists each record once, as it is now, in revision order;
    recording a token's use is not a change.
    """

    async def test_a_principal_is_one_name_in_normal_form(
        self, store: Store, clock: FakeClock
    ) -> None:
        ana = await store.add_principal(
            "Ana", role="approver", display_name="Ana Lima", groups=["finance", "sre"]
        )
        assert isinstance(ana, PrincipalRecord)
        assert (ana.name, ana.display_name, ana.role, ana.groups) == (
            "Ana",
            "Ana Lima",
            "approver",
            ("finance", "sre"),
        )
        assert ana.disabled is False and ana.key == "ana" and ana.rev >= 1
        if clock.reads:
            assert ana.created_at == clock.now
        for same in ("ana", "ANA", "\uff21\uff4e\uff41"):  # the last in full-width letters
            with pytest.raises(PrincipalExists) as refused:
                await store.add_principal(same, role="admin")
            assert refused.value.existing == "Ana"
        assert await store.get_principal("ANA") == ana
        assert await store.get_principal("ben") is None
        assert await store.principals() == [ana]

    async def test_principals_are_listed_by_normal_form_and_paged(self, store: Store) -> None:
        for name in ("carla", "Ben", "ana", "dora"):
            await store.add_principal(name, role="viewer")
        listed = [p.name for p in await store.principals()]
        assert listed == ["ana", "Ben", "carla", "dora"]
        page = await store.principals(limit=2)
        assert [p.name for p in page] == ["ana", "Ben"]
        rest = await store.principals(after=page[-1].name)
        assert [p.name for p in rest] == ["carla", "dora"]
        assert [p.name for p in await store.principals(after="BEN", limit=1)] == ["carla"]

    async def test_an_update_changes_what_is_given_and_nothing_else(self, store: Store) -> None:
        ana = await store.add_principal("ana", role="approver", groups=["finance"])
        off = await store.update_principal("ANA", disabled=True)
        assert off.disabled and off.name == "ana" and off.rev > ana.rev
        assert (off.role, off.groups, off.display_name) == (ana.role, ana.groups, "")
        moved = await store.update_principal(
            "ana", role="admin", groups=[], display_name="Ana L.", disabled=False
        )
        assert (moved.role, moved.groups, moved.display_name, moved.disabled) == (
            "admin",
            (),
            "Ana L.",
            False,
        )
        assert moved.created_at == ana.created_at and moved.rev > off.rev
        assert await store.get_principal("ana") == moved
        with pytest.raises(UnknownPrincipal):
            await store.update_principal("ben", disabled=True)

    async def test_a_token_is_kept_by_its_hash_and_names_its_principal(
        self, store: Store, clock: FakeClock
    ) -> None:
        await store.add_principal("Ana", role="approver")
        made = await store.add_token(
            "t1",
            hash=token_hash("s1"),
            principal="ana",
            role="viewer",
            tools=["send_*", "refund"],
            threads=["ops-"],
            expires_at=2e9,
        )
        assert isinstance(made, TokenRecord)
        assert (made.id, made.hash, made.principal, made.role) == (
            "t1",
            token_hash("s1"),
            "Ana",
            "viewer",
        )
        assert (made.tools, made.threads, made.expires_at) == (("send_*", "refund"), ("ops-",), 2e9)
        assert made.revoked_at is None and made.last_used_at is None
        if clock.reads:
            assert made.created_at == clock.now
        plain = await store.add_token("t2", hash=token_hash("s2"), principal="Ana")
        assert (plain.role, plain.tools, plain.threads, plain.expires_at) == (
            None,
            ("*",),
            ("",),
            None,
        )
        assert await store.tokens() == [made, plain]
        assert await store.tokens(principal="ANA", after="t1") == [plain]
        assert await store.tokens(principal="ben") == []
        with pytest.raises(StoreError, match="taken"):
            await store.add_token("t1", hash=token_hash("s3"), principal="ana")
        with pytest.raises(StoreError, match="taken"):
            await store.add_token("t3", hash=token_hash("s1"), principal="ana")
        with pytest.raises(UnknownPrincipal):
            await store.add_token("t3", hash=token_hash("s3"), principal="ben")
        assert [t.id for t in await store.tokens()] == ["t1", "t2"]

    async def test_a_store_refuses_to_keep_a_token_itself(self, store: Store) -> None:
        await store.add_principal("ana", role="approver")
        for wrong in ("s3cret-token", token_hash("x").upper(), token_hash("x")[:-1], "sha256:"):
            with pytest.raises(ValueError, match="sha256"):
                await store.add_token("t", hash=wrong, principal="ana")
        assert await store.tokens() == []

    async def test_revoking_is_once_per_token(self, store: Store, clock: FakeClock) -> None:
        await store.add_principal("ana", role="approver")
        await store.add_principal("ben", role="approver")
        for n, owner in enumerate(("ana", "ana", "ben", "ana")):
            await store.add_token(f"t{n}", hash=token_hash(f"s{n}"), principal=owner)
        (one,) = await store.revoke_tokens(id="t1")
        assert one.id == "t1" and one.revoked_at is not None
        if clock.reads:
            assert one.revoked_at == clock.now
        assert await store.revoke_tokens(id="t1") == []
        rest = await store.revoke_tokens(principal="ANA")
        assert [t.id for t in rest] == ["t0", "t3"]
        assert await store.revoke_tokens(principal="ana") == []
        assert [t.id for t in await store.tokens() if t.revoked_at is None] == ["t2"]
        with pytest.raises(UnknownToken):
            await store.revoke_tokens(id="nope")
        with pytest.raises(UnknownPrincipal):
            await store.revoke_tokens(principal="carla")
        for both_or_none in ({"id": "t2", "principal": "ben"}, {}):
            with pytest.raises(ValueError, match="one token"):
                await store.revoke_tokens(**both_or_none)

    async def test_a_token_is_live_until_revoked_or_expired(self, store: Store) -> None:
        await store.add_principal("ana", role="approver")
        token = await store.add_token("t", hash=token_hash("s"), principal="ana", expires_at=100.0)
        assert token.live(99.5) and not token.live(100.0)
        (revoked,) = await store.revoke_tokens(id="t")
        assert not revoked.live(0.0)

    async def test_a_use_is_recorded_forward_and_is_no_change(self, store: Store) -> None:
        await store.add_principal("ana", role="approver")
        await store.add_token("t", hash=token_hash("s"), principal="ana")
        before = await store.identity_changes()
        await store.touch_tokens({"t": 1000.0, "unknown": 5.0})
        await store.touch_tokens({"t": 900.0})
        (token,) = await store.tokens()
        assert token.last_used_at == 1000.0
        assert await store.identity_changes(after=before[-1].rev) == []
        await store.touch_tokens({})

    async def test_a_follower_of_the_identity_changes_misses_none(self, store: Store) -> None:
        assert await store.identity_changes() == []
        ana = await store.add_principal("ana", role="approver")
        token = await store.add_token("t", hash=token_hash("s"), principal="ana")
        ben = await store.add_principal("ben", role="viewer")
        everything = await store.identity_changes()
        assert everything == [ana, token, ben]
        assert [r.rev for r in everything] == sorted({r.rev for r in everything})
        cursor = everything[-1].rev
        assert await store.identity_changes(after=cursor) == []
        (revoked,) = await store.revoke_tokens(id="t")
        off = await store.update_principal("ana", disabled=True)
        assert await store.identity_changes(after=cursor) == [revoked, off]
        # Each record once, as it is now, at its latest revision.
        assert await store.identity_changes() == [ben, revoked, off]
        first = await store.identity_changes(limit=1)
        assert first == [ben]
        assert await store.identity_changes(after=first[-1].rev, limit=1) == [revoked]
        with pytest.raises(ValueError, match="ahead"):
            await store.identity_changes(after=off.rev + 1)

    async def test_identity_arguments_are_refused_by_name(self, store: Store) -> None:
        with pytest.raises(InvalidId, match="white space"):
            await store.add_principal("ana ", role="approver")
        with pytest.raises(ValueError, match="role"):
            await store.add_principal("ana", role="god")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="one group"):
            await store.add_principal("ana", role="viewer", groups=["SRE", "sre"])
        with pytest.raises(TypeError, match="groups"):
            await store.add_principal("ana", role="viewer", groups="sre")
        with pytest.raises(InvalidId, match="display_name"):
            await store.add_principal("ana", role="viewer", display_name="Ana\nAdmin")
        assert await store.principals() == []
        await store.add_principal("ana", role="viewer")
        with pytest.raises(TypeError, match="disabled"):
            await store.update_principal("ana", disabled="yes")  # type: ignore[arg-type]
        good = token_hash("s")
        with pytest.raises(ValueError, match="tools is empty"):
            await store.add_token("t", hash=good, principal="ana", tools=[])
        with pytest.raises(InvalidId, match="threads"):
            await store.add_token("t", hash=good, principal="ana", threads=["ops\n"])
        with pytest.raises(ValueError, match="expires_at"):
            await store.add_token("t", hash=good, principal="ana", expires_at=float("nan"))
        with pytest.raises(ValueError, match="role"):
            await store.add_token("t", hash=good, principal="ana", role="root")  # type: ignore[arg-type]
        assert await store.tokens() == []
        with pytest.raises(ValueError, match="limit"):
            await store.principals(limit=-1)
        with pytest.raises(TypeError, match="after"):
            await store.identity_changes(after="0")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="after"):
            await store.identity_changes(after=-1)

    async def test_concurrent_adds_of_one_name_make_one_principal(self, store: Store) -> None:
        outcomes: list[str] = []

        async def add(name: str) -> None:
            try:
                await store.add_principal(name, role="viewer")
                outcomes.append("added")
            except PrincipalExists:
                outcomes.append("exists")

        async with anyio.create_task_group() as group:
            for name in ("ana", "Ana", "ANA", "ana", "aNa", "AnA"):
                group.start_soon(add, name)
        assert sorted(outcomes) == ["added"] + ["exists"] * 5
        revs = [r.rev for r in await store.identity_changes()]
        assert len(revs) == 1

    async def test_every_identity_call_of_a_closed_store_raises(self, store: Store) -> None:
        await store.add_principal("ana", role="viewer")
        await store.close()
        calls = [
            store.add_principal("ben", role="viewer"),
            store.update_principal("ana", disabled=True),
            store.get_principal("ana"),
            store.principals(),
            store.add_token("t", hash=token_hash("s"), principal="ana"),
            store.tokens(),
            store.revoke_tokens(principal="ana"),
            store.touch_tokens({"t": 1.0}),
            store.identity_changes(),
        ]
        for call in calls:
            with pytest.raises(StoreClosed):
                await call
