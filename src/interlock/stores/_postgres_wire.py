"""An append's call of ``interlock_append``, sent to libpq directly.

psycopg's way to a statement (a cursor, a transformer choosing a dumper per parameter, Python
list dumpers for the arrays, the generator that waits on the socket, the row maker) costs about
90 µs of the client's CPU per append, five times what the same call costs sent to libpq as
prepared bytes (measured with the 45 parameters of a round trip's appends). An S2pg round trip
makes six appends, so this is where the client's time went. Here the append's parameters are
encoded once, in PostgreSQL's binary format (no text to build on this side, none to parse on
the server's), and sent with ``PQexecPrepared``, which waits for the result with the GIL
released, as psycopg's wait does.

The statement is prepared under a name of its own on each connection, the first time that
connection appends (`_PREPARED`). psycopg does not know that name, so nothing of psycopg's
cache is affected; but psycopg deallocates every prepared statement of a connection (``DEALLOCATE
ALL``) after a rollback on it, ours included. An append that finds its statement gone prepares
it again and runs once more (`call`); inside a group's transaction, the failed statement first
rolls back to the savepoint every append of a group runs in (`_postgres_ops.append_group`).

Only connections whose client encoding is UTF-8 (the server's default) take this path: the
store encodes text as UTF-8; the others keep psycopg's (`PsycopgNeeded`). A store made with
``prepare=False`` sends the statement unprepared (``PQexecParams``), keeping no session state.
"""

from __future__ import annotations

import struct
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Final

import psycopg
import psycopg.errors
from psycopg import pq

__all__ = ["PsycopgNeeded", "byteas", "call", "float8", "float8s", "int8", "texts"]

_ARRAY_HEAD: Final = struct.Struct(">iiiii").pack
_LENGTH: Final = struct.Struct(">i").pack
_NULL: Final = b"\xff\xff\xff\xff"
_TEXT_OID: Final = 25
_BYTEA_OID: Final = 17
_FLOAT8_OID: Final = 701
_MISSING_STATEMENT: Final = b"26000"  # invalid_sql_statement_name
_UNDO: Final = b"ROLLBACK TO SAVEPOINT interlock_append"

int8: Final[Callable[[int], bytes]] = struct.Struct(">q").pack
"""A ``bigint`` parameter (raises `struct.error` out of range, as the column would)."""
float8: Final[Callable[[float], bytes]] = struct.Struct(">d").pack
"""A ``double precision`` parameter."""


class PsycopgNeeded(Exception):
    """Raised, before anything is sent, for a call this module leaves to psycopg: on a
    connection whose client encoding is not UTF-8, or one that is not in autocommit mode and
    not in a transaction (psycopg would begin one first)."""


def _heads(oid: int) -> tuple[bytes, bytes]:
    """The whole of a one-element array holding NULL, and the head of one holding a value."""
    return _ARRAY_HEAD(1, 1, oid, 1, 1) + _NULL, _ARRAY_HEAD(1, 0, oid, 1, 1)


# An append's arrays mostly hold one element (one interrupt raised, one resolved, one audit
# entry): those are built without the general loop.
_TEXT_NULL, _TEXT_ONE = _heads(_TEXT_OID)
_BYTEA_NULL, _BYTEA_ONE = _heads(_BYTEA_OID)
_FLOAT8_NULL, _FLOAT8_ONE = _heads(_FLOAT8_OID)


def _array(oid: int, items: list[bytes | None]) -> bytes:
    has_null = None in items
    parts = [_ARRAY_HEAD(1, 1 if has_null else 0, oid, len(items), 1)]
    for item in items:
        if item is None:
            parts.append(_NULL)
        else:
            parts.append(_LENGTH(len(item)))
            parts.append(item)
    return b"".join(parts)


