"""`FakeClock`: time that moves only when a test says so."""

from __future__ import annotations

__all__ = ["FakeClock"]


class FakeClock:
    """A clock for a store (``MemoryStore(clock=clock)``) that stands still until `advance`.

    A test that needs a lease to run out advances the clock past it instead of sleeping.
    Reading it from several threads is safe (a store may read it on its worker thread).

    Args:
        start: The Unix time it starts at.
    """

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start
        """The time it tells (Unix seconds)."""
        self.reads = 0
        """How often it was read: zero means whatever was given it keeps its own time."""

    def __call__(self) -> float:
        """Return `now`."""
        self.reads += 1  # a lost increment under a race only undercounts; zero stays exact
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward.

        Raises:
            ValueError: ``seconds`` is negative (time never runs back).
        """
        if not seconds >= 0:
            raise ValueError(f"a clock only moves forward; got {seconds!r} seconds")
        self.now += seconds

    def __repr__(self) -> str:
        return f"<FakeClock at {self.now:.3f}, read {self.reads} times>"
