"""Round trips, the registry, error messages and limits of `interlock.serde.Codec`."""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import decimal
import enum
import io
import math
import sys
import uuid
import zlib
from typing import Any

import msgspec
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import interlock.serde
from interlock import CheckpointCorrupt, PayloadTooLarge, SerializationError, UnregisteredType
from interlock.serde import DEFAULT_CODEC, Codec

UTC = dt.UTC


# -- registered classes used below -----------------------------------------------------------


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Role(enum.StrEnum):
    USER = "user"
    ASSISTANT = "assistant"


class Perm(enum.Flag):
    READ = 1
    WRITE = 2


@dataclasses.dataclass
class Point:
    x: int
    y: int


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Tagged:
    name: str
    tags: frozenset[str] = frozenset()
    where: Point | None = None


@dataclasses.dataclass
class Derived:
    base: int
    double: int = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.double = self.base * 2


@dataclasses.dataclass
class Node:
    value: int
    children: list[Node] = dataclasses.field(default_factory=list)


class Item(msgspec.Struct):
    sku: str
    qty: int = 1


class Order(msgspec.Struct, frozen=True, kw_only=True):
    items: tuple[Item, ...]
    placed: dt.datetime


class Address(pydantic.BaseModel):
    city: str
    zip_code: str = pydantic.Field(alias="zip")


