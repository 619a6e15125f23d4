"""`srt-console clusters | launch | status | cancel`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from typing import TYPE_CHECKING, Any

from console.cli.context import CliError, Context, open_context, resolve_attempts
from console.cli.exits import EXIT_BAD, EXIT_USAGE, fail
from console.describe import clock_label, duration_label, grid_label, iso_time, shown, topology_label
from console.engine import LaunchRefused
from console.ids import arm_ref, attempt_ref, parse_ref, sweep_ref
from console.provenance import Provenance
from console.scheduler import SchedulerError
from console.store import AttemptRow, Store, StoreError
from console.transport.base import TransportError

if TYPE_CHECKING:
    from console.launch_plan import ArmPlan
    from console.model import Arm, Recipe

# `status` and `cancel` run often (scripts, prompts): what only `clusters` and `launch` use
# (the recipe schemas, the launch checks) is imported by those commands.


def _fail(message: str, problems: list[str] | None = None, code: int = EXIT_BAD) -> int:
    return fail(message, problems, code)


def _json(doc: Any) -> None:
    json.dump(doc, sys.stdout, indent=2)
    sys.stdout.write("\n")


def attempt_doc(store: Store, attempt: AttemptRow) -> dict[str, Any]:
    arm = store.arm(attempt.arm_id)
    return {
        "id": attempt_ref(attempt.arm_id, attempt.number),
        "arm": arm.name if arm else None,
        "arm_id": arm_ref(attempt.arm_id),
        "attempt": attempt.number,
        "cluster": attempt.cluster,
        "job_id": attempt.job_id,
        "output_dir": attempt.output_dir,
        "results_dir": attempt.results_dir,
        "state": attempt.state,
        "reason": attempt.reason,
        "exit_code": attempt.exit_code,
        "nodelist": attempt.nodelist,
        "error": attempt.error,
        "cancelled_by_you": attempt.cancelled_by_operator,
        # Demo-launcher attempts: the demo engine's numbers, not measured on hardware.
        "simulated": attempt.simulated,
        "submitted": iso_time(attempt.submit_time),
        "started": iso_time(attempt.start_time),
        "ended": iso_time(attempt.end_time),
        "times_from": "scheduler" if attempt.sched_submit_at is not None else "console",
        "elapsed_s": round(attempt.elapsed() or 0.0, 1) if attempt.start_time is not None else None,
        # What ran (the resolved recipe itself is in `report --json`; here its digest).
        "provenance": Provenance.from_json(attempt.provenance).to_json(with_recipe=False)
        if attempt.provenance
        else None,
    }


# --- clusters -----------------------------------------------------------------------------


def cmd_clusters(args: argparse.Namespace) -> int:
    try:
        ctx = open_context(args.config)
    except CliError as exc:
        return _fail(str(exc), code=exc.code)
    reports = asyncio.run(_check_all(ctx))
    if args.json:
        _json({"clusters": reports, "default": ctx.default_cluster})
    else:
        for report in reports:
            mark = "ok " if report["ok"] else "BAD"
            print(
                f"{mark} {report['name']:<16} {shown(report['where']):<28} {report['launcher']}/{report['scheduler']}"
            )
            for check in report["checks"]:
                mark = "!" if check.get("warning") else "✓" if check["ok"] else "✗"
                print(f"      {mark} {check['check']}: {shown(check['detail'], 2000)}")
                if check.get("fix") and (not check["ok"] or check.get("warning")):
                    print(f"        → {shown(check['fix'], 2000)}")
    return 0 if all(r["ok"] for r in reports) else 1


async def _check_all(ctx: Context) -> list[dict[str, Any]]:
    from console.checks import check_profile

    try:
        reports = await asyncio.gather(*(check_profile(ctx.engine.runtime(name)) for name in ctx.profiles))
        return [r.as_dict() for r in reports]
    finally:
        await ctx.engine.close()


# --- launch ------------------------------------------------------------------------------


def cmd_launch(args: argparse.Namespace) -> int:
    from console.recipes import load_targets

    try:
        ctx = open_context(args.config)
    except CliError as exc:
        return _fail(str(exc), code=exc.code)
    cluster = args.cluster or ctx.default_cluster
    if cluster not in ctx.profiles:
        return _fail(f"unknown cluster {cluster!r}; configured: {', '.join(sorted(ctx.profiles))}", code=EXIT_USAGE)
    profile = ctx.profiles[cluster]
    # Checked for the srtctl this cluster runs, when its profile says which (srtctl_flavour).
    recipes = load_targets(args.paths, flavour=profile.flavour())
    arms = [arm for recipe in recipes for arm in recipe.arms]
    problems = [str(p) for r in recipes for p in r.errors]
    if problems:
        return _fail("the recipes have errors; nothing was submitted", problems)
    # A selector that matches nothing (or not what was meant) is a warning for `check`; a
    # launch does not guess what the operator wanted.
    selectors = [
        str(p) for r in recipes for p in r.problems if p.field == "selector" and p.message.startswith("selector ")
    ]
    if selectors:
        return _fail("a selector does not apply; nothing was submitted", selectors)
    if not arms:
        return _fail("no arms to launch")
    if not args.json:
        print(f"Launch {len(arms)} arm(s) on {cluster} ({shown(profile.where)}, {profile.launcher} launcher):")
        for arm in arms:
            print(
                f"  {shown(arm.name)}: {topology_label(arm.topology)}, {arm.topology.node_demand} node(s), "
                f"points {grid_label(arm.concurrencies)}"
            )
    if args.dry_run:
        return asyncio.run(_preview(ctx, arms, cluster, args.json))
    return asyncio.run(_launch(ctx, args, cluster, (recipes, arms)))


async def _pin_checks(ctx: Context, arms: list[Arm], cluster: str, as_json: bool) -> list[ArmPlan]:
    """The pin checks of every arm (no dry-run), printed unless the output is JSON."""
    from console.launch_plan import plan_arms

    plans = await plan_arms(ctx.engine.runtime(cluster), arms, dry_run=False)
    if not as_json:
        for plan in plans:
            for problem in plan.pin_problems:
                mark = "✗" if problem.blocking else "!"
                lines = problem.lines()
                print(f"  {mark} {plan.arm.name}: {lines[0]}")
                for line in lines[1:]:
                    print(f"    {line}")
            if plan.verdict == "unchecked":
                print(f"  ! {plan.arm.name}: pins not checked: {plan.detail}")
    return plans


def _confirmed(args: argparse.Namespace) -> str | None:
    """None when the operator confirmed (or --yes), else why nothing is submitted."""
    if args.yes:
        return None
    if not sys.stdin.isatty():
        return "not a terminal: add --yes to launch without confirmation"
    if input("Submit? [y/N] ").strip().lower() not in ("y", "yes"):
        return "nothing submitted"
    return None


async def _preview(ctx: Context, arms: list[Arm], cluster: str, as_json: bool) -> int:
    """Each arm as it would run: its scheduling values and the launcher's own account (srtctl's
    dry-run, compared with the console's plan); nothing is submitted. Exit 1 when srtctl refuses
    an arm or its generated header differs from the plan."""
    from console.launch_plan import plan_arms, settings_label
    from console.launchers import LaunchError, SrtctlLauncher
    from console.sanitize import clean_line

    try:
        runtime = ctx.engine.runtime(cluster)
        plans = await plan_arms(runtime, arms)
        texts = {p.arm.name: p.dry_run.text for p in plans if p.dry_run}
        if not isinstance(runtime.launcher, SrtctlLauncher):
            for arm in arms:
                texts[arm.name] = await runtime.launcher.preview(arm)
    except (LaunchError, TransportError, OSError) as exc:
        return _fail(f"dry run failed: {exc}")
    finally:
        await ctx.engine.close()
    if as_json:
        _json({"cluster": cluster, "dry_run": [{**p.as_dict(), "preview": texts.get(p.arm.name)} for p in plans]})
    else:
        for plan in plans:
            print(f"--- {shown(plan.arm.name)} ---")
            print(f"scheduling: {shown(settings_label(plan.settings), 2000)}")
            for problem in plan.pin_problems:
                print(("PIN CHECK FAILED: " if problem.blocking else "pin warning: ") + shown(str(problem), 2000))
            if plan.arm.name in texts:
                # The cluster's own words: untrusted text, shown inert.
                print("\n".join(clean_line(line) for line in texts[plan.arm.name].splitlines()))
            if plan.dry_run is not None:
                header = " ".join(f"--{k}={v}" for k, v in plan.dry_run.sbatch.items())
                print(f"Generated #SBATCH header: {shown(header, 2000)}")
                print(f"console's plan: {plan.arm.topology.node_demand} node(s)")
            if plan.verdict == "ok":
                if plan.dry_run is not None:
                    print("The header agrees with the console's plan.")
            else:
                print(f"{plan.verdict.upper()}: {shown(plan.detail, 4000)}")
    return 0 if all(p.verdict in ("ok", "unchecked") and not p.blocking for p in plans) else 1


async def _launch(ctx: Context, args: argparse.Namespace, cluster: str, planned: tuple[list[Recipe], list[Arm]]) -> int:
    try:
        plans = await _pin_checks(ctx, planned[1], cluster, args.json)
        blocked = [p for p in plans if p.blocking]
        if blocked and not args.force:
            message = (
                "the cluster's checkout cannot run these arms as stated; nothing was submitted (--force submits anyway)"
            )
            if args.json:  # one document: the error and what was refused
                _json({"error": message, "problems": [], "exit_code": EXIT_BAD,
                       "refused": [p.as_dict() for p in blocked]})  # fmt: skip
                return EXIT_BAD
            return _fail(message)
        refusal = _confirmed(args)
        if refusal:
            return _fail(refusal)
        sweep_id = await ctx.engine.launch(args.paths, cluster, name=args.name, planned=planned)
        attempts = [a for arm in ctx.store.arms(sweep_id) for a in ctx.store.attempts(arm.id)]
        if args.wait:
            if not args.json:
                print(f"Waiting for {len(attempts)} attempt(s) of {sweep_ref(sweep_id)}...", file=sys.stderr)
            attempts = await ctx.engine.wait([a.id for a in attempts])
    except LaunchRefused as exc:
        return _fail(str(exc), exc.problems)
    finally:
        await ctx.engine.close()
    docs = [attempt_doc(ctx.store, a) for a in attempts]
    if args.json:
        _json({"sweep": sweep_ref(sweep_id), "attempts": docs})
    else:
        print(f"Sweep {sweep_ref(sweep_id)}:")
        for doc in docs:
            job = f"job {doc['job_id']}" if doc["job_id"] else shown(doc["error"] or "not submitted", 2000)
            print(f"  {doc['id']:<8} {shown(doc['arm']):<44} {doc['state']:<13} {job}  {shown(doc['output_dir'])}")
    failed = [d for d in docs if d["state"] == "SUBMIT_FAILED" or (args.wait and d["state"] != "COMPLETED")]
    return 1 if failed else 0


# --- status ------------------------------------------------------------------------------


def cmd_status(args: argparse.Namespace) -> int:
    try:
        ctx = open_context(args.config)
    except CliError as exc:
        return _fail(str(exc), code=exc.code)
    notes = asyncio.run(_refresh(ctx))
    sweeps: list[dict[str, Any]] = []
    lines: list[tuple[str, AttemptRow] | str] = []  # a sweep's title, or an attempt with its arm's name
    for sweep in ctx.store.sweeps():
        arms: list[dict[str, Any]] = []
        lines.append(f"{sweep_ref(sweep.id)}  {shown(sweep.name)}  on {shown(sweep.cluster)}")
        for arm in ctx.store.arms(sweep.id):
            rows = ctx.store.attempts(arm.id)
            lines += [(shown(arm.name), a) for a in rows]
            attempts = [attempt_doc(ctx.store, a) for a in rows]
            arms.append({"id": arm_ref(arm.id), "name": arm.name, "recipe": arm.recipe_path, "attempts": attempts})
        sweeps.append({"id": sweep_ref(sweep.id), "name": sweep.name, "cluster": sweep.cluster, "arms": arms})
    if args.json:
        _json({"sweeps": sweeps, "clusters": notes})
        return 0
    for cluster, note in notes.items():
        if note != "connected":
            print(f"{cluster}: {shown(note, 2000)}", file=sys.stderr)
    if not sweeps:
        print(f"No sweeps yet (store {ctx.store.path}): `srt-console launch PATH` starts one.")
        return 0
    width = max([len("ARM")] + [len(line[0]) for line in lines if isinstance(line, tuple)])
    print(
        f"  {'ATTEMPT':<8} {'ARM':<{width}} {'STATE':<28} {'JOB':<10} {'SUBMITTED':<16} {'STARTED':<8} "
        f"{'ENDED':<8} {'ELAPSED':>8}"
    )
    noticed = False
    for line in lines:
        if isinstance(line, str):
            print(line)
            continue
        name, a = line
        state = a.state + (f" ({shown(a.reason)})" if a.reason else "") + (" [simulated]" if a.simulated else "")
        noticed = noticed or (a.job_id is not None and a.sched_submit_at is None)
        print(
            f"  {attempt_ref(a.arm_id, a.number):<8} {name:<{width}} {state:<28} {a.job_id or '-':<10} "
            f"{clock_label(a.submit_time, date=True):<16} {clock_label(a.start_time):<8} "
            f"{clock_label(a.end_time):<8} {duration_label(a.elapsed()):>8}"
        )
    if noticed:
        print("(times without the scheduler's own are when the console noticed)")
    return 0


async def _refresh(ctx: Context) -> dict[str, str]:
    """One poll of the live attempts so `status` is current; transport trouble is reported, not fatal."""
    try:
        if ctx.store.attempts(live=True):
            await ctx.engine.poll_once()
        return ctx.engine.cluster_statuses()
    finally:
        await ctx.engine.close()


# --- cancel ------------------------------------------------------------------------------


def cmd_cancel(args: argparse.Namespace) -> int:
    try:
        ctx = open_context(args.config)
    except CliError as exc:
        return _fail(str(exc), code=exc.code)
    return asyncio.run(_cancel(ctx, args))


async def _cancel(ctx: Context, args: argparse.Namespace) -> int:
    unrecorded: str | None = None
    try:
        # Submissions a dead console left half-way get their jobs (or fail) before the cancel.
        with contextlib.suppress(TransportError, SchedulerError):
            await ctx.engine.reconcile()
        try:
            attempts = resolve_attempts(ctx.store, args.target)
        except CliError as exc:
            if not args.target.startswith("job:"):
                return _fail(str(exc))
            # A job the console did not launch: adopt it, so that its end is followed and diagnosed.
            cluster = args.cluster or ctx.default_cluster
            try:
                attempts = [await ctx.engine.adopt(cluster, args.target.removeprefix("job:"))]
            except LaunchRefused as refused:
                return _fail(str(refused))
            if not args.json:
                print(f"adopted job {attempts[0].job_id} on {cluster} as {attempt_ref(attempts[0].arm_id, 1)}")
        # A sweep's cancel also stops its submissions that have not started (another console
        # may be submitting it now); an attempt being submitted is cancelled once its job exists.
        ref = parse_ref(args.target) if not args.target.startswith("job:") else None
        sweep_id = int(ref.id) if ref is not None and ref.kind == "sweep" else None
        live = [a for a in attempts if a.live]
        if not live:
            return _fail(f"{args.target}: nothing to cancel (no live attempt)")
        if not args.yes:
            if not sys.stdin.isatty():
                return _fail("not a terminal: add --yes to cancel without confirmation")
            jobs = ", ".join(f"{a.cluster}:{a.job_id or 'being submitted'}" for a in live)
            if input(f"Cancel {len(live)} job(s) ({jobs})? [y/N] ").strip().lower() not in ("y", "yes"):
                return _fail("nothing cancelled")
        try:
            await ctx.engine.cancel(live, sweep_id=sweep_id)
            await ctx.engine.poll_once()
        except StoreError as exc:
            # The jobs were cancelled all the same; only the record is missing.
            unrecorded = str(exc)
    except (TransportError, SchedulerError, OSError) as exc:
        return _fail(f"cancel not confirmed: {exc}")
    finally:
        await ctx.engine.close()
    if unrecorded is not None:
        for a in live:
            if a.job_id:
                print(f"{attempt_ref(a.arm_id, a.number)}: cancel sent to job {a.job_id} on {a.cluster}")
        return _fail(f"the cancel was sent but not recorded: {unrecorded}")
    docs = [attempt_doc(ctx.store, ctx.store.attempt(a.id)) for a in live]
    if args.json:
        _json({"cancelled": docs})
    else:
        for doc in docs:
            job = f"job {doc['job_id']}" if doc["job_id"] else "its submission (stopped before it starts)"
            print(f"{doc['id']}: cancel requested for {job} on {doc['cluster']} (now {doc['state']})")
    return 0
