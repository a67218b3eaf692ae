"""The building blocks of the wire format: extension codes, leaf conversions, registry entries.

A value is turned into plain msgpack data (maps, arrays, str, int, float, bool, None, bin)
plus msgpack extension values (Ext), which user data can never contain: an `Ext` found in user
data is refused like any other unregistered type. So no user value can forge a tag, whatever
its keys or strings look like, and user dicts and lists need no escaping.

* A *leaf* tag is one Ext whose payload holds the value (UUID, datetime, big int, ...).
* A *container* tag is an array whose first item is a marker Ext with an empty payload; the
  items that follow are the contents (tuple, set, registered objects, and dicts with a key
  msgpack cannot keep as it is, such as a tuple).

A registered object is written with its field names (``OBJECT``), or, for a Struct that
declares the order of its fields (``__interlock_fields__``), by position (``RECORD``): its
values in that order, the fields at the end that hold their defaults left out. A class that
declares an order reads both forms, and its old names (``__interlock_aliases__``), so data
written before it declared them stays readable.
"""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import gc
import inspect
import operator
import struct
import sys
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

import msgspec
from msgspec.msgpack import Ext

from .._lazy import lazy_module

if TYPE_CHECKING:
    import dataclasses
else:  # imported by the first call that needs it, not by `import interlock`
    dataclasses = lazy_module("dataclasses", globals())

__all__ = [
    "CONTAINER_CODES",
    "DICT",
    "ENUM",
    "FROZENSET",
    "INT_MAX",
    "INT_MIN",
    "KEY_TYPES",
    "LEAF_ENCODERS",
    "MARKERS",
    "OBJECT",
    "PLAIN",
    "RECORD",
    "SET",
    "TUPLE",
    "Entry",
    "Kind",
    "Tag",
    "encode_bigint",
    "ext_hook",
    "is_plain_tree",
    "make_entry",
    "registrable_kind",
    "type_name",
    "wire_aliases",
]

# Container tag codes: `[Ext(code, b""), item, item, ...]`.
TUPLE: Final = 1
SET: Final = 2
FROZENSET: Final = 3
DICT: Final = 4  # [marker, k1, v1, k2, v2, ...]; only if some key is not in KEY_TYPES
OBJECT: Final = 5  # [marker, registered name, field1, value1, ...]
ENUM: Final = 6  # [marker, registered name, value]
RECORD: Final = 7  # [marker, registered name, value1, value2, ...]; see `Entry.positional`
CONTAINER_CODES: Final = frozenset({TUPLE, SET, FROZENSET, DICT, OBJECT, ENUM, RECORD})

# Leaf tag codes: `Ext(code, payload)`.
_BIGINT: Final = 16  # two's complement, big-endian
_BYTEARRAY: Final = 17
_DATETIME: Final = 18  # fields as below, then the UTC offset in microseconds if aware
_DATE: Final = 19
_TIME: Final = 20  # like datetime
_TIMEDELTA: Final = 21  # days, seconds, microseconds as big-endian int32
_UUID: Final = 22  # the 16 bytes
_DECIMAL: Final = 23  # str(), which is exact and keeps NaN, Infinity and the exponent

MARKERS: Final = {code: Ext(code, b"") for code in CONTAINER_CODES}

_TIMEDELTA_LAYOUT: Final = struct.Struct(">iii")
# year, month, day, hour, minute, second, microsecond, fold. Not isoformat: Python 3.11's
# fromisoformat drops the microseconds of a UTC offset.
_DATETIME_LAYOUT: Final = struct.Struct(">HBBBBBIB")
_DATE_LAYOUT: Final = struct.Struct(">HBB")
_TIME_LAYOUT: Final = struct.Struct(">BBBIB")
_OFFSET_LAYOUT: Final = struct.Struct(">q")
_MICROSECOND: Final = dt.timedelta(microseconds=1)

# Types msgspec writes and reads back unchanged (ints only within 64 bits).
PLAIN: Final[frozenset[type]] = frozenset({str, float, bool, type(None), bytes})
INT_MIN: Final = -(2**63)
INT_MAX: Final = 2**64 - 1
# Map keys msgpack keeps as they are; any other key makes the dict a tagged DICT.
KEY_TYPES: Final[frozenset[type]] = PLAIN | {int}

_CONTAINERS: Final[frozenset[type]] = frozenset({dict, list})
_TREE: Final[frozenset[type]] = KEY_TYPES | _CONTAINERS
# The census gives up past this many items. A tree that big is walked in Python instead, and a
# value that shares containers (a cycle, or a DAG) cannot make the census grow without bound.
_CENSUS_MAX_ITEMS: Final = 1 << 20

Kind: TypeAlias = Literal["dataclass", "pydantic", "struct", "enum"]


