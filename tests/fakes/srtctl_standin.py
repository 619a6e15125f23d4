"""A stand-in for `srtctl` on the test cluster (srtctl itself and GPUs cannot exist here).

It follows srtctl's command-line contract exactly (reference/srtctl.md §2-3): `apply` and
`dry-run` with `-f FILE[:selector]`, `-o DIR`, `--json`, `--tags`, `-y`, `--no-preflight`;
with `--json` every prose line goes to stderr and stdout gets one JSON line per submitted job
(`status`, `slurm_job_id`, `job_name`, `output_dir`, `metadata_path`, `config_path`, `tags`),
`{"status": "error", "error": ...}` with exit 1, or `{"status": "no-submissions"}`. Jobs are real
sbatch jobs in srtctl's output layout; what they run is the demo engine, since no model can.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from console.demo.bundle import engine_script
from console.demo.sbatch import arm_plan, render_batch_script
from console.recipes import load_targets


class Failure(Exception):
    pass


def find_cluster_config() -> dict[str, object]:
    """srtslurm.yaml: $SRTSLURM_CONFIG, else the cwd, its parent and its grandparent."""
    import yaml

    candidates = [os.environ.get("SRTSLURM_CONFIG")] if os.environ.get("SRTSLURM_CONFIG") else []
    here = Path.cwd()
    candidates += [str(d / "srtslurm.yaml") for d in (here, here.parent, here.parent.parent)]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            data = yaml.safe_load(Path(candidate).read_text()) or {}
            return data if isinstance(data, dict) else {}
    return {}


def run(argv: list[str]) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise Failure(f"{argv[0]} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def batch_script(arm, base: Path, plan: Path, cluster: dict[str, object], job_name: str) -> str:  # type: ignore[no-untyped-def]
    """The batch script, with the recipe's `slurm:` values over srtslurm.yaml's defaults (as srtctl)."""
    slurm = arm.config.get("slurm") or {}
    results = cluster.get("results_dir") or str(base.parent / "results")

    def value(key: str) -> str | None:
        chosen = slurm.get(key) or cluster.get(f"default_{key}")
        return str(chosen) if chosen else None

    return render_batch_script(
        arm,
        job_dir_template=f"{base}/%j",
        engine_path=str(engine_script()),
        config_path=str(plan),
        python=str(cluster.get("python") or "/usr/bin/python3"),
        results_root=str(results),
        job_name=job_name,
        partition=value("partition"),
        account=value("account"),
        time_limit=value("time_limit"),
    )


def preflight(arms, file: str) -> int:  # type: ignore[no-untyped-def]
    """srtctl's preflight: local model and container paths must exist (aliases and URIs pass)."""
    failed: list[str] = []
    for arm in arms:
        issues = []
        for field_name, value in (("model.path", arm.model_path), ("model.container", arm.container)):
            if isinstance(value, str) and value.startswith("/") and not Path(value).exists():
                issues.append(f"{field_name}: not found: {value}")
        print(f"{'✗' if issues else '✓'} {arm.variant or 'base'}")
        for issue in issues:
            print(f"  {issue}")
        failed += issues
    if failed:
        print(f"Error: Preflight failed for {file}:")
        for issue in failed:
            print(f"- {issue}")
        return 1
    return 0


def submit(arm, base: Path, config_path: str, cluster: dict[str, object], tags: list[str] | None, say) -> dict:  # type: ignore[no-untyped-def]
    job_name = os.environ.get("RUNNER_NAME") or arm.name
    staging = base / ".staging" / f"{int(time.time() * 1000)}-{os.getpid()}"
    staging.mkdir(parents=True)
    plan = staging / "plan.json"
    plan.write_text(json.dumps(arm_plan(arm)))
    script = batch_script(arm, base, plan, cluster, job_name)
    (staging / "sbatch_script.sh").write_text(script)
    say(f"🚀 Submitting: {arm.name}")
    job_id = run(["sbatch", "--parsable", "--hold", str(staging / "sbatch_script.sh")]).strip().split(";")[0]
    job_dir = base / job_id
    (job_dir / "logs").mkdir(parents=True, exist_ok=True)
    (job_dir / "logs" / f"sweep_{job_id}.log").touch()
    (job_dir / "sbatch_script.sh").write_text(script)
    if Path(config_path).is_file():
        (job_dir / "config.yaml").write_text(Path(config_path).read_text())
    metadata = {
        "version": "2.0", "orchestrator": True, "job_id": job_id, "job_name": job_name,
        "generated_at": time.strftime("%Y-%m-%d %H:%M:%S"),
        "model": {"path": arm.model_path, "container": arm.container, "precision": arm.precision},
        "backend_type": arm.backend, "frontend_type": arm.frontend,
        "benchmark": {"type": arm.benchmark, "isl": arm.isl, "osl": arm.osl}, "tags": tags,
    }  # fmt: skip
    (job_dir / f"{job_id}.json").write_text(json.dumps(metadata, indent=2))
    run(["scontrol", "release", job_id])
    say(f"✅ Job {job_id} submitted!")
    say(f"📁 Logs: {job_dir}/logs")
    say(f"📋 Monitor: tail -f {job_dir}/logs/sweep_{job_id}.log")
    return {
        "status": "submitted", "slurm_job_id": job_id, "job_name": job_name, "output_dir": str(job_dir),
        "metadata_path": str(job_dir / f"{job_id}.json"), "config_path": config_path, "tags": tags,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="srtctl")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("preflight")
    p.add_argument("-f", "--file", required=True)
    for name in ("apply", "dry-run"):
        p = sub.add_parser(name)
        p.add_argument("-f", "--file", required=True)
        p.add_argument("-o", "--output")
        p.add_argument("--sweep", action="store_true")
        p.add_argument("-y", "--yes", action="store_true")
        if name == "apply":
            p.add_argument("--tags")
            p.add_argument("--setup-script")
            p.add_argument("--json", action="store_true")
            p.add_argument("--no-preflight", action="store_true")
    args = parser.parse_args(argv)
    as_json = getattr(args, "json", False)

    def say(text: str) -> None:
        print(text, file=sys.stderr if as_json else sys.stdout)

    try:
        recipes = load_targets([args.file])
        problems = [str(p) for r in recipes for p in r.errors]
        if problems:
            raise Failure("; ".join(problems))
        arms = [a for r in recipes for a in r.arms]
        if args.command == "preflight":
            return preflight(arms, args.file)
        if args.command == "dry-run":
            cluster = find_cluster_config()
            base = Path(args.output or str(cluster.get("output_dir") or Path.cwd() / "outputs")).expanduser()
            for arm in arms:
                say(f"🔍 DRY-RUN (orchestrator mode): {arm.name}")
                say("Generated sbatch Script")
                script = batch_script(arm, base, Path("<plan>"), cluster, arm.name)
                for number, line in enumerate(script.splitlines(), 1):
                    say(f"{number:6d} {line}")
            return 0
        if not arms:
            print(json.dumps({"status": "no-submissions"}) if as_json else "Nothing to submit")
            return 0
        cluster = find_cluster_config()
        base = Path(args.output or str(cluster.get("output_dir") or Path.cwd() / "outputs")).expanduser()
        tags = args.tags.split(",") if args.tags else None
        config_path = str(Path(args.file.rpartition(":")[0] if not Path(args.file).exists() else args.file))
        for arm in arms:
            doc = submit(arm, base, config_path, cluster, tags, say)
            if as_json:
                print(json.dumps(doc), flush=True)
    except Failure as exc:
        if as_json:
            print(json.dumps({"status": "error", "error": str(exc)}))
        else:
            print(f"Error: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