def texts(values: Sequence[str | None]) -> bytes:
    """A ``text[]`` parameter of one dimension."""
    if len(values) == 1:
        value = values[0]
        if value is None:
            return _TEXT_NULL
        item = value.encode()
        return _TEXT_ONE + _LENGTH(len(item)) + item
    return _array(_TEXT_OID, [None if v is None else v.encode() for v in values])


def byteas(values: Sequence[bytes | None]) -> bytes:
    """A ``bytea[]`` parameter of one dimension."""
    if len(values) == 1:
        value = values[0]
        return _BYTEA_NULL if value is None else _BYTEA_ONE + _LENGTH(len(value)) + value
    return _array(_BYTEA_OID, list(values))


def float8s(values: Sequence[float | None]) -> bytes:
    """A ``double precision[]`` parameter of one dimension."""
    if len(values) == 1:
        value = values[0]
        return _FLOAT8_NULL if value is None else _FLOAT8_ONE + b"\x00\x00\x00\x08" + float8(value)
    return _array(_FLOAT8_OID, [None if v is None else float8(v) for v in values])


_PREPARED: weakref.WeakKeyDictionary[psycopg.Connection[Any], set[bytes]] = (
    weakref.WeakKeyDictionary()
)
"""The statements this module prepared on each connection (as far as it knows: see `call`)."""


def call(
    conn: psycopg.Connection[Any],
    name: bytes,
    statement: bytes,
    params: Sequence[bytes | None],
    *,
    prepare: bool,
) -> pq.abc.PGresult:
    """Run ``statement`` (prepared as ``name`` on the connection if ``prepare``) with
    ``params`` in binary format; its result, or psycopg's error for it.

    Raises:
        PsycopgNeeded: The call is psycopg's to make (nothing was sent).
        psycopg.Error: What psycopg would raise for the same failure: the server's error as its
            SQLSTATE's class, `psycopg.OperationalError` for a lost connection.
    """
    pgconn = conn.pgconn
    if not conn.autocommit and pgconn.transaction_status == pq.TransactionStatus.IDLE:
        raise PsycopgNeeded(conn)
    prepared = _PREPARED.get(conn)
    if prepared is None:
        if pgconn.parameter_status(b"client_encoding") != b"UTF8":
            raise PsycopgNeeded(conn)
        prepared = _PREPARED[conn] = set()
    formats = [1] * len(params)
    # A None is a NULL: libpq takes it, though psycopg's stubs say otherwise.
    values: Any = params
    if not prepare:
        return _checked(conn, pgconn.exec_params(statement, values, None, formats, 0))
    if name not in prepared:
        _checked(conn, pgconn.prepare(name, statement))
        prepared.add(name)
    result = pgconn.exec_prepared(name, values, formats, 0)
    if (
        result.status == pq.ExecStatus.FATAL_ERROR
        and result.error_field(pq.DiagnosticField.SQLSTATE) == _MISSING_STATEMENT
    ):
        # Deallocated behind our back (psycopg's DEALLOCATE ALL after a rollback): the call
        # failed before running anything. In a group's transaction it aborted the transaction,
        # so go back to the savepoint this append began in first.
        prepared.discard(name)
        if pgconn.transaction_status == pq.TransactionStatus.INERROR:
            _checked(conn, pgconn.exec_(_UNDO))
        _checked(conn, pgconn.prepare(name, statement))
        prepared.add(name)
        result = pgconn.exec_prepared(name, values, formats, 0)
    return _checked(conn, result)


def _checked(conn: psycopg.Connection[Any], result: pq.abc.PGresult) -> pq.abc.PGresult:
    """``result`` if it succeeded; otherwise raise the error psycopg would have."""
    if result.status in (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK):
        return result
    if not result.error_field(pq.DiagnosticField.SQLSTATE) and conn.broken:
        message = result.get_error_message("utf-8") or conn.pgconn.get_error_message("utf-8")
        raise psycopg.OperationalError(message.strip() or "the connection was lost")
    raise psycopg.errors.error_from_result(result, encoding="utf-8")
