"""Tools: typed functions a model may call, with a JSON Schema of their arguments.

`@tool` turns a function into a `Tool`. Its arguments' schema comes from the annotations (msgspec
writes it), the description and each argument's help from the docstring (Google style
``Args:`` or reST ``:param x:``). Arguments are checked against the schema, then converted to
the annotated types, before the function runs; a tool can be sync, async, or an async generator
(its chunks stream out as events, and their concatenation is the result).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import AsyncIterator, Callable, Mapping
from contextvars import ContextVar
from typing import Any, get_type_hints, overload

import msgspec

from .._errors import GraphDefinitionError
from ..graph import concat
from ..runtime import schema_problem, stored_schema
from ._messages import ToolCall
from ._models import ToolSpec

__all__ = ["Tool", "current_tool_call", "result_text", "tool"]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_call: ContextVar[ToolCall | None] = ContextVar("interlock_tool_call", default=None)


def current_tool_call() -> ToolCall:
    """The tool call being served, for a tool that wants its id or raw arguments.

    Raises:
        GraphDefinitionError: Called outside a tool an agent runs.
    """
    found = _call.get()
    if found is None:
        raise GraphDefinitionError("current_tool_call() works only inside a tool an agent calls")
    return found


class ArgumentsError(ValueError):
    """A model's arguments do not fit the tool (the message says what is wrong)."""


