"""Start-up time of `srt-console --help` and `srt-console status --json`, beside srtctl's own.

The store holds ``--attempts`` attempts over several sweeps on the built-in ``local`` profile,
``--live`` of them backed by real jobs of the local scheduler (so `status` polls it as it would
any cluster); the rest ended in the states a real history has. Each command runs ``--runs``
times as a fresh process (wall time, median and p90), beside the interpreter doing nothing and,
when it can be found, the real srtctl's `srtctl --help` (``--srtctl``). Also prints how many
modules a bare `--help` imports and whether asyncssh, textual, yaml or the catalog are among them.

    .venv/bin/python benchmarks/bench_startup.py [--runs 15] [--attempts 70] [--live 10] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console.demo.localsched import LocalScheduler
from console.provenance import Provenance
from console.scheduler import JobState, JobStatus, Submission
from console.store import LaunchArm, Store

ROOT = Path(__file__).resolve().parents[1]
CLUSTER_SRTCTL = Path("/var/lib/srt-console-cluster/home/hpcuser/srt-slurm/.venv/bin/srtctl")
WATCHED = ("asyncssh", "textual", "yaml", "console.signatures", "console.recipes", "sqlite3")
CONFIG = """\
default_cluster: local
recipe_dirs: []
clusters:
  mi355x:
    ssh: {host: 127.0.0.1, port: 2222, user: hpcuser}
    launcher: srtctl
    srt_slurm: ~/srt-slurm
    srtctl_flavour: upstream
    partition: compute
    time_limit: "04:00:00"
