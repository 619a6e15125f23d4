"""One side of a comparison, from what an operator types: an attempt (a3.1), an arm (a3), a
sweep (s2), a Slurm job (job:123), or a results directory on this machine."""

from __future__ import annotations

from pathlib import Path

from console.compare import Side, arm_side_points, dir_side
from console.engine import LaunchRefused
from console.ids import parse_ref
from console.results import arm_points
from console.results.arms import ResultsUnavailable, arm_points_view, fetch_attempt_points
from console.session import Session
from console.transport.base import TransportError


class SideError(Exception):
    """The text names nothing that has points; the message says why."""


async def side_of(session: Session, text: str) -> Side:
    """A directory on this machine, else an id of the store."""
    path = Path(text).expanduser()
    if path.is_dir():
        return dir_side(path)
    return await store_side(session, text)


async def store_side(session: Session, text: str) -> Side:
    """The points an id names: an attempt's own, an arm's merged, every arm's of a sweep."""
    try:
        ref = parse_ref(text)
    except ValueError as exc:
        raise SideError(f"{exc}, or a results directory on this machine") from None
    store = session.store
    try:
        if ref.kind in ("attempt", "job"):
            if ref.kind == "attempt":
                found = [a for a in store.attempts(int(ref.id)) if a.number == ref.number]
            else:
                found = [a for a in store.attempts() if a.job_id == ref.id]
            if not found:
                raise SideError(f"no {ref.kind} {text}")
            attempt = found[-1]
            arm = store.arm(attempt.arm_id)
            got = await fetch_attempt_points(session.engine, attempt)
            points = arm_points(attempt.concurrencies, got.points)
            return Side(text, arm_side_points(arm.summary if arm else {}, arm.name if arm else text, points))
        arms = store.arms(int(ref.id)) if ref.kind == "sweep" else [a for a in [store.arm(int(ref.id))] if a]
        if not arms:
            raise SideError(f"no {ref.kind} {text}")
        side_points = []
        for arm in arms:
            fetched = await session.arm_points(arm.id)
            merged = arm_points_view(store, arm.id, session.monitor.views, attempt_points=fetched)
            side_points += arm_side_points(arm.summary, arm.name, merged)
        return Side(text, side_points)
    except (TransportError, OSError, ResultsUnavailable, LaunchRefused) as exc:
        raise SideError(f"cannot read the results of {text}: {exc}") from None
