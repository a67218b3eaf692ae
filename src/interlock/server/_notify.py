"""Outgoing notifications: tell the people who must act that a question waits for them.

A `Notifier` takes every `ServerEvent` the server publishes and hands it to each `Channel`
that asked for its type: a `Webhook` (signed JSON, or a Slack-compatible message) or an
`Email` (SMTP, through the standard library). Each attempt is recorded in a `DeliveryLog`
and on the ``interlock.notify`` logger.

Invariants:

- Publishing never waits: `Notifier.publish` puts one delivery per channel in that channel's
  bounded queue and returns. A full queue drops its oldest delivery, on the record.
- Channels are independent: each has its own queue and its own delivery tasks, so a slow or
  dead receiver holds up only its own deliveries.
- Every delivery ends on the record exactly once, as ``delivered``, ``failed`` or
  ``dropped``; the attempts before a retry are recorded as ``retrying``.
- A retry carries the same event (same body, same ``Interlock-Event-Id``), so a receiver that
  saw the first attempt can tell the second one is a duplicate.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from types import TracebackType
from typing import Literal, Self

import anyio
import anyio.lowlevel
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ._channels import (
    INTERRUPT_EVENTS,
    Channel,
    Email,
    Outcome,
    Receipt,
    RetryPolicy,
    Sender,
    Webhook,
)
from ._events import EventType, ServerEvent
from ._signing import SignatureError, sign, verify_signature

__all__ = [
    "INTERRUPT_EVENTS",
    "Channel",
    "DeliveryLog",
    "DeliveryRecord",
    "Email",
    "Notifier",
    "Receipt",
    "RetryPolicy",
    "Sender",
    "SignatureError",
    "Webhook",
    "sign",
    "verify_signature",
]


_logger = logging.getLogger("interlock.notify")

# --- the log ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class DeliveryRecord:
    """One entry of the `DeliveryLog`: an attempt, or a delivery dropped before it was sent."""

    event_id: str
    """The event's id (the ``Interlock-Event-Id`` a webhook receiver sees)."""
    event_type: EventType
    """What happened."""
    channel: str
    """The channel's name."""
    attempt: int
    """The attempt's number, from 1; for a dropped delivery, the attempts made before."""
    at: float
    """Unix time the attempt ended (or the delivery was dropped)."""
    outcome: Outcome
    """``delivered``, ``retrying`` (another attempt follows), ``failed`` or ``dropped``."""
    status: int | None = None
    """The receiver's answer, if it gave one: an HTTP status or an SMTP reply code."""
    error: str | None = None
    """What went wrong (or why it was dropped)."""
    elapsed_ms: float | None = None
    """How long the attempt took; None for a delivery dropped between attempts."""
    thread: str = ""
    """The thread the event happened on (whose readers may see its deliveries)."""
    tool: str | None = None
    """The tool whose question the event is about, if any."""


class DeliveryLog:
    """The latest delivery attempts, in memory: the oldest go once ``maxlen`` is reached."""

    def __init__(self, maxlen: int = 1000) -> None:
        if maxlen < 1:
            raise ValueError(f"maxlen must be 1 or more, not {maxlen}")
        self._entries: deque[DeliveryRecord] = deque(maxlen=maxlen)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        counts: dict[str, int] = {}
        for entry in self._entries:
            counts[entry.outcome] = counts.get(entry.outcome, 0) + 1
        shown = " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
        return f"<DeliveryLog {len(self._entries)} entries {shown}>".replace(" >", ">")

    def record(self, entry: DeliveryRecord) -> None:
        """Add an entry (the notifier does; a custom channel has no need to)."""
        self._entries.append(entry)

    def entries(
        self, *, limit: int | None = None, event_id: str | None = None, channel: str | None = None
    ) -> list[DeliveryRecord]:
        """The entries, oldest first; only ``event_id``'s and ``channel``'s, the last ``limit``."""
        found = [
            e
            for e in self._entries
            if (event_id is None or e.event_id == event_id)
            and (channel is None or e.channel == channel)
        ]
        if limit is not None:
            if limit < 0:
                raise ValueError(f"limit must be 0 or more, not {limit}")
            found = found[len(found) - limit :] if limit else []
        return found


# --- the notifier ----------------------------------------------------------------------------

_LEVELS: dict[Outcome, int] = {
    "delivered": logging.INFO,
    "retrying": logging.WARNING,
    "failed": logging.ERROR,
    "dropped": logging.WARNING,
}


@dataclass(eq=False)
class _Delivery:
    event: ServerEvent
    attempts: int = 0


@dataclass(eq=False)
class _Lane:
    """One channel's queue and the state of its deliveries."""

    channel: Channel
    send: MemoryObjectSendStream[_Delivery]
    receive: MemoryObjectReceiveStream[_Delivery]
    sender: Sender | None = None
    queued: int = 0
    in_flight: int = 0


