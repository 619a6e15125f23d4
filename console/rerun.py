"""Arm results across attempts, and reruns: the whole arm again, or only its missing points.

An arm's view merges the points of every attempt (the latest valid result per concurrency,
with the attempt it came from) against the points the arm expects. A rerun is a new attempt
of the same arm: exactly the last attempt's resolved config, or a derived config whose grid is
only the points still missing. Earlier attempts and their results are kept.

Points come from the monitor's live views when it follows an attempt, else from the result
files: on this machine with seeks, on a remote cluster through the transport (a listing plus
each file's head and tail bytes, never a whole file).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import yaml

from console.ids import arm_ref, attempt_ref
from console.recipes import load_recipe, parse_concurrencies
from console.recipes.yamlio import dump
from console.results import (
    AttemptPoints,
    LocalFiles,
    PointResult,
    RemoteFiles,
    ResultFiles,
    arm_view,
    read_attempt_points,
    read_local_points,
)
from console.store import SUBMIT_FAILED, ArmRow, AttemptRow, Store

if TYPE_CHECKING:
    from console.diagnosis import Diagnosis
    from console.engine import Engine
    from console.triage import Triage

__all__ = [
    "FAILED_STATES",
    "AttemptPoints",
    "RerunPlan",
    "RerunRefused",
    "arm_points_view",
    "derive_missing",
    "diagnose_output_dir",
    "failed_arms",
    "fetch_arm_points",
    "fetch_attempt_points",
    "grid_of",
    "missing_points",
    "plan_rerun",
    "plan_sweep_reruns",
    "rerun",
    "triage_output_dir",
]

# The last attempt's states that make an arm "failed" (rerun-worthy).
FAILED_STATES = frozenset(
    {
        "FAILED",
        "TIMEOUT",
        "CANCELLED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "OOM",
        "BOOT_FAIL",
        "DEADLINE",
        "PREEMPTED",
        SUBMIT_FAILED,
    }
)


class RerunRefused(Exception):
    """Nothing was submitted; the message says why."""


class _View(Protocol):
    """What the arm view needs of a monitor's per-attempt view."""

    points: dict[int, PointResult]


# --------------------------------------------------------------------------- grids


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _grid_location(config: Mapping[str, Any]) -> tuple[str, Any]:
    """Where the grid lives: ``("env", raw)`` for a custom benchmark's CONCURRENCIES, else ``("bench", raw)``."""
    bench = _map(config.get("benchmark"))
    env = _map(bench.get("env"))
    if bench.get("concurrencies") is None and bench.get("type") == "custom" and "CONCURRENCIES" in env:
        return "env", env["CONCURRENCIES"]
    return "bench", bench.get("concurrencies")


def grid_of(config: Mapping[str, Any]) -> list[int]:
    """The concurrency points a resolved config runs (empty when it has none)."""
    _, raw = _grid_location(config)
    try:
        return parse_concurrencies(raw) if raw is not None else []
    except ValueError:
        return []


def derive_missing(config: Mapping[str, Any], missing: Sequence[int]) -> dict[str, Any]:
    """A copy of ``config`` whose points are exactly ``missing``; everything else identical.

    sa-bench (and any benchmark with ``benchmark.concurrencies``) gets its list there, in the
    form it had (a list stays a list, a string becomes ``"AxB"``); a custom (InferenceX)
    benchmark keeps its grid in ``benchmark.env.CONCURRENCIES`` as ``"AxB"``.
    """
    points = [int(c) for c in missing]
    if not points:
        raise ValueError("no points to derive a config for")
    if any(c < 1 for c in points) or len(set(points)) != len(points):
        raise ValueError(f"not a list of distinct concurrencies: {points}")
    derived = copy.deepcopy(dict(config))
    bench = derived.get("benchmark")
    if not isinstance(bench, dict):
        raise ValueError("the config has no benchmark section to hold the points")
    where, raw = _grid_location(derived)
    text = "x".join(str(c) for c in points)
    if where == "env":
        bench["env"]["CONCURRENCIES"] = text
    else:
        bench["concurrencies"] = points if isinstance(raw, list) else text
    return derived


