"""The rerun flow the sweeps screen runs on ``r`` / ``R`` (plan, confirm, submit), and the export on ``e``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.screen import Screen

from console.describe import shown
from console.engine import LaunchRefused
from console.ids import arm_ref, attempt_ref
from console.rerun import RerunPlan, RerunRefused
from console.session import Session
from console.store import AttemptRow
from screens.dialogs import ConfirmDialog
from screens.results import write_export

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


async def export_sweep(session: Session, sweep_id: int, directory: Path) -> list[Path]:
    """Read every arm of the sweep and write its merged points as CSV and JSON."""
    return write_export(directory, sweep_id, await session.sweep_rows(sweep_id))