class Customer(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(frozen=True)

    id: uuid.UUID
    address: Address
    color: Color
    balance: decimal.Decimal


class Loose(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")

    known: int


class Picky(pydantic.BaseModel):
    n: int

    @pydantic.field_validator("n")
    @classmethod
    def _positive(cls, n: int) -> int:
        if n <= 0:
            raise ValueError("n must be positive")
        return n


ALL_TYPES = [Color, Level, Role, Perm, Point, Tagged, Derived, Node, Item, Order]
ALL_TYPES += [Address, Customer, Loose, Picky]


def make_codec(**kwargs: Any) -> Codec:
    return Codec(types=ALL_TYPES, **kwargs)


def same(a: Any, b: Any) -> bool:
    """Equal values of exactly the same types, all the way down (NaN equals NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1, a) == math.copysign(1, b)
        )
    if isinstance(a, decimal.Decimal):
        return str(a) == str(b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return len(a) == len(b) and all(
            same(ka, kb) and same(va, vb)
            for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True)
        )
    if isinstance(a, (dt.datetime, dt.time)):
        return a == b and a.utcoffset() == b.utcoffset()
    return bool(a == b)


def roundtrip(value: Any, codec: Codec | None = None) -> Any:
    codec = codec or make_codec()
    return codec.decode(codec.encode(value))


def frame(body: bytes, version: int = 1) -> bytes:
    """Wrap a msgpack body in a valid header (the documented wire format)."""
    return b"ILK" + bytes([version]) + zlib.crc32(body).to_bytes(4, "big") + body


# -- the public namespace ----------------------------------------------------------------------


def test_exports() -> None:
    assert set(interlock.serde.__all__) == {"DEFAULT_CODEC", "Codec", "collect_types"}
    for name in interlock.serde.__all__:
        assert getattr(interlock.serde, name) is not None
    assert isinstance(DEFAULT_CODEC, Codec)
    assert not DEFAULT_CODEC.is_registered(Point)


# -- round trips ---------------------------------------------------------------------------------

BUILTIN_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    2**63 - 1,
    -(2**63),
    2**64 - 1,
    2**64,
    -(2**63) - 1,
    2**200,
    -(2**200) + 7,
    0.0,
    -0.0,
    1.5,
    float("inf"),
    float("-inf"),
    float("nan"),
    "",
    "héllo ✓ \x00",
    b"",
    b"\x00\xff",
    bytearray(b"ab\x00"),
    bytearray(),
    [],
    [1, "a", None],
    (),
    (1,),
    (1, (2, (3,))),
    set(),
    {1, "a", (1, 2)},
    frozenset(),
    frozenset({1.5, b"x"}),
    {},
    {"a": 1, "b": [1, 2]},
    dt.datetime(2024, 2, 29, 23, 59, 59, 999999),
    dt.datetime(2024, 1, 1, 12, 0, 0, 1, tzinfo=UTC),
    dt.datetime(2024, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30))),
    dt.datetime(2024, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=-3, seconds=7, microseconds=9))),
    dt.datetime.min,
    dt.datetime.max,
    dt.datetime(2021, 11, 7, 1, 30, fold=1),
    dt.date(1, 1, 1),
    dt.date(2024, 6, 30),
    dt.time(0, 0),
    dt.time(23, 59, 59, 999999),
    dt.time(12, 30, tzinfo=dt.timezone(dt.timedelta(hours=-8))),
    dt.timedelta(0),
    dt.timedelta(days=-1, microseconds=1),
    dt.timedelta.max,
    dt.timedelta.min,
    uuid.UUID(int=0),
    uuid.UUID("12345678-1234-5678-1234-567812345678"),
    decimal.Decimal("1.50"),
    decimal.Decimal("-0"),
    decimal.Decimal("1E+3"),
    decimal.Decimal("NaN"),
    decimal.Decimal("-Infinity"),
    decimal.Decimal("3.141592653589793238462643383279502884197"),
]


@pytest.mark.parametrize("value", BUILTIN_VALUES, ids=repr)
def test_builtin_values_round_trip(value: Any) -> None:
    assert same(roundtrip(value, DEFAULT_CODEC), value)


@pytest.mark.parametrize("value", BUILTIN_VALUES, ids=repr)
def test_builtin_values_round_trip_nested(value: Any) -> None:
    nested = {"list": [value], "tuple": (value,), "dict": {"k": value}, "deep": [[{"v": value}]]}
    assert same(roundtrip(nested, DEFAULT_CODEC), nested)


@pytest.mark.parametrize(
    "key",
    [
        "s",
        "",
        0,
        -5,
        2**64 - 1,
        2**70,
        -(2**70),
        1.5,
        True,
        None,
        b"raw",
        (1, "a"),
        ((1, 2), (3,)),
        frozenset({1, 2}),
        dt.datetime(2024, 1, 1, tzinfo=UTC),
        dt.date(2024, 1, 1),
        uuid.UUID(int=7),
        decimal.Decimal("2.5"),
        Color.RED,
        Level.HIGH,
        Tagged(name="t"),
    ],
    ids=repr,
)
def test_dict_keys_of_every_kind_round_trip(key: Any) -> None:
    value = {key: [key], "other": 1}
    back = roundtrip(value)
    assert same(back, value)
    assert [type(k) for k in back] == [type(k) for k in value]


def test_mixed_key_dict_keeps_order_and_types() -> None:
    value = {1: "int", "1": "str", 1.5: "float", (1,): "tuple", None: "none", b"1": "bytes"}
    back = roundtrip(value)
    assert list(back.items()) == list(value.items())
    assert [type(k) for k in back] == [type(k) for k in value]


def test_registered_classes_round_trip() -> None:
    when = dt.datetime(2024, 5, 1, 9, 30, tzinfo=UTC)
    values = [
        Color.GREEN,
        Level.HIGH,
        Role.ASSISTANT,
        Perm.READ | Perm.WRITE,
        Point(1, 2),
        Tagged(name="a", tags=frozenset({"x", "y"}), where=Point(3, 4)),
        Derived(base=21),
        Node(1, [Node(2), Node(3, [Node(4)])]),
        Item("sku-1"),
        Order(items=(Item("a", 2), Item("b")), placed=when),
        Address(city="Paris", zip="75001"),
        Customer(
            id=uuid.UUID(int=5),
            address=Address(city="Oslo", zip="0150"),
            color=Color.RED,
            balance=decimal.Decimal("10.05"),
        ),
        Loose(known=1, surprise=[1, (2, 3)]),
    ]
    for value in values:
        back = roundtrip(value)
        assert back == value
        assert type(back) is type(value)
    assert roundtrip(Derived(base=4)).double == 8
    assert roundtrip(Loose(known=1, surprise=(1, 2))).surprise == (1, 2)
    assert isinstance(roundtrip(Role.USER), Role)


def test_nested_combination_round_trips() -> None:
    state = {
        "messages": [
            {"role": Role.USER, "content": "hi", "at": dt.datetime(2024, 1, 1, tzinfo=UTC)},
            {"role": Role.ASSISTANT, "content": "hello", "tools": (Point(1, 2), {Color.RED})},
        ],
        "orders": {uuid.UUID(int=1): Order(items=(Item("a"),), placed=dt.datetime(2024, 1, 1))},
        "graph": Node(0, [Node(1)]),
        "grid": {(0, 0): frozenset({Level.LOW}), (0, 1): frozenset()},
        "big": [2**80, {"n": -(2**90)}],
        "blob": bytearray(b"\x01\x02"),
    }
    assert same(roundtrip(state), state)


def test_big_ints_inside_large_plain_containers() -> None:
    # Large plain containers take the fast path that trusts ints to fit in 64 bits; a big int
    # there must still round-trip exactly.
    rows = [{"id": i, "name": f"row {i}", "tags": ["a", "b"]} for i in range(50)]
    rows[37]["tags"].append(2**100)
    keyed = {i: str(i) for i in range(40)}
    keyed[2**65] = "big key"
    value = {"rows": rows, "keyed": keyed, "flat": [*range(30), -(2**64)]}
    assert same(roundtrip(value, DEFAULT_CODEC), value)


def test_encoding_does_not_change_the_value() -> None:
    inner = [(1, 2), {3}]
    value = {"a": inner, "b": [uuid.UUID(int=1)] * 20}
    DEFAULT_CODEC.encode(value)
    assert value == {"a": [(1, 2), {3}], "b": [uuid.UUID(int=1)] * 20}
    assert value["a"] is inner
    assert type(inner[0]) is tuple


def test_decode_accepts_memoryview_and_bytearray() -> None:
    data = DEFAULT_CODEC.encode({"a": (1, 2)})
    assert DEFAULT_CODEC.decode(memoryview(data)) == {"a": (1, 2)}
    assert DEFAULT_CODEC.decode(bytearray(data)) == {"a": (1, 2)}
    assert DEFAULT_CODEC.decode(memoryview(b"xx" + data)[2:]) == {"a": (1, 2)}


@pytest.mark.parametrize(
    "value",
    [
        {"__t": "uuid", "v": "x"},
        {"__t": "tuple", "v": [1, 2]},
        {"__tag__": "set", "items": []},
        [1],
        [5, f"{__name__}.Point", "x", 1, "y", 2],
        [6, f"{__name__}.Color", "red"],
        ["tuple", 1, 2],
        b"\xd4\x05\x00",
        {"ILK": b"ILK\x01\x00\x00\x00\x00\xc0"},
        {5: [1, f"{__name__}.Point"]},
    ],
    ids=repr,
)
def test_data_that_looks_like_a_tag_stays_data(value: Any) -> None:
    assert same(roundtrip(value), value)


# -- property: any nested value round-trips, including ones that look like tags --------------

_offsets = st.timedeltas(min_value=-dt.timedelta(hours=23), max_value=dt.timedelta(hours=23))
_timezones = st.none() | st.builds(dt.timezone, _offsets)

# Strings, numbers and shapes that resemble tag encodings of any plausible design.
_TAG_LIKE_STRINGS = ["__t", "__tag__", "__type__", "$type", "v", "tuple", "uuid", "ILK", "~"]
_TAG_LIKE_STRINGS += [f"{__name__}.Point", f"{__name__}.Color", "builtins.eval"]
_tag_like_text = st.sampled_from(_TAG_LIKE_STRINGS) | st.text(max_size=8)

_hashable = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | _tag_like_text
    | st.binary(max_size=8)
    | st.uuids()
    | st.dates(),
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
    max_leaves=4,
)

_leaves = (
    _hashable
    | st.floats()
    | st.binary(max_size=16).map(bytearray)
    | st.datetimes(timezones=_timezones)
    | st.times(timezones=_timezones)
    | st.timedeltas()
    | st.decimals(allow_nan=True)
    | st.sampled_from([Color.RED, Level.LOW, Role.USER, Point(1, 2)])
    # Byte strings that are msgpack encodings of ext values and of tagged arrays.
    | st.sampled_from([b"\xd4\x01\x00", b"\xc7\x00\x01", b"\x92\xd4\x05\x00\xa1x", b"ILK\x01"])
)


def _tag_like_containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(_tag_like_text, inner, max_size=4)
        | st.dictionaries(_hashable, inner, max_size=3)
        | st.sets(_hashable, max_size=3)
        # Lists that start like a tagged array would: a small int code, then a name.
        | st.tuples(st.integers(0, 30), _tag_like_text, inner).map(list)
        | st.builds(lambda t, v: {"__t": t, "v": v}, _tag_like_text, inner)
        | st.builds(lambda v: {"__tag__": "tuple", "items": [v]}, inner)
    )


values = st.recursive(_leaves, _tag_like_containers, max_leaves=25)


@settings(max_examples=300, deadline=None, database=None)
@given(values)
def test_any_value_round_trips_exactly(value: Any) -> None:
    codec = make_codec()
    assert same(codec.decode(codec.encode(value)), value)


_small_values = st.recursive(_leaves, _tag_like_containers, max_leaves=4)


@settings(max_examples=60, deadline=None, database=None)
@given(st.lists(_small_values, min_size=16, max_size=24))
def test_large_containers_round_trip_exactly(items: list[Any]) -> None:
    # 16+ items switch the walkers to their C-speed census of plain subtrees.
    codec = make_codec()
    value = {"items": items, "keyed": dict(enumerate(items)), "nested": [items, items]}
    assert same(codec.decode(codec.encode(value)), value)


# -- the registry ------------------------------------------------------------------------------


def test_register_is_idempotent_and_copy_is_independent() -> None:
    codec = Codec()
    codec.register(Point)
    codec.register(Point)
    assert codec.is_registered(Point)
    twin = codec.copy()
    twin.register(Item)
    assert twin.is_registered(Point) and twin.is_registered(Item)
    assert not codec.is_registered(Item)
    assert twin.max_bytes == codec.max_bytes and twin.max_depth == codec.max_depth
    with pytest.raises(UnregisteredType):
        codec.encode(Item("x"))
    assert twin.decode(twin.encode(Item("x"))) == Item("x")


def test_register_under_a_custom_name_survives_copy() -> None:
    codec = Codec()
    codec.register(Point, name="geo.Point.v1")
    data = codec.copy().encode(Point(1, 2))
    assert b"geo.Point.v1" in data
    reader = Codec()
    reader.register(Point, name="geo.Point.v1")
    assert reader.decode(data) == Point(1, 2)


def test_register_conflicts_raise_value_error() -> None:
    codec = Codec()
    codec.register(Point, name="shared")
    with pytest.raises(ValueError, match=r"'shared'.*already taken by .*Point"):
        codec.register(Item, name="shared")
    with pytest.raises(ValueError, match="already registered as 'shared'"):
        codec.register(Point, name="other")
    with pytest.raises(ValueError, match="non-empty"):
        codec.register(Item, name="")


def test_register_refuses_what_it_cannot_encode() -> None:
    codec = Codec()
    with pytest.raises(TypeError, match="only dataclasses, pydantic models"):
        codec.register(collections.OrderedDict)
    with pytest.raises(TypeError, match="takes a class"):
        codec.register(Point(1, 2))  # type: ignore[arg-type]


def test_always_supported_types_need_no_registration() -> None:
    codec = Codec(types=[dt.datetime, list, uuid.UUID])
    assert codec.is_registered(dt.datetime) and codec.is_registered(list)
    assert not codec.is_registered(Point)
    assert "0 registered types" in repr(codec)


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        Codec(max_bytes=0)
    with pytest.raises(ValueError, match="positive"):
        Codec(max_depth=0)


# -- encoding errors ---------------------------------------------------------------------------


class Foo:
    pass


Foo.__module__ = "mymod"


@dataclasses.dataclass
class Unlisted:
    payload: Any


def test_unregistered_type_message_names_path_type_and_remedy() -> None:
    @dataclasses.dataclass
    class Foo:  # a registrable class, named as in the docs
        pass

    Foo.__module__, Foo.__qualname__ = "mymod", "Foo"
    state = {"messages": [0, 1, 2, {"payload": Foo()}]}
    with pytest.raises(UnregisteredType) as info:
        DEFAULT_CODEC.encode(state, path="state")
    assert str(info.value) == (
        "state.messages[3].payload: type mymod.Foo is not registered; "
        "pass it to Graph(..., types=[Foo]) or call codec.register(Foo)"
    )
    assert info.value.path == "state.messages[3].payload"
    assert info.value.type_name == "mymod.Foo"


def _generator() -> Any:
    yield 1


@pytest.mark.parametrize(
    ("value", "path", "type_name"),
    [
        (Foo(), "value", "mymod.Foo"),
        ({"a b": [1, Foo()]}, 'value["a b"][1]', "mymod.Foo"),
        ({"ok": {"é": Foo()}}, "value.ok.é", "mymod.Foo"),
        ([(1, Foo())], "value[0][1]", "mymod.Foo"),
        ({1: Foo()}, "value[1]", "mymod.Foo"),
        ({(1, 2): {"x": Foo()}}, "value[(1, 2)].x", "mymod.Foo"),
        (Point(1, Foo()), "value.y", "mymod.Foo"),  # type: ignore[arg-type]
        (Item("a", Foo()), "value.qty", "mymod.Foo"),  # type: ignore[arg-type]
        (Loose(known=1, extra_field=Foo()), "value.extra_field", "mymod.Foo"),
        (Unlisted(1), "value", f"{__name__}.Unlisted"),
        ([lambda: 1], "value[0]", "builtins.function"),
        ({"gen": _generator()}, "value.gen", "builtins.generator"),
        ({"mod": sys}, "value.mod", "builtins.module"),
        ({"file": io.StringIO()}, "value.file", "_io.StringIO"),
        ({"cls": Point}, "value.cls", "builtins.type"),
        ({"od": collections.OrderedDict()}, "value.od", "collections.OrderedDict"),
        ({"ext": msgspec.msgpack.Ext(1, b"")}, "value.ext", "msgspec.msgpack.Ext"),
        ({"view": memoryview(b"x")}, "value.view", "builtins.memoryview"),
        ([1] * 20 + [object()], "value[20]", "builtins.object"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_unregistered_values_are_reported_with_their_path(
    value: Any, path: str, type_name: str
) -> None:
    with pytest.raises(UnregisteredType) as info:
        make_codec().encode(value)
    assert info.value.path == path
    assert info.value.type_name == type_name
    assert str(info.value).startswith(f"{path}: type {type_name} is not registered; ")


def test_unregistrable_types_get_a_different_remedy() -> None:
    with pytest.raises(UnregisteredType, match="convert the value to one of those or to plain"):
        DEFAULT_CODEC.encode({"f": print}, path="state")


def test_subclasses_are_not_their_registered_base() -> None:
    class SpecialPoint(Point):
        pass

    class Name(str):
        pass

    for value in (SpecialPoint(1, 2), Name("x")):
        with pytest.raises(UnregisteredType):
            make_codec().encode(value)


def test_payload_too_large() -> None:
    codec = Codec(max_bytes=1000)
    codec.encode("x" * 900)
    with pytest.raises(PayloadTooLarge) as info:
        codec.encode({"blob": "x" * 2000}, path="state")
    message = str(info.value)
    assert message.startswith("state: the encoding is 2")
    assert "over the limit of 1000" in message and "Codec(max_bytes=...)" in message


def nested_lists(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize("max_depth", [1, 5, 100])
def test_depth_limit_is_exact(max_depth: int) -> None:
    codec = Codec(max_depth=max_depth)
    assert codec.decode(codec.encode(nested_lists(max_depth))) == nested_lists(max_depth)
    with pytest.raises(PayloadTooLarge, match=f"deeper than max_depth={max_depth}"):
        codec.encode(nested_lists(max_depth + 1))


@pytest.mark.parametrize(
    "wrap",
    [
        lambda v: (v,),
        lambda v: {v} if not isinstance(v, list) else {"k": v},
        lambda v: {1: v},
        lambda v: Tagged(name="n", where=v),
        lambda v: Node(0, [v]),
    ],
    ids=["tuple", "set-or-dict", "keyed-dict", "dataclass", "dataclass-list"],
)
def test_every_container_kind_counts_towards_depth(wrap: Any) -> None:
    codec = Codec(max_depth=3, types=[Tagged, Node, Point])
    with pytest.raises(PayloadTooLarge, match="max_depth=3"):
        codec.encode([wrap([[1]])])


def test_cycles_raise_instead_of_hanging() -> None:
    loop: list[Any] = []
    loop.append(loop)
    mapping: dict[str, Any] = {}
    mapping["self"] = mapping
    node = Node(0)
    node.children.append(node)
    wide: list[Any] = [0] * 30
    wide.append(wide)
    for value in (loop, mapping, node, wide):
        with pytest.raises(PayloadTooLarge, match="is it cyclic"):
            make_codec().encode(value)
    with pytest.raises(PayloadTooLarge, match=r"value\.self\.self\.self"):
        make_codec().encode(mapping)


def test_cycle_with_a_huge_depth_limit_is_still_an_error() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(PayloadTooLarge):
        Codec(max_depth=10**6).encode(loop)


def test_lone_surrogates_are_a_serialization_error() -> None:
    with pytest.raises(SerializationError, match="state: a str cannot be encoded as UTF-8"):
        DEFAULT_CODEC.encode({"s": "\ud800"}, path="state")


# -- decoding errors ---------------------------------------------------------------------------


def test_header_is_magic_version_checksum() -> None:
    data = DEFAULT_CODEC.encode([1, 2])
    assert data[:4] == b"ILK\x01"
    assert int.from_bytes(data[4:8], "big") == zlib.crc32(data[8:])
    assert msgspec.msgpack.decode(data[8:]) == [1, 2]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "not an interlock encoding"),
        (b"ILK", "not an interlock encoding"),
        (b"PK\x03\x04rest-of-zip", "not an interlock encoding"),
        (frame(b"\xc0", version=2), "format version 2 is not supported"),
        (b"ILK\x01\x00\x00\x00\x00\xc0", "checksum mismatch"),
        (frame(b"\x92\x01"), "malformed: .*truncated"),
        (frame(b"\xc0\xc0"), "malformed"),
        (frame(b"\xc1"), "malformed"),
    ],
)
def test_damaged_data_is_checkpoint_corrupt(data: bytes, message: str) -> None:
    with pytest.raises(CheckpointCorrupt, match=message):
        DEFAULT_CODEC.decode(data)


def test_flipped_bit_is_caught_by_the_checksum() -> None:
    data = bytearray(DEFAULT_CODEC.encode({"a": "hello"}))
    data[-1] ^= 0x01
    with pytest.raises(CheckpointCorrupt, match="checksum mismatch"):
        DEFAULT_CODEC.decode(bytes(data))


def test_non_bytes_input_is_checkpoint_corrupt() -> None:
    for data in ("ILK", 42, None):
        with pytest.raises(CheckpointCorrupt, match="expected bytes"):
            DEFAULT_CODEC.decode(data)  # type: ignore[arg-type]


def test_oversized_data_is_refused_before_parsing() -> None:
    data = DEFAULT_CODEC.encode("x" * 5000)
    with pytest.raises(CheckpointCorrupt, match="over the limit of 1000"):
        Codec(max_bytes=1000).decode(data)


def test_unknown_registered_name_says_what_to_register() -> None:
    data = make_codec().encode({"p": Point(1, 2)})
    with pytest.raises(CheckpointCorrupt, match=r"type '.*\.Point' is not registered") as info:
        Codec().decode(data)
    assert "codec.register" in str(info.value)
    assert info.value.__cause__ is not None


def test_constructor_refusing_the_fields_is_checkpoint_corrupt() -> None:
    body = msgspec.msgpack.encode([msgspec.msgpack.Ext(5, b""), f"{__name__}.Picky", "n", -1])
    with pytest.raises(CheckpointCorrupt, match="ValidationError") as info:
        make_codec().decode(frame(body))
    assert isinstance(info.value.__cause__, pydantic.ValidationError)
    body = msgspec.msgpack.encode([msgspec.msgpack.Ext(5, b""), f"{__name__}.Point", "x", 1])
    with pytest.raises(CheckpointCorrupt, match="TypeError") as info:
        make_codec().decode(frame(body))
    assert isinstance(info.value.__cause__, TypeError)


def test_decode_enforces_the_depth_limit() -> None:
    data = Codec(max_depth=50).encode(nested_lists(50))
    assert Codec(max_depth=50).decode(data) == nested_lists(50)
    with pytest.raises(CheckpointCorrupt, match="deeper than max_depth=49"):
        Codec(max_depth=49).decode(data)
    wide_and_deep = [[0] * 20 for _ in range(20)]
    data = DEFAULT_CODEC.encode([[wide_and_deep]])
    with pytest.raises(CheckpointCorrupt, match="deeper than max_depth=3"):
        Codec(max_depth=3).decode(data)


def test_decode_many_is_decode_of_each() -> None:
    codec = make_codec()
    plain = [{"n": i, "tags": ["a", "b"], "more": {"x": None}} for i in range(20)]
    exact = [(i, {i}, Point(i, -i), Color.RED) for i in range(3)]
    for values in (plain, exact, plain + exact, plain[:3], []):
        decoded = codec.decode_many([codec.encode(v) for v in values])
        assert all(same(a, b) for a, b in zip(decoded, values, strict=True))
    # bytearray and memoryview take the careful path and give the same values.
    datas = [codec.encode(v) for v in plain]
    mixed = [bytearray(d) if i % 2 else memoryview(d) for i, d in enumerate(datas)]
    assert codec.decode_many(mixed) == plain


@settings(max_examples=60, deadline=None, database=None)
@given(st.lists(_small_values, min_size=0, max_size=40))
def test_decode_many_agrees_with_decode(items: list[Any]) -> None:
    codec = make_codec()
    datas = [codec.encode(item) for item in items]
    batch = codec.decode_many(datas)
    assert all(same(a, b) for a, b in zip(batch, items, strict=True))


def test_decode_many_keeps_the_depth_limit_of_each_value() -> None:
    # The batch census sees one more level than each value has: it must not lend it out.
    codec = Codec(max_depth=5)
    ok = [codec.encode(nested_lists(5)) for _ in range(20)]
    assert codec.decode_many(ok) == [nested_lists(5)] * 20
    too_deep = Codec(max_depth=6).encode(nested_lists(6))
    with pytest.raises(CheckpointCorrupt, match="deeper than max_depth=5"):
        codec.decode_many([*ok, too_deep])


def test_decode_many_names_the_first_bad_encoding_like_decode() -> None:
    codec = make_codec()
    good = [codec.encode({"i": i}) for i in range(20)]
    damaged = bytearray(good[4])
    damaged[-1] ^= 1
    bad = [frame(b"\xc1"), bytes(damaged), b"nonsense", frame(msgspec.msgpack.encode([1, 2]))[:-1]]
    for data in bad:
        with pytest.raises(CheckpointCorrupt) as single:
            codec.decode(data)
        with pytest.raises(CheckpointCorrupt) as batch:
            codec.decode_many([*good[:10], data, *good[10:], frame(b"\xc1")])
        assert str(batch.value) == str(single.value)


@pytest.mark.parametrize("depth", [1_000, 100_000, 10_000_000])
def test_very_deep_msgpack_nesting_is_checkpoint_corrupt(depth: int) -> None:
    for opener in (b"\x91", b"\x81\xa1k"):
        with pytest.raises(CheckpointCorrupt, match=r"too deeply|deeper than"):
            DEFAULT_CODEC.decode(frame(opener * depth + b"\xc0"))


class Sparse(msgspec.Struct, omit_defaults=True):
    """A Struct that asks msgspec to leave out fields holding their default."""

    a: int
    b: str | None = None
    c: dict[str, int] = msgspec.field(default_factory=dict)
    d: tuple[int, ...] = ()


class Alone(msgspec.Struct):
    a: int


class Dense(msgspec.Struct):
    a: int
    b: str | None = None


def test_a_struct_declared_omit_defaults_is_written_without_them() -> None:
    codec = Codec(types=[Sparse, Dense])
    for value in (Sparse(1), Sparse(1, "x", {"k": 1}, (2,)), Sparse(2, None, {}, ())):
        assert codec.decode(codec.encode(value)) == value
    # Only the name and `a` are written: as small as a Struct that has no other field.
    assert len(codec.encode(Sparse(1))) == len(Codec(types=[Alone]).encode(Alone(1))) + len(
        "Sparse"
    ) - len("Alone")
    # Without the option every field is written, as before: `b` and its nil are there.
    assert codec.encode(Dense(1)).count(b"\xa1b\xc0") == 1


# -- clone --------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", BUILTIN_VALUES, ids=repr)
def test_clone_equals_a_round_trip(value: Any) -> None:
    nested = {"list": [value], "tuple": (value,), "dict": {"k": value}, "deep": [[{"v": value}]]}
    assert same(DEFAULT_CODEC.clone(nested), roundtrip(nested, DEFAULT_CODEC))


def test_clone_shares_no_container_with_the_original() -> None:
    plain = {"messages": [{"text": "a", "n": 1, "blob": b"x"}] * 20, "big": 2**70, "k": {3: [None]}}
    for original in (plain, {**plain, "t": (1, 2)}):  # plain data, and data with a tuple
        copy = DEFAULT_CODEC.clone(original)
        assert copy == original
        copy["messages"][0]["text"] = "changed"
        copy["k"][3].append(1)
        assert original["messages"][0]["text"] == "a" and original["k"] == {3: [None]}
        assert copy["big"] == 2**70 and type(copy["messages"][0]["blob"]) is bytes


def test_clone_refuses_what_encode_refuses() -> None:
    class Unknown:
        pass

    with pytest.raises(UnregisteredType):
        DEFAULT_CODEC.clone({"x": [Unknown()]})
    with pytest.raises(SerializationError):
        DEFAULT_CODEC.clone(["\ud800"])


def test_bytes_checked_by_their_reader_skip_the_crc_but_nothing_else() -> None:
    codec = Codec()
    data = codec.encode({"a": [1, (2, 3)]})
    wrong_crc = data[:4] + bytes(b ^ 0xFF for b in data[4:8]) + data[8:]
    with pytest.raises(CheckpointCorrupt, match="checksum mismatch"):
        codec.decode(wrong_crc)
    with pytest.raises(CheckpointCorrupt, match="checksum mismatch"):
        codec.decode_many([data, wrong_crc])
    # A store that checked these bytes against its own digest: the CRC is not computed again.
    assert codec.decode(wrong_crc, checked=True) == {"a": [1, (2, 3)]}
    assert codec.decode_many([data, wrong_crc], checked=True) == [{"a": [1, (2, 3)]}] * 2
    # The header, the limits and the body itself are still checked.
    with pytest.raises(CheckpointCorrupt, match="not an interlock encoding"):
        codec.decode(b"XYZ" + wrong_crc[3:], checked=True)
    with pytest.raises(CheckpointCorrupt, match="malformed"):
        codec.decode(data[:8] + b"\xc1", checked=True)
    with pytest.raises(CheckpointCorrupt, match="over the limit"):
        Codec(max_bytes=len(data) - 1).decode(data, checked=True)


# -- decode_page: a page of arrays that end alike decodes its shared tail once ----------------


SCHEMA = {"anyOf": [{"type": "boolean"}, {"enum": ["approve", "reject"]}]}


def questions(n: int) -> list[list[Any]]:
    return [
        [{"type": "approval", "question": f"run {i}?", "details": None}, SCHEMA] for i in range(n)
    ]


def agrees(codec: Codec, datas: list[bytes]) -> list[Any]:
    """decode_page's values, after checking they are exactly decode's, one by one."""
    page = codec.decode_page(datas)
    assert len(page) == len(datas)
    assert all(same(p, codec.decode(d)) for p, d in zip(page, datas, strict=True))
    return page


def test_a_page_alike_shares_its_tail_and_decodes_as_decode_would() -> None:
    codec = make_codec()
    values = questions(40)
    page = agrees(codec, [codec.encode(v) for v in values])
    assert page == values
    assert all(v[1] is page[0][1] for v in page)  # the schema decoded once
    assert len({id(v[0]) for v in page}) == 40  # each question its own


def test_pages_not_all_alike_decode_each_on_its_own() -> None:
    codec = make_codec()
    other = [[{"question": "why?"}, {"type": "string"}]]
    longer = [[{"question": "ok?"}, SCHEMA, 2, ["ann"]]]
    tuples = [(i, "x") for i in range(3)]
    for values in (
        questions(5) + other + questions(5),
        other + questions(20),
        questions(3) + longer,
        [*questions(3), {"not": "an array"}, 7, None],
        tuples + questions(2),
        [[1]] * 4,  # one item: no tail
        [list(range(20))] * 3,  # 16 items and more: not a one-byte array header
        questions(1),
        [],
    ):
        page = agrees(codec, [codec.encode(v) for v in values])
        assert [*map(type, page)] == [*map(type, values)]
        assert page == values
    # The alike among others still share the first one's tail; the others have their own.
    page = codec.decode_page([codec.encode(v) for v in questions(3) + other + questions(2)])
    assert page[0][1] is page[1][1] is page[4][1] and page[3][1] == {"type": "string"}
    page = codec.decode_page([codec.encode(v) for v in other + questions(2)])
    assert page[1][1] is not page[2][1]


def test_registered_and_tagged_items_in_the_head_and_the_tail() -> None:
    codec = make_codec()
    values: list[Any] = [
        [(i, {i}, Point(i, -i)), Color.RED, (1, 2), frozenset({"a"})] for i in range(20)
    ]
    page = agrees(codec, [codec.encode(v) for v in values])
    assert page[3][1] is page[4][1] is Color.RED
    assert page[3][2] is page[4][2]


def test_bytes_that_are_not_bytes_take_the_careful_path() -> None:
    codec = make_codec()
    datas = [codec.encode(v) for v in questions(20)]
    mixed: list[Any] = [bytearray(d) if i % 2 else memoryview(d) for i, d in enumerate(datas)]
    assert codec.decode_page(mixed) == questions(20)
    assert codec.decode_page([*datas[:10], bytearray(datas[10]), *datas[11:]]) == questions(20)


@pytest.mark.parametrize("where", ["head", "tail"])
def test_the_depth_limit_of_each_item_is_kept(where: str) -> None:
    codec = Codec(max_depth=5)

    def value(depth: int) -> list[Any]:
        # In an array, an item nests one level below the array: depth - 1 of its own.
        inner = nested_lists(depth - 1)
        return [inner, "tail"] if where == "head" else ["head", inner]

    ok = [codec.encode(value(5)) for _ in range(20)]
    assert codec.decode_page(ok) == [value(5)] * 20
    too_deep = Codec(max_depth=6).encode(value(6))
    with pytest.raises(CheckpointCorrupt, match="deeper than max_depth=5") as single:
        codec.decode(too_deep)
    for page in ([*ok, too_deep], [too_deep, *ok]):
        with pytest.raises(CheckpointCorrupt) as batch:
            codec.decode_page(page)
        assert str(batch.value) == str(single.value)


def test_a_marker_out_of_place_in_the_tail_is_refused_as_decode_refuses_it() -> None:
    codec = make_codec()
    # A tuple's body is [marker, items...]; the marker moved to an item of another array.
    marker = codec.encode((1,))[8:][1:-1]
    bad = frame(b"\x92\x01" + marker)
    alike = frame(b"\x92\x02" + marker)
    with pytest.raises(CheckpointCorrupt) as single:
        codec.decode(bad)
    assert "container marker" in str(single.value)
    for page in ([bad, alike], [bad] * 20, [frame(b"\x92\x03" + marker), bad]):
        with pytest.raises(CheckpointCorrupt) as batch:
            codec.decode_page(page)
        assert str(batch.value) == str(single.value)


def test_a_damaged_encoding_is_refused_with_decode_s_error() -> None:
    codec = make_codec()
    good = [codec.encode(v) for v in questions(20)]
    damaged = bytearray(good[4])
    damaged[-1] ^= 1  # in the shared tail: the checksum fails
    head_damaged = bytearray(good[5])
    head_damaged[12] ^= 1  # in the question: the checksum fails, the tail still matches
    reframed = frame(b"\x92\xc1" + good[0][8:][-len(msgspec.msgpack.encode(SCHEMA)) :])
    bad = [
        bytes(damaged),
        bytes(head_damaged),
        reframed,  # a valid checksum over a head that is no msgpack
        frame(b"\xc1"),
        b"nonsense",
        good[3][:-1],
        frame(msgspec.msgpack.encode([1, 2]))[:-1],
    ]
    for data in bad:
        with pytest.raises(CheckpointCorrupt) as single:
            codec.decode(data)
        for page in ([*good[:10], data, *good[10:]], [data, *good], [*good, data]):
            with pytest.raises(CheckpointCorrupt) as batch:
                codec.decode_page(page)
            assert str(batch.value) == str(single.value)


def test_an_encoding_over_the_size_limit_is_refused_among_alike_ones() -> None:
    values = questions(20)
    big = [{"question": "x" * 500}, SCHEMA]
    datas = [make_codec().encode(v) for v in [*values, big]]
    codec = make_codec(max_bytes=max(map(len, datas[:-1])))
    assert codec.decode_page(datas[:-1]) == values
    with pytest.raises(CheckpointCorrupt) as single:
        codec.decode(datas[-1])
    assert "over the limit" in str(single.value)
    for page in ([*datas[:10], datas[-1], *datas[10:-1]], [datas[-1], *datas[:-1]]):
        with pytest.raises(CheckpointCorrupt) as batch:
            codec.decode_page(page)
        assert str(batch.value) == str(single.value)


def test_a_head_that_spills_into_the_tail_is_not_split_there() -> None:
    # [["a", S], ...]: the first item's bytes end in S's, so a row [x] + S must not be read as
    # [x, S] unless it really is an array of two items.
    codec = make_codec()
    tail = msgspec.msgpack.encode(SCHEMA)
    first = codec.encode(["q", SCHEMA])
    one_item = frame(b"\x91" + tail)  # [SCHEMA]
    three = frame(b"\x93\xa1q" + tail + tail)  # ["q", SCHEMA, SCHEMA]
    assert codec.decode_page([first, one_item, three]) == [
        ["q", SCHEMA],
        [SCHEMA],
        ["q", SCHEMA, SCHEMA],
    ]
    # Same header, same tail, but the head holds two values: not an encoding decode accepts.
    two_heads = frame(b"\x92\xa1q\xa1r" + tail)
    with pytest.raises(CheckpointCorrupt) as single:
        codec.decode(two_heads)
    with pytest.raises(CheckpointCorrupt) as batch:
        codec.decode_page([first, two_heads])
    assert str(batch.value) == str(single.value)


@settings(max_examples=60, deadline=None, database=None)
@given(
    st.lists(_small_values, min_size=0, max_size=30),
    st.lists(_small_values, min_size=1, max_size=3),
)
def test_decode_page_agrees_with_decode(heads: list[Any], tail: list[Any]) -> None:
    codec = make_codec()
    agrees(codec, [codec.encode([head, *tail]) for head in heads])
