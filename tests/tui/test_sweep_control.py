"""The sweep under control: the tree's filter, sort and fold keys, rerun every failed arm in one
go (deterministic failures left out unless asked), notices with the bell, the command palette."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.command import CommandPalette
from textual.widgets import DataTable, Input

from console.clusters import local_profile
from console.engine import Engine
from console.store import Store
from screens.app import SrtConsole, make_app
from screens.attempt import AttemptScreen
from screens.commands import console_commands
from screens.dialogs import InfoDialog, PathDialog, SweepRerunDialog
from screens.results import ResultsScreen
from screens.sweeps import SweepsScreen
from tests.conftest import RECIPES, ROOT
from tests.tui.helpers import showing, wait_for

DEMO = RECIPES / "demo"


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Engine:
    monkeypatch.setenv("SRT_DEMO_SPEED", "8")
    data = tmp_path / "data"
    return Engine(Store(data / "console.sqlite3"), {"local": local_profile(data)}, data)


async def _one_sweep(engine: Engine) -> int:
    """quick (completes), flake-first-attempt (fails, not deterministic), the ZMQ twin (fails, deterministic)."""
    targets = [str(DEMO / n) for n in ("quick.yaml", "flake-first-attempt.yaml", "mi355x-2p1d-dpa-tp8.yaml")]
    sweep = await engine.launch(targets, "local")
    await engine.wait([a.id for a in engine.store.attempts()], 0.2)
    return sweep


def keys(table: DataTable[object]) -> list[str]:
    return [str(k.value) for k in table.rows]


async def test_filter_sort_fold_and_rerun_failed(engine: Engine) -> None:
    await _one_sweep(engine)
    app = make_app([DEMO], engine=engine)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.press("s")
        await wait_for(pilot, showing(pilot, SweepsScreen))
        screen = app.screen
        assert isinstance(screen, SweepsScreen)
        table = screen.query_one(DataTable)
        await wait_for(pilot, lambda: table.row_count == 7)
        summary = str(screen.query_one("#summary").render())
        assert summary.startswith("0 running · 0 pending · 2 failed · 1 done · 0 doomed")
        await pilot.press("f", "f", "f")  # running, pending, failed
        await wait_for(pilot, lambda: keys(table) == ["s1", "a2", "a2.1", "a3", "a3.1"])
        assert "filter: failed" in str(screen.query_one("#summary").render())
        await pilot.press("f", "f", "f")  # done, doomed, all
        await wait_for(pilot, lambda: table.row_count == 7)
        await pilot.press("o", "o", "o")  # sort by state, elapsed, name
        await wait_for(pilot, lambda: screen.view.sort == "name")
        arms = [k for k in keys(table) if k.count("a") and "." not in k]
        assert [screen.rows[k].name for k in arms] == sorted(screen.rows[k].name for k in arms)
        await pilot.press("O")
        await wait_for(pilot, lambda: screen.view.descending)
        table.move_cursor(row=0)
        await pilot.press("space")  # fold the sweep
        await wait_for(pilot, lambda: keys(table) == ["s1"])
        await pilot.press("space")
        await wait_for(pilot, lambda: table.row_count == 7)

        # Every failed arm in one go: the deterministic one is left out, and the dialog says why.
        await pilot.press("F")
        await wait_for(pilot, lambda: isinstance(app.screen, SweepRerunDialog), timeout=30)
        dialog = app.screen
        assert isinstance(dialog, SweepRerunDialog)
        body = str(dialog.query_one("#plan").render())
        assert "Will submit 1 arm(s):" in body and "demo-flake-first-attempt" in body
        assert "Will not submit 2 arm(s):" in body
        assert "a1 demo-quick: COMPLETED: nothing to rerun" in body
        assert "deterministic, a plain rerun will fail the same way" in body and "zmq" in body.lower()
        await pilot.press("d")  # include deterministic failures: planned again
        await wait_for(pilot, lambda: isinstance(app.screen, SweepRerunDialog) and app.screen is not dialog, timeout=30)
        again = app.screen
        assert isinstance(again, SweepRerunDialog) and len(again.plan.plans) == 2
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, SweepRerunDialog) and app.screen is not again, timeout=30)
        await pilot.press("y")
        await wait_for(pilot, lambda: len(engine.store.attempts(2)) == 2, timeout=30)
        assert len(engine.store.attempts(3)) == 1 and len(engine.store.attempts(1)) == 1
        await wait_for(pilot, lambda: "a2.2" in keys(table), timeout=30)


async def test_export_asks_where_from_the_sweeps_screen(engine: Engine, tmp_path: Path) -> None:
    await _one_sweep(engine)
    app = make_app([DEMO], engine=engine)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.press("s")
        await wait_for(pilot, showing(pilot, SweepsScreen))
        await pilot.press("e")
        await wait_for(pilot, showing(pilot, PathDialog))
        field = app.screen.query_one(Input)
        assert field.value == str(engine.data_dir.parent / "data-exports")  # beside the data dir, shown
        field.value = str(tmp_path / "chosen")
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(list((tmp_path / "chosen").glob("srt-results-s1-*.json"))) == 1, timeout=30)
        assert any("Exported" in n.message for n in app._notifications)


async def test_notices_ring_the_bell_on_any_screen(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app([DEMO], engine=engine)
    bells: list[int] = []
    monkeypatch.setattr(SrtConsole, "bell", lambda self: bells.append(1))
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, lambda: app.session is not None and app.session.notifier is not None)
        await engine.launch([str(DEMO / "quick.yaml")], "local")
        await wait_for(pilot, lambda: any(n.kind == "sweep_ended" for n in app.notices), timeout=60)
        kinds = [n.kind for n in app.notices]
        assert kinds[:2] == ["arm_completed", "sweep_ended"] and len(bells) == len(kinds)
        assert any("s1 ended: 1/1 arm(s) completed" in n.message for n in app._notifications)


async def test_the_command_palette_offers_the_consoles_commands(engine: Engine) -> None:
    await _one_sweep(engine)
    app = make_app([DEMO], engine=engine)
    async with app.run_test(size=(160, 45)) as pilot:
        texts = [text for text, _, _ in console_commands(app)]
        for expected in ("Launch the selected recipe, folder or marked recipes", "Open sweep s1",
                         "Open arm a3 demo-dsv4-fp4-mi355x-atom-2p1d-dpa-tp8", "Open attempt a2.1", "Results of s1",
                         "Export s1", "Rerun failed arms of s1", "Rerun arm a2 demo-flake-first-attempt",
                         "Scan a folder of logs"):  # fmt: skip
            assert any(t.startswith(expected) for t in texts), expected
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"open attempt a2.1")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, AttemptScreen), timeout=20)
        screen = app.screen
        assert isinstance(screen, AttemptScreen) and screen.attempt.arm_id == 2
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"results of s1")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ResultsScreen), timeout=20)


async def test_scan_a_folder_from_the_palette(engine: Engine) -> None:
    seed_logs = ROOT / "tests" / "data" / "logs" / "seed-39443"
    app = make_app([DEMO], engine=engine)
    async with app.run_test(size=(140, 40)) as pilot:
        (scan,) = [run for text, _, run in console_commands(app) if text == "Scan a folder of logs"]
        scan()
        await wait_for(pilot, showing(pilot, PathDialog))
        app.screen.query_one(Input).value = str(seed_logs)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, InfoDialog), timeout=30)
        dialog = app.screen
        assert isinstance(dialog, InfoDialog) and dialog.heading == f"Scan of {seed_logs}: failed"
        assert "zmq-bind-in-use" in dialog.body
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, InfoDialog))
