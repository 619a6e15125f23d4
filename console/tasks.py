"""Ending background tasks for good."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

# How often a task that ran on is cancelled again.
RECANCEL_S = 0.3


async def cancel_and_wait(tasks: Iterable[asyncio.Task[object]]) -> None:
    """Cancel ``tasks`` and wait until each has ended, cancelling again while one runs on.

    ``asyncio.wait_for`` before Python 3.12 can swallow a cancellation that arrives just as the
    awaited call finishes; a loop around it then runs on, and a single ``cancel(); await task``
    waits for it for ever. A task's own exception or cancellation is not raised here.
    """
    pending = {task for task in tasks if not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        _done, pending = await asyncio.wait(pending, timeout=RECANCEL_S)
