"""The change feed's shared part: which changes an append makes, and what a cursor is.

Every backend derives the same changes from the same append, in the same order, and refuses
the same cursors with the same errors, so what needs no backend's data lives here once. The
backends differ in how a cursor names a position (see `seq_cursor` and `xid_cursor`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from .._args import check_limit, check_time
from ._base import ChangeKind, CheckpointRecord, InterruptRecord, Resolution

__all__ = [
    "RESOLVED",
    "Change",
    "check_follow",
    "check_prune",
    "cursor_ahead",
    "derive",
    "seq_cursor",
    "xid_cursor",
]

Change = tuple[ChangeKind, str | None]
"""A change an append makes: its kind and its interrupt's id (None for a run's end)."""

RESOLVED: Final[dict[str, ChangeKind]] = {
    "resolved": "interrupt_resolved",
    "expired": "interrupt_expired",
    "cancelled": "interrupt_cancelled",
}
"""The change a resolution makes, by the status it gives its interrupt (never ``pending``)."""

_ENDS: Final[dict[str, ChangeKind]] = {"done": "run_finished", "failed": "run_failed"}

_MAX_SEQ: Final = 2**63 - 1
_SEQ: Final = re.compile(r"0|[1-9][0-9]{0,18}")
_XID: Final = re.compile(r"(0|[1-9][0-9]{0,19})-(0|[1-9][0-9]{0,18})")
_MAX_XID: Final = 2**64 - 1


def derive(
    record: CheckpointRecord,
    new_interrupts: Sequence[InterruptRecord],
    resolutions: Sequence[Resolution],
) -> list[Change]:
    """The changes an append makes, in feed order.

    The resolutions in the order given, then the new interrupts in the order given, then the
    run's end when the checkpoint's status is ``done`` or ``failed``. Most appends (a step of a
    run) make none. The arguments are checked already (`check_append_args`).
    """
    end = _ENDS.get(record.status)
    if not (resolutions or new_interrupts or end):
        return []
    out: list[Change] = [(RESOLVED[r.status], r.id) for r in resolutions]
    out += [("interrupt_created", i.id) for i in new_interrupts]
    if end is not None:
        out.append((end, None))
    return out


def check_follow(after: object, limit: object) -> None:
    """Refuse a cursor that is not a str, and a bad page size (the format is the backend's).

    Raises:
        TypeError: ``after`` is not a str or None, or ``limit`` is not an int.
        ValueError: ``limit`` is out of range.
    """
    if after is not None and not isinstance(after, str):
        raise TypeError(
            f"after must be a change cursor (a str) or None, not {type(after).__name__} "
            f"{after!r:.80}"
        )
    check_limit(limit, "limit")


def check_prune(older_than: object, limit: object) -> float:
    """Refuse a bad bound or page size for `Store.prune_changes`; return the bound.

    Raises:
        TypeError: ``older_than`` is not a number, or ``limit`` is not an int.
        ValueError: ``older_than`` is NaN, or ``limit`` is out of range.
    """
    moment = check_time(older_than, "older_than")
    if moment is None:
        raise TypeError("older_than must be a Unix time in seconds (a float), not None")
    check_limit(limit, "limit")
    return moment


def _malformed(after: str, form: str) -> ValueError:
    return ValueError(
        f"{after!r:.80} is not a change cursor of this store: a cursor is the `cursor` of a "
        f"ChangeRecord it returned, or what its change_cursor() returned ({form}); pass one "
        "back exactly as it was, or None to start from the oldest change kept"
    )


def seq_cursor(after: str | None) -> int:
    """The position a cursor of a counted feed names (`MemoryStore`, `SqliteStore`).

    A cursor is the decimal number of the last change seen (``0``: before the first).

    Raises:
        ValueError: ``after`` is not such a number.
    """
    if after is None:
        return 0
    if _SEQ.fullmatch(after) is None or int(after) > _MAX_SEQ:
        raise _malformed(after, "a decimal number")
    return int(after)


def xid_cursor(after: str | None) -> tuple[int, int]:
    """The position a cursor of `PostgresStore` names: ``(transaction id, seq)``.

    A cursor is ``<txid>-<seq>``, both decimal.

    Raises:
        ValueError: ``after`` is not of that form.
    """
    if after is None:
        return 0, 0
    found = _XID.fullmatch(after)
    if found is None or int(found[1]) > _MAX_XID or int(found[2]) > _MAX_SEQ:
        raise _malformed(after, "two decimal numbers joined by '-'")
    return int(found[1]), int(found[2])


def cursor_ahead(after: str, end: str) -> ValueError:
    """The error for a well-formed cursor beyond anything the store's feed ever held."""
    return ValueError(
        f"change cursor {after!r} is ahead of this store's feed, which ends at {end!r}: it was "
        "made by another store, or the database was restored from an older copy. Follow "
        "again from change_cursor() (or from None, the oldest change kept)"
    )
