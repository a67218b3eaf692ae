"""The tokens file: identities and their token hashes, TOML or JSON, read strictly.

Each entry of the ``identity`` list names one identity::

    [[identity]]
    name = "ana"
    role = "approver"
    token_sha256 = "sha256:9f86d0..."
    tools = ["send_*"]

A key the format does not have, or a value of the wrong type, stops the reading with a message
that names the key, its entry and its line. Silently dropping it would be worse than a typo:
``thread = ["ops-"]`` for ``threads`` would leave the identity every thread, and an invented
``expires`` would never expire anything.
"""

from __future__ import annotations

import difflib
import json
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..stores import ROLES, Role

__all__ = ["KEYS", "FileEntry", "check_entries", "read_tokens_file"]

KEYS: Final = ("name", "role", "token_sha256", "tools", "threads", "groups")
"""The keys of an entry; ``name`` and ``token_sha256`` are required."""
_LISTS: Final = ("tools", "threads", "groups")

Locate = Callable[[int, str | None], int | None]
"""The line of entry ``n``'s key (None: of the entry), if it can be found."""


@dataclass(frozen=True, kw_only=True)
class FileEntry:
    """One identity of a tokens file, its keys checked."""

    name: str
    role: Role
    token_sha256: str
    tools: tuple[str, ...] | None
    """None: the key is absent (every tool)."""
    threads: tuple[str, ...] | None
    """None: the key is absent (every thread)."""
    groups: tuple[str, ...]
    where: str
    """Which entry it is, for messages: ``identity #2 (line 7)``."""


def read_tokens_file(path: Path) -> list[FileEntry]:
    """The entries of the tokens file ``path``: TOML, or JSON when it ends in ``.json``.

    Raises:
        ValueError: The file cannot be read or parsed, or holds a key the format does not
            have or a value of the wrong type; the message names the file, the key and its
            line.
    """
    source = f"the token file {str(path)!r}"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read {source}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ValueError(f"{source} is not valid: not UTF-8 ({exc})") from exc
    if path.suffix == ".json":
        data, locate = _json(text, source)
    else:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{source} is not valid: {exc}") from exc
        locate = _toml_locator(text)
    if isinstance(data, dict):
        for key in data:
            if key != "identity":
                line = locate(-1, key)
                raise ValueError(
                    f"{source}{_at(line)}: unknown key {key!r}{_hint(key, ['identity'])}; the "
                    "file holds a list of identities under 'identity' ([[identity]] in TOML)"
                )
        entries: Any = data.get("identity", [])
        if not isinstance(entries, list):
            raise ValueError(
                f"{source}{_at(locate(-1, 'identity'))}: 'identity' must be a list of "
                f"identities ([[identity]] tables in TOML), not {_kind(entries)}"
            )
    else:
        entries = data
    return check_entries(entries, source=source, locate=locate)


