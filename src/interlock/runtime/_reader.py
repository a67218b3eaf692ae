"""What a person's surface reads of one question or one checkpoint: `Question` and `Reader`.

The approval server, the command line and the workers show people questions; they read them
here, not from the store's rows and the runtime's decoders. A `Reader` needs only a store and
a codec (the command line's commands that have no app); `App.question` and `App.reader` add
what the App knows: its registered types, and its threads' latest state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from .._errors import CheckpointCorrupt, CheckpointNotFound
from ..serde import Codec
from ..stores import (
    CheckpointRecord,
    CheckpointStatus,
    InterruptRecord,
    InterruptStatus,
    Store,
    ThreadRecord,
)
from ._persist import interrupt_of
from ._records import Decision, Interrupt
from ._resume import payload_hash, recorded_decision

__all__ = ["Question", "Reader", "ThreadSummary"]


class Question(msgspec.Struct, frozen=True, kw_only=True):
    """One question as a person's surface shows it: the interrupt and what is known of it.

    Returned by `App.question` and `Reader.question`.
    """

    interrupt: Interrupt
    """The question, decoded. A pending quorum's `Interrupt.approved_by` is filled in when an
    App read it (a `Reader` alone leaves it empty)."""
    record: InterruptRecord
    """The store's row of it (its status, tool, the checkpoint that asked)."""
    payload_hash: str
    """The hash of what it asks, to send back with a decision (`App.decide`'s ``seen``)."""
    decision: Decision | None
    """The decision recorded with it, once it was decided (None while pending)."""
    meta: Mapping[str, Any] = msgspec.field(default_factory=dict)
    """The metadata of the checkpoint that asked (``started_by``, a run's own keys); empty when
    not read or gone."""

    @property
    def id(self) -> str:
        """The interrupt's id."""
        return self.record.id

    @property
    def thread(self) -> str:
        """The thread that asked."""
        return self.record.thread

    @property
    def status(self) -> InterruptStatus:
        """``pending``, ``resolved``, ``expired`` or ``cancelled``."""
        return self.record.status

    @property
    def tool(self) -> str | None:
        """The tool whose call it gates, if any."""
        return self.record.tool

    @property
    def started_by(self) -> str | None:
        """Who started the run that asked (the run's ``started_by`` metadata), if known."""
        starter = self.meta.get("started_by")
        return starter if isinstance(starter, str) else None


class ThreadSummary(msgspec.Struct, frozen=True, kw_only=True):
    """One thread as a listing shows it: its head, and why it failed if it did.

    Returned by `App.threads` and `Reader.threads`.
    """

    record: ThreadRecord
    """The store's head pointer of the thread (id, latest checkpoint, status, time)."""
    error: str | None = None
    """For a ``failed`` thread: why (a node's error, or why its continuation could not run)."""
    continue_with: str | None = None
    """For a ``failed`` thread: the command that continues it once the cause is fixed."""

    @property
    def thread(self) -> str:
        """The thread's id."""
        return self.record.thread

    @property
    def status(self) -> CheckpointStatus:
        """The status of its latest checkpoint."""
        return self.record.status


class Reader:
    """Reads questions and checkpoints' metadata from a store, decoded with a codec.

    Needs no graph: what it decodes is the interrupt index and checkpoint bodies, with the
    codec's registered types (the default `Codec` reads every built-in value).

        reader = Reader(SqliteStore("app.db"))
        question = await reader.question("01J...")
    """

    __slots__ = ("codec", "store")

    def __init__(self, store: Store, codec: Codec | None = None) -> None:
        self.store = store
        self.codec = codec if codec is not None else Codec()

    async def question(self, interrupt_id: str, *, meta: bool = True) -> Question | None:
        """The question with id ``interrupt_id``, or None when the store has no such one.

        One read of the interrupt index, and with ``meta`` one of the checkpoint that asked.

        Raises:
            CheckpointCorrupt: The question's record cannot be read (damaged, or of types
                the codec lacks).
        """
        row = await self.store.get_interrupt(interrupt_id)
        if row is None:
            return None
        found = self.of(row)
        if not meta:
            return found
        return msgspec.structs.replace(
            found, meta=await self.checkpoint_meta(row.thread, row.checkpoint_id)
        )

    def of(self, row: InterruptRecord) -> Question:
        """The question a row of the store's interrupt index holds (nothing is read).

        Raises:
            CheckpointCorrupt: The row cannot be read.
        """
        interrupt = self.interrupt(row)
        return Question(
            interrupt=interrupt,
            record=row,
            payload_hash=self.payload_hash(interrupt),
            decision=self.decision(row),
        )

    def interrupt(self, row: InterruptRecord) -> Interrupt:
        """The `Interrupt` a row of the store's interrupt index holds.

        Raises:
            CheckpointCorrupt: The row cannot be read.
        """
        return interrupt_of(self.codec, row)

    def decision(self, row: InterruptRecord) -> Decision | None:
        """The decision recorded with a row that left ``pending``, if any."""
        return recorded_decision(self.codec, row)

    def payload_hash(self, interrupt: Interrupt) -> str:
        """The hash of what ``interrupt`` asks (what a decision sends back as seen)."""
        return payload_hash(self.codec, interrupt)

    async def checkpoint_meta(self, thread: str, checkpoint_id: str) -> dict[str, Any]:
        """The metadata stored with one checkpoint: empty when it is gone or damaged."""
        record = await self.store.get_checkpoint(thread, checkpoint_id)
        return {} if record is None else self.meta(record)

    def meta(self, record: CheckpointRecord) -> dict[str, Any]:
        """The metadata stored with a checkpoint read already (its state is not rebuilt):
        empty when it has none or its body is damaged."""
        return meta_of(self.codec, record.body)

    async def failure(self, thread: str, checkpoint_id: str) -> tuple[str | None, str | None]:
        """Why a failed checkpoint failed, and the command that continues its thread.

        Both are in its metadata (``error``, ``continue_with``; see `App.record_failure`);
        either is None when not recorded.
        """
        meta = await self.checkpoint_meta(thread, checkpoint_id)
        error, command = meta.get("error"), meta.get("continue_with")
        return (
            error if isinstance(error, str) else None,
            command if isinstance(command, str) else None,
        )

    async def threads(
        self,
        *,
        status: CheckpointStatus | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> list[ThreadSummary]:
        """Up to ``limit`` threads in id order after thread ``after`` (`Store.threads`), a
        ``failed`` one with its reason (one more read each: few threads fail)."""
        found: list[ThreadSummary] = []
        for record in await self.store.threads(status=status, limit=limit, after=after):
            if record.status == "failed":
                error, command = await self.failure(record.thread, record.head_id)
                found.append(ThreadSummary(record=record, error=error, continue_with=command))
            else:
                found.append(ThreadSummary(record=record))
        return found


def meta_of(codec: Codec, body: bytes) -> dict[str, Any]:
    """The metadata in a checkpoint's body; empty when there is none or it cannot be read."""
    try:
        decoded = codec.decode(body)
    except (CheckpointCorrupt, CheckpointNotFound):
        return {}
    meta = decoded.get("meta") if isinstance(decoded, dict) else None
    return dict(meta) if isinstance(meta, dict) else {}
