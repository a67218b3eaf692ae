"""The audit log's hash chain: how an entry's hash is computed, and how a log is verified.

Each thread has its own chain. An entry's hash is SHA-256 over the previous entry's hash and the
entry's content (thread, seq, time, kind, actor, data, msgpack-encoded), so editing, removing or
inserting a row breaks the chain at that point. Rewriting a whole tail consistently needs write
access to the database *and* recomputing every later hash; publish `AuditReport.heads`
somewhere else to detect even that.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

import msgspec

from .._args import check_id, check_limit
from .._lazy import lazy_module
from ._base import AuditEntry, AuditRecord, Store

if TYPE_CHECKING:
    import hashlib
else:  # imported by the first call that needs it, not by `import interlock`
    hashlib = lazy_module("hashlib", globals())

__all__ = [
    "GENESIS",
    "AuditProblem",
    "AuditReport",
    "audit_hash",
    "chain",
    "thread_deleted",
    "verify_audit",
]

GENESIS: Final = bytes(32)
"""The ``prev`` of a thread's first entry."""


def audit_hash(
    prev: bytes, thread: str, seq: int, at: float, kind: str, actor: str | None, data: bytes
) -> bytes:
    """The hash of one audit entry, chained to ``prev``."""
    content = msgspec.msgpack.encode([thread, seq, at, kind, actor, data])
    return hashlib.sha256(prev + content).digest()


def thread_deleted() -> AuditEntry:
    """The entry that closes the log of a deleted (or expired) thread."""
    return AuditEntry(kind="thread_deleted", actor=None, data=b"{}")


def chain(
    thread: str, tail: tuple[int, bytes] | None, entries: Sequence[AuditEntry], at: float
) -> list[AuditRecord]:
    """Link ``entries`` after the thread's last ``(seq, hash)`` (None: the log is empty)."""
    seq, prev = tail or (0, GENESIS)
    out: list[AuditRecord] = []
    for e in entries:
        seq += 1
        digest = audit_hash(prev, thread, seq, at, e.kind, e.actor, e.data)
        out.append(
            AuditRecord(
                thread=thread,
                seq=seq,
                at=at,
                kind=e.kind,
                actor=e.actor,
                data=e.data,
                prev=prev,
                hash=digest,
            )
        )
        prev = digest
    return out


class AuditProblem(msgspec.Struct, frozen=True, kw_only=True):
    """One place where a thread's audit chain does not hold."""

    thread: str
    """The thread."""
    seq: int
    """The entry where the chain breaks."""
    problem: str
    """What is wrong, for a person."""


class AuditReport(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of `verify_audit`."""

    entries: int
    """Entries checked."""
    threads: int
    """Threads whose logs were checked."""
    problems: list[AuditProblem]
    """Every break found (empty when the log is intact)."""
    heads: dict[str, str]
    """The last hash (hex) of each thread's chain: keep them elsewhere to detect a rewrite."""

    @property
    def ok(self) -> bool:
        """True when no entry was edited, removed or inserted."""
        return not self.problems


async def verify_audit(store: Store, *, thread: str | None = None, page: int = 1000) -> AuditReport:
    """Walk the audit log (one thread's, or all) and check every link of its hash chains.

    Reads the log page by page; memory stays bounded by ``page``.

    For example (a sketch, not run)::

        report = await verify_audit(store)
        assert report.ok, report.problems
    """
    check_id(thread, "thread", optional=True)
    check_limit(page, "page", least=1)
    problems: list[AuditProblem] = []
    heads: dict[str, str] = {}
    entries = 0
    last: tuple[str, int, bytes] | None = None  # thread, seq, hash of the previous row
    cursor: tuple[str, int] | None = None
    while True:
        rows = await store.audit_log(thread=thread, after=cursor, limit=page)
        for r in rows:
            entries += 1
            if last is None or last[0] != r.thread:
                expected_seq, expected_prev = 1, GENESIS
            else:
                expected_seq, expected_prev = last[1] + 1, last[2]
            if r.seq != expected_seq:
                problems.append(
                    AuditProblem(
                        thread=r.thread,
                        seq=r.seq,
                        problem=f"expected entry {expected_seq} here: entries are missing",
                    )
                )
            if r.prev != expected_prev:
                problems.append(
                    AuditProblem(
                        thread=r.thread,
                        seq=r.seq,
                        problem="its link to the previous entry does not match that entry's hash",
                    )
                )
            digest = audit_hash(r.prev, r.thread, r.seq, r.at, r.kind, r.actor, r.data)
            if digest != r.hash:
                problems.append(
                    AuditProblem(
                        thread=r.thread,
                        seq=r.seq,
                        problem="its content does not match its hash: the entry was edited",
                    )
                )
            heads[r.thread] = r.hash.hex()
            last = (r.thread, r.seq, r.hash)
        if len(rows) < page:
            break
        cursor = (rows[-1].thread, rows[-1].seq)
    return AuditReport(entries=entries, threads=len(heads), problems=problems, heads=heads)
