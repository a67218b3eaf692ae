"""State schemas: TypedDict, dataclass or pydantic model classes, read once at graph build time."""

from __future__ import annotations

import collections.abc
import re
import sys
import types
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec

from .._errors import GraphDefinitionError, InvalidStateEdit, InvalidUpdate
from .._lazy import lazy_module
from ._channels import (
    MISSING,
    AppendChannel,
    Channel,
    LastValue,
    Reducer,
    ReducerChannel,
    append,
)

if TYPE_CHECKING:
    import dataclasses
else:  # imported by the first call that needs it, not by `import interlock`
    dataclasses = lazy_module("dataclasses", globals())

__all__ = ["FieldSpec", "StateSchema"]

SchemaKind = Literal["typeddict", "dataclass", "pydantic", "dict"]


class FieldSpec(msgspec.Struct, frozen=True):
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

    def json_schema(self) -> dict[str, Any]:
        """The JSON Schema of the state: an object with one property per key.

        Each key's schema is its annotation's (reducers left out), as `msgspec.json.schema`
        describes it (pydantic's for a pydantic state); a union msgspec cannot describe at
        once is described member by member. A type neither can describe is ``{}`` with a
        description saying so: its values are kept as given. Shared types are in ``$defs``.

        >>> from typing import TypedDict
        >>> class S(TypedDict):
        ...     n: int
        >>> StateSchema(S).json_schema()["properties"]
        {'n': {'type': 'integer'}}
        """
        defs: dict[str, Any] = {}
        properties = {
            name: _describe(_plain(spec.annotation), defs, pydantic=self.kind == "pydantic")
            for name, spec in self.fields.items()
        }
        schema: dict[str, Any] = {
            "title": self.cls.__name__,
            "type": "object",
            "properties": properties,
            "additionalProperties": False,
        }
        if defs:
            schema["$defs"] = defs
        return schema

    def convert_edit(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Check ``values`` (key → whole new value) against the schema; return them typed.

        Each value is converted to its key's annotation (reducers left out): JSON objects
        become the TypedDicts, dataclasses, msgspec Structs or pydantic models it names
        (`msgspec.convert`, lax; pydantic's ``TypeAdapter`` for pydantic types). A type
        neither can check keeps the value as given.

        Raises:
            InvalidStateEdit: A key is not in the state, or a value does not fit; every
                problem found is listed, with its path (``/messages/3/role``).
        """
        if not isinstance(values, Mapping):
            raise InvalidStateEdit(
                [("", f"expected an object of state keys, got {type(values).__name__}")],
                schema=self.cls.__name__,
            )
        problems: list[tuple[str, str]] = []
        out: dict[str, Any] = {}
        for key, value in values.items():
            spec = self.fields.get(key) if isinstance(key, str) else None
            if spec is None:
                problems.append(
                    (f"/{key}", f"not a key of the state; its keys: {sorted(self.fields)}")
                )
                continue
            out[key] = _convert(
                value, _plain(spec.annotation), f"/{key}", problems, self.kind == "pydantic"
            )
        if problems:
            raise InvalidStateEdit(problems, schema=self.cls.__name__)
        return out

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


# -- checking and describing values of a key's type ------------------------------------------

_UNDESCRIBED: Final = "values of this key are not described (its type has no JSON Schema)"
_PATH_PART: Final = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")


def _plain(annotation: Any) -> Any:
    """The annotation without its ``Annotated`` metadata (the reducer)."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = annotation.__origin__
    return annotation


def _pointer(base: str, message: str) -> tuple[str, str]:
    """A msgspec validation message as ``(path, message)``: its ``$[1].role`` joins ``base``."""
    text, sep, where = message.rpartition(" - at `")
    if not sep:
        return base, message
    parts = [
        m.group(1) or ("*" if m.group(2) == "..." else m.group(2))
        for m in _PATH_PART.finditer(where.rstrip("`").removeprefix("$"))
    ]
    return base + "".join(f"/{p}" for p in parts), text


def _convert(
    value: Any, tp: Any, path: str, problems: list[tuple[str, str]], pydantic: bool
) -> Any:
    """``value`` as type ``tp``; what does not fit goes to ``problems`` (value kept)."""
    if pydantic:
        return _by_pydantic(value, tp, path, problems)
    try:
        return msgspec.convert(value, tp, strict=False)
    except msgspec.ValidationError as exc:
        problems.append(_pointer(path, str(exc)))
        return value
    except TypeError:
        pass  # msgspec cannot check this type as a whole: check its parts
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Union or origin is types.UnionType:
        return _convert_union(value, args, path, problems)
    if origin in (list, tuple, set, frozenset, collections.abc.Sequence) and args:
        if not isinstance(value, list | tuple):
            problems.append((path, f"Expected `array`, got `{type(value).__name__}`"))
            return value
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            if len(args) != len(value):
                problems.append((path, f"Expected an array of {len(args)} items"))
                return value
            return tuple(
                _convert(v, a, f"{path}/{i}", problems, False)
                for i, (v, a) in enumerate(zip(value, args, strict=True))
            )
        items = [_convert(v, args[0], f"{path}/{i}", problems, False) for i, v in enumerate(value)]
        return items if origin in (list, collections.abc.Sequence) else origin(items)
    if origin in (dict, collections.abc.Mapping) and len(args) == 2:
        if not isinstance(value, Mapping):
            problems.append((path, f"Expected `object`, got `{type(value).__name__}`"))
            return value
        return {k: _convert(v, args[1], f"{path}/{k}", problems, False) for k, v in value.items()}
    return _by_pydantic(value, tp, path, problems)


def _convert_union(
    value: Any, members: tuple[Any, ...], path: str, problems: list[tuple[str, str]]
) -> Any:
    """``value`` as one of ``members``: a Struct by its tag, else the first that fits."""
    if value is None and type(None) in members:
        return None
    for member in members:
        if isinstance(member, type) and isinstance(value, member):
            return value
    if isinstance(value, Mapping):
        for member in members:
            config = getattr(member, "__struct_config__", None)
            if (
                config is not None
                and config.tag is not None
                and value.get(config.tag_field) == config.tag
            ):
                return _convert(value, member, path, problems, False)
    first: list[tuple[str, str]] = []
    for member in members:
        tried: list[tuple[str, str]] = []
        converted = _convert(value, member, path, tried, False)
        if not tried:
            return converted
        first = first or tried
    names = ", ".join(getattr(m, "__name__", repr(m)) for m in members)
    where, message = first[0] if first else (path, "")
    problems.append((where, f"fits none of {names}: {message}"))
    return value


def _by_pydantic(value: Any, tp: Any, path: str, problems: list[tuple[str, str]]) -> Any:
    """``value`` through pydantic's ``TypeAdapter``; kept as given without pydantic."""
    # pydantic is optional: a pydantic type can only exist once pydantic is imported.
    pydantic = sys.modules.get("pydantic")
    if pydantic is None:
        return value
    try:
        adapter = pydantic.TypeAdapter(tp)
    except pydantic.PydanticSchemaGenerationError:
        return value  # a type pydantic cannot check either: kept as given
    try:
        return adapter.validate_python(value)
    except pydantic.ValidationError as exc:
        for error in exc.errors():
            where = path + "".join(f"/{p}" for p in error["loc"])
            problems.append((where, error["msg"]))
        return value


def _describe(tp: Any, defs: dict[str, Any], *, pydantic: bool) -> dict[str, Any]:
    """The JSON Schema of ``tp``, its shared parts added to ``defs``."""
    if not pydantic:
        try:
            (schema,), components = msgspec.json.schema_components(
                [tp], ref_template="#/$defs/{name}"
            )
        except TypeError:
            pass  # msgspec cannot describe it as a whole: describe its parts
        else:
            defs.update(components)
            return schema
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is typing.Union or origin is types.UnionType:
            return {"anyOf": [_describe(m, defs, pydantic=False) for m in args]}
        if origin in (list, tuple, set, frozenset, collections.abc.Sequence) and args:
            return {"type": "array", "items": _describe(args[0], defs, pydantic=False)}
        if origin in (dict, collections.abc.Mapping) and len(args) == 2:
            return {
                "type": "object",
                "additionalProperties": _describe(args[1], defs, pydantic=False),
            }
    pd = sys.modules.get("pydantic")  # optional, as in `_by_pydantic`
    if pd is None:
        return {"description": _UNDESCRIBED}
    try:
        described: dict[str, Any] = pd.TypeAdapter(tp).json_schema(ref_template="#/$defs/{model}")
    except (pd.PydanticSchemaGenerationError, pd.errors.PydanticInvalidForJsonSchema):
        return {"description": _UNDESCRIBED}
    defs.update(described.pop("$defs", {}))
    return described
