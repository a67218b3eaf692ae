"""Who is calling: bearer tokens, stored hashed, mapped to identities with roles and scopes.

A token is a random secret handed to one person or service once; the server keeps only its
SHA-256 (``sha256:<hex>``), so a leaked configuration file grants nothing. An identity has a
role (``viewer`` reads, ``approver`` also decides and starts runs, ``admin`` also pauses
threads and reads the delivery log) and scopes: the tools whose calls it may decide
(shell-style patterns; a question that gates no tool has the tool name ``""``, matched by
``*``) and the thread-id prefixes it may see.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import tomllib
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Final, Literal, get_args

import msgspec

from ..runtime import Principal

__all__ = ["ROLES", "Identity", "Role", "TokenAuth", "hash_token", "new_token"]

Role = Literal["viewer", "approver", "admin"]
"""What an identity may do; each role may do everything the ones before it may."""

ROLES: Final[tuple[Role, ...]] = get_args(Role)
"""Every role, from the least to the most allowed: ``("viewer", "approver", "admin")``."""
_RANK: Final[dict[str, int]] = {r: i for i, r in enumerate(ROLES)}
_PREFIX: Final = "sha256:"


class Identity(msgspec.Struct, frozen=True, kw_only=True):
    """A person or service the server knows, and what it may do."""

    name: str
    """Recorded as the actor of its decisions; unique among the configured identities."""
    role: Role = "viewer"
    """``viewer``, ``approver`` or ``admin``."""
    tools: tuple[str, ...] = ("*",)
    """Patterns of the tools whose questions it may see and decide (``*`` is every one)."""
    threads: tuple[str, ...] = ("",)
    """Prefixes of the thread ids it may see and act on (``""`` is every thread)."""
    groups: tuple[str, ...] = ()
    """The groups its principal belongs to (a question's `Authority` may name them)."""

    def principal(self) -> Principal:
        """The `Principal` it decides as: its name, groups, and its role."""
        return Principal(name=self.name, groups=self.groups, roles=(self.role,))

    def can(self, role: Role) -> bool:
        """Whether this identity's role includes ``role``."""
        return _RANK[self.role] >= _RANK[role]

    def sees_thread(self, thread: str) -> bool:
        """Whether ``thread`` is within this identity's thread scope."""
        return any(thread.startswith(p) for p in self.threads)

    def sees_tool(self, tool: str | None) -> bool:
        """Whether a question gating ``tool`` (None: no tool) is within its tool scope."""
        name = tool or ""
        return any(fnmatchcase(name, p) for p in self.tools)

    def sees(self, thread: str, tool: str | None) -> bool:
        """Both scopes at once."""
        return self.sees_thread(thread) and self.sees_tool(tool)


def new_token() -> str:
    """A new random token (43 URL-safe characters, 256 bits)."""
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The form a token is configured in: ``sha256:<hex>``."""
    if not isinstance(token, str):
        raise TypeError(f"token must be a str, not {type(token).__name__}")
    return _PREFIX + hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class TokenAuth:
    """Bearer-token authentication: ``{hash_token(token): Identity}``.

    For example (a sketch, not run)::

        auth = TokenAuth({hash_token("s3cret"): Identity(name="ana", role="approver")})

    Or from a file (`from_file`), TOML or JSON (a sketch of one entry)::

        [[identity]]
        name = "ana"
        role = "approver"
        token_sha256 = "sha256:9f86d0..."
        tools = ["send_*"]
    """

    def __init__(self, tokens: Mapping[str, Identity]) -> None:
        if not isinstance(tokens, Mapping):
            raise TypeError(f"tokens must be a mapping of hash to Identity, not {tokens!r}")
        names: set[str] = set()
        self._by_hash: dict[str, Identity] = {}
        for digest, identity in tokens.items():
            if not isinstance(identity, Identity):
                raise TypeError(f"tokens[{digest!r}] must be an Identity, not {identity!r}")
            _check_identity(identity)
            if not (isinstance(digest, str) and digest.startswith(_PREFIX) and len(digest) == 71):
                raise ValueError(
                    f"token of {identity.name!r} is not a hash: configure hash_token(token) "
                    "(sha256:<64 hex digits>), never the token itself"
                )
            if identity.name in names:
                raise ValueError(f"two identities are named {identity.name!r}; names are actors")
            names.add(identity.name)
            self._by_hash[digest.lower()] = identity

    @property
    def identities(self) -> list[Identity]:
        """The configured identities."""
        return list(self._by_hash.values())

    def authenticate(self, authorization: str | None) -> Identity | None:
        """The identity an ``Authorization: Bearer <token>`` header value names, or None."""
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        digest = hash_token(token.strip())
        for known, identity in self._by_hash.items():
            if hmac.compare_digest(known, digest):
                return identity
        return None

    @classmethod
    def from_file(cls, path: str | Path) -> TokenAuth:
        """Read identities from a TOML or JSON file (a list under ``identity``)."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read the token file {str(p)!r}: {exc.strerror}") from exc
        except UnicodeDecodeError as exc:
            raise ValueError(f"the token file {str(p)!r} is not valid: not UTF-8 ({exc})") from exc
        try:
            data: Any = json.loads(text) if p.suffix == ".json" else tomllib.loads(text)
        except (ValueError, tomllib.TOMLDecodeError) as exc:
            raise ValueError(f"the token file {str(p)!r} is not valid: {exc}") from exc
        return cls.from_config(data.get("identity", []) if isinstance(data, dict) else data)

    @classmethod
    def from_config(cls, entries: Iterable[Mapping[str, Any]]) -> TokenAuth:
        """Identities from plain mappings with ``name``, ``role``, ``token_sha256``..."""
        tokens: dict[str, Identity] = {}
        for n, entry in enumerate(entries):
            if not isinstance(entry, Mapping) or "token_sha256" not in entry:
                raise ValueError(f"identity #{n + 1} needs name, role and token_sha256")
            fields = {k: v for k, v in entry.items() if k != "token_sha256"}
            for scope in ("tools", "threads"):
                if isinstance(fields.get(scope), list):
                    fields[scope] = tuple(fields[scope])
            try:
                identity = msgspec.convert(fields, Identity)
            except msgspec.ValidationError as exc:
                raise ValueError(f"identity #{n + 1} is not valid: {exc}") from exc
            tokens[str(entry["token_sha256"])] = identity
        return cls(tokens)


def _check_identity(identity: Identity) -> None:
    if not identity.name or not identity.name.isprintable() or len(identity.name) > 200:
        raise ValueError(f"identity name {identity.name!r} must be 1-200 printable characters")
    if identity.role not in _RANK:
        raise ValueError(f"role of {identity.name!r} must be one of {list(ROLES)}")
    if not identity.tools or not identity.threads:
        raise ValueError(
            f"identity {identity.name!r} has an empty scope: give tools=('*',) and "
            "threads=('',) for every tool and thread"
        )
