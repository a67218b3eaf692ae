"""`EffectIO`: how a run records its dangerous calls in the store, under its lease.

A task's `effect()` (and a ``dangerous=True`` node) records ``started`` before the call and
``done`` after it. Both writes carry the fencing token of the lease the run holds, so a run
that lost its thread to another executor cannot record anything more. The recorder asks the
run's `LeaseHolder` for that token at each write: the run acquires its lease with its first
commit, after the recorder was made.
"""

from __future__ import annotations

import weakref
from typing import Any, Protocol

import msgspec

from ..serde import Codec
from ..stores import AuditEntry, AuditKind, EffectRecord, Fence, Store

__all__ = ["EffectIO", "LeaseHolder"]


class LeaseHolder(Protocol):
    """The run whose lease effect records are written under."""

    def held(self) -> Fence | None:
        """The fence of the lease the run holds now (None while it holds none)."""
        ...


class EffectIO:
    """What `effect` needs from the run: the store, the codec, the run's lease."""

    __slots__ = ("_holder", "codec", "store")

    def __init__(self, store: Store, codec: Codec, holder: LeaseHolder | None = None) -> None:
        self.store = store
        self.codec = codec
        # Weak: the run holds this recorder (through its engine), and a reference cycle per
        # call would leave every finished run to the cyclic garbage collector.
        self._holder = None if holder is None else weakref.ref(holder)

    def _fence(self) -> Fence | None:
        holder = None if self._holder is None else self._holder()
        return None if holder is None else holder.held()

    async def begin(
        self, thread: str, key: str, name: str, *, retry: bool
    ) -> tuple[bool, EffectRecord]:
        """Record that the call is about to be made (see `Store.begin_effect`)."""
        kind: AuditKind = "effect_retried" if retry else "effect_started"
        entry = AuditEntry(kind=kind, actor=None, data=_json({"effect": key, "name": name}))
        return await self.store.begin_effect(
            thread, key, name=name, fence=self._fence(), retry=retry, audit=[entry]
        )

    async def finish(
        self, thread: str, key: str, name: str, result: Any, *, how: AuditKind = "effect_done"
    ) -> None:
        """Record the call's outcome; ``how`` names it in the audit log."""
        data = self.codec.encode(result, path=f"effect {name!r} result")
        entry = AuditEntry(kind=how, actor=None, data=_json({"effect": key, "name": name}))
        # Not waiting for the disk: the step's checkpoint commit, durable, takes it along, and
        # an outcome lost to a power cut reads as "started" — a reconcile question, never a
        # second call. One fsync fewer per dangerous call.
        await self.store.finish_effect(
            thread, key, result=data, fence=self._fence(), audit=[entry], durable=False
        )


def _json(value: Any) -> bytes:
    return msgspec.json.encode(value, enc_hook=repr)
