"""`StoreConformance`: the tests every `Store` backend must pass, one group per concern.

Each group is a mixin in a module of its own whose docstring says what it demands of a
backend; `StoreConformance` is all of them at once.
"""

from __future__ import annotations

from ._arguments import ArgumentConformance
from ._audit import AuditConformance
from ._channel_messages import ChannelMessageConformance
from ._checkpoints import CheckpointConformance
from ._closing import ClosingConformance
from ._concurrency import ConcurrencyConformance
from ._contacts import ContactConformance
from ._deletion import DeletionConformance
from ._effects import EffectConformance
from ._feed import FeedConformance
from ._identities import IdentityConformance
from ._interrupts import InterruptConformance
from ._leases import LeaseConformance
from ._pauses import PauseConformance

__all__ = ["StoreConformance"]


class StoreConformance(
    CheckpointConformance,
    InterruptConformance,
    LeaseConformance,
    EffectConformance,
    AuditConformance,
    PauseConformance,
    FeedConformance,
    IdentityConformance,
    ContactConformance,
    ChannelMessageConformance,
    DeletionConformance,
    ArgumentConformance,
    ConcurrencyConformance,
    ClosingConformance,
):
    """Tests that check a `Store` keeps every clause of the protocol.

    Subclass it in a test module and provide one fixture, ``store``, that yields a fresh, empty
    store and closes it afterwards. Build the store with the ``clock`` fixture (a
    `interlock.testing.FakeClock`) where it takes one, so that the lease tests move its time
    instead of waiting for leases to run out (a sketch; the conformance how-to guide runs one)::

        class TestMyStore(StoreConformance):
            @pytest.fixture
            async def store(self, tmp_path, clock):
                my_store = MyStore(tmp_path / "db", clock=clock)
                yield my_store
                await my_store.close()

    The tests are marked ``anyio`` and run under anyio's pytest plugin: on every event loop
    anyio finds installed (asyncio, and trio too where it is installed) unless an
    ``anyio_backend`` fixture of yours names one.
    """
