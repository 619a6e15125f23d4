"""Reruns: the whole arm again, or only its missing points.

A rerun is a new attempt of the same arm: exactly the last attempt's resolved config, or a
derived config (:mod:`console.grid`) whose grid is only the points still missing, as the arm's
merged results say (:mod:`console.results.arms`). Earlier attempts and their results are kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from console.grid import derive_missing, grid_of
from console.ids import arm_ref, attempt_ref
from console.recipes import load_recipe
from console.recipes.yamlio import dump
from console.results import AttemptPoints
from console.results.arms import (
    LiveView,
    ResultsUnavailable,
    arm_points_view,
    expected_points,
    fetch_arm_points,
    fetch_attempt_points,
    missing_points,
)
from console.store import SUBMIT_FAILED, ArmRow, AttemptRow, Store
from console.triage import diagnose_output_dir

if TYPE_CHECKING:
    from console.diagnosis import Diagnosis
    from console.engine import Engine

__all__ = [
    "FAILED_STATES",
    "AttemptPoints",
    "RerunPlan",
    "RerunRefused",
    "ResultsUnavailable",
    "SweepRerun",
    "arm_points_view",
    "derive_missing",
    "expected_points",
    "failed_arms",
    "fetch_arm_points",
    "fetch_attempt_points",
    "grid_of",
    "missing_points",
    "plan_failed_reruns",
    "plan_rerun",
    "plan_sweep_reruns",
    "rerun",
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
    if diagnosis.recurrences:
        return f"a plain rerun will fail the same way: {cause} also ended {', '.join(diagnosis.recurrences)}"
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
    monitor_views: Mapping[int, LiveView] | None = None,
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
    monitor_views: Mapping[int, LiveView] | None = None,
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


@dataclass(frozen=True)
class SweepRerun:
    """What "rerun every failed arm" of a sweep will and will not submit, and why."""

    sweep_id: int
    plans: list[RerunPlan]  # will be submitted
    skipped: list[tuple[str, str]]  # (arm, why not): deterministic failures, live or finished arms
    include_deterministic: bool = False

    def describe(self) -> str:
        lines = [f"Will submit {len(self.plans)} arm(s):"] if self.plans else ["Nothing will be submitted."]
        for plan in self.plans:
            lines.append(f"  {plan.arm} {plan.arm_name}: after {plan.last_attempt} {plan.last_state}, "
                         f"points {', '.join(str(c) for c in plan.concurrencies)}")  # fmt: skip
            if plan.warning:
                lines.append(f"    warning: {plan.warning}")
        if self.skipped:
            lines.append(f"Will not submit {len(self.skipped)} arm(s):")
            lines += [f"  {arm}: {why}" for arm, why in self.skipped]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "sweep": f"s{self.sweep_id}",
            "plans": [p.to_json() for p in self.plans],
            "skipped": [{"arm": arm, "reason": why} for arm, why in self.skipped],
            "include_deterministic": self.include_deterministic,
        }


def plan_failed_reruns(
    store: Store,
    sweep_id: int,
    missing_only: bool,
    diagnoses: Mapping[int, Diagnosis | None] | None = None,
    *,
    include_deterministic: bool = False,
    monitor_views: Mapping[int, LiveView] | None = None,
    attempt_points: Mapping[int, AttemptPoints] | None = None,
) -> SweepRerun:
    """Every failed arm of the sweep again, in one go. An arm whose failure is deterministic
    (it would fail the same way) is skipped unless ``include_deterministic``; every other arm
    is listed with why it is not rerun (still live, completed, refused)."""
    plans, refused = plan_sweep_reruns(
        store, sweep_id, missing_only, diagnoses, monitor_views=monitor_views, attempt_points=attempt_points
    )
    skipped: list[tuple[str, str]] = []
    kept: list[RerunPlan] = []
    for plan in plans:
        if plan.warning and not include_deterministic:
            skipped.append((f"{plan.arm} {plan.arm_name}", f"deterministic, {plan.warning} (include it to rerun)"))
        else:
            kept.append(plan)
    failed = {a.id for a in failed_arms(store, sweep_id)}
    for arm in store.arms(sweep_id):
        if arm.id in failed:
            continue
        attempts = store.attempts(arm.id)
        last = attempts[-1] if attempts else None
        if last is None:
            why = "never submitted"
        elif last.live:
            why = f"still {last.state} ({attempt_ref(last.arm_id, last.number)})"
        else:
            why = f"{last.state}: nothing to rerun" if last.state == "COMPLETED" else f"last attempt {last.state}"
        skipped.append((f"{arm_ref(arm.id)} {arm.name}", why))
    skipped += [(reason.split(":", 1)[0], reason.split(":", 1)[-1].strip()) for reason in refused]
    return SweepRerun(sweep_id, kept, skipped, include_deterministic)


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
        return diagnose_output_dir(last.output_dir, last.state, earlier=store.earlier_root_causes(last))
    return None
