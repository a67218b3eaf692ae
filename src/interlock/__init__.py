"""interlock: agent graphs that stop for a person's decision, persist exactly, and resume anywhere.

The rule to remember: a task that was interrupted re-runs from its first line when it is
resumed; `interrupt()` then returns the answer. Wrap work that must not repeat in `step()`.
"""

from typing import TYPE_CHECKING, Any

# isort: split
# Building graphs
from .graph import END as END
from .graph import START as START
from .graph import Reducer as Reducer
from .graph import append as append
from .graph import merge as merge
from .runtime._graph import Graph as Graph

# isort: split
# Running them
from .runtime._app import App as App
from .runtime._app import InterruptHandler as InterruptHandler
from .runtime._app import Targets as Targets
from .runtime._control import GracefulShutdown as GracefulShutdown
from .runtime._control import RunHandle as RunHandle
from .runtime._records import Address as Address
from .runtime._records import Command as Command
from .runtime._records import Decision as Decision
from .runtime._records import Interrupt as Interrupt
from .runtime._records import RunResult as RunResult
from .runtime._records import Segment as Segment
from .runtime._records import Send as Send
from .runtime._records import StateSnapshot as StateSnapshot

# isort: split
# Events of a streamed run
from .graph._chunks import MessageChunk as MessageChunk
from .graph._chunks import ToolCallChunk as ToolCallChunk
from .graph._concat import register_concat as register_concat
from .runtime._events import CheckpointEvent as CheckpointEvent
from .runtime._events import ChunkEvent as ChunkEvent
from .runtime._events import CustomEvent as CustomEvent
from .runtime._events import Event as Event
from .runtime._events import EventStream as EventStream
from .runtime._events import InterruptEvent as InterruptEvent
from .runtime._events import NodeOutputEvent as NodeOutputEvent
from .runtime._events import RunFinishedEvent as RunFinishedEvent
from .runtime._events import RunStartedEvent as RunStartedEvent
from .runtime._events import StepEvent as StepEvent
from .runtime._events import StepFinishedEvent as StepFinishedEvent
from .runtime._events import StreamMode as StreamMode

# isort: split
# Asking people, inside nodes
from .runtime._context import child_scope as child_scope
from .runtime._interrupts import Child as Child
from .runtime._interrupts import approve as approve
from .runtime._interrupts import ask as ask
from .runtime._interrupts import choose as choose
from .runtime._interrupts import composite_interrupt as composite_interrupt
from .runtime._interrupts import emit_event as emit_event
from .runtime._interrupts import gather_children as gather_children
from .runtime._interrupts import interrupt as interrupt
from .runtime._interrupts import interrupt_state as interrupt_state
from .runtime._interrupts import resume_context as resume_context
from .runtime._interrupts import step as step
from .runtime._signals import InterruptSignal as InterruptSignal

# isort: split
# Deadlines and answer checks
from .runtime._interrupts import timeout_default as timeout_default
from .runtime._interrupts import validator as validator
from .runtime._records import OnTimeout as OnTimeout
from .runtime._records import TimeoutDefault as TimeoutDefault

# isort: split
# Side effects
from .runtime._effects import RETRY as RETRY
from .runtime._effects import effect as effect
from .runtime._effects import effect_key as effect_key

# isort: split
# Storage, encoding and audit
from .serde import Codec as Codec
from .stores import AuditReport as AuditReport
from .stores import Fence as Fence
from .stores import MemoryStore as MemoryStore
from .stores import SqliteStore as SqliteStore
from .stores import Store as Store
from .stores import verify_audit as verify_audit

# isort: split
# Errors
from ._errors import CheckpointCorrupt as CheckpointCorrupt
from ._errors import CheckpointNotFound as CheckpointNotFound
from ._errors import FencedOut as FencedOut
from ._errors import GraphChanged as GraphChanged
from ._errors import GraphDefinitionError as GraphDefinitionError
from ._errors import InterlockError as InterlockError
from ._errors import InterruptAlreadyResolved as InterruptAlreadyResolved
from ._errors import InvalidId as InvalidId
from ._errors import InvalidResume as InvalidResume
from ._errors import InvalidUpdate as InvalidUpdate
from ._errors import ModelError as ModelError
from ._errors import NodeError as NodeError
from ._errors import PayloadTooLarge as PayloadTooLarge
from ._errors import RecursionLimit as RecursionLimit
from ._errors import ReplyCutShort as ReplyCutShort
from ._errors import ResumeError as ResumeError
from ._errors import RunError as RunError
from ._errors import SerializationError as SerializationError
from ._errors import StoreClosed as StoreClosed
from ._errors import StoreError as StoreError
from ._errors import StoreUnavailable as StoreUnavailable
from ._errors import ThreadBusy as ThreadBusy
from ._errors import ThreadInterrupted as ThreadInterrupted
from ._errors import ToolError as ToolError
from ._errors import UnknownInterrupt as UnknownInterrupt
from ._errors import UnregisteredType as UnregisteredType

if TYPE_CHECKING:
    from .stores._postgres import PostgresStore as PostgresStore

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # PostgresStore needs psycopg (the ``postgres`` extra), so it is imported on first use:
    # `import interlock` works without it, and `interlock.stores` raises the ImportError that
    # names the extra. It stays out of `__all__` so that `from interlock import *` does too.
    if name == "PostgresStore":
        from .stores import PostgresStore

        globals()[name] = PostgresStore
        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), "PostgresStore"})


__all__ = [
    # building
    "END",
    "START",
    "Graph",
    "Reducer",
    "append",
    "merge",
    # running
    "Address",
    "App",
    "Command",
    "Decision",
    "GracefulShutdown",
    "Interrupt",
    "InterruptHandler",
    "RunHandle",
    "RunResult",
    "Segment",
    "Send",
    "StateSnapshot",
    "Targets",
    # events and streaming
    "CheckpointEvent",
    "ChunkEvent",
    "CustomEvent",
    "Event",
    "EventStream",
    "InterruptEvent",
    "NodeOutputEvent",
    "RunFinishedEvent",
    "RunStartedEvent",
    "StepEvent",
    "StepFinishedEvent",
    "MessageChunk",
    "StreamMode",
    "ToolCallChunk",
    "register_concat",
    # asking people
    "Child",
    "InterruptSignal",
    "approve",
    "ask",
    "child_scope",
    "choose",
    "composite_interrupt",
    "emit_event",
    "gather_children",
    "interrupt",
    "interrupt_state",
    "resume_context",
    "step",
    # side effects
    "RETRY",
    "effect",
    "effect_key",
    # deadlines and answer checks
    "OnTimeout",
    "TimeoutDefault",
    "timeout_default",
    "validator",
    # storage, encoding and audit
    "AuditReport",
    "Codec",
    "Fence",
    "MemoryStore",
    "SqliteStore",
    "Store",
    "verify_audit",
    # errors
    "CheckpointCorrupt",
    "CheckpointNotFound",
    "FencedOut",
    "GraphChanged",
    "GraphDefinitionError",
    "InterlockError",
    "InterruptAlreadyResolved",
    "InvalidId",
    "InvalidResume",
    "InvalidUpdate",
    "ModelError",
    "NodeError",
    "PayloadTooLarge",
    "RecursionLimit",
    "ReplyCutShort",
    "ResumeError",
    "RunError",
    "SerializationError",
    "StoreClosed",
    "StoreError",
    "StoreUnavailable",
    "ThreadBusy",
    "ThreadInterrupted",
    "ToolError",
    "UnknownInterrupt",
    "UnregisteredType",
]
