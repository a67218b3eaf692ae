"""State channels: one per state key, each knowing how writes merge and what changed.

A channel tracks what changed since the last checkpoint so a checkpoint stores a delta, not the
whole state: an append channel reports only the items added since, other channels their new
value when they changed and nothing otherwise. Nothing here copies a whole value per step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from .._errors import InvalidUpdate

__all__ = [
    "MISSING",
    "AppendChannel",
    "Channel",
    "LastValue",
    "Reducer",
    "ReducerChannel",
    "append",
    "merge",
]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Final = _Missing()
"""Marks a channel that has never been written."""


class Reducer:
    """A named merge rule for one state key, used as ``Annotated[list[X], append]``.

    Args:
        fn: ``fn(current, update) -> new``.
        name: Shown in error messages and in the graph fingerprint.
        initial: Factory for the value before the first write (None: the first write is taken).
    """

    __slots__ = ("fn", "initial", "name")

    def __init__(
        self,
        fn: Callable[[Any, Any], Any],
        *,
        name: str,
        initial: Callable[[], Any] | None = None,
    ) -> None:
        self.fn = fn
        self.name = name
        self.initial = initial

    def __call__(self, current: Any, update: Any) -> Any:
        return self.fn(current, update)

    def __repr__(self) -> str:
        return f"<Reducer {self.name}>"


def _append(current: list[Any], update: Any) -> list[Any]:
    if isinstance(update, list | tuple):
        current.extend(update)
    else:
        current.append(update)
    return current


def _merge(current: dict[Any, Any], update: Any) -> dict[Any, Any]:
    if not isinstance(update, dict):
        raise InvalidUpdate(
            f"merge expects a dict update, got {type(update).__name__}; return {{key: value}}"
        )
    return {**current, **update}


append: Final = Reducer(_append, name="append", initial=list)
"""Append reducer: a list/tuple update extends the list, any other value is appended as one item.

Checkpoints store only the appended items (plus periodic snapshots).
"""

merge: Final = Reducer(_merge, name="merge", initial=dict)
"""Merge reducer: a dict update is merged into the current dict (shallow, update wins)."""


class Channel:
    """Base class: holds one state key's value and its change since the last checkpoint."""

    __slots__ = ("dirty", "key", "value")

    kind: str = "base"

    def __init__(self, key: str) -> None:
        self.key = key
        self.value: Any = MISSING
        self.dirty = False

    def update(self, writes: Sequence[tuple[str, Any]]) -> None:
        """Apply one superstep's writes ``[(writer, value), ...]`` in order."""
        raise NotImplementedError

    def delta(self) -> tuple[str, Any] | None:
        """Return the change since `mark` as ``(op, payload)``, or None when unchanged."""
        return ("set", self.value) if self.dirty else None

    def full(self) -> tuple[str, Any] | None:
        """Return the whole value as a delta that rebuilds it from nothing."""
        return None if self.value is MISSING else ("set", self.value)

    def mark(self) -> None:
        """Forget changes: they are now in a checkpoint."""
        self.dirty = False

    def apply(self, op: str, payload: Any) -> None:
        """Apply a stored delta (when rebuilding state from checkpoints)."""
        if op == "set":
            self.value = payload
        elif op == "del":
            self.value = MISSING
        else:
            raise ValueError(f"channel {self.key!r} cannot apply {op!r}")

    def set(self, value: Any) -> None:
        """Overwrite the value (input, `update_state` without reducers)."""
        self.value = value
        self.dirty = True


class LastValue(Channel):
    """A key without reducer: last write wins; two writes in one step are an error."""

    __slots__ = ()
    kind = "last"

    def update(self, writes: Sequence[tuple[str, Any]]) -> None:
        if len(writes) > 1:
            writers = ", ".join(repr(w) for w, _ in writes)
            raise InvalidUpdate(
                f"state key {self.key!r} was written by {len(writes)} tasks in the same step "
                f"({writers}); give it a reducer, e.g. Annotated[list[...], append]"
            )
        self.value = writes[0][1]
        self.dirty = True


