"""Awaiting UI conditions without fixed sleeps."""

from __future__ import annotations

import time
from collections.abc import Callable

from textual.pilot import Pilot


async def wait_for(pilot: Pilot[object], condition: Callable[[], object], timeout: float = 10.0) -> None:
    """Let the app run until `condition()` is true; fail with a clear message after `timeout`."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await pilot.pause(0.02)


def showing(pilot: Pilot[object], screen_type: type) -> Callable[[], bool]:
    """A condition: the app shows a screen of ``screen_type``, mounted with its widgets."""

    def check() -> bool:
        screen = pilot.app.screen
        return isinstance(screen, screen_type) and screen.is_mounted and bool(screen.children)

    return check
