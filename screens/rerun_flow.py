"""The rerun flows the sweeps screen runs on ``r`` / ``R`` (one arm) and ``F`` (every failed arm of
a sweep): plan, confirm, submit; and the export on ``e``, which asks where."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.screen import Screen

from console.describe import shown
from console.engine import LaunchRefused
from console.ids import arm_ref, attempt_ref
from console.rerun import RerunPlan, RerunRefused, SweepRerun
from console.results.export import NothingToExport, export_dir, write_export
from console.session import Session
from console.store import AttemptRow
from screens.dialogs import ConfirmDialog, PathDialog, SweepRerunDialog

_BUSY: set[tuple[int, int]] = set()  # (id(session), arm id) while a rerun is being planned or submitted


def rerun_body(plan: RerunPlan) -> str:
    points = ", ".join(str(c) for c in plan.concurrencies)
    what = "only its missing points" if plan.missing_only else "the whole arm again, exactly the last config"
    lines = [
        f"arm     {plan.arm}  {shown(plan.arm_name)}",
        f"what    {what}",
        f"points  {points}",
        f"cluster {plan.cluster}",
        f"after   {plan.last_attempt} ({plan.last_state}); earlier attempts and results are kept",
    ]
    if plan.warning:
        lines += ["", f"WARNING: {plan.warning}"]
    return "\n".join(lines)


async def rerun_from_screen(
    screen: Screen[Any], session: Session, arm_id: int, missing_only: bool
) -> AttemptRow | None:
    """Plan, confirm and submit one rerun; a second press while one is under way does nothing."""
    key = (id(session), arm_id)
    if key in _BUSY:
        screen.notify(f"{arm_ref(arm_id)}: a rerun is already being prepared", severity="warning")
        return None
    _BUSY.add(key)
    try:
        try:
            plan = await session.plan_rerun(arm_id, missing_only)
        except (RerunRefused, OSError, LaunchRefused) as exc:
            screen.notify(f"Not rerun: {exc}", severity="error", timeout=8)
            return None
        except Exception as exc:
            screen.notify(f"Not rerun: {type(exc).__name__}: {exc}", severity="error", timeout=8)
            return None
        title = "Rerun missing points?" if missing_only else "Rerun this arm?"
        yes = await screen.app.push_screen_wait(ConfirmDialog(title, rerun_body(plan), yes="Submit (y)"))
        if not yes:
            return None
        try:
            row = await session.rerun(plan)
        except (RerunRefused, LaunchRefused) as exc:
            screen.notify(f"Not rerun: {exc}", severity="error", timeout=8)
            return None
        if row.job_id:
            screen.notify(f"{attempt_ref(row.arm_id, row.number)} submitted: job {row.job_id} on {row.cluster}")
        else:
            screen.notify(f"{attempt_ref(row.arm_id, row.number)}: {row.error or row.state}", severity="error")
        return row
    finally:
        _BUSY.discard(key)


async def rerun_failed_from_screen(screen: Screen[Any], session: Session, sweep_id: int) -> list[AttemptRow]:
    """Plan every failed arm of the sweep, show what will and will not be submitted and why
    (deterministic failures left out until ``d`` includes them), then submit each."""
    include = False
    while True:
        try:
            plan: SweepRerun = await session.plan_failed_reruns(sweep_id, include_deterministic=include)
        except Exception as exc:
            screen.notify(f"Not rerun: {type(exc).__name__}: {exc}", severity="error", timeout=8, markup=False)
            return []
        answer = await screen.app.push_screen_wait(SweepRerunDialog(plan))
        if answer == "toggle":
            include = not include
            continue
        if answer != "submit":
            return []
        break
    rows: list[AttemptRow] = []
    for arm_plan in plan.plans:
        try:
            rows.append(await session.rerun(arm_plan))
        except (RerunRefused, LaunchRefused) as exc:
            screen.notify(f"Not rerun: {exc}", severity="error", timeout=8, markup=False)
    failed = [r for r in rows if not r.job_id]
    screen.notify(
        f"s{sweep_id}: {len(rows) - len(failed)} rerun(s) submitted"
        + (f", {len(failed)} failed to submit" if failed else ""),
        severity="error" if failed else "information",
    )
    return rows


async def export_sweep(session: Session, sweep_id: int, directory: Path) -> list[Path]:
    """Read every arm of the sweep and write its merged points as CSV and JSON."""
    job_dirs = {
        attempt_ref(a.arm_id, a.number): a.output_dir
        for arm in session.arms(sweep_id)
        for a in session.attempts(arm.id)
        if a.output_dir
    }
    return write_export(directory, f"s{sweep_id}", await session.sweep_rows(sweep_id), job_dirs)


def export_from_screen(screen: Screen[Any], session: Session, sweep_id: int) -> None:
    """Ask where (default beside the data dir, the path shown), then export the sweep there."""

    def chosen(directory: str | None) -> None:
        if directory:
            screen.run_worker(_export(screen, session, sweep_id, Path(directory)), group="export", exit_on_error=False)

    title = f"Export the results of s{sweep_id}"
    body = f"Writes srt-results-s{sweep_id}-<time>.csv and .json in this folder:"
    screen.app.push_screen(PathDialog(title, body, str(export_dir(session.data_dir))), chosen)


async def _export(screen: Screen[Any], session: Session, sweep_id: int, directory: Path) -> None:
    try:
        paths = await export_sweep(session, sweep_id, directory)
    except NothingToExport as exc:
        screen.notify(str(exc).capitalize(), severity="warning", markup=False)
    except Exception as exc:
        screen.notify(f"export failed: {exc}", severity="error", markup=False)
    else:
        screen.notify("Exported " + " and ".join(str(p) for p in paths), timeout=10, markup=False)