# --------------------------------------------------------------------------- reading points


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
    engine: Engine, arm_id: int, monitor_views: Mapping[int, _View] | None = None
) -> dict[int, AttemptPoints]:
    """Per attempt of the arm: its points (from the monitor when it has them, else read now)."""
    found: dict[int, AttemptPoints] = {}
    for attempt in engine.store.attempts(arm_id):
        view = (monitor_views or {}).get(attempt.id)
        if view is not None and view.points and not attempt.live:
            found[attempt.id] = AttemptPoints(list(view.points.values()))
            continue
        if not attempt.output_dir:
            found[attempt.id] = AttemptPoints([])
            continue
        try:
            found[attempt.id] = await fetch_attempt_points(engine, attempt)
        except Exception as exc:  # a dead connection: fall back to what the monitor has
            if view is None:
                raise RerunRefused(
                    f"cannot read the results of {attempt_ref(attempt.arm_id, attempt.number)}: {exc}"
                ) from None
            found[attempt.id] = AttemptPoints(list(view.points.values()))
    return found


# --------------------------------------------------------------------------- the arm's view


def expected_points(arm: ArmRow) -> list[int]:
    raw = arm.summary.get("concurrencies")
    if isinstance(raw, list) and all(isinstance(c, int) for c in raw):
        return list(raw)
    try:
        return grid_of(_load(arm.config_yaml))
    except RerunRefused:
        return []


def arm_points_view(
    store: Store,
    arm_id: int,
    monitor_views: Mapping[int, _View] | None = None,
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
        raise RerunRefused(f"no arm {arm_ref(arm_id)}")
    gpus = _gpus(arm)
    per_attempt: list[tuple[str, Sequence[int], Sequence[PointResult], int | None]] = []
    for attempt in store.attempts(arm_id):
        got = (attempt_points or {}).get(attempt.id)
        if got is None:
            view = (monitor_views or {}).get(attempt.id)
            if view is not None and (view.points or attempt.live):
                got = AttemptPoints(list(view.points.values()))
            elif attempt.output_dir:
                got = read_local_points(
                    attempt.output_dir, results_dir=attempt.results_dir, gpus=gpus, running=attempt.live
                )
            else:
                got = AttemptPoints([])
        running = got.running if attempt.live else None
        per_attempt.append((attempt_ref(attempt.arm_id, attempt.number), attempt.concurrencies, got.points, running))
    return arm_view(expected_points(arm), per_attempt)


def missing_points(points: Iterable[PointResult], expected: Sequence[int] | None = None) -> list[int]:
    """Expected points without a valid result (missing, incomplete, invalid), in order."""
    wanted = set(expected) if expected is not None else None
    return sorted(p.concurrency for p in points if p.status != "done" and (wanted is None or p.concurrency in wanted))


# --------------------------------------------------------------------------- planning


@dataclass(frozen=True)
class RerunPlan:
    """Exactly what one rerun will submit."""

    arm_id: int
    arm_name: str
    cluster: str
    config_yaml: str
    concurrencies: list[int]
    missing_only: bool
    last_attempt: str  # the attempt it repeats, e.g. "a3.1"
    last_state: str
    warning: str | None = None
    diagnosis: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def arm(self) -> str:
        return arm_ref(self.arm_id)

    def describe(self) -> str:
        what = "missing points" if self.missing_only else "whole arm again"
        points = ", ".join(str(c) for c in self.concurrencies)
        text = (
            f"{self.arm} {self.arm_name}: {what} on {self.cluster}, points [{points}] (after {self.last_attempt} "
            f"{self.last_state})"
        )
        if self.warning:
            text += f"\n  warning: {self.warning}"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "arm": self.arm,
            "arm_name": self.arm_name,
            "cluster": self.cluster,
            "concurrencies": self.concurrencies,
            "missing_only": self.missing_only,
            "after": self.last_attempt,
            "after_state": self.last_state,
            "warning": self.warning,
        }