class Tag:
    """A container marker as the decoder sees it, before the container is rebuilt."""

    __slots__ = ("code",)

    def __init__(self, code: int) -> None:
        self.code = code

    def __repr__(self) -> str:
        return f"<Tag {self.code}>"


_TAGS: Final = {code: Tag(code) for code in CONTAINER_CODES}


def encode_bigint(value: int) -> Ext:
    """Encode an int outside msgpack's 64-bit range."""
    return Ext(_BIGINT, value.to_bytes(value.bit_length() // 8 + 1, "big", signed=True))


def _offset(value: dt.timedelta | None) -> bytes:
    return b"" if value is None else _OFFSET_LAYOUT.pack(value // _MICROSECOND)


def _encode_datetime(value: dt.datetime) -> Ext:
    fields = _DATETIME_LAYOUT.pack(
        value.year,
        value.month,
        value.day,
        value.hour,
        value.minute,
        value.second,
        value.microsecond,
        value.fold,
    )
    return Ext(_DATETIME, fields + _offset(value.utcoffset()))


def _encode_time(value: dt.time) -> Ext:
    fields = _TIME_LAYOUT.pack(
        value.hour, value.minute, value.second, value.microsecond, value.fold
    )
    return Ext(_TIME, fields + _offset(value.utcoffset()))


def _encode_timedelta(value: dt.timedelta) -> Ext:
    return Ext(_TIMEDELTA, _TIMEDELTA_LAYOUT.pack(value.days, value.seconds, value.microseconds))


# Exact type -> leaf encoder. Dispatch is on `type(v)`, so subclasses are not leaves.
LEAF_ENCODERS: Final[dict[type, Callable[[Any], Ext]]] = {
    bytearray: lambda v: Ext(_BYTEARRAY, v),
    dt.datetime: _encode_datetime,
    dt.date: lambda v: Ext(_DATE, _DATE_LAYOUT.pack(v.year, v.month, v.day)),
    dt.time: _encode_time,
    dt.timedelta: _encode_timedelta,
    uuid.UUID: lambda v: Ext(_UUID, v.bytes),
    decimal.Decimal: lambda v: Ext(_DECIMAL, str(v).encode()),
}


def _timezone(data: memoryview, start: int) -> dt.timezone | None:
    if len(data) == start:
        return None
    if len(data) != start + _OFFSET_LAYOUT.size:
        raise ValueError(f"a date or time payload has {len(data)} bytes")
    (micros,) = _OFFSET_LAYOUT.unpack_from(data, start)
    return dt.timezone(dt.timedelta(microseconds=micros))


def _decode_datetime(data: memoryview) -> dt.datetime:
    year, month, day, hour, minute, second, micro, fold = _DATETIME_LAYOUT.unpack_from(data)
    tz = _timezone(data, _DATETIME_LAYOUT.size)
    return dt.datetime(year, month, day, hour, minute, second, micro, tz, fold=fold)


def _decode_time(data: memoryview) -> dt.time:
    hour, minute, second, micro, fold = _TIME_LAYOUT.unpack_from(data)
    tz = _timezone(data, _TIME_LAYOUT.size)
    return dt.time(hour, minute, second, micro, tz, fold=fold)


def _decode_timedelta(data: memoryview) -> dt.timedelta:
    days, seconds, micros = _TIMEDELTA_LAYOUT.unpack(data)
    return dt.timedelta(days=days, seconds=seconds, microseconds=micros)


_LEAF_DECODERS: Final[dict[int, Callable[[memoryview], object]]] = {
    _BIGINT: lambda d: int.from_bytes(d, "big", signed=True),
    _BYTEARRAY: bytearray,
    _DATETIME: _decode_datetime,
    _DATE: lambda d: dt.date(*_DATE_LAYOUT.unpack(d)),
    _TIME: _decode_time,
    _TIMEDELTA: _decode_timedelta,
    _UUID: lambda d: uuid.UUID(bytes=bytes(d)),
    _DECIMAL: lambda d: decimal.Decimal(str(d, "ascii")),
}


def ext_hook(code: int, data: memoryview) -> object:
    """Turn one msgpack extension value into a leaf value or a container marker.

    Raises:
        ValueError: The code is unknown or a marker carries a payload.
    """
    decode = _LEAF_DECODERS.get(code)
    if decode is not None:
        return decode(data)
    tag = _TAGS.get(code)
    if tag is None:
        raise ValueError(f"unknown extension type {code}")
    if len(data):
        raise ValueError(f"container marker {code} carries a payload")
    return tag


def is_plain_tree(container: list[Any] | dict[Any, Any], levels: int) -> bool:
    """Say, at C speed, whether a list or dict holds only plain data nested at most `levels` deep.

    Plain data is dicts, lists, str, int, float, bool, None and bytes: what msgspec writes and
    reads back unchanged, given that ints fit in 64 bits (the caller must make sure of that).
    The census goes one nesting level at a time: `gc.get_referents` lists the items of every
    list and dict of a level (and the keys of dicts with a non-str key) in C, and the scalars
    have no referents, so the loop below runs once per level, not once per item.
    """
    if not _CENSUS_WORKS:
        return False
    level: list[Any] = [container]
    budget = _CENSUS_MAX_ITEMS
    while True:
        budget -= len(level)
        if budget < 0:
            return False
        kinds = set(map(type, level))
        if not kinds <= _TREE:
            return False
        if kinds.isdisjoint(_CONTAINERS):
            return True
        if levels <= 0:
            return False
        levels -= 1
        level = gc.get_referents(*level)


def copy_tree(container: Any) -> Any:
    """Copy a plain tree's lists and dicts, sharing its leaves (all immutable).

    Only for a container `is_plain_tree` accepted: what it holds is then lists, dicts and
    immutable scalars, nested boundedly deep. A container met twice is copied twice, as a
    round trip through msgpack would.
    """
    if type(container) is dict:
        return {k: copy_tree(v) if type(v) in _CONTAINERS else v for k, v in container.items()}
    if _CONTAINERS.isdisjoint(map(type, gc.get_referents(*container))):
        # Its items hold no containers (a chat's messages, say): one census of them in C,
        # then each one copied in C, not item by item (about 3× faster for 600 messages).
        return [v.copy() if type(v) in _CONTAINERS else v for v in container]
    return [copy_tree(v) if type(v) in _CONTAINERS else v for v in container]


def _census_works() -> bool:
    # The census relies on CPython's traversal of lists and dicts reporting every item (and
    # every key of a dict with a non-str key). Check once; without it, values are walked in
    # Python, which is slower but just as correct.
    found = gc.get_referents([1, "s", None], {"k": 2.5, 3: b"x"})
    expected = [1, "s", None, 2.5, "k", b"x", 3]
    return sys.implementation.name == "cpython" and sorted(map(repr, found)) == sorted(
        map(repr, expected)
    )


_CENSUS_WORKS: Final = _census_works()


def type_name(cls: type) -> str:
    """Return the name of a class for people: ``module.QualName``."""
    return f"{cls.__module__}.{cls.__qualname__}"


def wire_name(cls: type) -> str:
    """Return the default registry name of a class: the ``__interlock_name__`` it sets itself
    (not one it inherits), else ``module.QualName``."""
    own = cls.__dict__.get("__interlock_name__")
    return own if isinstance(own, str) and own else type_name(cls)


def wire_aliases(cls: type) -> tuple[str, ...]:
    """Return the other names data may call a class by (``__interlock_aliases__``, set on the
    class itself): the names it was written under before it took its current one.

    Raises:
        TypeError: ``__interlock_aliases__`` is not a tuple of non-empty strs.
    """
    aliases = cls.__dict__.get("__interlock_aliases__", ())
    if not isinstance(aliases, tuple) or not all(isinstance(a, str) and a for a in aliases):
        raise TypeError(
            f"{type_name(cls)}.__interlock_aliases__ must be a tuple of non-empty strs (the "
            f"names the class was stored under before), not {aliases!r}"
        )
    return aliases


def registrable_kind(cls: type) -> Kind | None:
    """Say which kind of registrable class `cls` is, or None if it cannot be registered."""
    if issubclass(cls, enum.Enum):
        return "enum"
    if issubclass(cls, msgspec.Struct):
        return "struct"
    # A class can only be a pydantic model if pydantic was imported: never import it here.
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and issubclass(cls, pydantic.BaseModel):
        return "pydantic"
    if dataclasses.is_dataclass(cls):
        return "dataclass"
    return None


class Entry(msgspec.Struct, frozen=True):
    """How the codec takes apart and rebuilds one registered class."""

    cls: type
    """The registered class."""
    name: str
    """The name written on the wire."""
    kind: Kind
    """What sort of class it is."""
    fields: tuple[str, ...]
    """The fields written, in order; empty for enums."""
    values: Callable[[Any], tuple[Any, ...]]
    """Read the values of `fields` from an instance."""
    extra: Callable[[Any], dict[str, Any] | None] | None
    """Read the extra fields of a pydantic model that allows them."""
    build: Callable[[Any], Any]
    """Construct an instance: from a dict of fields, or from the value for an enum."""
    defaults: tuple[Any, ...] | None = None
    """For a Struct declared with ``omit_defaults=True``: each field's default (`NO_DEFAULT`
    for a required one). A field holding its default is not written; reading it back takes the
    default, as msgspec itself does for such a Struct."""
    positional: bool = False
    """Written by position (``RECORD``), `fields` in the order the class declares in
    ``__interlock_fields__``: a field is only ever added at the end of that order, so data
    written before it was added reads with the fields it has."""


NO_DEFAULT: Final = object()
"""Marks a field without a default in `Entry.defaults`."""
_OMITTABLE = (type(None), bool, int, float, str, bytes, tuple, list, dict, frozenset, set)


def struct_defaults(cls: Any, order: tuple[str, ...] | None = None) -> tuple[Any, ...] | None:
    """The defaults of a Struct declared ``omit_defaults=True``, field by field (in ``order``
    if given; a positional Struct always has them); else None."""
    if order is None and not getattr(cls.__struct_config__, "omit_defaults", False):
        return None
    infos = {info.name: info for info in msgspec.structs.fields(cls)}
    out: list[Any] = []
    for info in (infos[name] for name in order) if order is not None else infos.values():
        if info.default is not msgspec.NODEFAULT:
            default = info.default
        elif info.default_factory is not msgspec.NODEFAULT:
            default = info.default_factory()
        else:
            default = NO_DEFAULT
        if default is not NO_DEFAULT and type(default) not in _OMITTABLE:
            default = NO_DEFAULT  # compared only when it is plain data
        out.append(default)
    return tuple(out)


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    # attrgetter reads many attributes in C, but returns a bare value for a single name.
    if not names:
        return lambda _obj: ()
    if len(names) == 1:
        only = names[0]
        return lambda obj: (getattr(obj, only),)
    getter: Callable[[Any], tuple[Any, ...]] = operator.attrgetter(*names)
    return getter


def _pydantic_builder(cls: Any) -> Callable[[dict[str, Any]], Any]:
    validate = cls.model_validate
    # Fields travel under their Python names; pydantic >= 2.11 can validate by name even when
    # a field has an alias. Older versions validate by alias, which works for alias-free models.
    params = inspect.signature(validate).parameters
    if "by_name" in params and "by_alias" in params:
        return lambda kw: validate(kw, by_alias=False, by_name=True)
    return lambda kw: validate(kw)


def _pydantic_extra(obj: Any) -> dict[str, Any] | None:
    extra: dict[str, Any] | None = obj.__pydantic_extra__
    return extra


def make_entry(cls: type, name: str) -> Entry:
    """Describe how to encode and rebuild `cls`.

    Raises:
        TypeError: `cls` is not a dataclass, pydantic model, msgspec Struct or Enum.
    """
    kind = registrable_kind(cls)
    fields: tuple[str, ...]
    extra = None
    if kind == "enum":
        return Entry(
            cls=cls, name=name, kind=kind, fields=(), values=_getter(()), extra=None, build=cls
        )
    order = None
    if kind == "struct":
        fields = tuple(cls.__struct_fields__)  # type: ignore[attr-defined]
        order = _declared_order(cls, fields)
        if order is not None:
            fields = order
        build: Callable[[Any], Any] = lambda kw: cls(**kw)  # noqa: E731
    elif kind == "pydantic":
        fields = tuple(cls.model_fields)  # type: ignore[attr-defined]
        build = _pydantic_builder(cls)
        extra = _pydantic_extra
    elif kind == "dataclass":
        # Fields with init=False are computed by the class itself (usually in __post_init__).
        fields = tuple(f.name for f in dataclasses.fields(cls) if f.init)
        build = lambda kw: cls(**kw)  # noqa: E731
    else:
        raise TypeError(
            f"cannot register {type_name(cls)}: only dataclasses, pydantic models, "
            "msgspec Structs and Enum classes can be registered"
        )
    return Entry(
        cls=cls,
        name=name,
        kind=kind,
        fields=fields,
        values=_getter(fields),
        extra=extra,
        build=build,
        defaults=struct_defaults(cls, order) if kind == "struct" else None,
        positional=order is not None,
    )


def _declared_order(cls: type, fields: tuple[str, ...]) -> tuple[str, ...] | None:
    """The wire order a Struct declares in ``__interlock_fields__`` (None if it declares none).

    Raises:
        TypeError: The order does not name every field exactly once.
    """
    order = cls.__dict__.get("__interlock_fields__")
    if order is None:
        return None
    if not isinstance(order, tuple) or len(set(order)) != len(order) or set(order) != set(fields):
        missing = sorted(set(fields) - set(order)) if isinstance(order, tuple) else []
        hint = f" (missing: {', '.join(missing)})" if missing else ""
        raise TypeError(
            f"{type_name(cls)}.__interlock_fields__ must name each of its fields once{hint}, "
            f"not {order!r}: it is the order values are stored in, so add a new field at its "
            "end and never reorder or remove one"
        )
    return order
