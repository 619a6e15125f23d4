"""cancel_and_wait: a task that swallows a cancellation is still ended."""

from __future__ import annotations

import asyncio

from console.tasks import cancel_and_wait


async def test_a_task_that_swallows_a_cancellation_is_cancelled_again() -> None:
    swallowed = 0

    async def runs_on() -> None:
        nonlocal swallowed
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if swallowed:
                    raise
                swallowed += 1  # as wait_for before 3.12 does when its call finishes meanwhile

    task = asyncio.create_task(runs_on())
    await asyncio.sleep(0)
    await asyncio.wait_for(cancel_and_wait([task], grace=0.1), 5)
    assert task.cancelled() and swallowed == 1


async def test_a_cleanup_in_progress_is_not_cut_short() -> None:
    cleaned = False

    async def closes_on_the_way_out() -> None:
        nonlocal cleaned
        try:
            await asyncio.sleep(3600)
        finally:
            await asyncio.sleep(0.5)  # e.g. a process given time to exit
            cleaned = True

    task = asyncio.create_task(closes_on_the_way_out())
    await asyncio.sleep(0)
    await asyncio.wait_for(cancel_and_wait([task], grace=5), 10)
    assert cleaned and task.cancelled()


async def test_ended_and_failed_tasks_are_waited_for_without_raising() -> None:
    async def fails() -> None:
        raise RuntimeError("boom")

    failed = asyncio.create_task(fails())
    done = asyncio.create_task(asyncio.sleep(0))
    await asyncio.wait([failed, done])
    await cancel_and_wait([failed, done])
    assert isinstance(failed.exception(), RuntimeError) and done.done()
