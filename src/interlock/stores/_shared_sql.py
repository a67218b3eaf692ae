"""The SQL both SQL stores run alike, written once for either placeholder.

`SqliteStore` binds parameters as ``?`` and `PostgresStore` as ``%s``; past that, many of their
statements are the same words, and the reads that choose between statements choose alike.
Those are here: `SharedSql` holds the statements bound to one backend's placeholder (each
backend's SQL module builds its own, ``SHARED``, once) with the choices made on them, and
`pending_filters` writes the inbox's conditions. An operation runs ``sql.SHARED.<name>`` or
the backend's own ``sql.<NAME>``, so each call site shows which it is.

What differs stays in each backend's module, which says why: PostgreSQL locks the rows it
reads in order to write them (``FOR UPDATE``, ``SKIP LOCKED``) where SQLite already holds the
file's write lock; ``RETURNING`` saves PostgreSQL a round trip; SQLite names the index each
inbox query must use; a thread's rows are deleted in the order each backend's locking needs;
the change feed's positions are each backend's own; and PostgreSQL appends in one server-side
function call where SQLite runs the statements one by one.
"""

from __future__ import annotations

import msgspec

from ._base import PendingFilter
from ._rows import (
    AUDIT_COLUMNS,
    CHECKPOINT_COLUMNS,
    EFFECT_COLUMNS,
    INTERRUPT_COLUMNS,
    THREAD_COLUMNS,
)

__all__ = ["SharedSql", "pending_filters"]


