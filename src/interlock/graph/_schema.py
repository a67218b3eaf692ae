"""State schemas: TypedDict, dataclass or pydantic model classes, read once at graph build time."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .._errors import GraphDefinitionError, InvalidUpdate
from ._channels import (
    MISSING,
    AppendChannel,
    Channel,
    LastValue,
    Reducer,
    ReducerChannel,
    append,
)

__all__ = ["FieldSpec", "StateSchema"]

SchemaKind = Literal["typeddict", "dataclass", "pydantic", "dict"]


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One state key: its annotation and how writes to it merge."""

    name: str
    annotation: Any
    reducer: Reducer | Callable[[Any, Any], Any] | None

    def new_channel(self) -> Channel:
        """Create an empty channel for this key."""
        if self.reducer is None:
            return LastValue(self.name)
        if self.reducer is append:
            return AppendChannel(self.name)
        return ReducerChannel(self.name, self.reducer)

    def describe(self) -> str:
        """Stable text for the graph fingerprint."""
        if self.reducer is None:
            return f"{self.name}:last"
        name = getattr(self.reducer, "name", None) or getattr(
            self.reducer, "__qualname__", type(self.reducer).__name__
        )
        return f"{self.name}:{name}"


def _reducer_of(annotation: Any) -> Reducer | Callable[[Any, Any], Any] | None:
    if typing.get_origin(annotation) is typing.Annotated:
        for meta in reversed(annotation.__metadata__):
            if isinstance(meta, Reducer) or callable(meta):
                return meta  # type: ignore[no-any-return]
    return None


def _hints(cls: type[Any], namespace: Mapping[str, Any] | None) -> dict[str, Any]:
    """Resolve annotations, also against the namespace the graph was built in.

    With ``from __future__ import annotations`` a schema class defined inside a function (or in
    exec'd code) has string annotations naming things only that scope knows.
    """
    try:
        return typing.get_type_hints(cls, localns=dict(namespace or {}), include_extras=True)
    except NameError as exc:
        raise GraphDefinitionError(
            f"cannot resolve the annotations of state schema {cls.__name__}: {exc}; define the "
            "names it uses at module level"
        ) from exc


class StateSchema:
    """The keys of a graph's state and how to build the value a node receives."""

    __slots__ = ("cls", "fields", "kind", "names")

    def __init__(self, cls: type[Any], *, namespace: Mapping[str, Any] | None = None) -> None:
        self.cls = cls
        self.kind: SchemaKind
        if isinstance(cls, type) and typing.is_typeddict(cls):
            self.kind = "typeddict"
            hints = _hints(cls, namespace)
        elif dataclasses.is_dataclass(cls):
            self.kind = "dataclass"
            hints = _hints(cls, namespace)
            hints = {f.name: hints[f.name] for f in dataclasses.fields(cls)}
        elif hasattr(cls, "model_fields") and hasattr(cls, "model_construct"):
            self.kind = "pydantic"
            hints = _hints(cls, namespace)
            hints = {name: hints.get(name, Any) for name in cls.model_fields}
        else:
            raise GraphDefinitionError(
                f"state schema must be a TypedDict, a dataclass or a pydantic model, got {cls!r}"
            )
        self.fields: dict[str, FieldSpec] = {
            name: FieldSpec(name, ann, _reducer_of(ann)) for name, ann in hints.items()
        }
        self.names = frozenset(self.fields)
        if not self.fields:
            raise GraphDefinitionError(f"state schema {cls.__name__} has no fields")

    def new_channels(self) -> dict[str, Channel]:
        """Create one empty channel per key, in declaration order."""
        return {name: spec.new_channel() for name, spec in self.fields.items()}

    def describe(self) -> str:
        """Stable text for the graph fingerprint."""
        return ",".join(spec.describe() for spec in self.fields.values())

    def values_of(self, obj: Any) -> dict[str, Any]:
        """Turn an input or update (dict, dataclass or model instance) into a key → value dict."""
        if obj is None:
            return {}
        if isinstance(obj, Mapping):
            return dict(obj)
        # The kind first: a TypedDict class refuses isinstance checks.
        if self.kind == "dataclass" and isinstance(obj, self.cls):
            return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        if self.kind == "pydantic" and isinstance(obj, self.cls):
            return {name: getattr(obj, name) for name in obj.model_fields_set}
        raise InvalidUpdate(
            f"expected a dict of state keys for {self.cls.__name__}, got {type(obj).__name__}"
        )

    def view(self, channels: Mapping[str, Channel]) -> Any:
        """Build the state value nodes receive, without copying channel values."""
        return self.view_of({k: c.value for k, c in channels.items() if c.value is not MISSING})

    def view_of(self, values: dict[str, Any]) -> Any:
        """Build the state value from a key → value dict."""
        if self.kind == "typeddict":
            return values
        if self.kind == "dataclass":
            try:
                return self.cls(**values)
            except TypeError as exc:
                missing = [k for k in self.fields if k not in values]
                raise InvalidUpdate(
                    f"cannot build {self.cls.__name__} from the state: {exc}; keys without a value "
                    f"yet: {missing}. Give them defaults or pass them in the input"
                ) from exc
        return self.cls.model_construct(**values)
