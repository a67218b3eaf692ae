"""The storage protocol every backend implements, and the records it moves.

A store is deliberately dumb: it keeps opaque, already-encoded checkpoint bodies in per-thread
append order, a head pointer per thread, and an index of interrupts. It never decodes a body.
All semantics (delta encoding, what a checkpoint means) live in the runtime; all the store must
get right is atomicity and compare-and-set.

Invariants every backend keeps (checked by `interlock.testing.StoreConformance`):

* `append_checkpoint` is all-or-nothing: the checkpoint row, the new head, the new interrupt rows,
  the resolutions and the changes they make are written together or not at all.
* The head moves only by compare-and-set against ``expected_head``.
* An interrupt leaves ``pending`` at most once.
* A write under a `Fence` holds the thread's lease: it fails with `FencedOut` when another
  executor took the lease over, and with `ThreadBusy` when another executor holds it now.
* An effect is started at most once per key (`begin_effect`), unless a retry is asked for.
* The audit log only grows; each entry's hash covers its content and the previous entry's hash.
* The change feed lists every change an append commits exactly once, each thread's in commit
  order: a follower that pages on with the cursor of the last change it got never misses one.
* Principal names are unique in normal form; a token's hash is unique; every write of a
  principal or a token gives it the next identity revision, in commit order, so a follower of
  `Store.identity_changes` never misses a change (see `interlock.stores.PrincipalRecord`).
  A principal's e-mail address (compared case-insensitively) and its Slack user id each
  name one principal at most.
* A channel's message about an interrupt is claimed once: of all the callers of
  `Store.claim_channel_message`, in every process, exactly one is told True. The message's
  row goes with its thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Literal, Protocol, get_args, runtime_checkable

import msgspec

from ._channels import ChannelMessage
from ._identities import IdentityChange, PrincipalRecord, Role, TokenRecord

__all__ = [
    "AUDIT_KINDS",
    "CHANGE_KINDS",
    "CHECKPOINT_STATUSES",
    "INTERRUPT_KINDS",
    "INTERRUPT_STATUSES",
    "PAUSE_KINDS",
    "AuditEntry",
    "AuditKind",
    "AuditRecord",
    "ChangeKind",
    "ChangeRecord",
    "CheckpointRecord",
    "CheckpointSource",
    "CheckpointStatus",
    "EffectRecord",
    "EffectStatus",
    "Fence",
    "InterruptKind",
    "InterruptRecord",
    "InterruptStatus",
    "PauseKind",
    "PendingFilter",
    "Resolution",
    "Store",
    "ThreadRecord",
]

CheckpointSource = Literal["input", "loop", "resume", "update", "fork"]
"""Why a checkpoint was written."""

CheckpointStatus = Literal["ready", "interrupted", "paused", "done", "failed"]
"""What the thread looks like at this checkpoint.

``ready``: tasks are planned and nothing blocks them (a crashed run can be continued);
``interrupted``: at least one interrupt is pending; ``paused``: stopped by a static or external
pause with no answer needed; ``done``: no more tasks; ``failed``: a node raised.
"""

InterruptStatus = Literal["pending", "resolved", "expired", "cancelled"]
"""Where an interrupt is in its life: waiting for an answer, or out of ``pending`` for good."""

InterruptKind = Literal["dynamic", "before", "after", "external", "reconcile"]
"""What raised an interrupt.

``dynamic``: a node asked (`interlock.interrupt`, `interlock.approve`...); ``before`` and
``after``: a static breakpoint before or after a node; ``external``: a pause asked for from
outside the run; ``reconcile``: an effect whose outcome is unknown waits for a person to say
what happened. A store refuses to write any other kind, and reports a row read back with
another as damage (`CheckpointCorrupt`).
"""

AuditKind = Literal[
    "interrupt",
    "approval",
    "decision",
    "expired",
    "cancelled",
    "edit",
    "dropped",
    "effect_started",
    "effect_retried",
    "effect_done",
    "effect_reconciled",
    "thread_deleted",
    "fork",
]
"""What an audit entry records.