class Notifier:
    """Delivers each published event to the channels that asked for its type.

    Run it with ``async with notifier:`` (under asyncio or trio); `publish` from anywhere
    in the same event loop while it runs. Leaving the block stops taking events, gives
    what is queued or in flight ``drain_timeout`` seconds to be delivered, and records
    what is left as dropped.

    Args:
        channels: Where events go; their names must differ.
        log: Where attempts are recorded; a fresh `DeliveryLog` by default.
        queue_size: How many deliveries wait per channel before the oldest is dropped.
        concurrency: How many deliveries per channel are attempted at once.
        drain_timeout: How long closing waits for queued deliveries to finish.
    """

    def __init__(
        self,
        channels: Iterable[Channel],
        *,
        log: DeliveryLog | None = None,
        queue_size: int = 1000,
        concurrency: int = 4,
        drain_timeout: float = 10.0,
    ) -> None:
        self.channels: tuple[Channel, ...] = tuple(channels)
        for channel in self.channels:
            if not isinstance(channel, Channel):
                raise TypeError(
                    f"{channel!r} is not a notification channel: use Webhook(...), Email(...) "
                    "or an object with name, events, retry and connect()"
                )
        names = [c.name for c in self.channels]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"channels {twice} share a name; pass name= to tell them apart")
        if queue_size < 1 or concurrency < 1:
            raise ValueError("queue_size and concurrency must be 1 or more")
        if drain_timeout < 0:
            raise ValueError(f"drain_timeout must be 0 or more seconds, not {drain_timeout}")
        self.log = log if log is not None else DeliveryLog()
        self._queue_size = queue_size
        self._concurrency = concurrency
        self._drain_timeout = drain_timeout
        self._state: Literal["new", "running", "closing", "closed"] = "new"
        self._lanes: list[_Lane] = []
        self._stack = AsyncExitStack()
        # Made when it starts: anyio's primitives belong to the event loop that runs it.
        self._workers: anyio.CancelScope | None = None
        self._unsettled = 0
        self._idle: anyio.Event | None = None

    def __repr__(self) -> str:
        queued = sum(lane.queued for lane in self._lanes)
        in_flight = sum(lane.in_flight for lane in self._lanes)
        return (
            f"<Notifier {self._state} {len(self.channels)} channels, {queued} queued, "
            f"{in_flight} in flight>"
        )

    # Lifecycle.

    async def __aenter__(self) -> Self:
        if self._state != "new":
            raise RuntimeError("a Notifier runs once; create a new one to run it again")
        self._state = "running"
        self._workers = anyio.CancelScope()
        try:
            for channel in self.channels:
                send, receive = anyio.create_memory_object_stream[_Delivery](self._queue_size)
                lane = _Lane(channel=channel, send=send, receive=receive)
                self._lanes.append(lane)
                lane.sender = await self._stack.enter_async_context(channel.connect())
            group = await self._stack.enter_async_context(anyio.create_task_group())
            group.start_soon(self._supervise)
        except BaseException:
            self._stop_taking()
            try:
                await self._stack.aclose()
            finally:
                self._sweep()
                self._state = "closed"
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._state in ("new", "closed"):
            self._state = "closed"
            return
        try:
            if exc_type is None:
                self._stop_taking()
                with anyio.move_on_after(self._drain_timeout):
                    await self.wait_idle()
        finally:
            self._stop_taking()
            if self._workers is not None:
                self._workers.cancel()
            try:
                await self._stack.aclose()
            finally:
                self._sweep()
                self._state = "closed"

    async def aclose(self) -> None:
        """Stop as leaving ``async with notifier:`` does; call it from the task that entered."""
        await self.__aexit__(None, None, None)

    # Publishing.

    def publish_nowait(self, event: ServerEvent) -> None:
        """Queue ``event`` for every channel that takes its type; never waits."""
        if not isinstance(event, ServerEvent):
            raise TypeError(f"publish takes a ServerEvent, not {type(event).__name__}")
        if self._state == "new":
            raise RuntimeError("the notifier is not running; publish inside `async with notifier:`")
        for lane in self._lanes:
            if event.type not in lane.channel.events:
                continue
            delivery = _Delivery(event=event)
            if self._state != "running":
                # Never counted: the server may publish while it shuts down.
                self._record(lane, delivery, "dropped", error="the notifier is closed")
                continue
            self._unsettled += 1
            if self._unsettled == 1:
                self._idle = anyio.Event()
            try:
                lane.send.send_nowait(delivery)
            except anyio.WouldBlock:
                oldest = lane.receive.receive_nowait()
                lane.queued -= 1
                self._settle(
                    lane,
                    oldest,
                    "dropped",
                    error=f"the queue was full ({self._queue_size} waiting); dropped the oldest",
                )
                lane.send.send_nowait(delivery)
            lane.queued += 1

    async def publish(self, event: ServerEvent) -> None:
        """Queue ``event`` for every channel that takes its type; returns at once."""
        self.publish_nowait(event)
        await anyio.lowlevel.checkpoint()

    async def wait_idle(self) -> None:
        """Wait until nothing is queued or being delivered."""
        while self._unsettled and self._idle is not None:
            await self._idle.wait()
        await anyio.lowlevel.checkpoint()

    # Delivery.

    async def _supervise(self) -> None:
        assert self._workers is not None
        with self._workers:
            async with anyio.create_task_group() as group:
                for lane in self._lanes:
                    for _ in range(self._concurrency):
                        group.start_soon(self._work, lane)

    async def _work(self, lane: _Lane) -> None:
        with lane.receive.clone() as receive:
            async for delivery in receive:
                lane.queued -= 1
                lane.in_flight += 1
                try:
                    await self._attempt_all(lane, delivery)
                except anyio.get_cancelled_exc_class():
                    self._settle(
                        lane, delivery, "dropped", error="the notifier closed during delivery"
                    )
                    raise
                finally:
                    lane.in_flight -= 1

    async def _attempt_all(self, lane: _Lane, delivery: _Delivery) -> None:
        assert lane.sender is not None
        policy = lane.channel.retry
        while True:
            delivery.attempts += 1
            started = time.perf_counter()
            try:
                receipt = await lane.sender(delivery.event, delivery.attempts)
            except Exception as exc:
                # A broken channel must not stop the others; its traceback goes to the logger.
                _logger.error("channel %s raised", lane.channel.name, exc_info=exc)
                receipt = Receipt(
                    outcome="failed", detail=f"the channel raised {type(exc).__name__}: {exc}"
                )
            elapsed_ms = (time.perf_counter() - started) * 1000
            if receipt.outcome == "delivered":
                self._settle(
                    lane,
                    delivery,
                    "delivered",
                    status=receipt.status,
                    error=receipt.detail or None,
                    elapsed_ms=elapsed_ms,
                )
                return
            if receipt.outcome == "failed" or delivery.attempts >= policy.max_attempts:
                error = receipt.detail or "failed"
                if receipt.outcome == "retry":
                    error = f"gave up after {delivery.attempts} attempts: {error}"
                self._settle(
                    lane,
                    delivery,
                    "failed",
                    status=receipt.status,
                    error=error,
                    elapsed_ms=elapsed_ms,
                )
                return
            wait = policy.delay(delivery.attempts, receipt.retry_after)
            asked = " as the receiver asked" if receipt.retry_after is not None else ""
            self._settle(
                lane,
                delivery,
                "retrying",
                status=receipt.status,
                error=f"{receipt.detail or 'failed'}; next attempt in {wait:.2f} s{asked}",
                elapsed_ms=elapsed_ms,
            )
            await anyio.sleep(wait)

    # State changes: small, synchronous, and the only places the counters move.

    def _record(
        self,
        lane: _Lane,
        delivery: _Delivery,
        outcome: Outcome,
        *,
        status: int | None = None,
        error: str | None = None,
        elapsed_ms: float | None = None,
    ) -> None:
        entry = DeliveryRecord(
            event_id=delivery.event.id,
            event_type=delivery.event.type,
            channel=lane.channel.name,
            attempt=delivery.attempts,
            at=time.time(),
            outcome=outcome,
            status=status,
            error=error,
            elapsed_ms=elapsed_ms,
            thread=delivery.event.thread,
            tool=delivery.event.tool,
        )
        self.log.record(entry)
        _logger.log(
            _LEVELS[outcome],
            "%s: event %s (%s) %s on attempt %d%s%s",
            entry.channel,
            entry.event_id,
            entry.event_type,
            outcome,
            entry.attempt,
            f", status {status}" if status is not None else "",
            f": {error}" if error else "",
            extra={"delivery": entry},
        )

    def _settle(
        self,
        lane: _Lane,
        delivery: _Delivery,
        outcome: Outcome,
        *,
        status: int | None = None,
        error: str | None = None,
        elapsed_ms: float | None = None,
    ) -> None:
        """Record an attempt's outcome; a final one takes the delivery off the count."""
        self._record(lane, delivery, outcome, status=status, error=error, elapsed_ms=elapsed_ms)
        # Invariant: _unsettled counts the deliveries queued or in flight; each one leaves
        # the count once, with its final outcome.
        if outcome != "retrying":
            self._unsettled -= 1
            if self._unsettled == 0 and self._idle is not None:
                self._idle.set()

    def _stop_taking(self) -> None:
        if self._state == "running":
            self._state = "closing"
        for lane in self._lanes:
            lane.send.close()

    def _sweep(self) -> None:
        """Record what is still queued as dropped, and close the queues."""
        for lane in self._lanes:
            while True:
                try:
                    delivery = lane.receive.receive_nowait()
                except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                    break
                lane.queued -= 1
                self._settle(
                    lane, delivery, "dropped", error="the notifier closed before it was sent"
                )
            lane.receive.close()
