"""Where checkpoints and interrupts are kept: the `Store` protocol and its backends.

`MemoryStore` keeps everything in the process (tests, notebooks); `SqliteStore` keeps it in one
SQLite file that several processes may share; `PostgresStore` (extra ``postgres``) keeps it in
a PostgreSQL database that many processes on many machines share. Every backend passes
`interlock.testing.StoreConformance`.

Every backend also keeps a change feed (`Store.changes`): what each append committed (interrupts
raised and answered, runs finished or failed), each thread's in commit order, for a process that
follows the store from a cursor, such as an HTTP server pushing events.

Every backend keeps the approval server's principals and their tokens too (`PrincipalRecord`,
`TokenRecord`), and lists what changed of them after an identity revision
(`Store.identity_changes`), so that every server sharing the store refuses a revoked token
within moments. A principal may have an e-mail address and a Slack user id, by which the
server's channels reach it and know it.

Every backend keeps the messages the server's channels posted about interrupts
(`ChannelMessage`): which process posts each one (`Store.claim_channel_message`), its handle
and what it shows, so that any process can update it later.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._public import publish
from ._audit import AuditProblem as AuditProblem
from ._audit import AuditReport as AuditReport
from ._audit import audit_hash as audit_hash
from ._audit import verify_audit as verify_audit
from ._base import AuditEntry as AuditEntry
from ._base import AuditKind as AuditKind
from ._base import AuditRecord as AuditRecord
from ._base import ChangeKind as ChangeKind
from ._base import ChangeRecord as ChangeRecord
from ._base import CheckpointRecord as CheckpointRecord
from ._base import CheckpointSource as CheckpointSource
from ._base import CheckpointStatus as CheckpointStatus
from ._base import EffectRecord as EffectRecord
from ._base import EffectStatus as EffectStatus
from ._base import Fence as Fence
from ._base import InterruptKind as InterruptKind
from ._base import InterruptRecord as InterruptRecord
from ._base import InterruptStatus as InterruptStatus
from ._base import PauseKind as PauseKind
from ._base import PendingFilter as PendingFilter
from ._base import Resolution as Resolution
from ._base import Store as Store
from ._base import ThreadRecord as ThreadRecord
from ._channels import ChannelMessage as ChannelMessage
from ._identities import ROLES as ROLES
from ._identities import IdentityChange as IdentityChange
from ._identities import PrincipalRecord as PrincipalRecord
from ._identities import Role as Role
from ._identities import TokenRecord as TokenRecord
from ._memory import MemoryStore as MemoryStore
from ._sqlite import SqliteStore as SqliteStore
from ._url import STORE_URL_FORMS as STORE_URL_FORMS
from ._url import open_store as open_store

if TYPE_CHECKING:
    from ._postgres import PostgresStore as PostgresStore


def __getattr__(name: str) -> Any:
    # PostgresStore needs psycopg (the ``postgres`` extra): import it only when asked for.
    if name == "PostgresStore":
        try:
            from ._postgres import PostgresStore
        except ImportError as exc:
            raise ImportError(
                "PostgresStore needs psycopg; install it with: pip install 'interlock[postgres]'"
            ) from exc
        publish(__name__, {name: PostgresStore}, [name])
        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ROLES",
    "STORE_URL_FORMS",
    "AuditEntry",
    "AuditKind",
    "AuditProblem",
    "AuditRecord",
    "AuditReport",
    "ChangeKind",
    "ChangeRecord",
    "ChannelMessage",
    "CheckpointRecord",
    "CheckpointSource",
    "CheckpointStatus",
    "EffectRecord",
    "EffectStatus",
    "Fence",
    "IdentityChange",
    "InterruptKind",
    "InterruptRecord",
    "InterruptStatus",
    "MemoryStore",
    "PauseKind",
    "PendingFilter",
    "PostgresStore",
    "PrincipalRecord",
    "Resolution",
    "Role",
    "SqliteStore",
    "Store",
    "ThreadRecord",
    "TokenRecord",
    "audit_hash",
    "open_store",
    "verify_audit",
]

publish(__name__, globals(), __all__)
