"""`srt-console results TARGET [--json|--csv]` and `srt-console rerun ARM|SWEEP [--missing]`."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from console.cli.context import CliError, Context, open_context
from console.cli.exits import fail
from console.cli.jobs_cmd import attempt_doc
from console.describe import shown
from console.engine import LaunchRefused
from console.ids import arm_ref, attempt_ref, parse_ref
from console.recipes import load_recipe
from console.rerun import (
    RerunPlan,
    RerunRefused,
    ResultsUnavailable,
    arm_points_view,
    failed_arms,
    fetch_arm_points,
    fetch_attempt_points,
    grid_of,
    last_attempt_diagnosis,
    plan_rerun,
    rerun,
)
from console.results import PointResult, arm_points, points_csv, read_job_metadata, read_points
from console.results.arms import attempt_context
from console.results.names import discover_results
from console.results.points import arm_view, read_point
from console.store import ArmRow, AttemptRow
from console.transport.base import TransportError


def _fail(message: str) -> int:
    return fail(message)


# --- results ------------------------------------------------------------------------------


def cmd_results(args: argparse.Namespace) -> int:
    target = Path(args.target)
    groups: list[tuple[str | None, list[PointResult]]]
    looked: list[str] = []
    try:
        if target.is_dir():
            points, looked = _dir_points(target, args.config)
            groups = [(None, points)]
        else:
            ctx = open_context(args.config)
            groups = asyncio.run(_store_points(ctx, args.target))
    except (CliError, RerunRefused, ResultsUnavailable) as exc:
        return _fail(str(exc))
    rows: list[dict[str, Any]] = []
    for arm_name, points in groups:
        for point in points:
            row = point.to_json()
            rows.append({"arm": arm_name, **row} if arm_name is not None else row)
    found = any(p.status != "missing" for _, points in groups for p in points)
    if args.json:
        doc: dict[str, Any] = {"points": rows}
        if looked and not found:
            doc["looked_in"] = looked
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.csv:
        sys.stdout.write(points_csv(rows))
    else:
        sys.stdout.write(_table(groups))
        if any(p.simulated for _, points in groups for p in points):
            print("simulated: these numbers come from the demo engine, not from hardware")
        if looked and not found:
            print("no result files found; looked in:\n  " + "\n  ".join(looked))
    # For scripts: 1 when an expected point has no valid result (missing, incomplete, invalid).
    bad = any(p.status in ("missing", "incomplete", "invalid") for _, points in groups for p in points)
    return 1 if bad else 0


def _recorded_attempt(job_dir: Path) -> AttemptRow | None:
    """The attempt the store recorded with this output dir, if any (read-only use of the store)."""
    from console.store import Store, StoreError, default_data_dir

    store_file = default_data_dir() / "console.sqlite3"
    if not store_file.is_file():
        return None
    try:
        store = Store(store_file)
    except StoreError:
        return None
    try:
        resolved = str(job_dir.resolve())
        found = [a for a in store.attempts() if a.output_dir and str(Path(a.output_dir).resolve()) == resolved]
        return found[-1] if found else None
    finally:
        store.close()


def _results_places(
    job_dir: Path, config_path: str | None, attempt: AttemptRow | None
) -> list[tuple[Path | None, str | None, Path | None]]:
    """Where a job's result files may be besides its dir: the results dir its attempt recorded,
    and each profile's ``results`` root (InferenceX's custom benchmark writes
    ``<results>/<job id>/fixed-seq/``). As (results_root, job_id, results_dir) triples."""
    from console.clusters import load_profiles
    from console.config import load_config
    from console.store import default_data_dir

    places: list[tuple[Path | None, str | None, Path | None]] = []
    if attempt is not None and attempt.results_dir:
        places.append((None, None, Path(attempt.results_dir)))
    profiles, _ = load_profiles(load_config(config_path), default_data_dir())
    for profile in profiles.values():
        if profile.results and profile.ssh is None:
            places.append((Path(profile.results).expanduser(), job_dir.name, None))
    return places


def _dir_points(job_dir: Path, config_path: str | None = None) -> tuple[list[PointResult], list[str]]:
    """Points of a job output dir on this machine (expected points from its config.yaml), and
    where result files were looked for."""
    expected: list[int] = []
    gpus: int | None = None
    simulated = False
    attempt = _recorded_attempt(job_dir)
    config_file = job_dir / "config.yaml"
    if config_file.is_file() and config_file.stat().st_size < 4 * 1024 * 1024:
        text = config_file.read_text(encoding="utf-8", errors="replace")
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError:
            data = None
        if isinstance(data, dict):
            expected = grid_of(data)
            # The demo engine's jobs keep the recipe's `demo:` section (srtctl never sees one).
            simulated = "demo" in data
            recipe = load_recipe(config_file, text=text)
            if len(recipe.arms) == 1:
                gpus = recipe.arms[0].topology.total_gpus or None
    for meta_file in sorted(job_dir.glob("*.json")) + sorted((job_dir / "logs").glob("*.json")):
        if re.fullmatch(r"\d+(?:_\d+)?\.json", meta_file.name):
            meta = read_job_metadata(meta_file)
            if meta.total_gpus:
                gpus = meta.total_gpus
                break
    points = read_points(job_dir, gpus=gpus)
    looked = [f"{job_dir} (and its logs/)"]
    simulated = simulated or (attempt is not None and attempt.simulated)
    if not points:
        for root, job_id, results_dir in _results_places(job_dir, config_path, attempt):
            where = results_dir or (root / (job_id or "") if root else None)
            if where is None:
                continue
            looked.append(str(where))
            found = (
                [read_point(rf.path, gpus=gpus) for rf in discover_results(None, results_dir=results_dir)
                 if rf.kind != "rollup"]
                if results_dir is not None
                else read_points(None, results_root=root, job_id=job_id, gpus=gpus)
            )  # fmt: skip
            if found:
                points = found
                break
    merged = arm_points(expected, points)
    return ([replace(p, simulated=True) for p in merged] if simulated else merged), looked


async def _store_points(ctx: Context, text: str) -> list[tuple[str | None, list[PointResult]]]:
    try:
        ref = parse_ref(text)
    except ValueError as exc:
        raise CliError(f"{exc}, or a job output dir on this machine") from None
    store = ctx.store
    try:
        if ref.kind in ("attempt", "job"):
            if ref.kind == "attempt":
                found = [a for a in store.attempts(int(ref.id)) if a.number == ref.number]
            else:
                found = [a for a in store.attempts() if a.job_id == ref.id]
            if not found:
                raise CliError(f"no {ref.kind} {text}")
            attempt = found[-1]
            arm = store.arm(attempt.arm_id)
            got = await fetch_attempt_points(ctx.engine, attempt)
            label = attempt_ref(attempt.arm_id, attempt.number)
            running = got.running if attempt.live else None
            points = arm_view(
                attempt.concurrencies, [(label, attempt.concurrencies, got.points, running)],
                **attempt_context([attempt]),
            )  # fmt: skip
            return [(arm.name if arm else None, points)]
        arms: list[ArmRow]
        if ref.kind == "sweep":
            arms = store.arms(int(ref.id))
            if not arms and store.sweep(int(ref.id)) is None:
                raise CliError(f"no sweep {text}")
        else:
            arm_row = store.arm(int(ref.id))
            if arm_row is None:
                raise CliError(f"no arm {text}")
            arms = [arm_row]
        groups: list[tuple[str | None, list[PointResult]]] = []
        for arm in arms:
            fetched = await fetch_arm_points(ctx.engine, arm.id)
            groups.append((arm.name, arm_points_view(store, arm.id, attempt_points=fetched)))
        return groups
    except (TransportError, OSError, LaunchRefused) as exc:
        raise CliError(f"cannot read results: {exc}") from None
    finally:
        await ctx.engine.close()


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _table(groups: list[tuple[str | None, list[PointResult]]]) -> str:
    lines: list[str] = []
    for arm_name, points in groups:
        if arm_name:
            lines.append(arm_name)
        lines.append(
            f"  {'conc':>6} {'status':<10} {'out tok/s':>11} {'tok/s/gpu':>10} {'tok/s/user':>10} "
            f"{'TTFT p50':>9} {'TPOT p50':>9} {'ITL p50':>8} {'done':>6} {'attempt':<8}"
        )
        for p in points:
            completed = "-" if p.completed is None else str(p.completed)
            lines.append(
                f"  {p.concurrency:>6} {p.status:<10} {_fmt(p.output_tok_s):>11} {_fmt(p.tok_s_per_gpu):>10} "
                f"{_fmt(p.tok_s_per_user):>10} {_fmt(p.ttft.median):>9} {_fmt(p.tpot.median, 2):>9} "
                f"{_fmt(p.itl.median, 2):>8} {completed:>6} {p.attempt or '':<8}"
                + (" [simulated]" if p.simulated else "")
                + (f"  ({p.invalid_reason})" if p.invalid_reason else "")
            )
    return "\n".join(lines) + "\n"


# --- rerun --------------------------------------------------------------------------------


def _arms_for(ctx: Context, text: str) -> list[ArmRow]:
    try:
        ref = parse_ref(text)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if ref.kind == "sweep":
        if ctx.store.sweep(int(ref.id)) is None:
            raise CliError(f"no sweep {text}")
        arms = failed_arms(ctx.store, int(ref.id))
        if not arms:
            raise CliError(f"{text}: no failed arm to rerun")
        return arms
    if ref.kind in ("arm", "attempt"):
        arm = ctx.store.arm(int(ref.id))
        if arm is None:
            raise CliError(f"no arm {arm_ref(int(ref.id))}")
        return [arm]
    raise CliError(f"{text}: give an arm (a3) or a sweep (s2)")


async def _plans(
    ctx: Context, arms: list[ArmRow], missing: bool, base: str | None
) -> tuple[list[RerunPlan], list[str]]:
    plans: list[RerunPlan] = []
    refused: list[str] = []
    for arm in arms:
        try:
            fetched = await fetch_arm_points(ctx.engine, arm.id) if missing else None
            diagnosis = last_attempt_diagnosis(ctx.store, arm.id)
            plans.append(
                plan_rerun(ctx.store, arm.id, missing, diagnosis, attempt_points=fetched, base_config_yaml=base)
            )
        except (RerunRefused, ResultsUnavailable) as exc:
            refused.append(str(exc))
        except (TransportError, OSError, LaunchRefused) as exc:
            refused.append(f"{arm_ref(arm.id)}: cannot read its results: {exc}")
    return plans, refused


def cmd_rerun(args: argparse.Namespace) -> int:
    try:
        ctx = open_context(args.config)
        arms = _arms_for(ctx, args.target)
    except CliError as exc:
        return _fail(str(exc))
    base: str | None = None
    if args.rerun_config:
        try:
            base = Path(args.rerun_config).read_text(encoding="utf-8")
        except OSError as exc:
            return _fail(f"{args.rerun_config}: cannot read: {exc.strerror or exc}")
    return asyncio.run(_rerun_flow(ctx, arms, args, base))


async def _rerun_flow(ctx: Context, arms: list[ArmRow], args: argparse.Namespace, base: str | None) -> int:
    try:
        if any(a.live for arm in arms for a in ctx.store.attempts(arm.id)):
            # The store may lag behind the scheduler (a job that just ended): ask once.
            await ctx.engine.poll_once()
        plans, refused = await _plans(ctx, arms, args.missing, base)
        if args.target.startswith("s") and not args.include_deterministic:
            # Every failed arm of a sweep: those that would fail the same way are left out unless asked.
            for plan in [p for p in plans if p.warning]:
                plans.remove(plan)
                refused.append(f"{plan.arm} {plan.arm_name}: deterministic, {plan.warning} "
                               "(--include-deterministic reruns it)")  # fmt: skip
        for reason in refused:
            print(f"srt-console: not rerun: {reason}", file=sys.stderr)
        if not plans:
            return 1
        if not args.json:
            print(f"Rerun {len(plans)} arm(s):")
            for plan in plans:
                print(f"  {shown(plan.describe(), 2000)}")
        if not args.yes:
            if not sys.stdin.isatty():
                return _fail("not a terminal: add --yes to submit without confirmation")
            if input("Submit? [y/N] ").strip().lower() not in ("y", "yes"):
                return _fail("nothing submitted")
        return await _submit(ctx, plans, args, refused)
    finally:
        await ctx.engine.close()


async def _submit(ctx: Context, plans: list[RerunPlan], args: argparse.Namespace, refused: list[str]) -> int:
    submitted: list[AttemptRow] = []
    for plan in plans:
        try:
            submitted.append(await rerun(ctx.engine, plan))
        except (RerunRefused, LaunchRefused) as exc:
            refused.append(str(exc))
            print(f"srt-console: not rerun: {exc}", file=sys.stderr)
    if args.wait and submitted:
        if not args.json:
            print(f"Waiting for {len(submitted)} attempt(s)...", file=sys.stderr)
        submitted = await ctx.engine.wait([a.id for a in submitted])
    docs = []
    for attempt in submitted:
        doc = attempt_doc(ctx.store, attempt)
        doc["concurrencies"] = attempt.concurrencies
        docs.append(doc)
    if args.json:
        json.dump({"plans": [p.to_json() for p in plans], "attempts": docs, "refused": refused}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for doc in docs:
            job = f"job {doc['job_id']}" if doc["job_id"] else shown(doc["error"] or "not submitted", 2000)
            points = "x".join(str(c) for c in doc["concurrencies"])
            print(f"  {doc['id']:<8} {shown(doc['arm']):<44} {doc['state']:<13} {job}  points {points}")
    bad = [d for d in docs if d["state"] == "SUBMIT_FAILED" or (args.wait and d["state"] != "COMPLETED")]
    return 1 if bad or not docs else 0


__all__ = ["cmd_rerun", "cmd_results"]
