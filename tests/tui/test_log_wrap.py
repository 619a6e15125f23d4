"""Wrapped rows of the log body stay right while a followed log grows, is trimmed at its front
(memory bound), is filtered and is resized: they are measured as lines arrive, not whole."""

from __future__ import annotations

import random

from textual.app import App, ComposeResult

from screens.widgets.log_view import LogBody
from tests.tui.helpers import wait_for

FILE = "logs/w0.out"


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield LogBody(max_lines=40)


def expected_rows(body: LogBody) -> list[tuple[int, int]]:
    """(line number, piece) of every row, wrapped from scratch."""
    buf = body.buffers[FILE]
    width = body._text_width()
    indices = range(len(buf.lines)) if body._rows is None else body._rows
    return [(buf.first_line_no + i, piece) for i in indices for piece in range(max(1, -(-len(buf.lines[i]) // width)))]


def shown_rows(body: LogBody) -> list[tuple[int, int]]:
    rows = []
    for row in range(body.row_count):
        line_no = body.line_at_row(row)
        assert line_no is not None
        rows.append((line_no, body._unwrap_row(row)[1]))
    return rows


async def test_wrapped_rows_match_a_fresh_wrap_through_appends_trims_filters_and_resizes() -> None:
    rng = random.Random(7)
    app = Host()
    async with app.run_test(size=(60, 20)) as pilot:
        body = app.query_one(LogBody)
        body.show(FILE)
        body.buffer(FILE).load(1, [], 0)
        body.set_wrap(True)
        next_no = 1
        for step in range(30):
            sizes = [rng.choice((0, 5, 49, 50, 51, 130)) for _ in range(7)]
            batch = [("ready " if rng.random() < 0.3 else "") + "x" * n for n in sizes]
            body.append(FILE, next_no, batch)
            next_no += len(batch)
            body.flush_now()
            if step == 10:
                body.set_filter("ready")
            elif step == 20:
                body.set_filter("")
            elif step == 25:
                await pilot.resize_terminal(45, 20)
                await wait_for(pilot, lambda: body.size.width == 45)
            assert shown_rows(body) == expected_rows(body), f"step {step}"
        last = body.buffers[FILE].last_line_no
        assert body.buffers[FILE].first_line_no > 1  # the front was trimmed along the way
        assert body.row_of(last) == expected_rows(body).index((last, 0))
