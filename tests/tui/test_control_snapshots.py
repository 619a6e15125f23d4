"""The sweeps tree, the launch dialog and the rerun-failed dialog, pixel for pixel (update with
--snapshot-update). Times are fixed and shown in UTC so the pictures do not depend on the clock."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.command import CommandList, CommandPalette
from textual.pilot import Pilot
from textual.widgets import Input

from console.clusters import local_profile
from console.engine import Engine
from console.events import Notice
from console.rerun import RerunPlan, SweepRerun
from console.scheduler import JobState, JobStatus
from console.store import Store
from screens.app import make_app
from screens.dialogs import LaunchDialog, PathDialog, SweepRerunDialog
from screens.sweeps import SweepsScreen
from screens.widgets.recipe_tree import RecipeTree
from tests.conftest import RECIPES
from tests.tui.helpers import wait_for

T0 = 1_764_590_400.0  # 2025-12-01 12:00:00 UTC


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def stored(tmp_path: Path, utc: None) -> Engine:
    """Two sweeps whose attempts all ended, with the scheduler's own times."""
    data = tmp_path / "data"
    store = Store(data / "console.sqlite3")
    s1 = store.add_sweep("seed twins", "local", ["recipes/demo"])
    rows = (
        (s1, "demo-quick", ["COMPLETED"], "demo"),
        (s1, "demo-flake-first-attempt", ["FAILED", "COMPLETED"], "demo"),
        (s1, "demo-dsv4-fp4-mi355x-atom-2p1d-dpa-tp8", ["FAILED"], "demo"),
    )
    job = 100
    for sweep, name, states, launcher in rows:
        arm = store.add_arm(sweep, name, f"{name}.yaml", None, None, "x: 1\n", {})
        for state in states:
            job += 1
            attempt = store.add_attempt(arm, "local", launcher, "x: 1\n", [1])
            store.mark_submitted(attempt.id, str(job), f"/o/{job}", None)
            start = T0 + job * 60
            reason = "NonZeroExitCode" if state == "FAILED" else None
            nodes = f"node[{job % 3 + 1}-{job % 3 + 2}]"
            status = JobStatus(str(job), JobState(state), reason=reason, nodelist=nodes, submit_time=start - 5,
                               start_time=start, end_time=start + 95)  # fmt: skip
            store.record_status(attempt.id, status)
    store._db.execute("UPDATE sweeps SET created_at = ?", (T0,))
    return Engine(store, {"local": local_profile(data)}, data)


def test_sweeps_tree_snapshot(snap_compare, stored: Engine) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot[None]) -> None:
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, SweepsScreen))
        await wait_for(pilot, lambda: pilot.app.screen.query_one("DataTable").row_count == 8)
        await pilot.pause()

    assert snap_compare(make_app([], engine=stored), terminal_size=(140, 20), run_before=run_before)


def test_sweeps_tree_at_80x24_filtered_to_failed(snap_compare, stored: Engine) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot[None]) -> None:
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, SweepsScreen))
        await pilot.press("f", "f", "f")
        await wait_for(pilot, lambda: pilot.app.screen.query_one("DataTable").row_count == 3)
        await pilot.pause()

    assert snap_compare(make_app([], engine=stored), terminal_size=(80, 24), run_before=run_before)


def test_launch_dialog_snapshot(snap_compare, stored: Engine) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot[None]) -> None:
        tree = pilot.app.screen.query_one(RecipeTree)
        await wait_for(pilot, lambda: len(tree._leaves) >= 7)
        tree.select_path(str(RECIPES / "demo" / "crash-at-concurrency.yaml"))
        await pilot.pause()
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, LaunchDialog) and pilot.app.screen.planned)
        await pilot.pause()

    app = make_app([RECIPES / "demo"], engine=stored)
    assert snap_compare(app, terminal_size=(120, 36), run_before=run_before)


def test_rerun_failed_dialog_snapshot(snap_compare, stored: Engine) -> None:  # type: ignore[no-untyped-def]
    plan = RerunPlan(2, "demo-flake-first-attempt", "local", "x: 1\n", [8, 16, 32], False, "a2.1", "FAILED")
    sweep = SweepRerun(1, [plan], [
        ("a1 demo-quick", "COMPLETED: nothing to rerun"),
        ("a3 demo-dsv4-fp4-mi355x-atom-2p1d-dpa-tp8", "deterministic, a plain rerun will fail the same way: "
         "ZMQ endpoint already bound (zmq-bind-in-use) (include it to rerun)"),
    ])  # fmt: skip

    async def run_before(pilot: Pilot[None]) -> None:
        await pilot.app.push_screen(SweepRerunDialog(sweep))
        await pilot.pause()

    assert snap_compare(make_app([], engine=stored), terminal_size=(110, 30), run_before=run_before)


def test_export_dialog_snapshot(snap_compare, stored: Engine) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot[None]) -> None:
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, SweepsScreen))
        await wait_for(pilot, lambda: pilot.app.screen.query_one("DataTable").row_count == 8)
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, PathDialog))
        pilot.app.screen.query_one(Input).value = "/srv/exports"  # the default is a temporary path here
        await pilot.pause()

    assert snap_compare(make_app([], engine=stored), terminal_size=(100, 24), run_before=run_before)


def test_command_palette_snapshot(snap_compare, stored: Engine) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot[None]) -> None:
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, CommandPalette))
        await pilot.press(*"rerun")
        # The palette searches in the background: wait until every matching command is listed.
        listed = pilot.app.screen.query_one(CommandList)
        await wait_for(pilot, lambda: listed.option_count >= 5)
        await pilot.pause(0.3)
        await pilot.pause()

    assert snap_compare(make_app([], engine=stored), terminal_size=(100, 24), run_before=run_before)


def test_notice_toast_snapshot(snap_compare, stored: Engine) -> None:  # type: ignore[no-untyped-def]
    notice = Notice("attempt_doomed", "error", "a3.1 is doomed: ZMQ endpoint already bound [zmq-bind-in-use]",
                    "s1", "a3", "a3.1", "RUNNING")  # fmt: skip

    async def run_before(pilot: Pilot[None]) -> None:
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, SweepsScreen))
        pilot.app._on_core_event(notice)  # type: ignore[attr-defined]
        await pilot.pause()

    assert snap_compare(make_app([], engine=stored), terminal_size=(120, 20), run_before=run_before)
