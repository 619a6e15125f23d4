"""One arm's results across its attempts: read through the one reader, merged by the one merge.

Points come from the monitor's live views when it follows an attempt (of an ended one, only a
view that holds every point it was launched with: the monitor reads a poll behind), else from
the result files: on this machine with seeks, on a remote cluster through the transport (a
listing plus each file's head and tail bytes, never a whole file). Either way :func:`arm_view`
merges them: the latest valid result per concurrency, with the attempt it came from, against
the points the arm expects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from console.grid import config_grid
from console.ids import arm_ref, attempt_ref
from console.results.points import PointResult, arm_view
from console.results.reader import (
    AttemptPoints,
    LocalFiles,
    RemoteFiles,
    ResultFiles,
    read_attempt_points,
    read_local_points,
)
from console.store import ArmRow, AttemptRow, Store

if TYPE_CHECKING:
    from console.engine import Engine


class ResultsUnavailable(Exception):
    """An arm's results cannot be read now (no such arm, or its cluster cannot be reached)."""


class LiveView(Protocol):
    """What the arm view needs of a monitor's per-attempt view."""

    points: dict[int, PointResult]


def _holds_every_point(view: LiveView, attempt: AttemptRow) -> bool:
    """Whether an ended attempt's view can stand for its result files. The monitor reads the
    files a poll behind the job, so the attempt can end before its last point reaches the
    view: a view short of a launched point is read past (a crashed attempt's files, too)."""
    return bool(attempt.concurrencies) and set(attempt.concurrencies) <= view.points.keys()


def _gpus(arm: ArmRow | None) -> int | None:
    total = arm.summary.get("total_gpus") if arm else None
    return total if isinstance(total, int) and total > 0 else None


async def fetch_attempt_points(engine: Engine, attempt: AttemptRow) -> AttemptPoints:
    """One attempt's results: local files with seeks, or through its cluster's transport."""
    gpus = _gpus(engine.store.arm(attempt.arm_id))
    profile = engine.profiles.get(attempt.cluster)
    if not attempt.output_dir:
        return AttemptPoints([])
    files: ResultFiles = LocalFiles()
    if profile is not None and profile.ssh is not None:
        files = RemoteFiles(engine.runtime(attempt.cluster).transport)
    return await read_attempt_points(
        files, attempt.output_dir, results_dir=attempt.results_dir, gpus=gpus, running=attempt.live
    )


async def fetch_arm_points(
    engine: Engine, arm_id: int, monitor_views: Mapping[int, LiveView] | None = None
) -> dict[int, AttemptPoints]:
    """Per attempt of the arm: its points (from the monitor when it holds them all, else read now)."""
    return {
        attempt.id: await fetch_points_of(engine, attempt, (monitor_views or {}).get(attempt.id))
        for attempt in engine.store.attempts(arm_id)
    }


async def fetch_points_of(engine: Engine, attempt: AttemptRow, view: LiveView | None) -> AttemptPoints:
    """One attempt's points: the monitor's view when it can stand for the files, else read now
    (and the view after all when the files cannot be reached: a dead connection)."""
    if view is not None and not attempt.live and _holds_every_point(view, attempt):
        return AttemptPoints(list(view.points.values()))
    try:
        return await fetch_attempt_points(engine, attempt)
    except Exception as exc:
        if view is None:
            raise ResultsUnavailable(
                f"cannot read the results of {attempt_ref(attempt.arm_id, attempt.number)}: {exc}"
            ) from None
        return AttemptPoints(list(view.points.values()))


# --------------------------------------------------------------------------- the arm's view


def expected_points(arm: ArmRow) -> list[int]:
    """The points the arm was launched with (its summary), else its config's grid."""
    raw = arm.summary.get("concurrencies")
    if isinstance(raw, list) and all(isinstance(c, int) for c in raw):
        return list(raw)
    return config_grid(arm.config_yaml)


def arm_points_view(
    store: Store,
    arm_id: int,
    monitor_views: Mapping[int, LiveView] | None = None,
    *,
    attempt_points: Mapping[int, AttemptPoints] | None = None,
) -> list[PointResult]:
    """The arm's merged points: every expected point, the latest valid result of each.

    Per attempt the points come from ``attempt_points`` (read by :func:`fetch_arm_points`),
    else the monitor's view, else local result files. Each point's ``attempt`` names the
    attempt (``a3.2``) its result came from.
    """
    arm = store.arm(arm_id)
    if arm is None:
        raise ResultsUnavailable(f"no arm {arm_ref(arm_id)}")
    gpus = _gpus(arm)
    per_attempt: list[tuple[str, Sequence[int], Sequence[PointResult], int | None]] = []
    attempts = store.attempts(arm_id)
    for attempt in attempts:
        got = (attempt_points or {}).get(attempt.id)
        if got is None:
            view = (monitor_views or {}).get(attempt.id)
            if view is not None and (attempt.live or _holds_every_point(view, attempt)):
                got = AttemptPoints(list(view.points.values()))
            elif attempt.output_dir:
                got = read_local_points(
                    attempt.output_dir, results_dir=attempt.results_dir, gpus=gpus, running=attempt.live
                )
            else:
                got = AttemptPoints([])
        running = got.running if attempt.live else None
        per_attempt.append((attempt_ref(attempt.arm_id, attempt.number), attempt.concurrencies, got.points, running))
    return arm_view(expected_points(arm), per_attempt, **attempt_context(attempts))


def attempt_context(attempts: Iterable[AttemptRow]) -> dict[str, Any]:
    """What :func:`arm_view` needs beyond the points: each attempt's state, and which are simulated."""
    attempts = list(attempts)
    return {
        "states": {attempt_ref(a.arm_id, a.number): a.state for a in attempts},
        "simulated": {attempt_ref(a.arm_id, a.number) for a in attempts if a.simulated},
    }


def missing_points(points: Iterable[PointResult], expected: Sequence[int] | None = None) -> list[int]:
    """Expected points without a valid result (missing, incomplete, invalid), in order."""
    wanted = set(expected) if expected is not None else None
    return sorted(p.concurrency for p in points if p.status != "done" and (wanted is None or p.concurrency in wanted))