def _load(config_yaml: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(config_yaml)
    except yaml.YAMLError as exc:
        raise RerunRefused(f"the stored config is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise RerunRefused("the stored config is not a mapping")
    return data


def deterministic_warning(diagnosis: Diagnosis | None) -> str | None:
    """The confirm dialog's warning when the last failure will repeat itself."""
    if diagnosis is None or not diagnosis.deterministic or diagnosis.root_cause is None:
        return None
    first = diagnosis.root_cause.first
    cause = f"{first.finding.title} ({first.id})"
    roles = f" in every {'/'.join(diagnosis.deterministic_roles)} worker" if diagnosis.deterministic_roles else ""
    return f"a plain rerun will fail the same way: {cause}{roles}"


def _live_refusal(arm: ArmRow, attempts: Sequence[AttemptRow]) -> str | None:
    live = [a for a in attempts if a.live]
    if not live:
        return None
    a = live[-1]
    job = f" (job {a.job_id} on {a.cluster})" if a.job_id else ""
    return (
        f"{arm_ref(arm.id)} {arm.name}: attempt {attempt_ref(a.arm_id, a.number)} is still {a.state}{job}; "
        "wait for it to end or cancel it first"
    )


def plan_rerun(
    store: Store,
    arm_id: int,
    missing_only: bool,
    diagnosis: Diagnosis | None = None,
    *,
    monitor_views: Mapping[int, _View] | None = None,
    attempt_points: Mapping[int, AttemptPoints] | None = None,
    base_config_yaml: str | None = None,
) -> RerunPlan:
    """What a rerun of the arm would submit, or :class:`RerunRefused` with the reason.

    A whole rerun repeats the last attempt's resolved config exactly. ``missing_only`` derives
    a config from it (or from ``base_config_yaml``, an operator's fixed config) whose points are
    the arm's expected points still without a valid result. ``diagnosis`` is the last attempt's:
    when its failure is deterministic the plan carries a warning.
    """
    arm = store.arm(arm_id)
    if arm is None:
        raise RerunRefused(f"no arm {arm_ref(arm_id)}")
    attempts = store.attempts(arm_id)
    if not attempts:
        raise RerunRefused(f"{arm_ref(arm_id)} {arm.name}: never submitted, nothing to rerun")
    refusal = _live_refusal(arm, attempts)
    if refusal:
        raise RerunRefused(refusal)
    last = attempts[-1]
    base = base_config_yaml if base_config_yaml is not None else last.config_yaml
    if missing_only:
        view = arm_points_view(store, arm_id, monitor_views, attempt_points=attempt_points)
        missing = missing_points(view, expected_points(arm))
        if not missing:
            raise RerunRefused(f"{arm_ref(arm_id)} {arm.name}: nothing is missing, every expected point is done")
        try:
            config_yaml = dump(derive_missing(_load(base), missing))
        except ValueError as exc:
            raise RerunRefused(f"{arm_ref(arm_id)}: cannot derive a config: {exc}") from None
        concurrencies = missing
    else:
        config_yaml = base
        concurrencies = grid_of(_load(base)) if base_config_yaml is not None else list(last.concurrencies)
    recipe = load_recipe(arm.recipe_path, text=config_yaml)
    if recipe.errors or len(recipe.arms) != 1:
        problems = "; ".join(str(p) for p in recipe.errors) or f"{len(recipe.arms)} arms"
        raise RerunRefused(f"{arm_ref(arm_id)}: the config to submit does not load: {problems}")
    if list(recipe.arms[0].concurrencies) != concurrencies:
        raise RerunRefused(
            f"{arm_ref(arm_id)}: the derived config runs {list(recipe.arms[0].concurrencies)}, not {concurrencies}"
        )
    return RerunPlan(
        arm_id=arm_id,
        arm_name=arm.name,
        cluster=last.cluster,
        config_yaml=config_yaml,
        concurrencies=concurrencies,
        missing_only=missing_only,
        last_attempt=attempt_ref(last.arm_id, last.number),
        last_state=last.state,
        warning=deterministic_warning(diagnosis),
        diagnosis=diagnosis.to_json() if diagnosis is not None else None,
    )


async def rerun(engine: Engine, plan: RerunPlan) -> AttemptRow:
    """Submit the plan: one call, exactly one submission (refused when the arm went live meanwhile)."""
    arm = engine.store.arm(plan.arm_id)
    if arm is None:
        raise RerunRefused(f"no arm {plan.arm}")
    # Checked without awaiting before the submission records its attempt, so two concurrent
    # calls for one arm give one submission.
    refusal = _live_refusal(arm, engine.store.attempts(plan.arm_id))
    if refusal:
        raise RerunRefused(refusal)
    return await engine.resubmit(plan.arm_id, plan.config_yaml, plan.cluster)


def failed_arms(store: Store, sweep_id: int) -> list[ArmRow]:
    """Arms of the sweep whose last attempt failed (FAILED, TIMEOUT, CANCELLED, NODE_FAIL, OOM, SUBMIT_FAILED...)."""
    found = []
    for arm in store.arms(sweep_id):
        attempts = store.attempts(arm.id)
        if attempts and attempts[-1].state in FAILED_STATES:
            found.append(arm)
    return found


def plan_sweep_reruns(
    store: Store,
    sweep_id: int,
    missing_only: bool,
    diagnoses: Mapping[int, Diagnosis | None] | None = None,
    *,
    monitor_views: Mapping[int, _View] | None = None,
    attempt_points: Mapping[int, AttemptPoints] | None = None,
) -> tuple[list[RerunPlan], list[str]]:
    """Plans for every failed arm of the sweep (``diagnoses`` by arm id), and why others were refused."""
    plans: list[RerunPlan] = []
    refused: list[str] = []
    for arm in failed_arms(store, sweep_id):
        try:
            plans.append(
                plan_rerun(
                    store,
                    arm.id,
                    missing_only,
                    (diagnoses or {}).get(arm.id),
                    monitor_views=monitor_views,
                    attempt_points=attempt_points,
                )
            )
        except RerunRefused as exc:
            refused.append(str(exc))
    return plans, refused


# --------------------------------------------------------------------------- diagnosis


_LOG_SUFFIXES = (".out", ".log", ".err")


def diagnose_output_dir(output_dir: str | Path, state: str | None = None) -> Diagnosis | None:
    """The diagnosis of a job from its logs on this machine; None when there are none."""
    triage = triage_output_dir(output_dir)
    return triage.diagnose(state) if triage is not None else None


def triage_output_dir(output_dir: str | Path) -> Triage | None:
    """Every log of a job dir on this machine read into one triage; None when there are none."""
    from console.triage import Triage, read_lines

    logs = Path(output_dir) / "logs"
    try:
        files = sorted(p for p in logs.iterdir() if p.is_file() and p.name.endswith(_LOG_SUFFIXES))
    except OSError:
        return None
    if not files:
        return None
    triage = Triage()
    for path in files:
        try:
            with path.open("rb") as fh:
                batch: list[str] = []
                for line in read_lines(fh):
                    batch.append(line)
                    if len(batch) >= 4096:
                        triage.feed(str(path), batch)
                        batch = []
                triage.feed(str(path), batch)
        except OSError:
            continue
    return triage


def last_attempt_diagnosis(
    store: Store, arm_id: int, monitor_views: Mapping[int, Any] | None = None
) -> Diagnosis | None:
    """The last attempt's diagnosis: the monitor's when it has one, else a scan of local logs."""
    attempts = store.attempts(arm_id)
    if not attempts:
        return None
    last = attempts[-1]
    view = (monitor_views or {}).get(last.id)
    diagnosis = getattr(view, "diagnosis", None) if view is not None else None
    if diagnosis is not None:
        return diagnosis  # type: ignore[no-any-return]
    if last.output_dir and Path(last.output_dir).is_dir():
        return diagnose_output_dir(last.output_dir, last.state)
    return None
