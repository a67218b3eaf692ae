"""The channel-message methods of the two SQL stores, and the SQL they run, written once.

Each operation is one statement, run outside an explicit transaction (both stores' connections
are in autocommit mode): a claim is an ``INSERT ... ON CONFLICT DO NOTHING`` on the primary
key (channel, interrupt id), which the database makes atomic across every connection of every
process, so exactly one claimer inserts the row and is told True.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar

import msgspec

from .._errors import StoreError, UnknownChannelMessage
from ._channels import ChannelMessage, check_channel_claim, check_channel_key, check_channel_update

__all__ = ["CHANNEL_COLUMNS", "ChannelSql", "SqlChannelMessages", "channel_message_from_row"]

T = TypeVar("T")

CHANNEL_COLUMNS: Final = "channel, interrupt_id, thread, ref, state, claimed_at, updated_at"


class ChannelSql(msgspec.Struct, frozen=True, kw_only=True):
    """The statements of channel messages, with one backend's placeholder."""

    claim: str
    """Parameters: channel, interrupt id, thread, claimed_at (and updated_at); inserts only
    a row that is not there."""
    update: str
    """Parameters: ref (NULL: unchanged), state (NULL: unchanged), updated_at, channel,
    interrupt id; returns the row."""
    select: str
    """Parameters: channel, interrupt id."""

    @classmethod
    def bound_to(cls, p: str) -> ChannelSql:
        """The statements with each parameter written as ``p`` (``?`` or ``%s``)."""
        return cls(
            claim=(
                f"INSERT INTO channel_messages ({CHANNEL_COLUMNS}) "
                f"VALUES ({p}, {p}, {p}, NULL, '', {p}, {p}) "
                "ON CONFLICT (channel, interrupt_id) DO NOTHING"
            ),
            update=(
                f"UPDATE channel_messages SET ref = coalesce({p}, ref), "
                f"state = coalesce({p}, state), updated_at = {p} "
                f"WHERE channel = {p} AND interrupt_id = {p} RETURNING {CHANNEL_COLUMNS}"
            ),
            select=(
                f"SELECT {CHANNEL_COLUMNS} FROM channel_messages "
                f"WHERE channel = {p} AND interrupt_id = {p}"
            ),
        )


def channel_message_from_row(row: Any) -> ChannelMessage:
    """A channel message's record from its row (`CHANNEL_COLUMNS`).

    Raises:
        StoreError: The row is damaged (a column of the wrong type).
    """
    channel, interrupt_id, thread, ref, state, claimed_at, updated_at = row
    texts = (channel, interrupt_id, thread, state)
    if not all(isinstance(t, str) for t in texts) or not isinstance(ref, str | None):
        raise StoreError(
            f"the store's channel messages are damaged: the row of channel {channel!r:.80} "
            f"and interrupt {interrupt_id!r:.80} holds a value of the wrong type. It was "
            "changed outside interlock: restore the store from a backup, or delete the row"
        )
    return ChannelMessage(
        channel=channel,
        interrupt_id=interrupt_id,
        thread=thread,
        ref=ref,
        state=state,
        claimed_at=float(claimed_at),
        updated_at=float(updated_at),
    )


class SqlChannelMessages:
    """`Store`'s channel-message methods over a store's ``_run`` and its placeholder."""

    _channel_sql: ChannelSql
    """The statements, bound to the backend's placeholder."""

    _clock: Callable[[], float]
    """The store's clock (Unix time)."""

    async def _run(self, fn: Callable[[Any], T]) -> T:
        raise NotImplementedError

    async def claim_channel_message(self, channel: str, interrupt_id: str, *, thread: str) -> bool:
        """Take the job of posting the channel's message about an interrupt (see
        `Store.claim_channel_message`)."""
        check_channel_claim(channel, interrupt_id, thread)
        statement = self._channel_sql.claim

        def claim(conn: Any) -> bool:
            now = self._clock()
            return bool(conn.execute(statement, (channel, interrupt_id, thread, now, now)).rowcount)

        return await self._run(claim)

    async def set_channel_message(
        self,
        channel: str,
        interrupt_id: str,
        *,
        ref: str | None = None,
        state: str | None = None,
    ) -> ChannelMessage:
        """Record the posted message's handle and/or what it shows (see
        `Store.set_channel_message`)."""
        check_channel_key(channel, interrupt_id)
        check_channel_update(ref, state)
        statement = self._channel_sql.update

        def update(conn: Any) -> ChannelMessage:
            params = (ref, state, self._clock(), channel, interrupt_id)
            # Every row read, so that SQLite finishes the statement (and commits) here.
            rows = conn.execute(statement, params).fetchall()
            if not rows:
                raise UnknownChannelMessage(channel, interrupt_id)
            return channel_message_from_row(rows[0])

        return await self._run(update)

    async def get_channel_message(self, channel: str, interrupt_id: str) -> ChannelMessage | None:
        """Return the channel's message about an interrupt, or None (see
        `Store.get_channel_message`)."""
        check_channel_key(channel, interrupt_id)
        statement = self._channel_sql.select

        def get(conn: Any) -> ChannelMessage | None:
            row = conn.execute(statement, (channel, interrupt_id)).fetchone()
            return None if row is None else channel_message_from_row(row)

        return await self._run(get)
