"""Stores named by URL: ``sqlite:///app.db``, ``postgresql://user@host:5432/db``.

A URL names where the threads are, for a command line or a setting, without code:

* ``sqlite:///relative/path.db`` and ``sqlite:////absolute/path.db`` (three slashes, then the
  path; an absolute path starts with the fourth) open a `SqliteStore` on that file;
* ``postgresql://...`` and ``postgres://...`` are libpq connection URIs, handed to
  `PostgresStore` as they are (so ``?options=-csearch_path%3Dname``, ``sslmode=`` and the other
  libpq parameters work). It needs the ``postgres`` extra.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from .._lazy import lazy_callable
from ._base import Store
from ._sqlite import SqliteStore

if TYPE_CHECKING:
    from urllib.parse import unquote
else:  # imported by the first call that needs it, not by `import interlock`
    unquote = lazy_callable("urllib.parse", "unquote", globals())

__all__ = ["STORE_URL_FORMS", "open_store"]

STORE_URL_FORMS: Final = (
    "sqlite:///relative/path.db, sqlite:////absolute/path.db, "
    "or postgresql://user@host:port/database"
)
"""The accepted forms, as an error message lists them."""

_SQLITE: Final = "sqlite:///"
_POSTGRES_SCHEMES: Final = ("postgresql", "postgres")
_PASSWORD: Final = re.compile(r"(://[^:/@]*:)[^@/]*@")
"""``user:password@`` in a URL; the password is masked in messages."""


def open_store(url: str) -> Store:
    """Return the store a URL names (opened on first use, like any store).

    Raises:
        ValueError: The URL is not one of the accepted forms; the message lists them.
        ImportError: A PostgreSQL URL, without psycopg installed (the ``postgres`` extra).
    """
    if not isinstance(url, str):
        raise TypeError(f"a store URL is a str, not {type(url).__name__}")
    scheme = url.partition(":")[0].lower()
    if scheme == "sqlite":
        return SqliteStore(_sqlite_path(url))
    if scheme in _POSTGRES_SCHEMES:
        return _postgres(url)
    raise ValueError(f"unsupported store URL {url!r}: use {STORE_URL_FORMS}")


def _sqlite_path(url: str) -> str:
    """The file of a ``sqlite:///`` URL: relative after three slashes, absolute after four."""
    if not url.lower().startswith(_SQLITE):
        raise ValueError(
            f"store URL {url!r} names no file: a SQLite URL is sqlite:///relative/path.db or "
            "sqlite:////absolute/path.db (no host between the slashes)"
        )
    rest = url[len(_SQLITE) :]
    if "?" in rest or "#" in rest:
        raise ValueError(
            f"store URL {url!r} has options; a SQLite URL takes none: use {_SQLITE}path.db"
        )
    path = unquote(rest)
    if not path or path.endswith("/"):
        raise ValueError(
            f"store URL {url!r} names no file: add its path, as in sqlite:///app.db or "
            "sqlite:////var/lib/app/app.db"
        )
    return path


def _postgres(url: str) -> Store:
    # psycopg is the ``postgres`` extra: it is imported only when a URL asks for PostgreSQL.
    try:
        from psycopg import ProgrammingError
        from psycopg.conninfo import conninfo_to_dict

        from ._postgres import PostgresStore
    except ImportError as exc:
        raise ImportError(
            f"store URL {_shown(url)} needs psycopg; install it with: "
            "pip install 'interlock[postgres]'"
        ) from exc
    try:
        conninfo_to_dict(url)
    except ProgrammingError as exc:
        # libpq quotes the URI in its message: the password must not go along.
        why = str(exc).strip().replace(url, _shown(url).strip("'"))
        raise ValueError(
            f"store URL {_shown(url)} is not a valid PostgreSQL URI ({why}): use "
            "postgresql://user@host:port/database"
        ) from exc
    return PostgresStore(url)


def _shown(url: str) -> str:
    """The URL for a message, without its password (even when the URL does not parse)."""
    return repr(_PASSWORD.sub(r"\1***@", url))
