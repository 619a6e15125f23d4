"""A table updated in place keeps only what it can still draw (screens/widgets/live_table.py)."""

from __future__ import annotations

from typing import Any

from textual.app import App, ComposeResult
from textual.containers import Horizontal
from textual.widgets import DataTable

from screens.widgets.live_table import LiveTable, render_caches

ROWS, COLUMNS, UPDATES = 12, 4, 40


class Tables(App[None]):
    def compose(self) -> ComposeResult:
        with Horizontal():
            yield LiveTable(id="live")
            yield DataTable(id="plain")

    def on_mount(self) -> None:
        for table in self.query(DataTable):
            for c in range(COLUMNS):
                table.add_column(f"c{c}", key=f"c{c}")
            for r in range(ROWS):
                table.add_row(*(f"{r}.{c}" for c in range(COLUMNS)), key=f"r{r}")


def cached_cells(table: DataTable[Any]) -> int:
    return len(render_caches(table)["_cell_render_cache"])


def shown(table: DataTable[Any]) -> list[str]:
    return [table.render_line(y).text for y in range(table.size.height)]


async def test_the_caches_hold_only_the_current_update() -> None:
    app = Tables()
    async with app.run_test(size=(120, 30)) as pilot:
        live = app.query_one("#live", LiveTable)
        plain = app.query_one("#plain", DataTable)
        await pilot.pause()
        for n in range(UPDATES):
            for table in (live, plain):
                table.update_cell(f"r{n % ROWS}", "c1", f"u{n}")
            await pilot.pause()
            # The caches fill as a frame is drawn; drawing every line makes that certain.
            shown(live)
            shown(plain)
        visible = (ROWS + 1) * COLUMNS  # the rows and the header
        assert cached_cells(live) <= visible
        # Without it, every update's entries stay until the LRU cap (what grew for minutes).
        assert cached_cells(plain) > 10 * visible
        # Both draw the same table: the last updates of each row are in view.
        assert shown(live) == shown(plain)
        assert any(f"u{UPDATES - 1}" in line for line in shown(live))
