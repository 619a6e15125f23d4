"""The attempt screen, pixel for pixel, on the seed's job 39443 logs (update with --snapshot-update)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from textual.pilot import Pilot

from console.clusters import local_profile
from console.engine import Engine
from console.scheduler import JobState, JobStatus
from console.store import Store
from screens.app import make_app
from screens.attempt import AttemptScreen
from screens.widgets.findings import DiagnosisBanner, FindingsPanel
from screens.widgets.log_view import LogView
from screens.widgets.workers import WorkersPanel
from tests.conftest import ROOT
from tests.tui.helpers import wait_for

SEED_LOGS = ROOT / "tests" / "data" / "logs" / "seed-39443"


@pytest.fixture
def seed_engine(tmp_path: Path) -> tuple[Engine, int]:
    """A finished attempt of the 2P1D arm whose output dir holds the seed's logs."""
    data = tmp_path / "data"
    engine = Engine(Store(data / "console.sqlite3"), {"local": local_profile(data)}, data)
    out = tmp_path / "outputs" / "39443"
    shutil.copytree(SEED_LOGS, out)
    store = engine.store
    sweep = store.add_sweep("seed", "local", ["2p1d-dpa-tp8.yaml"])
    arm = store.add_arm(sweep, "dsv4-fp4-mi355x-atom-2p1d-dpa-tp8", "2p1d-dpa-tp8.yaml", None, None, "name: x\n",
                        {"node_demand": 3, "total_gpus": 24})  # fmt: skip
    attempt = store.add_attempt(arm, "local", "demo", "name: x\n", [256, 512])
    store.mark_submitted(attempt.id, "39443", str(out), None)
    store.record_status(attempt.id, JobStatus("39443", JobState.FAILED, exit_code="1:0",
                                              nodelist="mi355x-a[01-03]", source="sacct"))  # fmt: skip
    return engine, attempt.id


async def _settled(pilot: Pilot[None], attempt_id: int, *, jump: bool) -> None:
    app = pilot.app
    await wait_for(pilot, lambda: getattr(app, "monitor", None) is not None)
    engine = getattr(app, "engine", None)
    assert engine is not None
    await app.push_screen(AttemptScreen(app.session, attempt_id))  # type: ignore[attr-defined]
    screen = app.screen
    banner = screen.query_one(DiagnosisBanner)
    view = screen.query_one(LogView)
    workers = screen.query_one(WorkersPanel)
    findings = screen.query_one(FindingsPanel)

    def ready() -> bool:
        buf = view.body.current_buffer
        d = banner.diagnosis
        return (
            d is not None
            and d.root_cause is not None
            and len(view.files) == 4
            and buf is not None
            and buf.loaded
            and not buf.loading
            and len(workers.stages()) == 3
            and len(findings.rows) > 0
        )

    await wait_for(pilot, ready, timeout=20)
    if jump:
        await pilot.press("n")
        await wait_for(pilot, lambda: view.body.cursor_line_no is not None)
    view.body.flush_now()
    await pilot.pause()
    await pilot.pause()


def test_attempt_screen_seed_39443(snap_compare, seed_engine) -> None:  # type: ignore[no-untyped-def]
    engine, attempt_id = seed_engine

    async def run_before(pilot: Pilot[None]) -> None:
        await _settled(pilot, attempt_id, jump=True)

    assert snap_compare(make_app([], engine=engine), terminal_size=(150, 48), run_before=run_before)


def test_attempt_screen_seed_39443_findings_only(snap_compare, seed_engine) -> None:  # type: ignore[no-untyped-def]
    engine, attempt_id = seed_engine

    async def run_before(pilot: Pilot[None]) -> None:
        await _settled(pilot, attempt_id, jump=False)
        await pilot.press("F")
        await pilot.pause()

    assert snap_compare(make_app([], engine=engine), terminal_size=(150, 48), run_before=run_before)


def test_attempt_screen_seed_39443_at_80x24(snap_compare, seed_engine) -> None:  # type: ignore[no-untyped-def]
    """At 80x24 the log view keeps its lines (panels and banner give way)."""
    engine, attempt_id = seed_engine

    async def run_before(pilot: Pilot[None]) -> None:
        await _settled(pilot, attempt_id, jump=True)

    assert snap_compare(make_app([], engine=engine), terminal_size=(80, 24), run_before=run_before)


def test_attempt_screen_seed_39443_wrapped_log(snap_compare, seed_engine) -> None:  # type: ignore[no-untyped-def]
    """`w`: long lines wrap inside the log view, no sideways scrolling; the status line says so."""
    engine, attempt_id = seed_engine

    async def run_before(pilot: Pilot[None]) -> None:
        await _settled(pilot, attempt_id, jump=True)
        await pilot.press("w")
        await pilot.pause()

    assert snap_compare(make_app([], engine=engine), terminal_size=(100, 36), run_before=run_before)


def test_attempt_screen_seed_39443_banner_maximised(snap_compare, seed_engine) -> None:  # type: ignore[no-untyped-def]
    """At 80x24, tab to the diagnosis and `z`: its whole advice."""
    engine, attempt_id = seed_engine

    async def run_before(pilot: Pilot[None]) -> None:
        await _settled(pilot, attempt_id, jump=False)
        pilot.app.screen.query_one(DiagnosisBanner).focus()
        await pilot.press("z")
        await pilot.pause()

    assert snap_compare(make_app([], engine=engine), terminal_size=(80, 24), run_before=run_before)
