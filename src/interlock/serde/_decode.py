"""Checking a freshly parsed body and rebuilding its tagged parts, in place."""

from __future__ import annotations

from itertools import islice
from typing import Any, Final

from ._types import (
    DICT,
    ENUM,
    FROZENSET,
    KEY_TYPES,
    RECORD,
    SET,
    TUPLE,
    Entry,
    Tag,
    is_plain_tree,
)

__all__ = ["Corrupt", "Rebuilder"]

# Below this many items a Python loop beats the C-level census of `is_plain_tree`.
_CENSUS_MIN_ITEMS: Final = 16


class Corrupt(Exception):
    """Something in a decoded body is wrong; the codec turns it into CheckpointCorrupt."""


class Rebuilder:
    """Rebuilds tagged containers in a parsed body and enforces the depth limit.

    msgspec has already turned leaf tags into values (see `_types.ext_hook`) and container
    markers into `Tag` objects. This walk replaces each tagged array by the value it stands for,
    and refuses markers elsewhere, map keys msgpack would not produce from a valid encoding, and
    nesting deeper than max_depth, which msgspec cannot limit itself.

    Args:
        by_name: The codec's registry by wire name, shared and kept up to date by the codec.
        max_depth: The deepest nesting of containers allowed.
    """

    __slots__ = ("_by_name", "_max_depth")

    def __init__(self, by_name: dict[str, Entry], max_depth: int) -> None:
        self._by_name = by_name
        self._max_depth = max_depth

    def rebuild(self, value: Any) -> Any:
        """Return the value a parsed body stands for.

        Raises:
            Corrupt: The body is not something `encode` produces.
        """
        kind = type(value)
        if kind is list or kind is dict:
            return self._container(value, self._max_depth)
        if kind is Tag:
            raise Corrupt("a container marker stands on its own")
        return value

    def rebuild_each(self, values: list[Any], *, inside: int = 0) -> list[Any]:
        """Return ``[rebuild(v) for v in values]``, checking plain batches in one census.

        ``inside``: how many arrays each value sits in (its depth budget is that much less).

        Raises:
            Corrupt: One of the values is not something `encode` produces.
        """
        budget = self._max_depth - inside
        # The batch list adds one level of nesting above each value.
        if len(values) >= _CENSUS_MIN_ITEMS and is_plain_tree(values, budget + 1):
            return values
        if not inside:
            rebuild = self.rebuild
            return [rebuild(value) for value in values]
        item = self._item
        return [item(value, budget) for value in values]

    def _container(self, value: Any, budget: int) -> Any:
        if budget <= 0:
            raise Corrupt(f"the value nests deeper than max_depth={self._max_depth}")
        if len(value) >= _CENSUS_MIN_ITEMS and is_plain_tree(value, budget):
            return value
        inner = budget - 1
        if type(value) is list:
            if value and type(value[0]) is Tag:
                return self._untag(value, inner)
            for i, item in enumerate(value):
                kind = type(item)
                if kind is list or kind is dict:
                    new = self._container(item, inner)
                    if new is not item:
                        value[i] = new
                elif kind is Tag:
                    raise Corrupt("a container marker is not at the start of an array")
            return value
        for key, item in value.items():
            if type(key) is not str and type(key) not in KEY_TYPES:
                raise Corrupt(f"a map has a key of type {type(key).__name__}")
            kind = type(item)
            if kind is list or kind is dict:
                new = self._container(item, inner)
                if new is not item:
                    # Replacing the value of an existing key is safe while iterating.
                    value[key] = new
            elif kind is Tag:
                raise Corrupt("a container marker is not at the start of an array")
        return value

    def _item(self, item: Any, budget: int) -> Any:
        kind = type(item)
        if kind is list or kind is dict:
            return self._container(item, budget)
        if kind is Tag:
            raise Corrupt("a container marker is not at the start of an array")
        return item

    def _untag(self, value: list[Any], budget: int) -> Any:
        code: int = value[0].code
        step = self._item
        if code == TUPLE:
            return tuple([step(item, budget) for item in islice(value, 1, None)])
        if code == SET:
            return {step(item, budget) for item in islice(value, 1, None)}
        if code == FROZENSET:
            return frozenset([step(item, budget) for item in islice(value, 1, None)])
        if code == DICT:
            if len(value) % 2 != 1:
                raise Corrupt("a dict has a key without a value")
            keys = [step(item, budget) for item in islice(value, 1, None, 2)]
            items = [step(item, budget) for item in islice(value, 2, None, 2)]
            return dict(zip(keys, items, strict=True))
        entry = self._entry(value, code)
        if code == ENUM:
            if len(value) != 3:
                raise Corrupt(f"the enum {entry.name} has {len(value) - 2} values, not 1")
            return entry.build(step(value[2], budget))
        if code == RECORD:
            return self._record(entry, value, budget)
        if len(value) % 2 != 0:
            raise Corrupt(f"the object {entry.name} has a field without a value")
        fields: dict[str, Any] = {}
        for i in range(2, len(value), 2):
            field = value[i]
            if type(field) is not str:
                raise Corrupt(f"the object {entry.name} has a field name that is not a str")
            fields[field] = step(value[i + 1], budget)
        return entry.build(fields)

    def _record(self, entry: Entry, value: list[Any], budget: int) -> Any:
        """An object stored by position: its values in the order the class declares."""
        if not entry.positional:
            raise Corrupt(
                f"the object {entry.name} is stored by position, but its class declares no "
                "__interlock_fields__ order to read it with"
            )
        fields = entry.fields
        if len(value) - 2 > len(fields):
            raise Corrupt(
                f"the object {entry.name} has {len(value) - 2} values but its class has "
                f"{len(fields)} fields; it was written by a newer version of the class"
            )
        step = self._item
        return entry.build(
            {
                field: step(item, budget)
                for field, item in zip(fields, islice(value, 2, None), strict=False)
            }
        )

    def _entry(self, value: list[Any], code: int) -> Entry:
        name = value[1] if len(value) > 1 else None
        if type(name) is not str:
            raise Corrupt("a registered object has no type name")
        entry = self._by_name.get(name)
        if entry is None:
            raise Corrupt(
                f"type {name!r} is not registered with this codec; register the class "
                "(Graph(..., types=[...]) or codec.register(...)) before reading this data"
            )
        if (entry.kind == "enum") != (code == ENUM):
            raise Corrupt(f"type {name!r} is stored as the wrong kind of value")
        return entry