class ReducerChannel(Channel):
    """A key merged by a reducer function; the checkpoint stores its new value when it changes."""

    __slots__ = ("reducer",)
    kind = "reducer"

    def __init__(self, key: str, reducer: Reducer | Callable[[Any, Any], Any]) -> None:
        super().__init__(key)
        self.reducer = reducer
        if isinstance(reducer, Reducer) and reducer.initial is not None:
            self.value = reducer.initial()

    def update(self, writes: Sequence[tuple[str, Any]]) -> None:
        value = self.value
        for writer, w in writes:
            try:
                value = w if value is MISSING else self.reducer(value, w)
            except InvalidUpdate:
                raise
            except Exception as exc:
                raise InvalidUpdate(
                    f"reducer of state key {self.key!r} failed on the update from {writer!r}: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
        self.value = value
        self.dirty = True


class AppendChannel(Channel):
    """A list key with the `append` reducer; checkpoints store only the new items.

    A snapshot of a long list need not copy it: items already held by earlier snapshots of the
    thread are *shared*, named by ``(seq, count)`` references to those snapshots (``shared``),
    and a snapshot stores only the items after them plus the references (`segments`). Replacing
    the list (`set`) drops the references.
    """

    __slots__ = ("marked_len", "reset", "shared", "shared_len")
    kind = "append"

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.value = []
        self.marked_len = 0
        self.reset = False  # the list was replaced, not extended, since the mark
        self.shared: list[tuple[int, int]] = []
        """``(seq, count)``: the first items are those stored by these snapshots, in order."""
        self.shared_len = 0
        """How many items ``shared`` stands for (the sum of its counts)."""

    def update(self, writes: Sequence[tuple[str, Any]]) -> None:
        items: list[Any] = self.value
        for _, w in writes:
            _append(items, w)
        self.dirty = True

    def set(self, value: Any) -> None:
        if not isinstance(value, list | tuple):
            raise InvalidUpdate(f"state key {self.key!r} holds a list; got {type(value).__name__}")
        self.value = list(value)
        self.reset = True
        self.dirty = True
        self.unshare()

    def delta(self) -> tuple[str, Any] | None:
        if not self.dirty:
            return None
        if self.reset:
            return ("set", self.value)
        return ("ext", self.value[self.marked_len :])

    def full(self) -> tuple[str, Any] | None:
        return ("set", self.value)

    def segments(self) -> tuple[str, Any]:
        """The whole value as a snapshot stores it: ``("seg", [refs, items])`` when earlier
        snapshots hold its first items (``refs`` names them, ``items`` are the rest), else
        ``("set", value)``."""
        if not self.shared:
            return ("set", self.value)
        refs = [[seq, count] for seq, count in self.shared]
        return ("seg", [refs, self.value[self.shared_len :]])

    def stored_at(self, seq: int, *, segmented: bool) -> None:
        """The snapshot ``seq`` now holds this value: as `segments` put it when ``segmented``,
        else whole. Later snapshots refer to it for these items."""
        if not segmented:
            n = len(self.value)
            self.shared = [(seq, n)] if n else []
            self.shared_len = n
            return
        n = len(self.value) - self.shared_len
        if n > 0:
            self.shared.append((seq, n))
            self.shared_len += n

    def unshare(self) -> None:
        """Forget the shared references (the list no longer starts with those items)."""
        self.shared = []
        self.shared_len = 0

    def load_shared(self, items: list[Any], shared: list[tuple[int, int]]) -> None:
        """Take a value rebuilt from a snapshot's references (see `segments`)."""
        self.value = items
        self.shared = shared
        self.shared_len = sum(count for _, count in shared)
        self.marked_len = len(items)

    def mark(self) -> None:
        self.dirty = False
        self.reset = False
        self.marked_len = len(self.value)

    def apply(self, op: str, payload: Any) -> None:
        if op == "ext":
            self.value.extend(payload)
        elif op == "set":
            self.value = list(payload)
            self.unshare()
        else:
            super().apply(op, payload)
            self.unshare()
        self.marked_len = len(self.value)
