"""The wire form of a pending interrupt: its `on_timeout` policy round-trips, old and damaged."""

from __future__ import annotations

import time

import pytest

from interlock import TimeoutDefault
from interlock.runtime._records import Address, Interrupt, OnTimeout, Segment
from interlock.runtime._signals import Raised
from interlock.runtime._wire import raised_from_wire, raised_to_wire


def _raised(policy: OnTimeout | None) -> Raised:
    record = Interrupt(
        id="i1", key=None, address=Address(), kind="dynamic", info="?", created_at=time.time()
    )
    return Raised(record, on_timeout=policy, task="t1", local="l", owner="t1")


@pytest.mark.parametrize("policy", [None, "reject", "escalate", TimeoutDefault({"ok": 1})])
def test_on_timeout_round_trips(policy: OnTimeout | None) -> None:
    assert raised_from_wire(raised_to_wire(_raised(policy))).on_timeout == policy


def test_a_default_is_stored_as_the_tagged_pair_checkpoints_always_held() -> None:
    wire = raised_to_wire(_raised(TimeoutDefault(5)))
    assert ["default", 5] in wire
    assert raised_from_wire(wire).on_timeout == TimeoutDefault(5)


@pytest.mark.parametrize("damaged", ["shrug", ["default"], ["other", 1], 7])
def test_an_unknown_policy_is_refused_as_damage(damaged: object) -> None:
    wire = raised_to_wire(_raised(None))
    wire[10] = damaged  # the on_timeout field
    with pytest.raises(ValueError, match="on_timeout"):
        raised_from_wire(wire)


def test_an_address_renders_the_same_before_and_after_its_text_is_kept() -> None:
    """Rendered addresses are kept for reuse, bounded: equal addresses render alike, and a
    full cache starts over rather than growing or answering for another address."""
    from interlock.runtime import _records

    first = Address((Segment("node", "review"), Segment("tool", "execute", "call_1")))
    assert str(first) == "node:review/tool:execute:call_1"
    twin = Address.parse("node:review/tool:execute:call_1")
    assert str(twin) == str(first) and twin == first
    many = [
        Address((Segment("node", "n"), Segment("tool", "t", f"call_{k}")))
        for k in range(_records._RENDERED_KEPT + 10)
    ]
    texts = [str(a) for a in many]
    assert texts == [f"node:n/tool:t:call_{k}" for k in range(len(many))]
    assert len(_records._RENDERED) <= _records._RENDERED_KEPT
    assert str(first) == "node:review/tool:execute:call_1"
    assert str(Address()) == ""
