"""Log records that say which thread, run and interrupt they are about.

interlock logs to ``interlock.runtime`` (runs, interrupts, decisions; steps at DEBUG). Those
loggers have a `logging.NullHandler` and nothing else: nothing is printed until the
application configures logging. Their records carry ``thread_id``, ``run_id`` and
``interrupt_id`` attributes; `ContextFilter` gives the application's own records the same
attributes (a node's log lines name the thread they ran for), and `JsonFormatter` writes
records as one JSON object per line.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any, Final

import msgspec

from ._context import CURRENT

__all__ = ["FIELDS", "ContextFilter", "JsonFormatter", "library_logger"]

FIELDS: Final = ("thread_id", "run_id", "interrupt_id")
"""The attributes `ContextFilter` adds to every record it sees."""

# Attributes every `LogRecord` has; anything else on a record came from ``extra=``.
_STANDARD: Final = frozenset(
    vars(logging.LogRecord("", logging.INFO, "", 0, "", None, None)).keys()
    | {"message", "asctime", "taskName"}
)


class ContextFilter(logging.Filter):
    """Adds ``thread_id``, ``run_id`` and ``interrupt_id`` to each record it sees.

    The values are those of the interlock call in progress in the task that logs (see
    `current_context`), None outside any; a value the record already has (given with
    ``extra=``) is kept. Attach it to a handler, and every record the handler writes has the
    attributes, so a format string may name them. It never drops a record.

    Examples:
        >>> import logging
        >>> handler = logging.StreamHandler()
        >>> handler.addFilter(ContextFilter())
        >>> handler.setFormatter(logging.Formatter("%(levelname)s %(thread_id)s %(message)s"))
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Add the current thread, run and interrupt ids to ``record``; keep every record."""
        scope = CURRENT.get()
        fields = record.__dict__
        if scope is None:
            for name in FIELDS:
                fields.setdefault(name, None)
            return True
        if "thread_id" not in fields:
            fields["thread_id"] = scope.thread
        if "run_id" not in fields:
            fields["run_id"] = scope.run_id
        if "interrupt_id" not in fields:
            fields["interrupt_id"] = scope.interrupt_id
        return True


class JsonFormatter(logging.Formatter):
    """Formats a record as one line of JSON.

    The object has ``time`` (ISO 8601, UTC), ``level``, ``logger`` and ``message``, then
    ``thread_id``, ``run_id`` and ``interrupt_id`` when the record has them (add a
    `ContextFilter` to the handler; null outside a call), every other attribute given with
    ``extra=``, and
    ``exception`` (the formatted traceback) when one was logged. Values JSON cannot hold are
    written as their ``str()``.
    """

    def format(self, record: logging.LogRecord) -> str:
        """Return ``record`` as one line of JSON, with its context ids and any exception."""
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, value in record.__dict__.items():
            if name not in _STANDARD:
                out[name] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exception"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return msgspec.json.encode(out, enc_hook=str).decode()


_FILTER: Final = ContextFilter()


def library_logger(name: str) -> logging.Logger:
    """One of interlock's loggers: silent until configured, its records carrying the context.

    A logger's filters see only the records logged through it (not its children's), so every
    logger of interlock that reports on calls gets the filter of its own.
    """
    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())
    return logger
