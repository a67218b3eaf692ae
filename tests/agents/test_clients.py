"""`LoopClients`, the per-event-loop SDK clients every model adapter holds, on its own."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest

from interlock.agents._clients import LoopClients

pytestmark = pytest.mark.anyio


@dataclass(eq=False)
class Client:
    """A stand-in SDK client that records where it was used and closed."""

    number: int
    used_in: list[anyio.lowlevel.EventLoopToken] = field(default_factory=list)
    closed_in: anyio.lowlevel.EventLoopToken | None = None
    closes: int = 0

    @property
    def closed(self) -> bool:
        return self.closes > 0


class Closed(Exception):
    pass


class Elsewhere(Exception):
    pass


class Factory:
    """Builds numbered clients and closes them, like an SDK; counts both."""

    def __init__(self) -> None:
        self.built: list[Client] = []

    def build(self) -> Client:
        client = Client(len(self.built) + 1)
        self.built.append(client)
        return client

    async def close(self, client: Client) -> None:
        await anyio.lowlevel.checkpoint()  # a real close awaits: cancellation must not stop it
        client.closes += 1
        client.closed_in = anyio.lowlevel.current_token()

    def owned(self, *, first: Client | None = None) -> LoopClients[Client]:
        return LoopClients.owned(self.build, self.close, closed_error=Closed, first=first)


def given(client: Client) -> LoopClients[Client]:
    return LoopClients.given(
        client,
        is_closed=lambda c: c.closed,
        closed_error=Closed,
        elsewhere_error=Elsewhere,
    )


async def use(clients: LoopClients[Client]) -> Client:
    """Ask for the running loop's client, as a model call does, and note where it ran."""
    client = await clients.here()
    client.used_in.append(anyio.lowlevel.current_token())
    return client


# -- a client per event loop -----------------------------------------------------------------


@pytest.mark.parametrize(
    "loops", [("asyncio", "asyncio"), ("trio", "trio"), ("asyncio", "trio")], ids="-then-".join
)
def test_each_event_loop_gets_its_own_client_closed_as_the_loop_ends(
    loops: tuple[str, str],
) -> None:
    factory = Factory()
    clients = factory.owned()

    async def twice() -> Client:
        first, again = await use(clients), await use(clients)
        assert first is again, "one loop asks twice: one client"
        assert not first.closed, "open while its loop runs"
        return first

    one, two = (anyio.run(twice, backend=loop) for loop in loops)
    assert one is not two
    assert factory.built == [one, two]
    for client in (one, two):
        assert client.closes == 1
        assert client.closed_in == client.used_in[0], "closed in its own loop, as it ended"
    assert not clients.closed, "a loop that ends does not close the model"


def test_the_client_built_first_goes_to_the_first_loop() -> None:
    factory = Factory()
    first = factory.build()  # what an adapter builds at once, to check its settings
    clients = factory.owned(first=first)
    assert anyio.run(use, clients) is first
    assert first.closed
    second = anyio.run(use, clients)
    assert second is not first
    assert factory.built == [first, second]


async def test_the_tasks_of_one_loop_share_one_client() -> None:
    factory = Factory()
    clients = factory.owned()
    got: list[Client] = []

    async def ask() -> None:
        got.append(await use(clients))

    async with anyio.create_task_group() as tasks:
        for _ in range(10):
            tasks.start_soon(ask)
    assert len(factory.built) == 1
    assert got == [factory.built[0]] * 10
    await clients.aclose()


async def test_a_build_that_fails_leaves_nothing_behind() -> None:
    factory = Factory()
    failures = [RuntimeError("no key")]

    def build() -> Client:
        if failures:
            raise failures.pop()
        return factory.build()

    clients = LoopClients.owned(build, factory.close, closed_error=Closed)
    with pytest.raises(RuntimeError, match="no key"):
        await clients.here()
    client = await clients.here()  # asked again: built now
    assert factory.built == [client]
    await clients.aclose()
    assert client.closed


# -- aclose ----------------------------------------------------------------------------------


async def test_aclose_closes_the_running_loops_client_and_refuses_more() -> None:
    factory = Factory()
    clients = factory.owned()
    client = await use(clients)
    await clients.aclose()
    assert client.closes == 1
    assert client.closed_in == anyio.lowlevel.current_token()
    assert clients.closed
    with pytest.raises(Closed):
        await clients.here()
    await clients.aclose()  # again: nothing left to close
    assert client.closes == 1
    assert factory.built == [client]


def test_a_closed_model_is_refused_in_a_later_loop_too() -> None:
    factory = Factory()
    clients = factory.owned()
    anyio.run(use, clients)
    anyio.run(clients.aclose)
    with pytest.raises(Closed):
        anyio.run(use, clients)
    assert len(factory.built) == 1


async def test_aclose_closes_a_first_client_no_loop_took() -> None:
    factory = Factory()
    first = factory.build()
    clients = factory.owned(first=first)
    await clients.aclose()
    assert first.closes == 1


async def test_aclose_closes_the_client_even_when_cancelled() -> None:
    factory = Factory()
    clients = factory.owned()
    client = await use(clients)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await clients.aclose()
    assert client.closes == 1


def test_aclose_leaves_another_running_loops_client_to_that_loop() -> None:
    factory = Factory()
    clients = factory.owned()
    taken, closed_elsewhere = threading.Event(), threading.Event()
    open_then: list[bool] = []

    async def other_loop() -> Client:
        client = await use(clients)
        taken.set()
        await anyio.to_thread.run_sync(closed_elsewhere.wait)
        open_then.append(not client.closed)  # after the main thread's aclose
        return client

    results: list[Client] = []
    thread = threading.Thread(target=lambda: results.append(anyio.run(other_loop)))
    thread.start()
    try:
        assert taken.wait(10), "the other loop did not start"

        async def close_here() -> Client:
            mine = await use(clients)
            await clients.aclose()
            return mine

        mine = anyio.run(close_here, backend="trio")
    finally:
        closed_elsewhere.set()
        thread.join()
    (theirs,) = results
    assert mine is not theirs and mine.closed
    assert open_then == [True], "another loop's aclose leaves this loop's client open"
    assert theirs.closes == 1 and theirs.closed_in == theirs.used_in[0], "closed as its loop ended"


# -- a client the caller gives ---------------------------------------------------------------


def test_a_given_client_is_used_in_its_loop_and_never_closed() -> None:
    client = Client(0)
    clients = given(client)

    async def twice_then_close() -> None:
        assert await use(clients) is client
        assert await use(clients) is client
        await clients.aclose()
        assert clients.closed
        with pytest.raises(Closed):
            await clients.here()

    anyio.run(twice_then_close)
    assert client.closes == 0, "the caller's to close"


def test_a_given_client_is_refused_in_another_loop() -> None:
    client = Client(0)
    clients = given(client)
    anyio.run(use, clients)
    with pytest.raises(Elsewhere):
        anyio.run(use, clients, backend="trio")
    assert len(client.used_in) == 1
    assert client.closes == 0


async def test_a_given_client_its_owner_closed_is_refused() -> None:
    client = Client(0)
    clients = given(client)
    assert await use(clients) is client
    client.closes = 1  # closed by its owner
    assert clients.closed
    with pytest.raises(Closed):
        await clients.here()
