"""What the commands print: consoles, human times, durations, JSON, and refusals.

Human output speaks in relative times ("3m ago", "in 12m"); ``--json`` output is exact (Unix
times, full values) and goes to stdout unformatted, so that scripts can read it.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from typing import Any, Final, TypeVar

import anyio
import click
import msgspec
from rich.console import Console

from .._errors import InterlockError

__all__ = [
    "EXIT_REFUSED",
    "Refused",
    "ago",
    "countdown",
    "echo_json",
    "err_console",
    "out_console",
    "parse_duration",
    "run",
    "span",
    "to_builtins",
]

EXIT_REFUSED: Final = 1
"""Exit status of a command that was refused, hit a conflict, or found nothing to act on."""

_T = TypeVar("_T")


class Refused(click.ClickException):
    """Raised when a command is refused or finds nothing to act on (exit status 1).

    The message says what was wrong and what to do next.
    """

    exit_code = EXIT_REFUSED


def out_console() -> Console:
    """The console for results (stdout)."""
    return Console(highlight=False, soft_wrap=True)


def err_console() -> Console:
    """The console for progress and problems (stderr), so stdout stays a clean result."""
    return Console(stderr=True, highlight=False, soft_wrap=True)


def run(call: Callable[[], Any]) -> Any:
    """Run a command's async body in an event loop of its own.

    An interlock error that no command turned into a refusal of its own still says what
    happened, and exits 1 rather than with a traceback.
    """
    try:
        return anyio.run(call)
    except InterlockError as exc:
        raise Refused(str(exc)) from exc


_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION: Final = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


def parse_duration(text: str) -> float:
    """Seconds in ``90``, ``45s``, ``10m``, ``2h``, ``1d``, ``1w`` or a sum like ``1h30m``.

    Raises:
        ValueError: Anything else; the message shows the accepted forms.
    """
    cleaned = text.strip().lower()
    try:
        seconds = float(cleaned)
    except ValueError:
        pos, seconds = 0, 0.0
        for m in _DURATION.finditer(cleaned):
            if m.start() != pos:
                break
            seconds += float(m[1]) * _UNITS[m[2]]
            pos = m.end()
        else:
            if pos == len(cleaned) and pos > 0:
                return seconds
        raise ValueError(
            f"{text!r} is not a duration: use seconds (90) or a number with a unit: 45s, 10m, "
            "2h, 1d, 1w, or a sum such as 1h30m"
        ) from None
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{text!r} is not a duration: give a number of seconds >= 0")
    return seconds


def span(seconds: float) -> str:
    """A length of time, rounded to its largest unit: ``45s``, ``12m``, ``3h``, ``2d``."""
    seconds = abs(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def ago(at: float, now: float | None = None) -> str:
    """When ``at`` was, from ``now``: ``just now``, ``3m ago`` (or ``in 5m`` if ahead)."""
    delta = (time.time() if now is None else now) - at
    if abs(delta) < 1:
        return "just now"
    return f"{span(delta)} ago" if delta > 0 else f"in {span(delta)}"


def countdown(deadline: float | None, now: float | None = None) -> str:
    """Time left until ``deadline``: ``in 12m``, ``overdue 3m``, or ``-`` for none."""
    if deadline is None:
        return "-"
    left = deadline - (time.time() if now is None else now)
    return f"in {span(left)}" if left >= 0 else f"overdue {span(left)}"


def to_builtins(value: Any) -> Any:
    """``value`` as JSON-able builtins (registered types as their fields, bytes as base64)."""
    return msgspec.to_builtins(value, enc_hook=repr)


def echo_json(value: Any) -> None:
    """Print ``value`` as indented JSON on stdout."""
    encoded = msgspec.json.encode(to_builtins(value))
    click.echo(msgspec.json.format(encoded, indent=2).decode())
