"""Where checkpoints and interrupts are kept: the `Store` protocol and its backends.

`MemoryStore` keeps everything in the process (tests, notebooks); `SqliteStore` keeps it in one
SQLite file that several processes may share. Every backend passes
`interlock.testing.StoreConformance`.
"""

from __future__ import annotations

from ._base import CheckpointRecord as CheckpointRecord
from ._base import CheckpointSource as CheckpointSource
from ._base import CheckpointStatus as CheckpointStatus
from ._base import InterruptRecord as InterruptRecord
from ._base import InterruptStatus as InterruptStatus
from ._base import PauseKind as PauseKind
from ._base import Resolution as Resolution
from ._base import Store as Store
from ._base import ThreadRecord as ThreadRecord
from ._memory import MemoryStore as MemoryStore
from ._sqlite import SqliteStore as SqliteStore

__all__ = [
    "CheckpointRecord",
    "CheckpointSource",
    "CheckpointStatus",
    "InterruptRecord",
    "InterruptStatus",
    "MemoryStore",
    "PauseKind",
    "Resolution",
    "SqliteStore",
    "Store",
    "ThreadRecord",
]
