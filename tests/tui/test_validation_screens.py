"""The validation workflow in the UI: pin checks in the launch dialog, provenance on the attempt
screen, the report on `v`, a baseline on the results screen (real local-profile runs, Pilot)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from textual.widgets import Button, DataTable, Input, Static

from console.clusters import Profile, local_profile
from console.engine import Engine
from console.store import Store
from screens.app import make_app
from screens.attempt import AttemptScreen
from screens.baseline import BaselineDialog
from screens.dialogs import LaunchDialog
from screens.results import ResultsScreen
from screens.sweeps import SweepsScreen
from screens.widgets.plot import THROUGHPUT, PointsPlot
from screens.widgets.recipe_tree import RecipeTree
from tests.conftest import RECIPES
from tests.tui.helpers import wait_for
from tests.unit.test_provenance import Checkout

TWIN = RECIPES / "demo" / "mi355x-1p1d-tp8.yaml"


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SRT_DEMO_SPEED", "8")
    return tmp_path / "data"


def rendered(app: object, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).render())  # type: ignore[attr-defined]


async def test_launch_dialog_shows_an_unsupported_backend_before_submitting(data: Path, tmp_path: Path) -> None:
    checkout = Checkout(tmp_path / "srt-slurm")
    site = Profile(name="site", launcher="srtctl", ssh=None, scheduler="slurm", workdir=str(tmp_path / "work"),
                   outputs=None, results=None, srt_slurm=str(checkout.path))  # fmt: skip
    engine = Engine(Store(data / "console.sqlite3"), {"local": local_profile(data), "site": site}, data)
    app = make_app([RECIPES / "demo"], engine=engine, default_cluster="site")
    async with app.run_test(size=(160, 50)) as pilot:
        tree = app.screen.query_one(RecipeTree)
        await wait_for(pilot, lambda: len(tree._leaves) >= 7)
        tree.select_path(str(TWIN))
        await pilot.pause()
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, LaunchDialog))
        await wait_for(pilot, lambda: "backend 'atom'" in rendered(app, "#pins"))
        pins = rendered(app, "#pins")
        assert "✗ demo-dsv4-fp4-mi355x-atom-1p1d-tp8: backend 'atom' is not supported" in pins
        assert "frontend 'atomesh'" in pins
        assert str(app.screen.query_one("#launch", Button).label) == "Launch anyway (y)"
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, LaunchDialog))
    assert engine.store.sweeps() == []


async def _twin_run(data: Path) -> Engine:
    engine = Engine(Store(data / "console.sqlite3"), {"local": local_profile(data)}, data)
    sweep = await engine.launch([str(TWIN)], "local")
    await engine.wait([a.id for arm in engine.store.arms(sweep) for a in engine.store.attempts(arm.id)], 0.2)
    return engine


def better_baseline(engine: Engine, target: Path) -> Path:
    """The run's own files, with c8's throughput 10 % higher: the run is a regression there."""
    (attempt,) = engine.store.attempts()
    target.mkdir()
    shutil.copy(Path(attempt.output_dir or "") / "config.yaml", target / "config.yaml")
    for path in (Path(attempt.results_dir or "") / "fixed-seq").glob("*.json"):
        doc = json.loads(path.read_text())
        if path.stem.endswith("-c8"):
            doc["output_throughput"] *= 1.10
            doc["total_token_throughput"] *= 1.10
        (target / path.name).write_text(json.dumps(doc))
    return target


async def test_results_screen_overlays_a_baseline_with_delta_columns(data: Path, tmp_path: Path) -> None:
    engine = await _twin_run(data)
    baseline = better_baseline(engine, tmp_path / "baseline")
    (arm,) = engine.store.arms()
    app = make_app([RECIPES / "demo"], engine=engine)
    async with app.run_test(size=(220, 50)) as pilot:
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SweepsScreen))
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, ResultsScreen) and app.screen.loaded)
        screen = app.screen
        assert isinstance(screen, ResultsScreen)
        table = screen.query_one(f"#arm-{arm.id}", DataTable)
        assert "vs_base" not in table.columns
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, BaselineDialog))
        app.screen.query_one(Input).value = str(baseline)
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.baseline is not None and "vs_base" in table.columns)
        verdicts = {int(str(table.get_cell(k, "conc"))): str(table.get_cell(k, "vs_base")) for k in table.rows}
        assert verdicts == {4: "ok", 8: "regressed: output tok/s, total tok/s, tok/s/GPU", 16: "ok", 32: "ok",
                            64: "ok", 128: "ok"}  # fmt: skip
        assert str(table.get_cell("8", "d_out")) == "-9.1%" and str(table.get_cell("4", "d_out")) == "+0.0%"
        series = screen.query_one(PointsPlot).series(THROUGHPUT.key)
        assert [s.name for s in series] == [arm.name, f"baseline {baseline}"] and len(series[1].points) == 6
        assert "1 regressed, 0 lost" in rendered(app, "#results-head")
        # An empty answer takes the baseline away again.
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, BaselineDialog))
        assert app.screen.query_one(Input).value == str(baseline)
        app.screen.query_one(Input).value = ""
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.baseline is None and "vs_base" not in table.columns)
        assert len(screen.query_one(PointsPlot).series(THROUGHPUT.key)) == 1


async def test_report_key_and_provenance_line(data: Path, tmp_path: Path) -> None:
    engine = await _twin_run(data)
    app = make_app([RECIPES / "demo"], engine=engine)
    async with app.run_test(size=(180, 50)) as pilot:
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SweepsScreen))
        sweeps = app.screen
        assert isinstance(sweeps, SweepsScreen)
        sweeps.report_dir = tmp_path
        await wait_for(pilot, lambda: sweeps.query_one(DataTable).row_count == 3)  # sweep, arm, attempt
        await pilot.press("v")
        await wait_for(pilot, lambda: list(tmp_path.glob("srt-report-s1-*.md")))
        (saved,) = tmp_path.glob("srt-report-s1-*.md")
        text = saved.read_text()
        assert text.startswith("## Validation report: s1 (mi355x-1p1d-tp8)") and "| 6 done |" in text
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, AttemptScreen))
        line = rendered(app, "#attempt-provenance")
        assert line.startswith("ran simulated (demo engine srt-demo-engine-") and "image rocm/atom-dev" in line
