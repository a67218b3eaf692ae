"""Turning a value into msgpack-ready data, and explaining why a value cannot be encoded."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Final

from msgspec.msgpack import Ext

from .._errors import PayloadTooLarge, SerializationError, UnregisteredType
from .._lazy import lazy_module
from ._types import (
    DICT,
    ENUM,
    FROZENSET,
    INT_MAX,
    INT_MIN,
    LEAF_ENCODERS,
    MARKERS,
    NO_DEFAULT,
    OBJECT,
    PLAIN,
    RECORD,
    SET,
    TUPLE,
    Entry,
    encode_bigint,
    is_plain_tree,
    registrable_kind,
    type_name,
)

if TYPE_CHECKING:
    import json
else:  # imported by the first call that needs it, not by `import interlock`
    json = lazy_module("json", globals())

__all__ = ["Walker"]

_PLAIN_OR_INT: Final = PLAIN | {int}

# Below this many items a Python loop beats the C-level census of `is_plain_tree`.
_CENSUS_MIN_ITEMS: Final = 16

_TUPLE_MARK: Final = MARKERS[TUPLE]
_SET_MARK: Final = MARKERS[SET]
_FROZENSET_MARK: Final = MARKERS[FROZENSET]
_DICT_MARK: Final = MARKERS[DICT]
_OBJECT_MARK: Final = MARKERS[OBJECT]
_ENUM_MARK: Final = MARKERS[ENUM]
_RECORD_MARK: Final = MARKERS[RECORD]

_Step = Callable[[Any, int], Any]


class Unsupported(Exception):
    """A value of a type the codec cannot encode; the path is worked out afterwards."""


class TooDeep(Exception):
    """The value nests deeper than max_depth; the path is worked out afterwards."""


def _same(value: Any, _depth: int) -> Any:
    return value


def _int(value: int, _depth: int) -> Any:
    return value if INT_MIN <= value <= INT_MAX else encode_bigint(value)


def _leaf(encode: Callable[[Any], Ext]) -> _Step:
    return lambda value, _depth: encode(value)


def key_path(path: str, key: str) -> str:
    """Extend `path` by a str key: ``.key`` for identifiers, else ``["key"]``."""
    if key.isidentifier():
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


class Walker:
    """Maps a value to msgpack-ready data by `type(v)`, copying only containers that change.

    Two walkers serve each codec. The trusting one assumes every int fits in 64 bits, which lets
    it skip whole plain subtrees at C speed; msgspec raises OverflowError when that assumption is
    wrong, and the codec then walks again with the checking one.

    Args:
        by_cls: The codec's registry, shared and kept up to date by the codec.
        max_depth: The deepest nesting of containers allowed.
        trust_ints: Whether to assume that every int fits in 64 bits.
    """

    __slots__ = ("_by_cls", "_census", "_max_depth", "_plain", "_steps")

    def __init__(self, by_cls: dict[type, Entry], max_depth: int, *, trust_ints: bool) -> None:
        self._by_cls = by_cls
        self._max_depth = max_depth
        self._census = trust_ints
        self._plain = _PLAIN_OR_INT if trust_ints else PLAIN
        # Invariant: the keys of _steps are exactly the types the codec accepts.
        self._steps: dict[type, _Step] = {
            dict: self._dict,
            list: self._list,
            tuple: self._tuple,
            set: self._set,
            frozenset: self._frozenset,
            int: _same if trust_ints else _int,
        }
        for plain in PLAIN:
            self._steps[plain] = _same
        for leaf_type, leaf_encoder in LEAF_ENCODERS.items():
            self._steps[leaf_type] = _leaf(leaf_encoder)
        for entry in by_cls.values():
            self.add(entry)

    def supports(self, cls: type) -> bool:
        """Say whether values of exactly `cls` can be encoded."""
        return cls in self._steps

    def add(self, entry: Entry) -> None:
        """Start accepting instances of a newly registered class."""
        if entry.kind == "enum":
            self._steps[entry.cls] = self._enum_step(entry)
        else:
            self._steps[entry.cls] = self._object_step(entry)

    def walk(self, value: object) -> Any:
        """Return msgpack-ready data for `value`.

        Raises:
            Unsupported: Somewhere is a value of a type the codec does not accept.
            TooDeep: The value nests deeper than max_depth.
        """
        step = self._steps.get(type(value))
        if step is None:
            raise Unsupported
        return step(value, 0)

    def any(self, value: Any, depth: int) -> Any:
        """`walk` for a value found ``depth`` levels deep."""
        step = self._steps.get(type(value))
        if step is None:
            raise Unsupported
        return step(value, depth)

    def _list(self, value: list[Any], depth: int) -> list[Any]:
        if depth >= self._max_depth:
            raise TooDeep
        if (
            self._census
            and len(value) >= _CENSUS_MIN_ITEMS
            and is_plain_tree(value, self._max_depth - depth)
        ):
            return value
        plain, steps, inner = self._plain, self._steps, depth + 1
        out: list[Any] | None = None
        for i, item in enumerate(value):
            kind = type(item)
            if kind in plain:
                continue
            step = steps.get(kind)
            if step is None:
                raise Unsupported
            new = step(item, inner)
            if new is not item:
                if out is None:
                    out = value.copy()
                out[i] = new
        return value if out is None else out

    def _dict(self, value: dict[Any, Any], depth: int) -> Any:
        if depth >= self._max_depth:
            raise TooDeep
        if (
            self._census
            and len(value) >= _CENSUS_MIN_ITEMS
            and is_plain_tree(value, self._max_depth - depth)
        ):
            return value
        plain, steps, inner = self._plain, self._steps, depth + 1
        out: dict[Any, Any] | None = None
        for key, item in value.items():
            # msgpack keeps str, int, float, bool, None and bytes keys as they are.
            if type(key) is not str and not (
                type(key) in plain or (type(key) is int and INT_MIN <= key <= INT_MAX)
            ):
                return self._keyed_dict(value, depth)
            kind = type(item)
            if kind in plain:
                continue
            step = steps.get(kind)
            if step is None:
                raise Unsupported
            new = step(item, inner)
            if new is not item:
                if out is None:
                    out = value.copy()
                out[key] = new
        return value if out is None else out

    def _keyed_dict(self, value: dict[Any, Any], depth: int) -> list[Any]:
        inner = depth + 1
        out: list[Any] = [_DICT_MARK]
        for key, item in value.items():
            out.append(self.any(key, inner))
            out.append(self.any(item, inner))
        return out

    def _items(self, mark: Ext, items: Iterable[Any], depth: int) -> list[Any]:
        if depth >= self._max_depth:
            raise TooDeep
        plain, step, inner = self._plain, self.any, depth + 1
        return [mark, *[item if type(item) in plain else step(item, inner) for item in items]]

    def _tuple(self, value: tuple[Any, ...], depth: int) -> list[Any]:
        return self._items(_TUPLE_MARK, value, depth)

    def _set(self, value: set[Any], depth: int) -> list[Any]:
        return self._items(_SET_MARK, value, depth)

    def _frozenset(self, value: frozenset[Any], depth: int) -> list[Any]:
        return self._items(_FROZENSET_MARK, value, depth)

    def _object_step(self, entry: Entry) -> _Step:
        name, fields, values, extra = entry.name, entry.fields, entry.values, entry.extra
        if entry.positional:
            return self._record_step(entry)
        if entry.defaults is not None:
            return self._sparse_step(entry)

        def walk_object(value: Any, depth: int) -> list[Any]:
            if depth >= self._max_depth:
                raise TooDeep
            plain, step, inner = self._plain, self.any, depth + 1
            out: list[Any] = [_OBJECT_MARK, name]
            for field, item in zip(fields, values(value), strict=True):
                out.append(field)
                out.append(item if type(item) in plain else step(item, inner))
            more = None if extra is None else extra(value)
            if more:
                for field, item in more.items():
                    out.append(field)
                    out.append(step(item, inner))
            return out

        return walk_object

    def _sparse_step(self, entry: Entry) -> _Step:
        """Like `_object_step`, leaving out fields that hold their default."""
        name, fields, values, defaults = entry.name, entry.fields, entry.values, entry.defaults
        assert defaults is not None

        def walk_sparse(value: Any, depth: int) -> list[Any]:
            if depth >= self._max_depth:
                raise TooDeep
            plain, step, inner = self._plain, self.any, depth + 1
            out: list[Any] = [_OBJECT_MARK, name]
            for field, item, default in zip(fields, values(value), defaults, strict=True):
                if item is default or (
                    default is not NO_DEFAULT and type(item) is type(default) and item == default
                ):
                    continue
                out.append(field)
                out.append(item if type(item) in plain else step(item, inner))
            return out

        return walk_sparse

    def _record_step(self, entry: Entry) -> _Step:
        """Values by position, in the declared order; the trailing ones at their defaults
        left out (the reader takes the defaults for the fields it is not given)."""
        name, values, defaults = entry.name, entry.values, entry.defaults
        assert defaults is not None

        def walk_record(value: Any, depth: int) -> list[Any]:
            if depth >= self._max_depth:
                raise TooDeep
            plain, step, inner = self._plain, self.any, depth + 1
            out: list[Any] = [_RECORD_MARK, name]
            end = 2  # out[:end] is what must be written: up to the last non-default value
            for item, default in zip(values(value), defaults, strict=True):
                out.append(item if type(item) in plain else step(item, inner))
                if not (
                    item is default
                    or (
                        default is not NO_DEFAULT
                        and type(item) is type(default)
                        and item == default
                    )
                ):
                    end = len(out)
            del out[end:]
            return out

        return walk_record

    def _enum_step(self, entry: Entry) -> _Step:
        name = entry.name

        def walk_enum(value: Any, depth: int) -> list[Any]:
            if depth >= self._max_depth:
                raise TooDeep
            return [_ENUM_MARK, name, self.any(value.value, depth + 1)]

        return walk_enum

    # -- explaining a failure: only runs after the fast walk failed ---------------------------

    def explain(self, value: object, path: str) -> SerializationError:
        """Walk `value` again, tracking paths, and describe the first problem found."""
        try:
            found = self._find(value, path, 0)
        except RecursionError:
            found = None
        if found is not None:
            return found
        return PayloadTooLarge(
            f"{path}: the value nests too deeply to encode (is it cyclic?); "
            "flatten it or lower the nesting"
        )

    def _find(self, value: Any, path: str, depth: int) -> SerializationError | None:
        kind = type(value)
        if kind not in self._steps:
            return _unregistered(kind, path)
        children = self._children(value, path)
        if children is None:
            return None
        if depth >= self._max_depth:
            shown = path if len(path) <= 120 else f"{path[:60]}...{path[-40:]}"
            return PayloadTooLarge(
                f"{shown}: the value nests deeper than max_depth={self._max_depth} (is it "
                "cyclic?); flatten it or raise the limit with Codec(max_depth=...)"
            )
        for child_path, child in children:
            problem = self._find(child, child_path, depth + 1)
            if problem is not None:
                return problem
        return None

    def _children(self, value: Any, path: str) -> Iterator[tuple[str, Any]] | None:
        """Yield ``(path, child)`` for each child of a container; return None for a leaf."""
        kind = type(value)
        if kind is dict:
            if all(type(key) is str for key in value):
                return ((key_path(path, key), item) for key, item in value.items())
            return (
                pair
                for i, (key, item) in enumerate(value.items())
                for pair in ((f"{path}.keys()[{i}]", key), (f"{path}[{key!r}]", item))
            )
        if kind in (list, tuple, set, frozenset):
            return ((f"{path}[{i}]", item) for i, item in enumerate(value))
        entry = self._by_cls.get(kind)
        if entry is None:
            return None
        if entry.kind == "enum":
            return iter([(f"{path}.value", value.value)])
        pairs = list(zip(entry.fields, entry.values(value), strict=True))
        more = None if entry.extra is None else entry.extra(value)
        if more:
            pairs.extend(more.items())
        return ((key_path(path, field), item) for field, item in pairs)


def _unregistered(cls: type, path: str) -> UnregisteredType:
    name = type_name(cls)
    if registrable_kind(cls) is not None:
        hint = (
            f"pass it to Graph(..., types=[{cls.__name__}]) or call codec.register({cls.__name__})"
        )
    else:
        hint = (
            "only dataclasses, pydantic models, msgspec Structs and Enums can be registered; "
            "convert the value to one of those or to plain data"
        )
    return UnregisteredType(
        f"{path}: type {name} is not registered; {hint}", path=path, type_name=name
    )
