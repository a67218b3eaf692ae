"""The messages channels posted: claimed once across every caller, recorded, read back, and
gone with their thread (`ChannelMessageConformance`)."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from ..._errors import InvalidId, StoreClosed, UnknownChannelMessage
from ...stores._base import Store
from ...stores._channels import ChannelMessage
from .._clock import FakeClock
from ._common import T0, ConformanceGroup, grow, make_checkpoint, make_interrupt

__all__ = ["ChannelMessageConformance"]

SLACK = "slack #approvals"
REF = '{"channel": "C1", "ts": "1.2"}'


class ChannelMessageConformance(ConformanceGroup):
    """The messages channels posted: claimed once, recorded, read back, gone with the thread.

    Of all the callers of `Store.claim_channel_message` for one channel and interrupt, at
    once or one after the other, exactly one is told True; the row it makes holds no handle
    and the open state (``""``) until `Store.set_channel_message` records them (each given
    field; None leaves one as it is). Changing a message nobody claimed raises
    `UnknownChannelMessage`. Deleting or expiring a thread deletes its messages.
    """

    async def test_a_message_is_claimed_once_per_channel(
        self, store: Store, clock: FakeClock
    ) -> None:
        assert await store.get_channel_message(SLACK, "i1") is None
        assert await store.claim_channel_message(SLACK, "i1", thread="t") is True
        assert await store.claim_channel_message(SLACK, "i1", thread="t") is False
        assert await store.claim_channel_message(SLACK, "i1", thread="other") is False
        # Another channel, or another interrupt, is another message.
        assert await store.claim_channel_message("email", "i1", thread="t") is True
        assert await store.claim_channel_message(SLACK, "i2", thread="t") is True
        claimed = await store.get_channel_message(SLACK, "i1")
        assert isinstance(claimed, ChannelMessage)
        assert (claimed.channel, claimed.interrupt_id, claimed.thread) == (SLACK, "i1", "t")
        assert (claimed.ref, claimed.state) == (None, "")
        assert claimed.claimed_at == claimed.updated_at
        if clock.reads:
            assert claimed.claimed_at == clock.now

    async def test_of_concurrent_claimers_exactly_one_posts(self, store: Store) -> None:
        for claimers in (2, 8):
            outcomes: list[bool] = []
            async with anyio.create_task_group() as group:
                for _ in range(claimers):
                    group.start_soon(_claim, store, f"i{claimers}", outcomes)
            assert sorted(outcomes) == [False] * (claimers - 1) + [True]

    async def test_the_posted_message_is_recorded_and_read_back(
        self, store: Store, clock: FakeClock
    ) -> None:
        await store.claim_channel_message(SLACK, "i1", thread="t")
        claimed = await store.get_channel_message(SLACK, "i1")
        assert claimed is not None
        clock.advance(5)
        posted = await store.set_channel_message(SLACK, "i1", ref=REF)
        assert posted == msgspec.structs.replace(claimed, ref=REF, updated_at=posted.updated_at)
        if clock.reads:
            assert posted.updated_at == clock.now == claimed.claimed_at + 5
        assert await store.get_channel_message(SLACK, "i1") == posted
        clock.advance(5)
        decided = await store.set_channel_message(SLACK, "i1", state="decided")
        assert (decided.ref, decided.state, decided.claimed_at) == (
            REF,
            "decided",
            posted.claimed_at,
        )
        assert decided.updated_at >= posted.updated_at
        both = await store.set_channel_message(SLACK, "i1", ref="r2 \u00e9\u4e2d", state="")
        assert (both.ref, both.state) == ("r2 \u00e9\u4e2d", "")
        assert await store.get_channel_message(SLACK, "i1") == both
        same = await store.set_channel_message(SLACK, "i1")
        assert (same.ref, same.state) == (both.ref, both.state)
        # A channel's name and the ids are kept as given, not normalised.
        await store.claim_channel_message("Slack #Génération", "I-1", thread="T")
        named = await store.set_channel_message("Slack #Génération", "I-1", state="expired")
        assert (named.channel, named.interrupt_id, named.thread) == (
            "Slack #Génération",
            "I-1",
            "T",
        )
        assert await store.get_channel_message("slack #génération", "I-1") is None

    async def test_an_unclaimed_message_cannot_be_recorded(self, store: Store) -> None:
        with pytest.raises(UnknownChannelMessage, match="claim") as unknown:
            await store.set_channel_message(SLACK, "i1", ref=REF)
        assert (unknown.value.channel, unknown.value.interrupt_id) == (SLACK, "i1")
        await store.claim_channel_message("email", "i1", thread="t")
        with pytest.raises(UnknownChannelMessage):
            await store.set_channel_message(SLACK, "i1", state="decided")
        assert await store.get_channel_message(SLACK, "i1") is None

    async def test_messages_go_with_their_thread(self, store: Store) -> None:
        (first,) = await grow(store, "t", 1, interrupts=["a"])
        await grow(store, "u", 1, interrupts=["b"])
        await store.claim_channel_message(SLACK, "a", thread="t")
        await store.claim_channel_message("email", "a", thread="t")
        await store.set_channel_message(SLACK, "a", ref=REF)
        await store.claim_channel_message(SLACK, "b", thread="u")
        await store.delete_thread("t")
        assert await store.get_channel_message(SLACK, "a") is None
        assert await store.get_channel_message("email", "a") is None
        with pytest.raises(UnknownChannelMessage):
            await store.set_channel_message(SLACK, "a", state="decided")
        kept = await store.get_channel_message(SLACK, "b")
        assert kept is not None and kept.thread == "u"
        # A thread that comes back gets its messages posted anew.
        assert await grow(store, "t", 1, interrupts=["a"]) == [first]
        assert await store.claim_channel_message(SLACK, "a", thread="t") is True

    async def test_messages_of_an_expired_thread_go_with_it(self, store: Store) -> None:
        done = make_checkpoint("old", 1, status="done")
        await store.append_checkpoint(
            done, expected_head=None, new_interrupts=[make_interrupt("x", done)]
        )
        waiting = msgspec.structs.replace(
            make_checkpoint("new", 1, status="done"), created_at=T0 + 500
        )
        await store.append_checkpoint(waiting, expected_head=None)
        await store.claim_channel_message(SLACK, "x", thread="old")
        await store.claim_channel_message(SLACK, "y", thread="new")
        assert await store.expire(older_than=T0 + 100) == ["old"]
        assert await store.get_channel_message(SLACK, "x") is None
        assert await store.get_channel_message(SLACK, "y") is not None

    async def test_channel_arguments_are_refused_by_name(self, store: Store) -> None:
        for channel in ("", "slack\n#approvals", "a" * 513):
            with pytest.raises(InvalidId, match="channel"):
                await store.claim_channel_message(channel, "i1", thread="t")
        with pytest.raises(InvalidId, match="interrupt_id"):
            await store.claim_channel_message(SLACK, "", thread="t")
        with pytest.raises(InvalidId, match="thread"):
            await store.claim_channel_message(SLACK, "i1", thread="")
        with pytest.raises(TypeError, match="interrupt_id"):
            await store.claim_channel_message(SLACK, 42, thread="t")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="thread"):
            await store.claim_channel_message(SLACK, "i1", thread=None)  # type: ignore[arg-type]
        assert await store.get_channel_message(SLACK, "i1") is None
        await store.claim_channel_message(SLACK, "i1", thread="t")
        for ref in ("", "a\x00b", "r" * 4097, "\ud800"):
            with pytest.raises(ValueError, match="ref"):
                await store.set_channel_message(SLACK, "i1", ref=ref)
        with pytest.raises(TypeError, match="ref"):
            await store.set_channel_message(SLACK, "i1", ref=b"ts")  # type: ignore[arg-type]
        with pytest.raises(InvalidId, match="state"):
            await store.set_channel_message(SLACK, "i1", state="decided\nby ana")
        with pytest.raises(TypeError, match="state"):
            await store.set_channel_message(SLACK, "i1", state=1)  # type: ignore[arg-type]
        with pytest.raises(InvalidId, match="channel"):
            await store.get_channel_message("", "i1")
        kept = await store.get_channel_message(SLACK, "i1")
        assert kept is not None and (kept.ref, kept.state) == (None, "")

    async def test_a_closed_store_refuses_channel_messages(self, store: Store) -> None:
        await store.claim_channel_message(SLACK, "i1", thread="t")
        await store.close()
        calls = [
            store.claim_channel_message(SLACK, "i2", thread="t"),
            store.set_channel_message(SLACK, "i1", ref=REF),
            store.get_channel_message(SLACK, "i1"),
        ]
        for call in calls:
            with pytest.raises(StoreClosed):
                await call


async def _claim(store: Store, interrupt_id: str, outcomes: list[bool]) -> None:
    outcomes.append(await store.claim_channel_message(SLACK, interrupt_id, thread="t"))
