"""Hostile input: decoding any bytes raises only CheckpointCorrupt and runs no foreign code."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import enum
import random
import struct
import sys
import uuid
import zlib
from collections.abc import Callable
from typing import Any, Final

import msgspec
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec.msgpack import Ext

from interlock import CheckpointCorrupt
from interlock.serde import Codec

HOSTILE = settings(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class Mood(enum.Enum):
    CALM = "calm"
    ANGRY = 2


class Size(enum.IntEnum):
    S = 1
    M = 2


@dataclasses.dataclass(frozen=True)
class Card:
    rank: int
    suit: str = "spades"

    def __post_init__(self) -> None:
        if not isinstance(self.rank, int) or not 1 <= self.rank <= 13:
            raise ValueError(f"bad rank {self.rank!r}")


@dataclasses.dataclass(slots=True, kw_only=True)
class Hand:
    cards: list[Card]
    owner: str | None = None


class Bid(msgspec.Struct):
    amount: int
    at: dt.datetime | None = None


class Player(pydantic.BaseModel):
    name: str
    score: int = 0
    hand: Hand | None = None

    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)


TYPES = [Mood, Size, Card, Hand, Bid, Player]
NAMES = [f"{cls.__module__}.{cls.__qualname__}" for cls in TYPES]
FIELDS = ["rank", "suit", "cards", "owner", "amount", "at", "name", "score", "hand", "value"]


def make_codec() -> Codec:
    return Codec(types=TYPES)


def frame(body: bytes | bytearray, version: int = 1) -> bytes:
    """Wrap a body in a header with a valid checksum, so the body parser really runs."""
    return b"ILK" + bytes([version]) + zlib.crc32(body).to_bytes(4, "big") + bytes(body)


_NEIGHBOURS: Final = [{"plain": [i, "x"]} for i in range(16)]
_NEIGHBOUR_BYTES: Final = [Codec().encode(n) for n in _NEIGHBOURS]


def check(codec: Codec, data: bytes) -> None:
    """Decode hostile bytes: CheckpointCorrupt, or a value that can be encoded again.

    Then decode them among plain neighbours with `decode_many`, which takes its batch fast path
    for the neighbours: the outcome must be exactly the one `decode` gave.
    """
    batch = [*_NEIGHBOUR_BYTES[:7], data, *_NEIGHBOUR_BYTES[7:]]
    try:
        value = codec.decode(data)
    except CheckpointCorrupt as exc:
        message = str(exc)
    else:
        again = codec.encode(value)
        values = codec.decode_many(batch)
        assert codec.encode(values[7]) == again or _canonical(values[7]) == _canonical(value)
        assert values[:7] + values[8:] == _NEIGHBOURS
        return
    assert message.startswith(("the data", "checksum", "format version", "expected bytes"))
    with pytest.raises(CheckpointCorrupt) as info:
        codec.decode_many(batch)
    assert str(info.value) == message


def _canonical(value: Any) -> Any:
    """A form of a decoded value in which equal values are equal, whatever their sets' order.

    A NaN hashes by identity, so two equal sets that hold one can iterate, and so encode, in
    different orders: their bytes differ although nothing else does.
    """
    if isinstance(value, float) and value != value:
        return ("nan",)
    if isinstance(value, set | frozenset):
        return (type(value).__name__, sorted((_canonical(v) for v in value), key=repr))
    if isinstance(value, dict):
        return ("dict", [(_canonical(k), _canonical(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [_canonical(v) for v in value])
    if isinstance(value, msgspec.Struct):
        fields = value.__struct_fields__
        return (type(value).__qualname__, [_canonical(getattr(value, f)) for f in fields])
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = [f.name for f in dataclasses.fields(value)]
        return (type(value).__qualname__, [_canonical(getattr(value, f)) for f in fields])
    if isinstance(value, pydantic.BaseModel):
        return (type(value).__qualname__, _canonical(dict(value)))
    return (type(value).__qualname__, value)


def test_equal_sets_holding_a_nan_compare_equal_in_canonical_form() -> None:
    a, b = {float("nan"), "x", 1}, {"x", 1, float("nan")}
    assert _canonical(a) == _canonical(b)
    assert _canonical({1, 2}) != _canonical({1, 3})
    assert _canonical([True]) != _canonical([1])


# -- strategies ----------------------------------------------------------------------------------

# Our codes (markers 1-6, leaves 16-23), msgspec's timestamp (-1), and everything else.
_ext_codes = st.sampled_from([1, 2, 3, 4, 5, 6, 16, 17, 18, 19, 20, 21, 22, 23, -1, 0, 7, 127])
_ext_codes |= st.integers(-128, 127)
_payloads = st.binary(max_size=24) | st.sampled_from(
    [
        b"",
        b"\x00" * 16,
        b"2024-01-01T00:00:00+05:00",
        b"2024-13-45",
        b"99:99",
        b"NaN",
        b"sNaN",
        b"1e999999999",
        b"\xff" * 9,
        struct.pack(">iii", 10**9, 0, 0),
        struct.pack(">iii", 0, 86400, 10**6),
        "é".encode(),
    ]
)
_exts = st.builds(Ext, _ext_codes, _payloads)
_markers = st.sampled_from([Ext(code, b"") for code in range(1, 7)])
_names = st.sampled_from([*NAMES, "os.system", "builtins.eval", "pickle.loads", ""]) | st.text(
    max_size=12
)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(FIELDS)
    | st.binary(max_size=12)
    | _exts
    | _markers
)
_keys = (
    st.text(max_size=6)
    | st.sampled_from(FIELDS)
    | st.integers(-5, 5)
    | st.none()
    | st.binary(max_size=4)
    | st.tuples(st.integers(0, 3), st.integers(0, 3))
)


def _hostile_containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    items = st.lists(inner, max_size=5)
    return (
        items
        | st.dictionaries(_keys, inner, max_size=4)
        # Tagged arrays with random contents, and objects naming registered classes.
        | st.builds(lambda mark, rest: [mark, *rest], _markers, items)
        | st.builds(lambda mark, name, rest: [mark, name, *rest], _markers, _names, items)
        | st.builds(
            lambda mark, name, pairs: [mark, name, *[x for pair in pairs for x in pair]],
            _markers,
            _names,
            st.lists(st.tuples(st.sampled_from(FIELDS) | inner, inner), max_size=3),
        )
        # A marker in the middle of an array.
        | st.builds(lambda first, mark, rest: [first, mark, *rest], inner, _markers, items)
    )


hostile_trees = st.recursive(_scalars, _hostile_containers, max_leaves=15)

valid_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=10)
    | st.binary(max_size=10)
    | st.uuids()
    | st.datetimes()
    | st.timedeltas()
    | st.decimals()
    | st.sampled_from(
        [
            Mood.CALM,
            Size.M,
            Card(12),
            Hand(cards=[Card(1, "hearts")], owner="ann"),
            Bid(5, dt.datetime(2024, 1, 1, tzinfo=dt.UTC)),
            Player(name="bo", score=3, hand=Hand(cards=[])),
        ]
    ),
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=5), inner, max_size=5)
        | st.dictionaries(st.integers() | st.tuples(st.integers()), inner, max_size=3)
        | st.frozensets(st.integers() | st.text(max_size=3), max_size=4)
    ),
    max_leaves=12,
)


def _mutate(body: bytearray, op: str, position: int, byte: int, length: int) -> None:
    at = position % (len(body) + 1)
    if op == "flip" and body:
        body[at % len(body)] ^= 1 << (byte % 8)
    elif op == "set" and body:
        body[at % len(body)] = byte
    elif op == "truncate":
        del body[at:]
    elif op == "extend":
        body.extend(bytes([byte]) * length)
    elif op == "insert":
        body[at:at] = bytes([byte]) * length
    elif op == "delete":
        del body[at : at + length]
    elif op == "swap" and len(body) > 1:
        other = (at + length) % len(body)
        at %= len(body)
        body[at], body[other] = body[other], body[at]


_mutations = st.lists(
    st.tuples(
        st.sampled_from(["flip", "set", "truncate", "extend", "insert", "delete", "swap"]),
        st.integers(0, 10**6),
        st.integers(0, 255),
        st.integers(1, 8),
    ),
    min_size=1,
    max_size=4,
)

# -- the properties: 2,500 + 2,500 + 600 x 5 + 500 x 5 = 10,500 hostile inputs -------------------


@pytest.mark.slow  # thousands of hostile bodies: the main leg runs them
@settings(HOSTILE, max_examples=2500)
@given(st.binary(max_size=64))
def test_random_bytes(data: bytes) -> None:
    with pytest.raises(CheckpointCorrupt):
        make_codec().decode(data)


@pytest.mark.slow  # thousands of hostile bodies: the main leg runs them
@settings(HOSTILE, max_examples=2500)
@given(st.binary(max_size=128))
def test_random_bodies_with_a_valid_header(body: bytes) -> None:
    check(make_codec(), frame(body))


def _damage(body: bytes, mutations: list[Any]) -> bytearray:
    damaged = bytearray(body)
    for mutation in mutations:
        _mutate(damaged, *mutation)
    return damaged


@pytest.mark.slow  # thousands of hostile bodies: the main leg runs them
@settings(HOSTILE, max_examples=600)
@given(valid_values, st.lists(_mutations, min_size=5, max_size=5), st.integers(0, 4))
def test_mutated_encodings(value: Any, mutation_sets: list[Any], stale: int) -> None:
    codec = make_codec()
    data = codec.encode(value)
    for i, mutations in enumerate(mutation_sets):
        body = _damage(data[8:], mutations)
        if i == stale and body != data[8:]:
            # With the old checksum, any change is caught before parsing.
            with pytest.raises(CheckpointCorrupt, match="checksum"):
                codec.decode(data[:8] + body)
        else:
            check(codec, frame(body))


@pytest.mark.slow  # thousands of hostile bodies: the main leg runs them
@settings(HOSTILE, max_examples=500)
@given(hostile_trees, st.lists(_mutations, min_size=4, max_size=4))
def test_hostile_msgpack_trees(tree: Any, mutation_sets: list[Any]) -> None:
    try:
        body = msgspec.msgpack.encode(tree)
    except (TypeError, ValueError):
        return  # not representable in msgpack (an Ext as a dict key, ...)
    codec = make_codec()
    check(codec, frame(body))
    for mutations in mutation_sets:
        check(codec, frame(_damage(body, mutations)))


# -- specific attacks ----------------------------------------------------------------------------


def _object(name: str, *pairs: Any) -> list[Any]:
    return [Ext(5, b""), name, *pairs]


ATTACKS: list[Any] = [
    Ext(5, b""),  # a marker on its own
    [1, Ext(1, b"")],  # a marker in the middle
    [Ext(1, b"payload")],  # a marker with a payload
    [Ext(99, b"")],  # an unknown code
    [Ext(22, b"short")],  # a UUID of the wrong length
    [Ext(18, b"\xff\xfe")],  # a datetime that is not ASCII
    [Ext(21, b"\x00")],  # a truncated timedelta
    [Ext(21, struct.pack(">iii", 2**31 - 1, 0, 0))],  # a timedelta out of range
    [Ext(23, b"1.5.5")],  # not a Decimal
    [Ext(19, b"\x07\xe8\x02\x1e")],  # February 30th
    [Ext(18, bytes(12) + b"\x00" * 7)],  # a datetime with a short offset
    [Ext(4, b""), "k"],  # a dict key without a value
    [Ext(2, b""), [1]],  # an unhashable set item
    [Ext(4, b""), [1], 2],  # an unhashable dict key
    {"k": Ext(1, b"")},
    {(1, 2): "tuple key"},
    {1: {2: {3: [Ext(3, b""), {"a": 1}]}}},
    _object("os.system", "command", "true"),
    _object("builtins.eval", "source", "1+1"),
    _object(NAMES[2]),  # Card without a rank
    _object(NAMES[2], "rank", 99),  # __post_init__ refuses
    _object(NAMES[2], "rank", 1, "suit"),  # a field without a value
    _object(NAMES[2], 7, 1),  # a field name that is not a str
    _object(NAMES[2], "rank", 1, "cheat", True),  # an unknown field
    _object(NAMES[0], "x", 1),  # an enum stored as an object
    [Ext(6, b""), NAMES[2], 1],  # an object stored as an enum
    [Ext(6, b""), NAMES[0], "nope"],  # no such member
    [Ext(6, b""), NAMES[0]],  # an enum without a value
    [Ext(6, b""), 5, "x"],  # a name that is not a str
    _object(NAMES[5], "name", 5),  # pydantic refuses
    _object(NAMES[5], "name", "x", "hand", _object(NAMES[3], "cards", [_object(NAMES[2])])),
]


@pytest.mark.parametrize("tree", ATTACKS, ids=repr)
def test_specific_attacks_are_checkpoint_corrupt(tree: Any) -> None:
    data = frame(msgspec.msgpack.encode(tree))
    with pytest.raises(CheckpointCorrupt) as info:
        make_codec().decode(data)
    assert str(info.value).startswith("the data is malformed: ")
    check(make_codec(), data)  # and the same error from a batch


def test_huge_declared_lengths_do_not_allocate() -> None:
    for header in (b"\xdd", b"\xdf", b"\xdb", b"\xc6", b"\xc9"):
        with pytest.raises(CheckpointCorrupt, match="truncated"):
            make_codec().decode(frame(header + b"\xff\xff\xff\xff\x01"))


# -- decoding runs no foreign code ---------------------------------------------------------------

_WATCHED = frozenset(
    {"import", "exec", "compile", "pickle.find_class", "marshal.loads", "open", "os.system"}
)
_recording = False
_events: list[str] = []


def _audit(event: str, _args: tuple[Any, ...]) -> None:
    if _recording and event in _WATCHED:
        _events.append(event)


# Audit hooks cannot be removed; this one only records while a test sets the flag.
sys.addaudithook(_audit)


def _record(action: Callable[[], None]) -> list[str]:
    global _recording
    _events.clear()
    _recording = True
    try:
        action()
    finally:
        _recording = False
    return list(_events)


def _hostile_blobs(codec: Codec, count: int) -> list[bytes]:
    rng = random.Random(20240601)
    valid = [
        codec.encode(value)
        for value in (
            {"mood": Mood.ANGRY, "sizes": (Size.S, Size.M), "id": uuid.UUID(int=3)},
            [Card(3), Hand(cards=[Card(4)]), Bid(1, dt.datetime(2024, 1, 1))],
            Player(name="x", hand=Hand(cards=[Card(5)])),
        )
    ]
    blobs = [frame(msgspec.msgpack.encode(tree)) for tree in ATTACKS] + valid
    for _ in range(count):
        choice = rng.randrange(3)
        if choice == 0:
            blobs.append(rng.randbytes(rng.randrange(64)))
        elif choice == 1:
            blobs.append(frame(rng.randbytes(rng.randrange(1, 96))))
        else:
            body = bytearray(rng.choice(valid)[8:])
            for _ in range(rng.randrange(1, 4)):
                _mutate(
                    body,
                    rng.choice(["flip", "set", "truncate", "insert", "delete"]),
                    rng.randrange(10**6),
                    rng.randrange(256),
                    rng.randrange(1, 8),
                )
            blobs.append(frame(body))
    return blobs


def test_decoding_hostile_blobs_never_imports_or_executes() -> None:
    codec = make_codec()
    blobs = _hostile_blobs(codec, 3000)

    def decode_all() -> None:
        for blob in blobs:
            with contextlib.suppress(CheckpointCorrupt):
                codec.decode(blob)

    # The hook works: importing a fresh module and executing source are both seen.
    def import_and_execute() -> None:
        __import__("colorsys")
        exec("1")

    sys.modules.pop("colorsys", None)
    assert {"import", "exec", "compile"} <= set(_record(import_and_execute))
    assert _record(decode_all) == []
