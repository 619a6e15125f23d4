"""The app's collector settings: a followed busy log does not bring full collections every few
seconds (each walks everything the app holds, and holds a frame, a key or a finding back)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from textual.app import App, ComposeResult

from screens.app import YOUNG_THRESHOLD, _settle_collector
from screens.widgets.log_view import LogBody
from tests.tui.helpers import wait_for

FILE = "logs/decode_w0.out"


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield LogBody()


@pytest.fixture
def collector_restored() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def decode_lines(first: int, count: int) -> list[str]:
    return [
        f"[2026-12-01 10:00:02 DP0 TP0] Decode batch. #running-req: {n % 64}, #token: {n}, "
        f"token usage: 0.{n % 100:02d}, gen throughput (token/s): 1234.5, #queue-req: 0"
        for n in range(first, first + count)
    ]


async def test_a_followed_busy_log_brings_no_full_collections(collector_restored: None) -> None:
    full: list[int] = []

    def on_collect(phase: str, info: dict[str, int]) -> None:
        if phase == "stop" and info["generation"] == 2:
            full.append(info["collected"])

    app = Host()
    async with app.run_test(size=(120, 40)) as pilot:
        body = app.query_one(LogBody)
        body.show(FILE)
        body.buffer(FILE).load(1, [], 0)
        _settle_collector()
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
        gc.callbacks.append(on_collect)
        try:
            next_no = 1
            for _ in range(200):  # 10,000 lines in batches of 50, a frame after most
                body.append(FILE, next_no, decode_lines(next_no, 50))
                next_no += 50
                await pilot.pause(0.02)
            await wait_for(pilot, lambda: body.line_at_row(body.row_count - 1) == next_no - 1)
        finally:
            gc.callbacks.remove(on_collect)
        # With Python's default (every 700 allocations) this load brings a full collection every
        # twenty frames or so; here at most one.
        assert body.flushes >= 50
        assert len(full) <= 1, full
