"""Launch from the recipes screen and track the attempt on the sweeps screen (local profile, for real)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable

from console.clusters import local_profile
from console.engine import Engine
from console.store import Store
from screens.app import make_app
from screens.dialogs import ConfirmDialog, LaunchDialog
from screens.sweeps import SweepsScreen
from screens.widgets.recipe_tree import RecipeTree
from tests.conftest import RECIPES
from tests.tui.helpers import showing, wait_for


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Engine:
    monkeypatch.setenv("SRT_DEMO_SPEED", "4")
    data = tmp_path / "data"
    return Engine(Store(data / "console.sqlite3"), {"local": local_profile(data)}, data)


def cell(table: DataTable[object], row: str, column: str) -> str:
    return str(table.get_cell(row, column))


async def test_launch_quick_and_watch_it_complete(engine: Engine) -> None:
    app = make_app([RECIPES / "demo"], engine=engine)
    async with app.run_test(size=(160, 45)) as pilot:
        tree = app.screen.query_one(RecipeTree)
        await wait_for(pilot, lambda: len(tree._leaves) >= 7)
        tree.select_path(str(RECIPES / "demo" / "quick.yaml"))
        await pilot.pause()
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, LaunchDialog))
        assert "demo-quick" in str(app.screen.query_one("#plan").render())
        await pilot.press("y")
        await wait_for(pilot, showing(pilot, SweepsScreen), timeout=20)
        table = app.screen.query_one(DataTable)
        await wait_for(pilot, lambda: table.row_count == 3)
        assert [k.value for k in table.rows] == ["s1", "a1", "a1.1"]
        key = "a1.1"
        refills = app.screen.refills
        seen: set[str] = set()

        def completed() -> bool:
            state = cell(table, key, "state").split()[0]
            seen.add(state)
            return state == "COMPLETED"

        await wait_for(pilot, completed, timeout=60)
        assert table.row_count == 3 and app.screen.refills == refills  # updated in place, never refilled
        assert {"PENDING", "RUNNING"} & seen
        assert cell(table, "a1", "name") == "demo-quick" and cell(table, "s1", "state") == "1 done"
        # Columns are as wide as their content (never COMPLET or NonZer).
        widths = {c.key.value: c.get_render_width(table) for c in table.columns.values()}
        assert widths["state"] >= len("COMPLETED sim") and widths["submitted"] >= len("12-01 11:25:34")
        # The scheduler's own times: started and ended are filled in, elapsed counts between them.
        assert cell(table, key, "started") != "-" and cell(table, key, "ended") != "-"


async def test_cancel_from_the_sweeps_screen(engine: Engine) -> None:
    await engine.launch([str(RECIPES / "demo" / "health-hang.yaml")], "local")
    app = make_app([RECIPES / "demo"], engine=engine)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.press("s")
        await wait_for(pilot, showing(pilot, SweepsScreen))
        table = app.screen.query_one(DataTable)
        key = "a1.1"
        await wait_for(pilot, lambda: cell(table, key, "state").startswith("RUNNING"), timeout=30)
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.press("y")
        await wait_for(pilot, lambda: cell(table, key, "state").startswith("CANCELLED"), timeout=30)
        assert cell(table, key, "reason") == "cancelled by you"
