"""Arriving lines are always shown: the flush that follows a burst is never lost, whatever its delay."""

from __future__ import annotations

import time

import pytest
from textual.app import App, ComposeResult

from screens.widgets import log_view
from screens.widgets.log_view import FLUSH_S, LogBody
from tests.tui.helpers import wait_for

FILE = "logs/w0.out"


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield LogBody()


class FrozenClock:
    """The log view's clock, held still so the wait before the next flush is exactly chosen."""

    def __init__(self) -> None:
        self.now = time.monotonic()

    def monotonic(self) -> float:
        return self.now


@pytest.mark.parametrize("wait", [1e-7, 1e-4, FLUSH_S / 2])
async def test_lines_that_arrive_just_before_a_flush_is_due_are_shown(
    wait: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FrozenClock()
    monkeypatch.setattr(log_view, "time", clock)
    app = Host()
    async with app.run_test(size=(80, 10)) as pilot:
        body = app.query_one(LogBody)
        body.show(FILE)
        body.buffer(FILE).load(1, [b"first"], 0)
        await wait_for(pilot, lambda: body.row_count == 1 and not body._flush_pending)
        await pilot.pause()  # no flush of the load is still queued
        flushes = body.flushes
        # The last flush was FLUSH_S - wait ago: the next is due in ``wait``.
        body._last_flush = clock.now - FLUSH_S + wait
        body.append(FILE, 2, ["second"])
        await wait_for(pilot, lambda: body.flushes > flushes, timeout=5)
        assert body.line_at_row(body.row_count - 1) == 2
        assert not body._flush_pending
