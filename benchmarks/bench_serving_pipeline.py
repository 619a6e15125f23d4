"""A real serving job through the console on the local test cluster: how fast the console shows it.

Needs the test cluster with its serving stack (tests/cluster/up.sh, then stack.sh). Launches N
mocker jobs (Dynamo's mocker engine and frontend, sa-bench) through the real srtctl over SSH,
follows them with the console's own poll loop and log following, and prints, as p50/max:
  submit -> RUNNING          the launch call until the console records RUNNING
  RUNNING -> worker ready    until the console first shows a worker ready (from its own logs)
  file written -> row shown  a result file's mtime until the console's point event
Beside them, the same job's own clock: srtctl's "Model is ready" and "Benchmark completed" lines.
Usage: python benchmarks/bench_serving_pipeline.py [--jobs 3] [--points 4] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _cluster import ENV_FILE, cluster_env  # noqa: E402  (benchmarks/, the script's folder)

from console.clusters import load_profiles  # noqa: E402
from console.config import load_config  # noqa: E402
from console.engine import Engine  # noqa: E402
from console.monitor import Monitor, MonitorEvent, PointArrived, Triaged  # noqa: E402
from console.store import Store  # noqa: E402


def p50_max(values: list[float]) -> dict[str, float | int]:
    if not values:
        return {"n": 0}
    return {"n": len(values), "p50": round(statistics.median(values), 3), "max": round(max(values), 3)}


async def run(jobs: int, points: int) -> dict[str, object]:
    from tests.integration.conftest import ClusterInfo, cluster_info_from_env, read_env_file
    from tests.integration.serving import mocker_recipe, stack_for

    env = cluster_env()
    info: ClusterInfo = cluster_info_from_env(read_env_file(ENV_FILE))
    stack = stack_for(info)
    tmp = Path(tempfile.mkdtemp(prefix="bench-serving-"))
    grid = [2**i for i in range(points)]
    config = {
        "clusters": {
            "real": {
                "ssh": {"host": env["SRT_CLUSTER_SSH_HOST"], "port": int(env["SRT_CLUSTER_SSH_PORT"]),
                        "user": env["SRT_CLUSTER_SSH_USER"], "identity_file": env["SRT_CLUSTER_SSH_IDENTITY"],
                        "known_hosts": env["SRT_CLUSTER_SSH_KNOWN_HOSTS"]},
                "launcher": "srtctl", "srt_slurm": "~/srt-slurm", "srtctl": ".venv/bin/srtctl",
                "workdir": f"{env['SRT_CLUSTER_WORKDIR']}/bench-serving", "srtctl_flavour": "upstream",
            }
        }
    }  # fmt: skip
    (tmp / "config.yaml").write_text(json.dumps(config))
    profiles, problems = load_profiles(load_config(tmp / "config.yaml"), tmp / "data")
    assert not problems, problems
    engine = Engine(Store(tmp / "data" / "console.sqlite3"), profiles, tmp / "data")
    monitor = Monitor(engine)
    ready_at: dict[int, float] = {}
    shown: dict[tuple[int, int], float] = {}

    def on_event(event: MonitorEvent) -> None:
        now = time.time()
        if isinstance(event, Triaged) and event.attempt_id not in ready_at:
            if any(w.ready for w in event.snapshot.workers.values()):
                ready_at[event.attempt_id] = now
        elif isinstance(event, PointArrived):
            shown.setdefault((event.attempt_id, event.point.concurrency), now)

    monitor.subscribe(on_event)
    submit_to_running: list[float] = []
    running_to_ready: list[float] = []
    file_to_row: list[float] = []
    job_ready: list[float] = []
    try:
        for i in range(jobs):
            recipe = tmp / f"bench-{i}.yaml"
            recipe.write_text(mocker_recipe(stack, f"bench-serving-{i}", concurrencies=grid, osl=64, speedup=5.0))
            started = time.time()
            sweep = await engine.launch([str(recipe)], "real")
            (attempt,) = [a for arm in engine.store.arms(sweep) for a in engine.store.attempts(arm.id)]
            running: float | None = None
            while engine.store.attempt(attempt.id).live or (attempt.id, grid[-1]) not in shown:
                await engine.poll_once()
                await monitor.sync()
                row = engine.store.attempt(attempt.id)
                if running is None and row.state in ("RUNNING", "COMPLETING", "COMPLETED"):
                    running = time.time()
                    submit_to_running.append(running - started)
                if not row.live and time.time() - (row.ended_at or time.time()) > 30:
                    break
                await asyncio.sleep(0.05)
            row = engine.store.attempt(attempt.id)
            if running is not None and attempt.id in ready_at:
                running_to_ready.append(ready_at[attempt.id] - running)
            logs = Path(row.output_dir or "") / "logs"
            for conc in grid:
                files = list(logs.glob(f"sa-bench_*/results_concurrency_{conc}_gpus_*.json"))
                if files and (attempt.id, conc) in shown:
                    file_to_row.append(shown[(attempt.id, conc)] - files[0].stat().st_mtime)
            sweep_log = next(logs.glob("sweep_*.log"), None)
            if sweep_log is not None:
                text = sweep_log.read_text(errors="replace")
                if "Model is ready" in text and running is not None:
                    stamp = next(line[:19] for line in text.splitlines() if "Model is ready" in line)
                    job_ready.append(time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")) - running)
            print(f"job {i}: {row.job_id} {row.state}", file=sys.stderr)
    finally:
        await monitor.close()
        await engine.close()
    return {
        "jobs": jobs,
        "points_per_job": points,
        "submit_to_running_s": p50_max(submit_to_running),
        "running_to_first_worker_ready_s": p50_max(running_to_ready),
        "result_file_to_row_s": p50_max(file_to_row),
        "peer_srtctl_model_ready_after_running_s": p50_max(job_ready),
        "host": os.uname().nodename,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--points", type=int, default=4)
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON")
    args = parser.parse_args()
    figures = asyncio.run(run(args.jobs, args.points))
    labels = {
        "submit_to_running_s": "submit -> RUNNING",
        "running_to_first_worker_ready_s": "RUNNING -> first worker ready (console)",
        "peer_srtctl_model_ready_after_running_s": "RUNNING -> srtctl's 'Model is ready' (1 s clock)",
        "result_file_to_row_s": "result file written -> row shown",
    }
    for key, label in labels.items():
        f = figures[key]
        assert isinstance(f, dict)
        text = f"p50 {f['p50']:.3f} s  max {f['max']:.3f} s  (n={f['n']})" if f.get("n") else "no samples"
        print(f"{label:<50} {text}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