def check_entries(
    entries: Iterable[object], *, source: str = "the identities", locate: Locate | None = None
) -> list[FileEntry]:
    """Check each entry's keys and the types of its values.

    Raises:
        ValueError: An entry is not a mapping, lacks ``name`` or ``token_sha256``, holds a key
            the format does not have or a value of the wrong type; the message names it.
    """
    if isinstance(entries, str | bytes | Mapping) or not isinstance(entries, Iterable):
        raise ValueError(f"{source} must be a list of identities, not {_kind(entries)}")
    checked: list[FileEntry] = []
    for n, entry in enumerate(entries):

        def where(key: str | None, n: int = n) -> str:
            line = None if locate is None else locate(n, key)
            return f"{source}, identity #{n + 1}{_at(line)}"

        if not isinstance(entry, Mapping):
            raise ValueError(f"{where(None)}: an identity is a table of keys, not {_kind(entry)}")
        for key in entry:
            if key not in KEYS:
                raise ValueError(
                    f"{where(str(key))}: unknown key {key!r}{_hint(str(key), KEYS)}; an identity "
                    f"has {', '.join(KEYS)}. Nothing was read: a key left out would be a scope "
                    "or a limit silently dropped"
                )
        for key in ("name", "token_sha256"):
            if key not in entry:
                raise ValueError(
                    f"{where(None)}: {key!r} is missing; an identity needs name, "
                    "role and token_sha256"
                )
        for key in ("name", "token_sha256", "role"):
            if key in entry and not isinstance(entry[key], str):
                raise ValueError(f"{where(key)}: {key!r} must be a string, not {_kind(entry[key])}")
        role = entry.get("role", "viewer")
        if role not in ROLES:
            raise ValueError(
                f"{where('role')}: 'role' must be one of {', '.join(ROLES)}, not {role!r}"
            )
        lists: dict[str, tuple[str, ...] | None] = {}
        for key in _LISTS:
            value = entry.get(key)
            if key in entry and not (
                isinstance(value, list) and all(isinstance(v, str) for v in value)
            ):
                raise ValueError(
                    f"{where(key)}: {key!r} must be a list of strings (e.g. {key} = "
                    f'["..."]), not {_kind(value)}'
                )
            lists[key] = None if value is None else tuple(value)
        checked.append(
            FileEntry(
                name=entry["name"],
                role=role,
                token_sha256=entry["token_sha256"],
                tools=lists["tools"],
                threads=lists["threads"],
                groups=lists["groups"] or (),
                where=where(None),
            )
        )
    return checked


def _at(line: int | None) -> str:
    return "" if line is None else f" (line {line})"


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string {value!r:.60}"
    if isinstance(value, list):
        return "a list" + (" holding something that is not a string" if value else "")
    if isinstance(value, Mapping):
        return "a table"
    return f"{type(value).__name__} {value!r:.60}"


def _hint(key: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _toml_locator(text: str) -> Locate:
    """Find a key's line in TOML text: in entry ``n``'s ``[[identity]]`` table, or before the
    first table (``n`` = -1). An entry written another way (an inline table) has no line."""
    lines = text.splitlines()

    def locate(n: int, key: str | None) -> int | None:
        entry = -1
        for number, line in enumerate(lines, start=1):
            stripped = line.strip()
            if stripped.startswith("["):
                header = stripped.strip("[] \t")
                if stripped.startswith("[[") and header == "identity":
                    entry += 1
                    if entry == n and key is None:
                        return number
                    continue
                if n == -1 and key is not None and header == key:
                    return number
                if entry == n:
                    return None  # the next table: the entry ended without the key
                continue
            if entry == n and key is not None and _assigns(line, key):
                return number
        return None

    return locate


def _assigns(line: str, key: str) -> bool:
    quoted = re.escape(key)
    return re.match(rf"\s*(?:{quoted}|\"{quoted}\"|'{quoted}')\s*=", line) is not None


def _json(text: str, source: str) -> tuple[Any, Locate]:
    """Parse JSON text; the locator finds a key's line within entry ``n``'s object."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{source} is not valid: {exc}") from exc
    # The entries are the objects in the list under "identity" (or in the file's own list).
    entries = _object_spans(text, depth=3 if isinstance(data, dict) else 2)

    def locate(n: int, key: str | None) -> int | None:
        if n == -1:
            start, end = 0, len(text)
        elif n < len(entries):
            start, end = entries[n]
        else:
            return None
        if key is None:
            return text.count("\n", 0, start) + 1
        found = re.compile(rf"{re.escape(json.dumps(key))}\s*:").search(text, start, end)
        return None if found is None else text.count("\n", 0, found.start()) + 1

    return data, locate


def _object_spans(text: str, *, depth: int) -> list[tuple[int, int]]:
    """Where the objects that are ``depth`` brackets deep (theirs included) start and end, in
    order (the text is valid JSON: only strings can hold a bracket that is not one)."""
    spans: list[tuple[int, int]] = []
    opened: list[tuple[str, int]] = []
    in_string = escaped = False
    for at, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            opened.append((char, at))
        elif char in "]}":
            kind, start = opened.pop()
            if kind == "{" and len(opened) + 1 == depth:
                spans.append((start, at + 1))
    return spans
