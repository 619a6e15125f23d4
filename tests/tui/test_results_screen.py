"""Results and reruns in the TUI: real local-profile engine, demo jobs, Pilot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import DataTable, Input

from console.clusters import local_profile
from console.engine import Engine
from console.results import PointResult
from console.store import Store
from screens.app import make_app
from screens.dialogs import ConfirmDialog, PathDialog
from screens.results import ResultsScreen
from screens.sweeps import SweepsScreen
from screens.widgets.plot import PARETO, THROUGHPUT, PointsPlot, Series, render_plot
from tests.conftest import RECIPES
from tests.tui.helpers import showing, wait_for

DEMO = RECIPES / "demo"


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Engine:
    monkeypatch.setenv("SRT_DEMO_SPEED", "4")
    data = tmp_path / "data"
    return Engine(Store(data / "console.sqlite3"), {"local": local_profile(data)}, data)


def cell(table: DataTable[object], row: str, column: str) -> str:
    return str(table.get_cell(row, column))


async def _launch_and_wait(engine: Engine, recipe: Path) -> int:
    sweep = await engine.launch([str(recipe)], "local")
    (arm,) = engine.store.arms(sweep)
    await engine.wait([a.id for a in engine.store.attempts(arm.id)], 0.2)
    return arm.id


def dialog_text(app: object) -> str:
    screen = app.screen  # type: ignore[attr-defined]
    return str(screen.query_one("#plan").render())


async def test_r_reruns_the_flaky_arm_once_and_the_arm_shows_all_points_done(engine: Engine, tmp_path: Path) -> None:
    arm_id = await _launch_and_wait(engine, DEMO / "flake-first-attempt.yaml")
    assert engine.store.attempts(arm_id)[0].state == "FAILED"
    app = make_app([DEMO], engine=engine)
    async with app.run_test(size=(180, 50)) as pilot:
        await pilot.press("s")
        await wait_for(pilot, showing(pilot, SweepsScreen))
        await pilot.press("r", "r")  # a double press: one plan, one dialog, one submission
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        body = dialog_text(app)
        assert "demo-flake-first-attempt" in body and "points  8, 16, 32" in body and "cluster local" in body
        assert "WARNING" not in body
        await pilot.press("y")
        await wait_for(pilot, lambda: len(engine.store.attempts(arm_id)) == 2, timeout=20)
        await wait_for(pilot, lambda: any("submitted" in n.message for n in app._notifications), timeout=20)
        await pilot.press("r")  # the arm is live now: refused, nothing submitted
        await wait_for(pilot, lambda: any("still" in n.message for n in app._notifications))
        sweeps = app.screen
        table = sweeps.query_one(DataTable)
        await wait_for(pilot, lambda: cell(table, f"a{arm_id}.2", "state").startswith("COMPLETED"), timeout=60)
        assert [a.number for a in engine.store.attempts(arm_id)] == [1, 2]
        assert not isinstance(app.screen, ConfirmDialog)

        table.move_cursor(row=table.get_row_index(f"a{arm_id}.2"))
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, ResultsScreen))
        results = app.screen
        assert isinstance(results, ResultsScreen)
        results.export_dir = tmp_path / "export"  # the export dialog's default
        arm_table = results.table(arm_id)
        await wait_for(pilot, lambda: results.loaded)
        assert [cell(arm_table, str(c), "status") for c in (8, 16, 32)] == ["done"] * 3
        assert [cell(arm_table, str(c), "attempt") for c in (8, 16, 32)] == [
            f"a{arm_id}.2 sim"
        ] * 3  # the demo engine's numbers, marked
        plot = results.query_one(PointsPlot)
        assert len(plot.series(PARETO.key)[0].points) == 3
        await pilot.press("t")
        assert plot.mode == THROUGHPUT.key
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, PathDialog))
        assert app.screen.query_one(Input).value == str(tmp_path / "export")  # the path is shown
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(list((tmp_path / "export").glob("*.json"))) == 1)
        (exported,) = (tmp_path / "export").glob("*.json")
        doc = json.loads(exported.read_text())
        assert [(p["concurrency"], p["status"]) for p in doc["points"]] == [(8, "done"), (16, "done"), (32, "done")]
        assert len(list((tmp_path / "export").glob("*.csv"))) == 1
        # Result files on this machine are named relative to the export: they resolve from it.
        assert all((exported.parent / p["file"]).is_file() for p in doc["points"]), doc["points"][0]["file"]
        assert all(p["simulated"] for p in doc["points"])


async def test_R_reruns_only_the_missing_points_of_the_crashed_arm(engine: Engine) -> None:
    arm_id = await _launch_and_wait(engine, DEMO / "crash-at-concurrency.yaml")
    app = make_app([DEMO], engine=engine)
    async with app.run_test(size=(180, 50)) as pilot:
        await pilot.press("s")
        await wait_for(pilot, showing(pilot, SweepsScreen))
        await pilot.press("R")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        body = dialog_text(app)
        assert "only its missing points" in body and "points  64, 128, 256" in body
        await pilot.press("y")
        await wait_for(pilot, lambda: len(engine.store.attempts(arm_id)) == 2, timeout=20)
        second = engine.store.attempts(arm_id)[1]
        assert second.concurrencies == [64, 128, 256]
        assert "concurrencies: 64x128x256" in second.config_yaml
        await engine.cancel([second])


async def test_deterministic_failure_warns_in_the_dialog_and_no_is_no(engine: Engine) -> None:
    arm_id = await _launch_and_wait(engine, DEMO / "mi355x-2p1d-dpa-tp8.yaml")
    app = make_app([DEMO], engine=engine)
    async with app.run_test(size=(180, 50)) as pilot:
        await pilot.press("s")
        await wait_for(pilot, showing(pilot, SweepsScreen))
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), timeout=20)
        body = dialog_text(app)
        assert "WARNING: a plain rerun will fail the same way:" in body
        await pilot.press("n")
        await wait_for(pilot, showing(pilot, SweepsScreen))
        assert len(engine.store.attempts(arm_id)) == 1


async def test_points_of_the_1p1d_twin_fill_in_live(engine: Engine) -> None:
    sweep = await engine.launch([str(DEMO / "mi355x-1p1d-tp8.yaml")], "local")
    (arm,) = engine.store.arms(sweep)
    (attempt,) = engine.store.attempts(arm.id)
    app = make_app([DEMO], engine=engine)
    async with app.run_test(size=(180, 50)) as pilot:
        await pilot.press("s")
        await wait_for(pilot, showing(pilot, SweepsScreen))
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, ResultsScreen))
        results = app.screen
        assert isinstance(results, ResultsScreen)
        table = results.table(arm.id)
        # Every expected point is there from the start.
        assert [str(k.value) for k in table.rows] == ["4", "8", "16", "32", "64", "128"]
        seen_while_live: list[int] = []

        def all_done() -> bool:
            for c in (4, 8, 16, 32, 64, 128):
                done = cell(table, str(c), "status") == "done"
                if done and c not in seen_while_live and engine.store.attempt(attempt.id).live:
                    seen_while_live.append(c)
            return all(cell(table, str(c), "status") == "done" for c in (4, 8, 16, 32, 64, 128))

        await wait_for(pilot, all_done, timeout=120)
        assert table.row_count == 6
        assert len(seen_while_live) >= 3, seen_while_live  # arrived one by one while the job ran
        times = sorted(t for (arm_id, _c), t in results.point_times.items() if arm_id == arm.id)
        assert len(times) == 6 and len({round(t, 2) for t in times}) >= 3
        assert float(cell(table, "128", "per_gpu").replace(",", "")) > 0


def test_plot_renders_series_with_braille_and_an_empty_state() -> None:
    series = [Series("a", ((10.0, 500.0), (20.0, 800.0))), Series("b", ((5.0, 1500.0),))]
    text = render_plot(series, 60, 12, PARETO)
    lines = text.plain.splitlines()
    assert len(lines) == 12 and all(len(line) <= 60 for line in lines)
    assert any("\u2800" < ch <= "\u28ff" for ch in text.plain)
    assert "a" in lines[0] and "b" in lines[0]
    empty = render_plot([Series("a", ())], 60, 12, THROUGHPUT)
    assert "no points yet" in empty.plain
    Console(width=60, file=open("/dev/null", "w")).print(text)  # noqa: SIM115


def test_plot_has_axis_labels_ticks_and_a_marker_per_arm() -> None:
    series = [
        Series("arm-a", ((1.0, 700.0), (4.0, 900.0), (16.0, 1000.0))),
        Series("arm-b", ((1.0, 80.0), (4.0, 300.0), (64.0, 1200.0))),
    ]
    lines = render_plot(series, 72, 18, THROUGHPUT).plain.splitlines()
    assert lines[0].startswith("● arm-a") and "▲ arm-b" in lines[0]  # shape, not only colour
    assert lines[1] == "output tok/s"  # the y axis's label
    body = "\n".join(lines[2:-3])
    assert body.count("●") == 3 and body.count("▲") == 3
    # The concurrency axis: a tick at each power of two, labelled, and the axis named.
    assert lines[-3].count("┬") == 7  # 1, 2, 4, ..., 64
    assert lines[-2].split() == ["1", "2", "4", "8", "16", "32", "64"]
    assert lines[-1].strip() == "concurrency (log2)"
    pareto = render_plot(series, 72, 18, PARETO).plain.splitlines()
    assert pareto[1] == "tok/s/GPU" and pareto[-1].strip() == "tok/s/user"
    assert len(pareto[-2].split()) >= 3  # ticks along a linear axis
    # tok/s/user from 3 to 139: the axis starts at zero at the lowest, never at a negative rate.
    low_rates = [Series("arm-c", ((3.3, 2400.0), (139.0, 290.0)))]
    ticks = render_plot(low_rates, 72, 18, PARETO).plain.splitlines()[-2].split()
    assert not any(tick.startswith("-") for tick in ticks) and float(ticks[0]) >= 0


def test_results_rows_merge_attempts() -> None:
    from console.store import ArmRow, AttemptRow
    from screens.results import ArmResults

    arm = ArmRow(1, 1, "x", "r.yaml", None, None, "", {"concurrencies": [4, 8]}, 0.0)

    def attempt(i: int, number: int, concs: list[int], state: str) -> AttemptRow:
        return AttemptRow(i, 1, number, "local", "demo", str(i), "/nowhere", None, "", concs, state, None, None,
                          None, None, 0.0, None, None, 0.0)  # fmt: skip

    state = ArmResults(arm, [attempt(1, 1, [4, 8], "FAILED"), attempt(2, 2, [8], "RUNNING")])
    state.points[1][4] = PointResult(4, "done", output_tok_s=1.0)
    state.running[2] = 8
    assert [(p.concurrency, p.status, p.attempt) for p in state.merged()] == [
        (4, "done", "a1.1"),
        (8, "running", "a1.2"),
    ]
    state.points[2][8] = PointResult(8, "done", output_tok_s=2.0)
    state.running[2] = None
    assert [(p.concurrency, p.status, p.attempt) for p in state.merged()] == [(4, "done", "a1.1"), (8, "done", "a1.2")]


def _stored_sweep(tmp_path: Path) -> tuple[Engine, int]:
    """A finished two-arm sweep whose result files are on disk: no job runs, nothing varies."""
    from console.scheduler import JobState, JobStatus

    data = tmp_path / "data"
    engine = Engine(Store(data / "console.sqlite3"), {"local": local_profile(data)}, data)
    store = engine.store
    sweep = store.add_sweep("snapshot", "local", ["x.yaml"])
    arms = (("arm-1p1d", 16, (4, 8, 16, 32), 900.0), ("arm-2p1d", 24, (64, 128, 256), 2400.0))
    for index, (name, gpus, grid, base) in enumerate(arms):
        arm_id = store.add_arm(sweep, name, "x.yaml", None, None, "{}", {"concurrencies": list(grid),
                                                                          "total_gpus": gpus})  # fmt: skip
        attempt = store.add_attempt(arm_id, "local", "demo", "{}", list(grid))
        job = tmp_path / f"job{index}"
        sub = job / "logs" / "sa-bench_isl_1024_osl_256"
        sub.mkdir(parents=True)
        for i, conc in enumerate(grid[:-1]):  # the last point never arrived
            out = base * (i + 1)
            doc = {
                "num_prompts": conc * 10, "max_concurrency": conc, "duration": 60.0, "completed": conc * 10,
                "total_input_tokens": conc * 10240, "total_output_tokens": conc * 2560, "output_throughput": out,
                "total_token_throughput": out * 5, "mean_ttft_ms": 100.0 + conc, "median_ttft_ms": 90.0 + conc,
                "p99_ttft_ms": 300.0 + conc, "mean_tpot_ms": 10.0 + i * 4, "median_tpot_ms": 10.0 + i * 4,
                "p99_tpot_ms": 20.0 + i, "mean_itl_ms": 9.0 + i, "median_itl_ms": 9.0 + i, "p99_itl_ms": 30.0,
                "mean_e2el_ms": 5000.0, "median_e2el_ms": 4900.0, "p99_e2el_ms": 9000.0,
            }  # fmt: skip
            (sub / f"results_concurrency_{conc}_gpus_{gpus}.json").write_text(json.dumps(doc))
        store.mark_submitted(attempt.id, str(100 + index), str(job), None)
        store.record_status(attempt.id, JobStatus(str(100 + index), JobState.FAILED, source="sacct"))
    return engine, sweep


def _open_results(sweep: int):  # type: ignore[no-untyped-def]
    """A run_before that opens the sweep's results screen and waits for its last point."""

    async def open_results(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.app.push_screen(ResultsScreen(pilot.app.session, sweep))
        screen = pilot.app.screen
        await wait_for(pilot, lambda: screen.loaded)
        await wait_for(pilot, lambda: str(screen.table(1).get_cell("16", "status")) == "done")
        await pilot.pause()

    return open_results


def test_results_screen_snapshot(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    engine, sweep = _stored_sweep(tmp_path)
    app = make_app([DEMO], engine=engine)

    open_results = _open_results(sweep)

    assert snap_compare(app, terminal_size=(160, 36), run_before=open_results)


def test_results_screen_at_80x24(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """At 80 columns the plot goes below the tables; `conc` stays the first column in view."""
    engine, sweep = _stored_sweep(tmp_path)
    app = make_app([DEMO], engine=engine)

    open_results = _open_results(sweep)

    assert snap_compare(app, terminal_size=(80, 24), run_before=open_results)
