"""Tracking cost and latency on the local test cluster over SSH (needs tests/cluster/up.sh).

Launches N long-running demo arms as one sweep, tracks them for a while with the engine's
normal loop, and prints: submit→RUNNING latency (median, max), scheduler calls per minute by
command, and the poll interval. Cancels everything at the end.
Usage: python benchmarks/bench_tracking.py [--arms 20] [--seconds 60] [--interval 2] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console.clusters import load_profiles
from console.config import load_config
from console.engine import Engine
from console.slurm import SlurmScheduler
from console.store import Store

ENV_FILE = Path("/var/lib/srt-console-cluster/cluster.env")
ROOT = Path(__file__).resolve().parents[1]


def cluster_env() -> dict[str, str]:
    values = {}
    for line in ENV_FILE.read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            (word,) = shlex.split(line)
            key, _, value = word.partition("=")
            values[key] = value
    return values


async def run(arms: int, seconds: float, interval: float) -> dict[str, object]:
    env = cluster_env()
    tmp = Path(tempfile.mkdtemp(prefix="bench-tracking-"))
    recipes = tmp / "recipes"
    recipes.mkdir()
    quick = (ROOT / "recipes" / "demo" / "quick.yaml").read_text().replace("startup_seconds: 2", "startup_seconds: 900")
    for i in range(arms):
        (recipes / f"hold-{i:02d}.yaml").write_text(quick.replace("name: demo-quick", f"name: bench-hold-{i:02d}"))
    config = {
        "clusters": {
            "bench": {
                "ssh": {
                    "host": env["SRT_CLUSTER_SSH_HOST"], "port": int(env["SRT_CLUSTER_SSH_PORT"]),
                    "user": env["SRT_CLUSTER_SSH_USER"], "identity_file": env["SRT_CLUSTER_SSH_IDENTITY"],
                    "known_hosts": env["SRT_CLUSTER_SSH_KNOWN_HOSTS"],
                },
                "launcher": "demo", "python": "/usr/bin/python3", "partition": env["SRT_CLUSTER_PARTITION"],
                "workdir": f"{env['SRT_CLUSTER_WORKDIR']}/bench-tracking",
            }
        }
    }  # fmt: skip
    (tmp / "config.yaml").write_text(json.dumps(config))
    profiles, problems = load_profiles(load_config(tmp / "config.yaml"), tmp / "data")
    assert not problems, problems
    engine = Engine(Store(tmp / "data" / "console.sqlite3"), profiles, tmp / "data")
    try:
        started = time.monotonic()
        await engine.launch([str(recipes)], "bench")
        submit_s = time.monotonic() - started
        attempts = engine.store.attempts()
        scheduler = engine.runtime("bench").scheduler
        assert isinstance(scheduler, SlurmScheduler)
        await engine.watch(0.2, until=lambda: all(a.state == "RUNNING" for a in engine.store.attempts()))
        latencies = []
        for attempt in engine.store.attempts():
            history = engine.store.history(attempt.id)
            pending = next(at for at, state, *_ in history if state == "PENDING")
            running = next(at for at, state, *_ in history if state == "RUNNING")
            latencies.append(running - pending)
        scheduler.calls.clear()
        window_start = time.monotonic()
        await engine.watch(interval, until=lambda: time.monotonic() - window_start >= seconds)
        window = time.monotonic() - window_start
        live = len(engine.store.attempts(live=True))
        calls = {k: round(v * 60 / window, 1) for k, v in scheduler.calls.items()}
        await engine.cancel(engine.store.attempts(live=True))
        await engine.wait([a.id for a in attempts], 0.5)
        return {
            "arms": arms,
            "live_attempts_tracked": live,
            "launch_s_total": round(submit_s, 2),
            "submit_to_running_s_median": round(statistics.median(latencies), 3),
            "submit_to_running_s_max": round(max(latencies), 3),
            "poll_interval_s": interval,
            "scheduler_calls_per_minute": calls,
        }
    finally:
        await engine.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--arms", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args()
    figures = asyncio.run(run(args.arms, args.seconds, args.interval))
    for key, value in figures.items():
        print(f"{key:>30}: {value}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
