"""Ending background tasks for good."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

GRACE_S = 7.0
"""How long a cancelled task may take to end: its cleanup (closing a process: two 3 s waits)."""
RECANCEL_S = 0.3
"""After that, how often a task that ran on is cancelled again."""


async def cancel_and_wait(tasks: Iterable[asyncio.Task[object]], *, grace: float = GRACE_S) -> None:
    """Cancel ``tasks`` and wait until each has ended, cancelling again any that runs on.

    ``asyncio.wait_for`` before Python 3.12 can swallow a cancellation that arrives just as the
    awaited call finishes; a loop around it then runs on, and a single ``cancel(); await task``
    waits for it for ever. A task gets ``grace`` seconds first, so that a cleanup in progress
    (a ``finally`` closing a process) is not cut short. A task's own exception or cancellation
    is not raised here.
    """
    pending = {task for task in tasks if not task.done()}
    wait = grace
    while pending:
        for task in pending:
            task.cancel()
        _done, pending = await asyncio.wait(pending, timeout=wait)
        wait = RECANCEL_S
