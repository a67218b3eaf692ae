"""The dedicated store thread: results, errors, order, cancellation."""

from __future__ import annotations

import threading

import anyio
import pytest

from interlock.stores._worker import ThreadWorker

pytestmark = pytest.mark.anyio


@pytest.mark.asyncio_only(
    reason="asserts the one dedicated thread; under trio ThreadWorker uses anyio.to_thread"
)
async def test_runs_calls_in_order_on_one_other_thread() -> None:
    worker = ThreadWorker("test")
    seen: list[tuple[int, int | None]] = []

    def call(n: int) -> int:
        seen.append((n, threading.get_ident()))
        return n * 2

    async with anyio.create_task_group() as tg:
        for n in range(20):
            tg.start_soon(worker.run, lambda n=n: call(n))
    assert sorted(n for n, _ in seen) == list(range(20))
    threads = {t for _, t in seen}
    assert len(threads) == 1 and threading.get_ident() not in threads
    assert await worker.run(lambda: 21) == 21
    await anyio.to_thread.run_sync(worker.stop)


async def test_errors_reach_the_caller() -> None:
    worker = ThreadWorker("test")

    def boom() -> None:
        raise ValueError("nope")

    with pytest.raises(ValueError, match="nope"):
        await worker.run(boom)
    assert await worker.run(lambda: "still works") == "still works"
    await anyio.to_thread.run_sync(worker.stop)


async def test_cancelled_caller_waits_for_the_call_to_finish() -> None:
    worker = ThreadWorker("test")
    started, release = threading.Event(), threading.Event()
    finished: list[bool] = []

    def slow() -> None:
        started.set()
        release.wait(5)
        finished.append(True)

    with anyio.CancelScope() as scope:

        async def cancel_when_started() -> None:
            await anyio.to_thread.run_sync(started.wait, 5)
            scope.cancel()
            release.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_when_started)
            await worker.run(slow)
            pytest.fail("the cancellation was not delivered")
    assert finished == [True]  # the call completed before the cancellation was seen
    await anyio.to_thread.run_sync(worker.stop)


async def test_a_task_among_others_waits_on_the_queue_and_gets_results_and_errors() -> None:
    # Under anyio's test runner the test is not its loop's only task: the worker thread runs
    # the calls.
    worker = ThreadWorker("test")
    ran_on: list[int] = []

    def call() -> str:
        ran_on.append(threading.get_ident())
        return "ok"

    def boom() -> None:
        raise KeyError("lost")

    assert await worker.run(call) == "ok"
    assert ran_on != [threading.get_ident()]
    with pytest.raises(KeyError, match="lost"):
        await worker.run(boom)
    await anyio.to_thread.run_sync(worker.stop)


def test_helper_threads_leave_ctrl_c_to_the_main_thread() -> None:
    import signal
    import threading

    from interlock._daemon import start_thread

    seen: list[set[int]] = []
    thread = start_thread(lambda: seen.append(signal.pthread_sigmask(signal.SIG_BLOCK, [])), "t")
    thread.join(5)
    assert {signal.SIGINT, signal.SIGTERM} <= seen[0]
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    assert thread.daemon and isinstance(thread, threading.Thread)
