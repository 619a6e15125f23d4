"""Tracking cost and latency on the local test cluster over SSH (needs tests/cluster/up.sh).

Launches N long-running demo arms as one sweep while the engine's poll loop runs (at its own
cadence, as the UI runs it), and prints, in one run:

- submit -> RUNNING seen: when the console recorded RUNNING, after Slurm's own StartTime;
- steady state with N live attempts: scheduler calls a minute by command (squeue, sacct, ...),
  beside srtctl's own monitor (``srtctl monitor``, run on the login node over the same jobs in the
  same window, its squeue calls counted by a shim ahead of squeue on its PATH);
- cancel -> CANCELLED seen: from the cancel request, and after Slurm's own EndTime.

Usage: python benchmarks/bench_tracking.py [--arms 20] [--seconds 60] [--interval S] [--srtctl PATH] [--json OUT]
(``--interval`` fixes one pace instead of the cadence, for comparison: ``--interval 2`` is the
console's former 2 s tick.) ``--local`` runs the same flow on this machine's local scheduler
(held demo arms launched by the engine, no cluster): each poll counts as the one squeue call it
is on Slurm, and srtctl's monitor (``--peer-python``, an interpreter with srtctl installed) runs
beside it in the same window, its calls counted by shims that answer an empty queue.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import posixpath
import shlex
import signal
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console.clusters import load_profiles
from console.config import load_config
from console.engine import Engine
from console.slurm import SlurmScheduler, parse_scontrol_fields, scontrol_argv
from console.store import Store
from console.transport.base import Transport

ROOT = Path(__file__).resolve().parents[1]
from _cluster import cluster_env  # noqa: E402  (benchmarks/, the script's folder)

CLUSTER_SRTCTL = "/var/lib/srt-console-cluster/home/hpcuser/srt-slurm/.venv/bin/srtctl"


async def slurm_time(transport: Transport, job_id: str, field: str) -> float | None:
    """StartTime/EndTime of a job as Slurm recorded it (whole seconds, the login node's zone)."""
    result = await transport.run(scontrol_argv(job_id), timeout=30)
    value = parse_scontrol_fields(result.stdout.strip()).get(field, "")
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S").timestamp()  # the login node is this machine
    except ValueError:
        return None


async def peer_monitor(transport: Transport, srtctl: str, outputs: str, seconds: float, scratch: str) -> int | None:
    """squeue calls srtctl's monitor makes in `seconds` (a shim ahead of squeue counts them)."""
    real = (await transport.run(["sh", "-c", "command -v squeue"], timeout=30)).stdout.strip()
    if not real:
        return None
    shim = f"{scratch}/shim"
    calls = f"{scratch}/squeue.calls"
    script = (
        f"mkdir -p {shlex.quote(shim)} && : > {shlex.quote(calls)} && "
        f"printf '#!/bin/sh\\necho x >> %s\\nexec %s \"$@\"\\n' {shlex.quote(calls)} {shlex.quote(real)}"
        f" > {shlex.quote(shim)}/squeue && chmod +x {shlex.quote(shim)}/squeue && "
        # `srtctl monitor` takes no options (its argparse drops them): it reads ./outputs.
        f"cd {shlex.quote(posixpath.dirname(outputs))} && "
        f"PATH={shlex.quote(shim)}:$PATH timeout -s INT {seconds:.0f} {shlex.quote(srtctl)} monitor "
        f"> /dev/null 2>&1; wc -l < {shlex.quote(calls)}"
    )
    result = await transport.run(["sh", "-c", script], timeout=seconds + 60)
    text = result.stdout.strip().splitlines()
    return int(text[-1]) if text and text[-1].strip().isdigit() else None


async def run(arms: int, seconds: float, interval: float | None, srtctl: str) -> dict[str, object]:
    env = cluster_env()
    tmp = Path(tempfile.mkdtemp(prefix="bench-tracking-"))
    recipes = tmp / "recipes"
    recipes.mkdir()
    quick = (ROOT / "recipes" / "demo" / "quick.yaml").read_text().replace("startup_seconds: 2", "startup_seconds: 900")
    for i in range(arms):
        (recipes / f"hold-{i:02d}.yaml").write_text(quick.replace("name: demo-quick", f"name: bench-hold-{i:02d}"))
    workdir = f"{env['SRT_CLUSTER_WORKDIR']}/bench-tracking"
    config = {
        "clusters": {
            "bench": {
                "ssh": {
                    "host": env["SRT_CLUSTER_SSH_HOST"], "port": int(env["SRT_CLUSTER_SSH_PORT"]),
                    "user": env["SRT_CLUSTER_SSH_USER"], "identity_file": env["SRT_CLUSTER_SSH_IDENTITY"],
                    "known_hosts": env["SRT_CLUSTER_SSH_KNOWN_HOSTS"],
                },
                "launcher": "demo", "python": "/usr/bin/python3", "partition": env["SRT_CLUSTER_PARTITION"],
                "workdir": workdir,
            }
        }
    }  # fmt: skip
    (tmp / "config.yaml").write_text(json.dumps(config))
    profiles, problems = load_profiles(load_config(tmp / "config.yaml"), tmp / "data")
    assert not problems, problems
    engine = Engine(Store(tmp / "data" / "console.sqlite3"), profiles, tmp / "data")
    cadence = engine.cadence
    stop = False
    loop: asyncio.Task[None] | None = None
    try:
        transport = engine.runtime("bench").transport
        scheduler = engine.runtime("bench").scheduler
        assert isinstance(scheduler, SlurmScheduler)
        loop = asyncio.create_task(engine.watch(interval, until=lambda: stop))
        started = time.monotonic()
        await engine.launch([str(recipes)], "bench")
        launch_s = time.monotonic() - started
        attempts = engine.store.attempts()
        while not all(engine.store.attempt(a.id).state == "RUNNING" for a in attempts):
            assert time.monotonic() - started < 600, "the arms did not all start within 10 minutes"
            await asyncio.sleep(0.1)
        seen_running: list[float] = []
        submit_to_running: list[float] = []
        for attempt in attempts:
            history = engine.store.history(attempt.id)
            pending = next(at for at, state, *_ in history if state == "PENDING")
            running = next(at for at, state, *_ in history if state == "RUNNING")
            submit_to_running.append(running - pending)
            start = await slurm_time(transport, attempt.job_id or "", "StartTime")
            if start is not None:
                seen_running.append(running - start)

        # Steady state: once the submissions are a while ago, beside srtctl's monitor.
        await asyncio.sleep(cadence.expect_s if interval is None else 0)
        scheduler.calls.clear()
        window_start = time.monotonic()
        peer = asyncio.create_task(peer_monitor(transport, srtctl, f"{workdir}/outputs", seconds, f"{workdir}/peer"))
        await asyncio.sleep(seconds)
        window = time.monotonic() - window_start
        calls = {k: round(v * 60 / window, 1) for k, v in scheduler.calls.items()}
        live = len(engine.store.attempts(live=True))
        peer_calls = await peer

        asked = time.time()
        await engine.cancel(engine.store.attempts(live=True))
        while any(engine.store.attempt(a.id).live for a in attempts):
            assert time.time() - asked < 300, "the cancels were not all seen within 5 minutes"
            await asyncio.sleep(0.1)
        cancel_seen: list[float] = []
        after_end: list[float] = []
        for attempt in attempts:
            at = next(at for at, state, *_ in engine.store.history(attempt.id) if state == "CANCELLED")
            cancel_seen.append(at - asked)
            end = await slurm_time(transport, attempt.job_id or "", "EndTime")
            if end is not None:
                after_end.append(at - end)

        def stats(values: list[float]) -> dict[str, float] | None:
            if not values:
                return None
            return {"median": round(statistics.median(values), 3), "max": round(max(values), 3)}

        return {
            "arms": arms,
            "live_attempts_tracked": live,
            "pace": "fixed" if interval is not None else "cadence",
            "steady_s": interval or cadence.steady_s,
            "quick_s": interval or cadence.quick_s,
            "launch_s_total": round(launch_s, 2),
            "submit_to_running_recorded_s": stats(submit_to_running),
            "running_seen_after_slurm_start_s": stats(seen_running),
            "window_s": round(window, 1),
            "scheduler_calls_per_minute": calls,
            "peer_srtctl_monitor_squeue_per_minute": round(peer_calls * 60 / seconds, 1)
            if peer_calls is not None
            else None,
            "cancel_to_cancelled_seen_s": stats(cancel_seen),
            "cancelled_seen_after_slurm_end_s": stats(after_end),
            "note": "Slurm's StartTime/EndTime have whole seconds: the 'after' figures are within ±1 s",
        }
    finally:
        stop = True
        if loop is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(loop, 60)
        with contextlib.suppress(Exception):
            await engine.cancel(engine.store.attempts(live=True))
        await engine.close()


PEER_PYTHON = "/work/srtctl-dev/venv/bin/python"
"""An interpreter with srtctl installed (from ../shared/upstream/): its monitor is the peer."""


async def local_peer(python: str, outputs: Path, seconds: float, scratch: Path) -> dict[str, int] | None:
    """Scheduler calls srtctl's monitor makes in `seconds` on this machine: counting shims named
    squeue/sacct/scontrol ahead of the real ones on its PATH note each call and answer an empty
    queue (the monitor asks on its own timer, whatever the answer; no Slurm is contacted)."""
    if not Path(python).exists():
        return None
    shim, calls = scratch / "shim", scratch / "calls"
    shim.mkdir(parents=True, exist_ok=True)
    calls.write_text("")
    for command in ("squeue", "sacct", "scontrol"):
        (shim / command).write_text(f"#!/bin/sh\necho {command} >> {shlex.quote(str(calls))}\n")
        (shim / command).chmod(0o755)
    env = {**os.environ, "PATH": f"{shim}:{os.environ.get('PATH', '')}", "COLUMNS": "200", "LINES": "50"}
    proc = await asyncio.create_subprocess_exec(
        python, "-m", "srtctl.cli.monitor", "--outputs", str(outputs),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL, env=env,
    )  # fmt: skip
    try:
        await asyncio.wait_for(proc.wait(), seconds)
    except asyncio.TimeoutError:
        proc.send_signal(signal.SIGINT)
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
    counted: dict[str, int] = {}
    for line in calls.read_text().split():
        counted[line] = counted.get(line, 0) + 1
    return counted


async def run_local(arms: int, seconds: float, interval: float | None, peer_python: str) -> dict[str, object]:
    """The same flow on this machine's local scheduler: `arms` held demo arms launched by the
    engine (its own submissions and cancels), each poll of the scheduler counted as the one
    squeue call it would be on Slurm; srtctl's monitor runs beside it in the same window."""
    from console.clusters import Profile, local_profile
    from console.demo.localsched import LocalScheduler, read_job
    from console.engine import ClusterRuntime, build_runtime
    from console.launchers import DemoLauncher
    from console.scheduler import JobStatus

    class Counting(LocalScheduler):
        def __init__(self, state_dir: Path) -> None:
            super().__init__(state_dir, grace_seconds=1.0)
            self.polls = 0

        async def poll(self, job_ids: list[str]) -> dict[str, JobStatus]:
            self.polls += 1
            return await super().poll(job_ids)

    tmp = Path(tempfile.mkdtemp(prefix="bench-tracking-local-"))
    sched = Counting(tmp / "local-jobs")

    def factory(profile: Profile, data_dir: Path) -> ClusterRuntime:
        runtime = build_runtime(profile, data_dir)
        runtime.scheduler = sched
        runtime.launcher = DemoLauncher(profile, runtime.transport, sched)
        return runtime

    recipes = tmp / "recipes"
    recipes.mkdir()
    quick = (ROOT / "recipes" / "demo" / "quick.yaml").read_text().replace("startup_seconds: 2", "startup_seconds: 900")
    for i in range(arms):
        (recipes / f"hold-{i:02d}.yaml").write_text(quick.replace("name: demo-quick", f"name: bench-hold-{i:02d}"))
    profile = local_profile(tmp)
    engine = Engine(Store(tmp / "console.sqlite3"), {"local": profile}, tmp, factory)
    stop = False
    loop = asyncio.create_task(engine.watch(interval, until=lambda: stop))
    try:
        await engine.launch([str(recipes)], "local")
        attempts = engine.store.attempts()
        began = time.monotonic()
        while not all(engine.store.attempt(a.id).state == "RUNNING" for a in attempts):
            assert time.monotonic() - began < 300, "the arms did not all start within 5 minutes"
            await asyncio.sleep(0.05)
        submit_seen, after_start = [], []
        for attempt in attempts:
            row = engine.store.attempt(attempt.id)
            running = next(t for t, state, *_ in engine.store.history(attempt.id) if state == "RUNNING")
            submit_seen.append(running - row.submitted_at)
            after_start.append(running - read_job(sched.state_dir, row.job_id or "")["start_time"])  # type: ignore[index]

        # Steady state: once the submissions are a while ago, beside srtctl's monitor.
        await asyncio.sleep(engine.cadence.expect_s if interval is None else 0)
        live = len(engine.store.attempts(live=True))
        polls, window_start = sched.polls, time.monotonic()
        peer = await local_peer(peer_python, Path(profile.outputs or tmp), seconds, tmp / "peer")
        window = time.monotonic() - window_start
        per_minute = round((sched.polls - polls) * 60 / window, 1)

        asked = time.time()
        await engine.cancel(engine.store.attempts(live=True))
        while any(engine.store.attempt(a.id).live for a in attempts):
            assert time.time() - asked < 300, "the cancels were not all seen within 5 minutes"
            await asyncio.sleep(0.05)
        cancel_seen, after_end = [], []
        for attempt in attempts:
            row = engine.store.attempt(attempt.id)
            at = next(t for t, s, *_ in engine.store.history(attempt.id) if s == "CANCELLED")
            cancel_seen.append(at - asked)
            after_end.append(at - read_job(sched.state_dir, row.job_id or "")["end_time"])  # type: ignore[index]

        def stats(values: list[float]) -> dict[str, float]:
            return {"median": round(statistics.median(values), 3), "max": round(max(values), 3)}

        return {
            "scheduler": "local (this machine); one poll = one squeue call on Slurm",
            "live_attempts_tracked": live,
            "pace": "fixed" if interval is not None else "cadence",
            "steady_s": interval or engine.cadence.steady_s,
            "quick_s": interval or engine.cadence.quick_s,
            "window_s": round(window, 1),
            "squeue_per_minute_steady": per_minute,
            "peer_srtctl_monitor_squeue_per_minute": round(peer.get("squeue", 0) * 60 / window, 1) if peer else None,
            "peer_srtctl_monitor_calls": peer,
            "peer_srtctl_monitor_interval_s": 5.0,
            "submit_to_running_seen_s": stats(submit_seen),
            "running_seen_after_start_s": stats(after_start),
            "cancel_to_cancelled_seen_s": stats(cancel_seen),
            "cancelled_seen_after_end_s": stats(after_end),
        }
    finally:
        stop = True
        await asyncio.wait_for(loop, 60)
        with contextlib.suppress(Exception):
            await engine.cancel(engine.store.attempts(live=True))
        for job_id in sched.job_ids():
            sched.request_cancel(job_id)
        await engine.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--arms", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--interval", type=float, default=None, help="a fixed pace instead of the cadence")
    parser.add_argument("--srtctl", default=CLUSTER_SRTCTL, help="srtctl on the login node (the peer)")
    parser.add_argument("--local", action="store_true", help="the local scheduler, no cluster")
    parser.add_argument("--peer-python", default=PEER_PYTHON, help="--local: an interpreter with srtctl (the peer)")
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args()
    if args.local:
        figures = asyncio.run(run_local(args.arms, args.seconds, args.interval, args.peer_python))
    else:
        figures = asyncio.run(run(args.arms, args.seconds, args.interval, args.srtctl))
    for key, value in figures.items():
        print(f"{key:>40}: {value}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