"""
ENDED = (JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT, JobState.COMPLETED)


def program() -> list[str]:
    """The installed entry point, as an operator runs it."""
    script = Path(sys.executable).with_name("srt-console")
    return [str(script)] if script.exists() else [sys.executable, "-m", "screens"]


async def populate(data_dir: Path, attempts: int, live: int) -> list[str]:
    """A store of `attempts` attempts (about 7 arms a sweep); `live` of them run as local jobs."""
    store = Store(data_dir / "console.sqlite3")
    sched = LocalScheduler(data_dir / "local-jobs")
    script = data_dir / "hold.sh"
    script.write_text("#!/bin/sh\nsleep 600\n")
    config = (ROOT / "recipes" / "demo" / "quick.yaml").read_text()
    job_ids: list[str] = []
    made = 0
    sweep = 0
    while made < attempts:
        sweep += 1
        count = min(7, attempts - made)
        arms = [
            LaunchArm(f"bench-{sweep}-{i}", str(ROOT / "recipes/demo/quick.yaml"), None, None, config,
                      {"mode": "disagg"}, [4, 8, 16], f"srt-console:{made + i:016x}")
            for i in range(count)
        ]  # fmt: skip
        _, rows = store.add_launch(f"sweep {sweep}", "local", ["recipes/demo"], "demo", arms)
        for row in rows:
            provenance = Provenance(
                launcher="demo", cluster="local", console_version="0.1.0", simulated=True,
                recorded_at=time.time(), image="lmsysorg/sglang:v0.5", recipe_sha256="0" * 64,
                resolved_recipe=config, scheduling=[{"key": "partition", "value": "debug", "source": "profile"}],
            )  # fmt: skip
            store.set_provenance(row.id, provenance.to_json())
            out = data_dir / "outputs" / f"{row.id}"
            if made < live:
                job_id = await sched.submit(
                    Submission(str(script), f"bench-{row.id}", output=str(out / "logs" / "sweep_%j.log"),
                               workdir=str(data_dir), comment=row.marker)
                )  # fmt: skip
                job_ids.append(job_id)
                store.mark_submitted(row.id, job_id, str(out), None)
                store.record_status(row.id, JobStatus(job_id, JobState.RUNNING, nodelist="node1", source="local"))
            else:
                job_id = str(90000 + row.id)
                store.mark_submitted(row.id, job_id, str(out), None)
                store.record_status(row.id, JobStatus(job_id, JobState.RUNNING, nodelist="node[1-3]"))
                state = ENDED[row.id % len(ENDED)]
                store.record_status(row.id, JobStatus(job_id, state, exit_code="0:0", source="sacct"))
            made += 1
    store.close()
    return job_ids


def timed(argv: list[str], env: dict[str, str], runs: int) -> dict[str, float]:
    samples = []
    subprocess.run(argv, env=env, capture_output=True, check=False)  # writes the bytecode cache
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, check=False)
        samples.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise SystemExit(f"{argv} exited {done.returncode}: {done.stderr.decode(errors='replace')[-2000:]}")
    samples.sort()
    return {
        "median_s": round(statistics.median(samples), 3),
        "p90_s": round(samples[min(len(samples) - 1, int(len(samples) * 0.9))], 3),
        "min_s": round(samples[0], 3),
    }


def help_imports(env: dict[str, str], cwd: Path) -> dict[str, object]:
    """The modules a bare `--help` leaves imported (the entry point's main, run in-process)."""
    code = (
        "import sys, contextlib, io\n"
        "from screens.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True, check=True
    ).stdout
    modules = out.split()
    return {
        "modules": len(modules),
        "console_modules": len([m for m in modules if m == "console" or m.startswith("console.")]),
        **{f"imports_{w}": any(m == w or m.startswith(w + ".") for m in modules) for w in WATCHED},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--attempts", type=int, default=70)
    parser.add_argument("--live", type=int, default=10, help="attempts backed by running local jobs")
    parser.add_argument("--srtctl", default=None, help="the real srtctl (default: on PATH, else the test cluster's)")
    parser.add_argument("--checkout", type=Path, help="run the console of another checkout (a before/after)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    env = dict(os.environ, SRT_CONSOLE_DATA=str(tmp / "data"), SRT_CONSOLE_CONFIG=str(tmp / "config.yaml"))
    # As installed: pip compiles a wheel's modules at install time, so an operator's run reads
    # cached bytecode. Each command runs once unmeasured to write it (this checkout's included).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = str((args.checkout or ROOT).resolve())
    (tmp / "data").mkdir()
    # An operator's config: a cluster over SSH besides the local profile (nothing live on it, so
    # nothing connects), which `status` reads, YAML and all.
    (tmp / "config.yaml").write_text(CONFIG)
    job_ids = asyncio.run(populate(tmp / "data", args.attempts, args.live))
    srtctl = args.srtctl or shutil.which("srtctl") or (str(CLUSTER_SRTCTL) if CLUSTER_SRTCTL.exists() else None)
    cmd = program()
    try:
        status = subprocess.run([*cmd, "status", "--json"], env=env, capture_output=True, text=True, check=True)
        doc = json.loads(status.stdout)
        shown = sum(len(arm["attempts"]) for sweep in doc["sweeps"] for arm in sweep["arms"])
        running = sum(a["state"] == "RUNNING" for s in doc["sweeps"] for arm in s["arms"] for a in arm["attempts"])
        figures: dict[str, object] = {
            "checkout": str(args.checkout or ROOT),
            "attempts": shown,
            "live_attempts": running,
            "help": timed([*cmd, "--help"], env, args.runs),
            "status_json": timed([*cmd, "status", "--json"], env, args.runs),
            "python_nothing": timed([sys.executable, "-c", "pass"], env, args.runs),
            "srtctl_help": timed([srtctl, "--help"], env, args.runs) if srtctl else None,
            "help_imports": help_imports(env, tmp),
            "runs": args.runs,
        }
    finally:
        sched = LocalScheduler(tmp / "data" / "local-jobs", grace_seconds=0.5)
        asyncio.run(sched.cancel(job_ids))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(not sched.status(j).state.finished for j in job_ids):
            time.sleep(0.1)
        shutil.rmtree(tmp, ignore_errors=True)

    def row(name: str, key: str) -> None:
        value = figures[key]
        if isinstance(value, dict):
            print(f"{name:<34} median {value['median_s']:.3f} s   p90 {value['p90_s']:.3f} s")
        else:
            print(f"{name:<34} (not found)")

    print(f"store: {figures['attempts']} attempts, {figures['live_attempts']} running local jobs")
    row("srt-console --help", "help")
    row("srt-console status --json", "status_json")
    row("peer: srtctl --help", "srtctl_help")
    row("floor: python -c pass", "python_nothing")
    imports = figures["help_imports"]
    assert isinstance(imports, dict)
    print(f"--help imports {imports['modules']} modules ({imports['console_modules']} of console): "
          + ", ".join(f"{w} {'yes' if imports[f'imports_{w}'] else 'no'}" for w in WATCHED))  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
