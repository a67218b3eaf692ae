"""What changed between two states: `diff_values` and its `Change` records.

It works on plain JSON-like values (dicts, lists, strings, numbers, booleans, None), the form
a surface shows a state in: the approval server converts a state with its JSON conversion
first, then compares. The order of the changes is deterministic: a dict's keys in the new
value's order, then the keys only the old one has, in its order; a list's items by index.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import msgspec

__all__ = ["Change", "ChangeOp", "diff_values"]

ChangeOp = Literal["add", "remove", "change", "append"]
"""What happened at a path: a key added or removed, a value changed, a list extended."""


class Change(msgspec.Struct, frozen=True, kw_only=True):
    """One difference between two values, at a path into them.

    For ``append`` (a list that kept all its old items and got more), ``old`` is the old
    length and ``new`` the list of added items.
    """

    path: tuple[str | int, ...]
    """Keys and list indexes from the top (``("messages", 3, "content")``)."""
    op: ChangeOp
    """What happened there."""
    old: Any = None
    """The value before (None for ``add``; the old length for ``append``)."""
    new: Any = None
    """The value after (None for ``remove``; the added items for ``append``)."""


def diff_values(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    """The changes that turn ``old`` into ``new``, recursing into dicts and lists.

    Dicts are compared key by key; a list that extends the old one is one ``append``; lists
    of the same length are compared item by item; any other list change replaces the whole
    list (``change``).

    Example:
        >>> old = {"messages": ["hi"], "count": 1, "draft": "x"}
        >>> new = {"messages": ["hi", "hello"], "count": 2, "done": True}
        >>> for c in diff_values(old, new):
        ...     print(c.op, c.path, c.old, c.new)
        append ('messages',) 1 ['hello']
        change ('count',) 1 2
        add ('done',) None True
        remove ('draft',) x None
        >>> diff_values({"a": {"b": [1, 2]}}, {"a": {"b": [1, 3]}})
        [Change(path=('a', 'b', 1), op='change', old=2, new=3)]
        >>> diff_values({"a": 1}, {"a": 1})
        []
    """
    out: list[Change] = []
    _diff_maps(old, new, (), out)
    return out


def _diff_maps(
    old: Mapping[str, Any], new: Mapping[str, Any], path: tuple[str | int, ...], out: list[Change]
) -> None:
    for key, value in new.items():
        if key in old:
            _diff(old[key], value, (*path, key), out)
        else:
            out.append(Change(path=(*path, key), op="add", new=value))
    for key, value in old.items():
        if key not in new:
            out.append(Change(path=(*path, key), op="remove", old=value))


def _diff(old: Any, new: Any, path: tuple[str | int, ...], out: list[Change]) -> None:
    if old is new:
        return
    if type(old) is dict and type(new) is dict:
        _diff_maps(old, new, path, out)
    elif type(old) is list and type(new) is list:
        _diff_lists(old, new, path, out)
    elif type(old) is not type(new) or (old != new and not (old != old and new != new)):
        # The type too: JSON tells 1 from 1.0 and true from 1, where Python's == does not;
        # and NaN, unequal to itself, is no change.
        out.append(Change(path=path, op="change", old=old, new=new))


def _diff_lists(
    old: list[Any], new: list[Any], path: tuple[str | int, ...], out: list[Change]
) -> None:
    n = len(old)
    if len(new) > n and _same(old, new[:n]):
        out.append(Change(path=path, op="append", old=n, new=new[n:]))
    elif len(new) == n:
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            _diff(a, b, (*path, i), out)
    elif not _same(old, new):
        out.append(Change(path=path, op="change", old=old, new=new))


def _same(a: list[Any], b: list[Any]) -> bool:
    """Whether two lists hold equal items.

    Python's ``==``, which runs in C: a long chat's lists compare in microseconds. It takes
    ``1``, ``1.0`` and ``true`` for one another inside a list, which can only make a list
    that also changed such an item read as extended; scalars are told apart (`_diff`).
    """
    return a is b or a == b