class SharedSql(msgspec.Struct, frozen=True, kw_only=True):
    """The statements both SQL stores run, with one backend's placeholder (see `bound_to`)."""

    select_thread: str
    """A thread's row (`THREAD_COLUMNS`), by thread."""
    has_checkpoints: str
    """Whether a thread has a checkpoint: one without its row is damaged, not absent."""
    threads: str
    """`Store.threads`: the threads after a thread id, in id order."""
    failed_threads: str
    """`threads` of status ``failed``, through their partial index (whose predicate must be
    written out for the planner to use it)."""
    threads_by_status: str
    """`threads` of one status."""
    select_checkpoint: str
    """A checkpoint, by id and thread."""
    select_interrupt: str
    """An interrupt, by id."""
    select_effect: str
    """An effect, by thread and key."""
    finish_effect: str
    """An effect's outcome, recorded only while it is ``started``."""
    set_lease: str
    """A thread's lease and its digest."""
    audit_tail: str
    """The last seq and hash of a thread's audit chain."""
    insert_audit: str
    """One audit row."""
    audit_all: str
    """`Store.audit_log` of every thread, after a (thread, seq) cursor."""
    audit_of_thread: str
    """`Store.audit_log` of one thread, after a seq."""
    request_pause: str
    """`Store.request_pause`: a request for a thread that exists; a forced one is never
    lowered to planned. Parameters: thread, kind, time, thread."""
    take_pause: str
    """`Store.take_pause_request`: delete the request, returning its kind."""

    @classmethod
    def bound_to(cls, p: str) -> SharedSql:
        """The statements with each parameter written as ``p`` (``?`` or ``%s``)."""
        return cls(
            select_thread=f"SELECT {THREAD_COLUMNS} FROM threads WHERE thread = {p}",
            has_checkpoints=f"SELECT 1 FROM checkpoints WHERE thread = {p} LIMIT 1",
            threads=(
                f"SELECT {THREAD_COLUMNS} FROM threads WHERE thread > {p} ORDER BY thread LIMIT {p}"
            ),
            failed_threads=(
                f"SELECT {THREAD_COLUMNS} FROM threads WHERE status = 'failed' AND thread > {p} "
                f"ORDER BY thread LIMIT {p}"
            ),
            threads_by_status=(
                f"SELECT {THREAD_COLUMNS} FROM threads WHERE status = {p} AND thread > {p} "
                f"ORDER BY thread LIMIT {p}"
            ),
            select_checkpoint=(
                f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoints WHERE id = {p} AND thread = {p}"
            ),
            select_interrupt=f"SELECT {INTERRUPT_COLUMNS} FROM interrupts WHERE id = {p}",
            select_effect=f"SELECT {EFFECT_COLUMNS} FROM effects WHERE thread = {p} AND key = {p}",
            finish_effect=(
                f"UPDATE effects SET status = 'done', finished_at = {p}, result = {p} "
                f"WHERE thread = {p} AND key = {p} AND status = 'started'"
            ),
            set_lease=(
                f"UPDATE threads SET lease_owner = {p}, lease_token = {p}, lease_expires = {p}, "
                f"lease_digest = {p} WHERE thread = {p}"
            ),
            audit_tail=f"SELECT seq, hash FROM audit WHERE thread = {p} ORDER BY seq DESC LIMIT 1",
            insert_audit=(f"INSERT INTO audit ({AUDIT_COLUMNS}) VALUES ({', '.join([p] * 8)})"),
            audit_all=(
                f"SELECT {AUDIT_COLUMNS} FROM audit WHERE (thread, seq) > ({p}, {p}) "
                f"ORDER BY thread, seq LIMIT {p}"
            ),
            audit_of_thread=(
                f"SELECT {AUDIT_COLUMNS} FROM audit WHERE thread = {p} AND seq > {p} "
                f"ORDER BY seq LIMIT {p}"
            ),
            request_pause=(
                "INSERT INTO pause_requests (thread, kind, requested_at) "
                f"SELECT {p}, {p}, {p} WHERE EXISTS (SELECT 1 FROM threads WHERE thread = {p}) "
                "ON CONFLICT (thread) DO UPDATE SET "
                "kind = CASE WHEN excluded.kind = 'forced' THEN 'forced' "
                "ELSE pause_requests.kind END, "
                "requested_at = excluded.requested_at"
            ),
            take_pause=f"DELETE FROM pause_requests WHERE thread = {p} RETURNING kind",
        )

    def threads_query(
        self, status: str | None, limit: int, after: str | None
    ) -> tuple[str, tuple[object, ...]]:
        """`Store.threads`: the statement for ``status`` and its parameters."""
        start = "" if after is None else after  # every thread id is longer than ""
        if status is None:
            return self.threads, (start, limit)
        if status == "failed":
            return self.failed_threads, (start, limit)
        return self.threads_by_status, (status, start, limit)

    def audit_query(
        self, thread: str | None, after: tuple[str, int] | None, limit: int
    ) -> tuple[str, tuple[object, ...]]:
        """`Store.audit_log`: the statement for one thread or all, and its parameters."""
        if thread is not None:
            seq = after[1] if after is not None and after[0] == thread else 0
            return self.audit_of_thread, (thread, seq, limit)
        return self.audit_all, (*(after or ("", 0)), limit)


def pending_filters(
    where: PendingFilter, after: str | None, *, mark: str, tiebreak: str
) -> tuple[list[str], list[object]]:
    """The WHERE conditions and parameters of an inbox query (``mark``: the placeholder).

    The conditions are `PendingFilter.matches` in SQL; the two must agree.
    """
    conditions = ["status = 'pending'"]
    params: list[object] = []
    if where.thread is not None:
        conditions.insert(0, f"thread = {mark}")
        params.append(where.thread)
    if where.key is not None:
        conditions.append(f"key = {mark}")
        params.append(where.key)
    if where.tool is not None:
        conditions.append(f"tool = {mark}")
        params.append(where.tool)
    if where.older_than is not None:
        conditions.append(f"created_at < {mark}")
        params.append(where.older_than)
    if where.deadline_before is not None:
        conditions.append(f"deadline IS NOT NULL AND deadline < {mark}")
        params.append(where.deadline_before)
    if after is not None:
        conditions.append(
            f"(created_at, {tiebreak}) > "
            f"(SELECT created_at, {tiebreak} FROM interrupts WHERE id = {mark})"
        )
        params.append(after)
    return conditions, params
