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
import secrets
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Final

import msgspec

from .._errors import InvalidId
from .._principals import principal_key
from ..runtime import Principal
from ..stores import ROLES, Role
from ._tokens_file import FileEntry, check_entries, read_tokens_file

__all__ = [
    "ROLES",
    "Identity",
    "Role",
    "TokenAuth",
    "bearer_token",
    "hash_token",
    "lower_role",
    "new_token",
]

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


def lower_role(a: Role, b: Role) -> Role:
    """The less allowed of two roles (what a token of a principal may do at most)."""
    return a if _RANK[a] <= _RANK[b] else b


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header value, or None."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


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
            _check_digest(digest, identity.name)
            key = principal_key(identity.name)
            if key in names:
                raise ValueError(
                    f"two identities are named {identity.name!r} (names are compared "
                    "case-folded); names are actors: give each identity its own"
                )
            names.add(key)
            self._by_hash[digest.lower()] = identity

    @property
    def identities(self) -> list[Identity]:
        """The configured identities."""
        return list(self._by_hash.values())

    @property
    def tokens(self) -> dict[str, Identity]:
        """The configured identities by their tokens' hashes (``sha256:<hex>``)."""
        return dict(self._by_hash)

    def authenticate(self, authorization: str | None) -> Identity | None:
        """The identity an ``Authorization: Bearer <token>`` header value names, or None."""
        token = bearer_token(authorization)
        if token is None:
            return None
        digest = hash_token(token)
        for known, identity in self._by_hash.items():
            if hmac.compare_digest(known, digest):
                return identity
        return None

    @classmethod
    def from_file(cls, path: str | Path) -> TokenAuth:
        """Read identities from a TOML or JSON file (a list under ``identity``).

        The file is read strictly: a key an identity does not have (``thread`` for
        ``threads``, an invented ``expires``) or a value of the wrong type is refused with a
        message that names the key and its line, rather than dropped, which would leave the
        identity every tool or thread.

        Raises:
            ValueError: The file cannot be read, is not valid TOML or JSON, or holds such a
                key or value.
        """
        return cls._from_entries(read_tokens_file(Path(path)))

    @classmethod
    def from_config(cls, entries: Iterable[Mapping[str, Any]]) -> TokenAuth:
        """Identities from plain mappings with ``name``, ``role``, ``token_sha256``...

        Raises:
            ValueError: As `from_file` does.
        """
        return cls._from_entries(check_entries(entries))

    @classmethod
    def _from_entries(cls, entries: list[FileEntry]) -> TokenAuth:
        tokens: dict[str, Identity] = {}
        names: dict[str, str] = {}
        for entry in entries:
            identity = Identity(
                name=entry.name,
                role=entry.role,
                tools=("*",) if entry.tools is None else entry.tools,
                threads=("",) if entry.threads is None else entry.threads,
                groups=entry.groups,
            )
            try:
                _check_identity(identity)
                _check_digest(entry.token_sha256, identity.name)
            except ValueError as exc:
                raise ValueError(f"{entry.where}: {exc}") from exc
            key = principal_key(identity.name)
            if key in names:
                raise ValueError(
                    f"{entry.where}: {identity.name!r} is the name of {names[key]} too (names "
                    "are compared case-folded); names are actors: give each identity its own"
                )
            names[key] = entry.where
            digest = entry.token_sha256.lower()
            if digest in tokens:
                raise ValueError(f"{entry.where}: its token_sha256 is another identity's too")
            tokens[digest] = identity
        return cls(tokens)


def _check_digest(digest: object, name: str) -> None:
    if not (isinstance(digest, str) and digest.startswith(_PREFIX) and len(digest) == 71):
        raise ValueError(
            f"token of {name!r} is not a hash: configure hash_token(token) "
            "(sha256:<64 hex digits>), never the token itself"
        )


def _check_identity(identity: Identity) -> None:
    if not identity.name or not identity.name.isprintable() or len(identity.name) > 200:
        raise ValueError(f"identity name {identity.name!r} must be 1-200 printable characters")
    try:
        principal_key(identity.name, "identity name")
        for group in identity.groups:
            principal_key(group, "group")
    except InvalidId as exc:
        raise ValueError(str(exc)) from None
    if identity.role not in _RANK:
        raise ValueError(f"role of {identity.name!r} must be one of {list(ROLES)}")
    if not identity.tools or not identity.threads:
        raise ValueError(
            f"identity {identity.name!r} has an empty scope: give tools=('*',) and "
            "threads=('',) for every tool and thread"
        )