``interrupt``: an interrupt was raised; ``approval``: one person approved an interrupt that
needs several distinct approvals (one entry per approval; the last one is followed by the
``decision`` entry that resolves it); ``decision``: one was answered (resolved);
``expired``: its deadline passed and a policy answered it; ``cancelled``: it was withdrawn
without an answer (a new turn dropped it, or the task that raised it is gone); ``edit``: a
person changed the state (``update_state``); ``dropped``: decided interrupts whose tasks were
dropped before they ran; ``effect_started``: a dangerous call is about to be made;
``effect_retried``: it is made again after a person said retry; ``effect_done``: its outcome
was recorded; ``effect_reconciled``: a person recorded the outcome of a call that may or may
not have happened; ``thread_deleted``: the thread was deleted or expired (the log's last
entry); ``fork``: a new thread was started from one of this thread's checkpoints, maybe with
its state edited (written in both logs: the new thread's, with its first checkpoint, then
the source's, with `Store.append_audit`). A store refuses to write any other kind, and
reports a row read back with another as damage (`CheckpointCorrupt`).
"""

PauseKind = Literal["planned", "forced"]
"""A pause request: stop at the next step boundary, or also cancel running tasks."""

EffectStatus = Literal["started", "done"]
"""An effect is ``started`` before its call and ``done`` once its outcome is recorded."""

ChangeKind = Literal[
    "interrupt_created",
    "interrupt_resolved",
    "interrupt_expired",
    "interrupt_cancelled",
    "run_finished",
    "run_failed",
]
"""What a change of the feed (`Store.changes`) says happened.

``interrupt_created``: an append raised an interrupt; ``interrupt_resolved``,
``interrupt_expired``, ``interrupt_cancelled``: an append moved one out of ``pending`` with
that status; ``run_finished``, ``run_failed``: an append's checkpoint has status ``done`` or
``failed``. A store reports a row read back with another kind as damage (`CheckpointCorrupt`).
"""

# The closed sets as values, for the checks of what is written and what is read back.
CHECKPOINT_STATUSES: Final[frozenset[str]] = frozenset(get_args(CheckpointStatus))
"""Every `CheckpointStatus`."""
INTERRUPT_STATUSES: Final[frozenset[str]] = frozenset(get_args(InterruptStatus))
"""Every `InterruptStatus`."""
INTERRUPT_KINDS: Final[frozenset[str]] = frozenset(get_args(InterruptKind))
"""Every `InterruptKind`."""
AUDIT_KINDS: Final[frozenset[str]] = frozenset(get_args(AuditKind))
"""Every `AuditKind`."""
PAUSE_KINDS: Final[frozenset[str]] = frozenset(get_args(PauseKind))
"""Every `PauseKind`."""
CHANGE_KINDS: Final[frozenset[str]] = frozenset(get_args(ChangeKind))
"""Every `ChangeKind`."""


class Fence(msgspec.Struct, frozen=True, kw_only=True):
    """The lease part of a write: which executor writes, under which fencing token.

    A thread has at most one live lease. The first write of a run acquires it (``token`` None:
    refused with `ThreadBusy` while another executor's lease is live; the thread's token goes
    up by one); later writes carry the token they got (refused with `FencedOut` once another
    executor has taken the lease over, even if that one has let it go since). Each write
    extends the lease by ``ttl`` seconds from the store's clock; ``release`` ends it.
    """

    owner: str
    """Who holds the lease, for people reading a `ThreadBusy` (e.g. ``host:pid:run``)."""
    token: int | None
    """The fencing token held, or None to acquire the lease with this write."""
    ttl: float
    """Seconds the lease lasts after this write."""
    release: bool = False
    """Let the lease go with this write (the run stops)."""


class CheckpointRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One committed checkpoint, as the store sees it."""

    thread: str
    """The thread it belongs to."""
    id: str
    """Unique id across the store (sortable within a thread)."""
    parent_id: str | None
    """The checkpoint this one follows; None for a thread's first."""
    seq: int
    """1-based position in the thread's append order; unique within the thread."""
    step: int
    """Superstep number of the run (-1 for the input checkpoint)."""
    base_seq: int
    """`seq` of the full snapshot this checkpoint's channel deltas build on (`seq` if it is one)."""
    created_at: float
    """Unix time of the commit."""
    source: CheckpointSource
    """Why it was written."""
    status: CheckpointStatus
    """The thread's status at this checkpoint."""
    body: bytes
    """The encoded checkpoint (deltas, tasks, interrupts...); opaque to the store."""


class InterruptRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One interrupt in the store's index (the inbox)."""

    id: str
    """Globally unique interrupt id."""
    thread: str
    """Thread that raised it."""
    checkpoint_id: str
    """Checkpoint that recorded it."""
    key: str | None
    """Optional user key."""
    address: str
    """Rendered address, e.g. ``node:review/tool:execute:call_1``."""
    kind: InterruptKind
    """What raised it."""
    status: InterruptStatus
    """Lifecycle state."""
    created_at: float
    """Unix time it was raised."""
    deadline: float | None
    """Unix time after which it expires, if any."""
    body: bytes
    """The encoded `Interrupt` (info, schema...); opaque to the store."""
    tool: str | None = None
    """The tool whose call it gates, if any (an inbox filter)."""
    resolved_at: float | None = None
    """When it left ``pending``."""
    resolution: bytes | None = None
    """Encoded outcome (the resume value or decision); opaque to the store."""


class Resolution(msgspec.Struct, frozen=True, kw_only=True):
    """A request to move one interrupt out of ``pending``, applied by compare-and-set."""

    id: str
    """The interrupt."""
    status: InterruptStatus
    """The new status (never ``pending``)."""
    resolved_at: float
    """Unix time of the decision."""
    resolution: bytes | None
    """Encoded outcome to record."""


class EffectRecord(msgspec.Struct, frozen=True, kw_only=True):
    """The record of one side effect (a dangerous call), keyed by thread and effect key."""

    thread: str
    """The thread whose task makes the call."""
    key: str
    """Stable key of the call (the same on every re-run of the task)."""
    name: str
    """What the call is, for people (a node or tool name)."""
    status: EffectStatus
    """``started`` (the call may or may not have happened) or ``done``."""
    attempt: int
    """How many times the call was started (more than one only after a person said retry)."""
    started_at: float
    """Unix time of the latest start."""
    finished_at: float | None = None
    """Unix time the outcome was recorded."""
    result: bytes | None = None
    """The encoded outcome; opaque to the store."""


class AuditEntry(msgspec.Struct, frozen=True, kw_only=True):
    """An audit event to append to a thread's log, written with the change it describes."""

    kind: AuditKind
    """What it records (see `AuditKind`)."""
    actor: str | None
    """Who caused it, if known."""
    data: bytes
    """The details, as UTF-8 JSON."""


class AuditRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A stored audit entry: one link of its thread's hash chain."""

    thread: str
    """The thread."""
    seq: int
    """1-based position in the thread's log."""
    at: float
    """Unix time it was written."""
    kind: AuditKind
    """What it records (see `AuditKind`)."""
    actor: str | None
    """Who caused it."""
    data: bytes
    """UTF-8 JSON details."""
    prev: bytes
    """Hash of the previous entry (32 zero bytes for the first)."""
    hash: bytes
    """SHA-256 over ``prev`` and this entry's content (see `interlock.stores.audit_hash`)."""


class ChangeRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One change of the feed: what an append committed, for those who follow the store."""

    cursor: str
    """Opaque: the feed's position just after this change; pass it back as ``after``."""
    at: float
    """Unix time of the commit (the ``created_at`` of the checkpoint that made the change)."""
    kind: ChangeKind
    """What happened (see `ChangeKind`)."""
    thread: str
    """The thread it happened to."""
    checkpoint_id: str
    """The checkpoint whose commit made the change."""
    interrupt_id: str | None = None
    """The interrupt raised or moved out of ``pending`` (None for a run's end)."""
    actor: str | None = None
    """Who caused it, when the store knows (the stores of this package leave it None)."""


class ThreadRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A thread's head pointer."""

    thread: str
    """Thread id."""
    head_id: str
    """Id of the latest checkpoint."""
    head_seq: int
    """`seq` of the latest checkpoint (also the number of checkpoints appended)."""
    status: CheckpointStatus
    """Status of the latest checkpoint."""
    updated_at: float
    """Unix time of the latest append (that checkpoint's ``created_at``)."""


class PendingFilter(msgspec.Struct, frozen=True, kw_only=True):
    """Which pending interrupts `Store.pending` returns: those that match every field given.

    A field left None does not filter. To add a filter, add a field here, a clause to
    `matches`, and a condition to each backend's inbox query.
    """

    thread: str | None = None
    """Only this thread's."""
    key: str | None = None
    """Only those with this key."""
    tool: str | None = None
    """Only those gating this tool."""
    older_than: float | None = None
    """Only those raised before this Unix time."""
    deadline_before: float | None = None
    """Only those with a deadline before this Unix time."""

    def matches(self, interrupt: InterruptRecord) -> bool:
        """Whether ``interrupt`` passes every filter given (its status is not looked at)."""
        return (
            (self.thread is None or interrupt.thread == self.thread)
            and (self.key is None or interrupt.key == self.key)
            and (self.tool is None or interrupt.tool == self.tool)
            and (self.older_than is None or interrupt.created_at < self.older_than)
            and (
                self.deadline_before is None
                or (interrupt.deadline is not None and interrupt.deadline < self.deadline_before)
            )
        )


@runtime_checkable
class Store(Protocol):
    """Durable home of checkpoints and interrupts. All methods are safe to call concurrently.

    A store whose every returned `CheckpointRecord` has been checked against a checksum
    written with its row, one that covers the body (the SQL stores' row digests), says so
    with a class attribute ``verifies_checkpoints = True``: the runtime then does not compute
    the body's own CRC-32 again when it decodes it. Without the attribute it does.
    """

    async def append_checkpoint(
        self,
        record: CheckpointRecord,
        *,
        expected_head: str | None,
        new_interrupts: Sequence[InterruptRecord] = (),
        resolutions: Sequence[Resolution] = (),
        fence: Fence | None = None,
        audit: Sequence[AuditEntry] = (),
        durable: bool = True,
    ) -> int | None:
        """Commit a checkpoint, its new interrupts, resolutions and audit entries at once.

        The changes the append makes (see `changes`) enter the feed with it.

        Args:
            record: The checkpoint; ``record.seq`` must be the thread's head seq + 1.
            expected_head: The head id the writer started from (None for a new thread).
            new_interrupts: Interrupt rows to insert (status ``pending``), each with
                ``thread`` and ``checkpoint_id`` of ``record``.
            resolutions: Interrupts of ``record.thread`` to move out of ``pending``.
            fence: Acquire, hold or release the thread's lease with this write. None writes
                without a lease, which is refused while another executor holds one.
            audit: Entries appended to the thread's audit log.
            durable: False commits without waiting for the disk: a process crash cannot lose
                the append, a power failure can until the next durable write to the same
                database (which makes every earlier one durable too). For progress whose loss
                only means repeating work, followed by a durable write before anyone is told.

        The lease is checked first, then the head, then the resolutions in order, then the new
        ids.

        Returns:
            The fencing token the writer holds after the write (None without ``fence``).

        Raises:
            ThreadBusy: The head is not ``expected_head`` (or the thread exists when None),
                ``record.seq`` is not the head's seq + 1, or another executor holds the lease.
            FencedOut: ``fence.token`` is no longer the thread's token.
            InterruptAlreadyResolved: A resolution targets an interrupt that is not pending.
            UnknownInterrupt: A resolution targets an interrupt the thread does not have.
            StoreError: The checkpoint id or a new interrupt id is already in the store.
            StoreClosed: The store was closed.
            ValueError: A resolution's status is ``pending`` (or not an `InterruptStatus`),
                or a new interrupt belongs to another thread or checkpoint (checked before
                anything else).
        Nothing is written when any of these is raised.
        """
        ...

    async def get_checkpoint(self, thread: str, id: str | None = None) -> CheckpointRecord | None:
        """Return one checkpoint (the head when ``id`` is None), or None if absent."""
        ...

    async def checkpoint_range(self, thread: str, *, lo: int, hi: int) -> list[CheckpointRecord]:
        """Return the thread's checkpoints with ``lo <= seq <= hi``, ascending by seq."""
        ...

    async def checkpoints_at(self, thread: str, seqs: Sequence[int]) -> list[CheckpointRecord]:
        """Return the thread's checkpoints whose seq is in ``seqs``, ascending by seq, in one
        read; seqs the thread does not have are left out.

        A snapshot names the earlier snapshots that hold the first items of its lists; a read
        fetches them with this.

        Raises:
            TypeError: ``seqs`` is not a list or tuple of ints.
            StoreClosed: The store was closed.
        """
        ...

    async def list_checkpoints(
        self, thread: str, *, before_seq: int | None = None, limit: int = 50
    ) -> list[CheckpointRecord]:
        """Return up to ``limit`` checkpoints with ``seq < before_seq``, newest first."""
        ...

    async def get_thread(self, thread: str) -> ThreadRecord | None:
        """Return the thread's head record, or None if the thread does not exist."""
        ...

    async def threads(
        self,
        *,
        status: CheckpointStatus | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> list[ThreadRecord]:
        """Up to ``limit`` threads' heads in thread id order, those after thread ``after``.

        With ``status``, only the threads whose latest checkpoint has that status. The
        ``failed`` ones are read through an index of their own (few threads fail, and each
        waits for someone to fix the cause and resume it); other statuses filter the id order.
        Page with ``after=page[-1].thread``.
        """
        ...

    async def get_interrupt(self, id: str) -> InterruptRecord | None:
        """Return one interrupt by id, or None."""
        ...

    async def pending(
        self, where: PendingFilter | None = None, /, *, limit: int = 100, after: str | None = None
    ) -> list[InterruptRecord]:
        """Return pending interrupts, oldest first, through an index (cost grows with the result).

        Args:
            where: Only those that match it (None: all of them).
            limit: At most this many.
            after: The id of the last interrupt of the previous page (the cursor): continue
                after it.

        Raises:
            TypeError: ``where`` is not a `PendingFilter`, or a text filter is not a str.
            ValueError: A text filter holds a lone surrogate.
        """
        ...

    async def pending_counts(self, where: PendingFilter | None = None, /) -> dict[str | None, int]:
        """Return how many pending interrupts match ``where``, per tool, through an index.

        The keys are the tools the interrupts gate (None for those that gate no tool); a tool
        with no pending interrupt is absent. The counts agree with the rows `pending` lists
        for the same filter.

        Args:
            where: Only those that match it (None: all of them).

        Raises:
            TypeError: ``where`` is not a `PendingFilter`, or a text filter is not a str.
            ValueError: A text filter holds a lone surrogate.
        """
        ...

    async def renew_lease(self, thread: str, fence: Fence) -> None:
        """Extend (or with ``fence.release``, end) a held lease without writing a checkpoint.

        Raises:
            FencedOut: ``fence.token`` is not the thread's token (or the thread is gone).
        """
        ...

    async def begin_effect(
        self,
        thread: str,
        key: str,
        *,
        name: str,
        fence: Fence | None,
        retry: bool = False,
        audit: Sequence[AuditEntry] = (),
    ) -> tuple[bool, EffectRecord]:
        """Record that an effect is about to be called, unless it already was.

        Returns ``(True, record)`` when this call started it (the caller may now make the call),
        ``(False, existing)`` when the key is already recorded: ``started`` means an earlier
        attempt may or may not have happened (a person must reconcile it), ``done`` carries its
        result. With ``retry``, a ``started`` record is started again (attempt + 1).

        Raises:
            FencedOut, ThreadBusy: As for `append_checkpoint`; nothing was recorded.
        """
        ...

    async def finish_effect(
        self,
        thread: str,
        key: str,
        *,
        result: bytes | None,
        fence: Fence | None,
        audit: Sequence[AuditEntry] = (),
        durable: bool = True,
    ) -> None:
        """Record an effect's outcome (``started`` → ``done``).

        Recording the same non-None result again is a no-op (a retried call). With
        ``durable=False`` the commit need not reach the disk before it returns (the next
        durable commit takes it along): a power loss may forget the outcome, and the effect
        then reads ``started`` — a question for a person, never a second call.

        Raises:
            FencedOut, ThreadBusy: As for `append_checkpoint`; nothing was recorded.
            StoreError: The effect is not ``started`` (and not done with this result).
        """
        ...

    async def get_effect(self, thread: str, key: str) -> EffectRecord | None:
        """Return one effect record, or None."""
        ...

    async def audit_log(
        self, *, thread: str | None = None, after: tuple[str, int] | None = None, limit: int = 1000
    ) -> list[AuditRecord]:
        """Return audit records ordered by (thread, seq), after the ``(thread, seq)`` cursor."""
        ...

    async def append_audit(
        self, thread: str, entries: Sequence[AuditEntry], *, durable: bool = True
    ) -> None:
        """Append entries to an existing thread's audit log, without a checkpoint.

        For what is recorded about a thread by a change made elsewhere: a fork records itself
        in its new thread's first checkpoint and then here, in the log of the thread it came
        from. The entries join the thread's hash chain after its last entry, serialised with
        every other write to that log (`append_checkpoint`, effects), so concurrent writers
        never fork the chain. The thread's lease is not checked: the entries change nothing
        its holder reads.

        Args:
            thread: A thread that exists (has a head checkpoint).
            entries: The entries, in order (at least one).
            durable: As for `append_checkpoint`.

        Raises:
            CheckpointNotFound: The thread does not exist (or was deleted).
            TypeError: ``entries`` is not a list or tuple of `AuditEntry`, or an entry's
                ``data`` is not bytes.
            ValueError: ``entries`` is empty, or an entry's kind is not an `AuditKind`.
            StoreClosed: The store was closed.
        Nothing is written when any of these is raised.
        """
        ...

    async def request_pause(self, thread: str, *, kind: PauseKind = "planned") -> bool:
        """Ask whoever runs ``thread`` to pause it; False if the thread does not exist.

        A ``forced`` request replaces a ``planned`` one, never the other way round. The request
        stays until an executor takes it.

        Raises:
            ValueError: ``kind`` is not a `PauseKind`.
        """
        ...

    async def take_pause_request(self, thread: str) -> PauseKind | None:
        """Return the thread's pause request and remove it (None if there is none)."""
        ...

    async def delete_thread(self, thread: str) -> None:
        """Delete a thread, its checkpoints, interrupts, effects and pause request.

        Its audit log stays, closed with a ``thread_deleted`` entry.
        """
        ...

    async def expire(self, *, older_than: float, limit: int = 1000) -> list[str]:
        """Delete up to ``limit`` finished threads (head status ``done``) last written before
        the Unix time ``older_than``, as `delete_thread` would; return their ids."""
        ...

    async def changes(self, *, after: str | None = None, limit: int = 1000) -> list[ChangeRecord]:
        """Return the changes committed after cursor ``after`` (None: from the oldest kept).

        The feed holds what each `append_checkpoint` committed, written in its transaction (a
        refused append writes none): an ``interrupt_created`` per new interrupt, an
        ``interrupt_<status>`` per resolution, then ``run_finished`` or ``run_failed`` when the
        checkpoint's status is ``done`` or ``failed``. A follower that calls again with the
        ``cursor`` of the last change it got sees every later change exactly once, whichever
        process committed it. Each thread's changes come in commit order (one commit's in the
        order above); the changes of appends to different threads that commit at about the
        same time may come in either order. A change of an append made with ``durable=False``
        is listed before it is durable. Deleting or expiring a thread leaves its changes in
        the feed; `prune_changes` removes them by age.

        Args:
            after: The ``cursor`` of a `ChangeRecord` or the result of `change_cursor`, of this
                store.
            limit: At most this many.

        Raises:
            TypeError: ``after`` is not a str or None, or ``limit`` is not an int.
            ValueError: ``after`` is not a cursor of this store (malformed, or ahead of its
                feed: another store's, or the database was restored from an older copy), or
                ``limit`` is out of range.
        """
        ...

    async def change_cursor(self) -> str:
        """Return the cursor of now: following from it yields only the changes that reach
        the feed later, and every one of them."""
        ...

    async def prune_changes(self, *, older_than: float, limit: int = 10000) -> int:
        """Delete the oldest changes, those committed before the Unix time ``older_than``;
        return how many.

        Deletes from the start of the feed, up to ``limit`` changes, and stops at the first
        change committed at or after ``older_than``: what is kept is always an unbroken tail of
        the feed, so a follower whose cursor is in it misses nothing, even when writers'
        clocks disagree. A follower whose cursor named a deleted change goes on after it.

        Raises:
            TypeError: ``older_than`` is not a number, or ``limit`` is not an int.
            ValueError: ``older_than`` is NaN, or ``limit`` is out of range.
        """
        ...

    async def add_principal(
        self,
        name: str,
        *,
        role: Role,
        display_name: str = "",
        groups: Sequence[str] = (),
        email: str | None = None,
        slack_user: str | None = None,
    ) -> PrincipalRecord:
        """Add a principal; return it as stored (``created_at`` from the store's clock).

        Args:
            name: Its name, unique in normal form.
            role: What it may do.
            display_name: How people see it (empty: its name).
            groups: The groups it belongs to.
            email: Its e-mail address (stripped; None or ``""``: none), for e-mail links.
            slack_user: Its Slack user id, such as ``U024BE7LH`` (None or ``""``: none).

        Raises:
            PrincipalExists: A principal has that name in normal form (``Ana`` and ``ana``
                are one name).
            ContactTaken: Another principal has that e-mail address (compared
                case-insensitively) or that Slack user id.
            TypeError, ValueError: An argument is not one (checked before anything else;
                ``InvalidId`` for a name).
        """
        ...

    async def update_principal(
        self,
        name: str,
        *,
        role: Role | None = None,
        display_name: str | None = None,
        groups: Sequence[str] | None = None,
        disabled: bool | None = None,
        email: str | None = None,
        slack_user: str | None = None,
    ) -> PrincipalRecord:
        """Change what is given of the principal named ``name`` (in normal form); return it.

        An argument left None is not changed; ``email=""`` and ``slack_user=""`` clear them.
        A change to what it already is still counts as a change (a new identity revision).

        Raises:
            UnknownPrincipal: No principal has that name.
            ContactTaken: Another principal has that e-mail address or Slack user id.
            TypeError, ValueError: An argument is not one.
        """
        ...

    async def principal_by_contact(
        self, *, email: str | None = None, slack_user: str | None = None
    ) -> PrincipalRecord | None:
        """Return the principal with this e-mail address (compared case-insensitively) or
        this Slack user id, or None.

        Raises:
            ValueError: Both or neither are given, or the one given is not one.
        """
        ...

    async def get_principal(self, name: str) -> PrincipalRecord | None:
        """Return the principal named ``name`` (compared in normal form), or None."""
        ...

    async def principals(
        self, *, limit: int = 100, after: str | None = None
    ) -> list[PrincipalRecord]:
        """Up to ``limit`` principals in the order of their names' normal forms, those after
        the principal named ``after``. Page with ``after=page[-1].name``."""
        ...

    async def add_token(
        self,
        id: str,
        *,
        hash: str,
        principal: str,
        role: Role | None = None,
        tools: Sequence[str] = ("*",),
        threads: Sequence[str] = ("",),
        expires_at: float | None = None,
    ) -> TokenRecord:
        """Add a token of ``principal`` (named in any form of its name); return it as stored.

        The store keeps what it is given: that ``role`` is no higher than the principal's
        is the caller's to decide (and the server's to enforce, whatever is stored).

        Raises:
            UnknownPrincipal: No principal has that name.
            StoreError: The id or the hash is taken (a token is never stored twice).
            TypeError, ValueError: An argument is not one: ``hash`` is not
                ``sha256:<64 hex digits>``, a scope is empty...
        """
        ...

    async def tokens(
        self, *, principal: str | None = None, limit: int = 100, after: str | None = None
    ) -> list[TokenRecord]:
        """Up to ``limit`` tokens in id order, revoked and expired ones included, those after
        the token with id ``after``; with ``principal``, only that principal's (an unknown
        one has none). Page with ``after=page[-1].id``."""
        ...

    async def revoke_tokens(
        self, *, id: str | None = None, principal: str | None = None
    ) -> list[TokenRecord]:
        """Revoke the token ``id``, or every token of ``principal``; return those this call
        revoked, in id order (a token revoked already is left as it is, and not returned).

        Raises:
            UnknownToken: No token has that id.
            UnknownPrincipal: No principal has that name.
            ValueError: Both or neither of ``id`` and ``principal`` are given.
        """
        ...

    async def touch_tokens(self, used: Mapping[str, float]) -> None:
        """Record when tokens were used: ``{token id: Unix time}``.

        A token's ``last_used_at`` only moves forward; an unknown id is ignored. This is not
        an identity change (no new revision): the servers that follow the identities are not
        woken by the use they record.
        """
        ...

    async def identity_changes(self, *, after: int = 0, limit: int = 1000) -> list[IdentityChange]:
        """The principals and tokens written after the identity revision ``after``, as they
        are now, in revision order (each appears once, with its latest revision).

        A follower that starts at 0 reads every principal and token there is; one that calls
        again with the ``rev`` of the last record it got sees every later change, whichever
        process made it. A change that commits while this reads may come in the next call.

        Raises:
            TypeError: ``after`` or ``limit`` is not an int.
            ValueError: ``after`` is negative or ahead of the store's revision (another
                store's, or the database was restored from an older copy), or ``limit`` is
                out of range.
        """
        ...

    async def claim_channel_message(self, channel: str, interrupt_id: str, *, thread: str) -> bool:
        """Take the job of posting ``channel``'s message about an interrupt of ``thread``.

        Returns True to the first caller of all (in every process sharing the store), which
        then posts the message and records it with `set_channel_message`; False to every
        later one, which leaves the posting to it. The message's row is deleted with its
        thread (`delete_thread`, `expire`); a claim does not check that the thread exists.

        Raises:
            TypeError, InvalidId: ``channel`` is not a one-line name, or ``interrupt_id`` or
                ``thread`` not an id.
        """
        ...

    async def set_channel_message(
        self,
        channel: str,
        interrupt_id: str,
        *,
        ref: str | None = None,
        state: str | None = None,
    ) -> ChannelMessage:
        """Record the posted message's handle and/or what it shows now; return the record.

        Args:
            channel: The channel's name.
            interrupt_id: The interrupt the message is about.
            ref: The channel's handle of its message (None: unchanged).
            state: What it shows: ``""`` (the open question) or a final state such as
                ``decided`` (None: unchanged).

        Raises:
            UnknownChannelMessage: The message was not claimed (or its thread was deleted).
            TypeError, ValueError: An argument is not one (``ref`` empty, too long...).
        """
        ...

    async def get_channel_message(self, channel: str, interrupt_id: str) -> ChannelMessage | None:
        """Return ``channel``'s message about the interrupt, or None if none was claimed."""
        ...

    async def close(self) -> None:
        """Release resources. Idempotent. Later calls raise `StoreClosed`."""
        ...