class Tool:
    """A function a model may call.

    Build one with `@tool`, from an MCP server (``interlock.agents.mcp``), or from an agent
    (``agent.as_tool()``).

    Args:
        name: What the model calls it (letters, digits, ``_`` and ``-``; at most 64).
        description: What it does, for the model.
        parameters: JSON Schema of its arguments object.
        fn: ``fn(**arguments)``: sync, async, or an async generator (a streaming tool).
        dangerous: Make each call at most once (recorded before and after; a crash between
            becomes a ``reconcile`` question). None (the default) means: dangerous when the
            policy makes the call wait for approval.
        idempotent: Safe to repeat: never recorded as an effect.
        convert: Turns checked arguments into the keyword arguments ``fn`` takes.
    """

    __slots__ = (
        "_convert",
        "dangerous",
        "description",
        "fn",
        "idempotent",
        "name",
        "parameters",
        "streaming",
    )

    def __init__(
        self,
        name: str,
        description: str,
        parameters: Mapping[str, Any],
        fn: Callable[..., Any],
        *,
        dangerous: bool | None = None,
        idempotent: bool = False,
        convert: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(
                f"tool name {name!r} is not valid: use 1 to 64 letters, digits, '_' or '-'"
            )
        if not isinstance(description, str):
            raise TypeError(f"description must be a str, not {type(description).__name__}")
        if not isinstance(parameters, Mapping) or parameters.get("type", "object") != "object":
            raise ValueError(f"tool {name!r}: parameters must be a JSON Schema of an object")
        if not callable(fn):
            raise TypeError(f"tool {name!r}: fn must be callable")
        if dangerous and idempotent:
            raise ValueError(f"tool {name!r} cannot be both dangerous and idempotent")
        try:
            checked = stored_schema(parameters)
        except GraphDefinitionError as exc:
            raise ValueError(
                f"tool {name!r}: parameters is not a usable JSON Schema: {exc}"
            ) from exc
        self.name = name
        self.description = description
        self.parameters: dict[str, Any] = checked
        self.fn = fn
        self.streaming = inspect.isasyncgenfunction(fn)
        self.dangerous = dangerous
        self.idempotent = idempotent
        self._convert = convert

    def __repr__(self) -> str:
        return f"<Tool {self.name}>"

    @property
    def spec(self) -> ToolSpec:
        """The tool as a model is offered it."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    def check(self, arguments: Any) -> dict[str, Any]:
        """Check arguments against the schema; return them converted for ``fn``.

        Raises:
            ArgumentsError: They do not fit (the message is meant for the model).
        """
        if not isinstance(arguments, Mapping):
            kind = type(arguments).__name__
            raise ArgumentsError(f"the arguments of {self.name} must be a JSON object, not {kind}")
        problem = schema_problem(dict(arguments), self.parameters)
        if problem is not None:
            raise ArgumentsError(problem.replace("answer", "arguments", 1))
        if self._convert is None:
            return dict(arguments)
        try:
            return self._convert(dict(arguments))
        except (msgspec.ValidationError, TypeError, ValueError) as exc:
            raise ArgumentsError(f"arguments: {exc}") from exc

    async def run(
        self, arguments: dict[str, Any], call: ToolCall, on_chunk: Callable[[Any], None] | None
    ) -> Any:
        """Call ``fn`` with checked arguments; a streaming tool's chunks go to ``on_chunk``."""
        token = _call.set(call)
        try:
            if self.streaming:
                chunks: list[Any] = []
                agen: AsyncIterator[Any] = self.fn(**arguments)
                try:
                    async for chunk in agen:
                        chunks.append(chunk)
                        if on_chunk is not None:
                            on_chunk(chunk)
                finally:
                    await agen.aclose()  # type: ignore[attr-defined]
                return concat(chunks, where=f"tool {self.name!r}")
            result = self.fn(**arguments)
            if inspect.isawaitable(result):
                result = await result
            return result
        finally:
            _call.reset(token)


def result_text(value: Any) -> str:
    """What a model reads of a tool's result: a string as it is, anything else as JSON."""
    if isinstance(value, str):
        return value
    try:
        return msgspec.json.encode(value, enc_hook=_fallback).decode()
    except (TypeError, msgspec.EncodeError):
        return str(value)


def _fallback(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return str(value)


# -- @tool ------------------------------------------------------------------------------------


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    dangerous: bool | None = None,
    idempotent: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    dangerous: bool | None = None,
    idempotent: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a tool of a typed function (use as ``@tool`` or ``@tool(name=..., ...)``).

    Every parameter needs an annotation msgspec understands (``str``, ``int``, ``list[str]``,
    ``Literal[...]``, a Struct, a dataclass, a TypedDict...); parameters with defaults are
    optional. The docstring's first paragraph describes the tool; its ``Args:`` section (or
    ``:param name:`` lines) describes each argument.

    Examples:
        >>> @tool
        ... def execute(command: str, timeout: float = 10.0) -> str:
        ...     '''Run a shell command.
        ...
        ...     Args:
        ...         command: The command line.
        ...         timeout: Seconds before it is stopped.
        ...     '''
        ...     return "..."
        >>> execute.parameters["required"]
        ['command']
    """

    def make(f: Callable[..., Any]) -> Tool:
        return _from_function(
            f, name=name, description=description, dangerous=dangerous, idempotent=idempotent
        )

    if fn is not None:
        return make(fn)
    return make


def _from_function(
    fn: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    dangerous: bool | None,
    idempotent: bool,
) -> Tool:
    if not callable(fn):
        raise TypeError(f"@tool needs a function, not {type(fn).__name__}")
    tool_name: str = name or str(getattr(fn, "__name__", ""))
    summary, helps = _parse_docstring(inspect.getdoc(fn) or "")
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise GraphDefinitionError(
            f"@tool {tool_name!r}: cannot read its annotations ({type(exc).__name__}: {exc})"
        ) from exc
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise GraphDefinitionError(
                f"@tool {tool_name!r}: *args and **kwargs cannot be described to a model; "
                "name every parameter"
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise GraphDefinitionError(
                f"@tool {tool_name!r}: parameter {param.name!r} is positional-only; tools are "
                "called with keyword arguments"
            )
        if param.name not in hints:
            raise GraphDefinitionError(
                f"@tool {tool_name!r}: parameter {param.name!r} has no type annotation; "
                "annotate it so the model knows what to pass"
            )
        if param.default is param.empty:
            fields.append((param.name, hints[param.name]))
        else:
            fields.append((param.name, hints[param.name], param.default))
    args_type = msgspec.defstruct(
        f"{tool_name}_arguments", fields, kw_only=True, forbid_unknown_fields=True
    )
    try:
        (ref,), components = msgspec.json.schema_components(
            [args_type], ref_template="#/$defs/{name}"
        )
    except (TypeError, ValueError) as exc:
        raise GraphDefinitionError(
            f"@tool {tool_name!r}: its annotations have no JSON Schema ({exc})"
        ) from exc
    top_name = ref["$ref"].rsplit("/", 1)[-1]
    schema = dict(components.pop(top_name))
    schema.pop("title", None)
    schema.setdefault("required", [])
    schema["additionalProperties"] = False
    props = {k: dict(v) for k, v in schema.get("properties", {}).items()}
    for key, text in helps.items():
        if key in props:
            props[key].setdefault("description", text)
    schema["properties"] = props
    if components:
        schema["$defs"] = components

    def convert(arguments: dict[str, Any]) -> dict[str, Any]:
        value = msgspec.convert(arguments, args_type, strict=False)
        return {f: getattr(value, f) for f in value.__struct_fields__}

    return Tool(
        tool_name,
        description if description is not None else summary,
        schema,
        fn,
        dangerous=dangerous,
        idempotent=idempotent,
        convert=convert,
    )


_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Returns|Yields|Raises|Example|Examples|Note|Notes):\s*$"
)
_GOOGLE_ARG = re.compile(r"^\s+(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_REST_ARG = re.compile(r"^:param\s+(?:[\w\[\], ]+\s+)?(\w+):\s*(.*)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The summary (first paragraph) and argument help of a Google- or reST-style docstring."""
    lines = doc.splitlines()
    summary: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line.strip()) or line.startswith(":"):
            break
        summary.append(line.strip())
    helps: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in lines:
        head = _SECTION.match(line.strip())
        if head and not line.startswith((" ", "\t")):
            section, current = head.group(1), None
            continue
        rest = _REST_ARG.match(line.strip())
        if rest:
            current = rest.group(1)
            helps[current] = rest.group(2).strip()
            continue
        if section in ("Args", "Arguments", "Parameters"):
            arg = _GOOGLE_ARG.match(line)
            indent = len(line) - len(line.lstrip())
            if arg and (current is None or indent <= _indent_of(lines, current)):
                current = arg.group(1).lstrip("*")
                helps[current] = arg.group(2).strip()
            elif current is not None and line.strip():
                helps[current] = f"{helps[current]} {line.strip()}".strip()
        elif current is not None and line.strip() and line.startswith((" ", "\t")):
            helps[current] = f"{helps[current]} {line.strip()}".strip()
        elif not line.strip():
            current = None if section not in ("Args", "Arguments", "Parameters") else current
    return " ".join(summary), helps


def _indent_of(lines: list[str], name: str) -> int:
    for line in lines:
        m = _GOOGLE_ARG.match(line)
        if m and m.group(1).lstrip("*") == name:
            return len(line) - len(line.lstrip())
    return 0
