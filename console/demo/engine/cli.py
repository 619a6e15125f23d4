"""The engine's command line: ``orchestrator`` (what the batch script runs) and ``node`` (one task per node)."""

import argparse
import os
import sys

from .orchestrator import Orchestrator
from .util import (
    as_float,
    as_int,
    stamp,
    utf8_stdout,
)
from .worker import NodeTask

# --------------------------------------------------------------------------- command line


def env_speed() -> float:
    value = as_float(os.environ.get("SRT_DEMO_SPEED"), 1.0)
    return value if value > 0 else 1.0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="engine.py", description="Simulate one srtctl job (demo engine).")
    sub = p.add_subparsers(dest="command")
    orch = sub.add_parser("orchestrator", help="run the job (what the batch script calls)")
    orch.add_argument("--plan", required=True, help="the arm's plan/config JSON")
    orch.add_argument("--job-dir", default=None, help="the job output dir (default: from --job-dir-template)")
    orch.add_argument("--job-dir-template", default=None, help="e.g. <outputs>/%%j; %%j becomes the job id")
    orch.add_argument("--job-id", default=None, help="default: $SLURM_JOB_ID")
    orch.add_argument("--results-root", default=None, help="InferenceX results root (default <job dir>/results)")
    orch.add_argument("--attempt", type=int, default=as_int(os.environ.get("SRT_DEMO_ATTEMPT"), 1))
    orch.add_argument("--speed", type=float, default=env_speed(), help="divide every demo duration by this")
    orch.add_argument("--python", default=None, help="interpreter for the worker tasks (default: this one)")
    orch.add_argument("--batch-script", default=None, help="the job's batch script, kept as sbatch_script.sh")
    node = sub.add_parser("node", help="one worker-node task (started by the orchestrator)")
    node.add_argument("--plan", required=True)
    node.add_argument("--job-dir", required=True)
    node.add_argument("--job-id", required=True)
    node.add_argument("--control", required=True, help="the control dir the orchestrator shares")
    node.add_argument("--nodes", required=True, help="comma-separated worker nodes, in task order")
    node.add_argument("--node", default="", help="this node (default: $SLURMD_NODENAME)")
    node.add_argument("--procid", type=int, default=0, help="this task (default: $SLURM_PROCID)")
    node.add_argument("--attempt", type=int, default=1)
    node.add_argument("--speed", type=float, default=1.0)
    return p


def main(argv: "list[str] | None" = None) -> int:
    utf8_stdout()
    args = parser().parse_args(argv)
    if args.command is None:
        parser().print_help()
        return 2
    if args.speed <= 0:
        args.speed = 1.0
    if args.command == "orchestrator":
        try:
            orchestrator = Orchestrator(args)
        except (OSError, ValueError) as exc:
            print(f"{stamp()} [ERROR] Config error: cannot load the plan {args.plan}: {exc}", flush=True)
            return 1
        return orchestrator.run()
    if args.command == "node":
        try:
            task = NodeTask(args)
        except (OSError, ValueError) as exc:
            print(f"node task: cannot load the plan {args.plan}: {exc}", file=sys.stderr, flush=True)
            return 1
        return task.run()
    parser().print_help()
    return 2
