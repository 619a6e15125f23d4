"""Points: bytes read per result file, and time from a result file landing to its row on screen.

Runs the 1P1D demo twin (six fixed-seq result files, one per concurrency) on the `local`
profile, and on the local test cluster over SSH when tests/cluster/up.sh has run, with the
real app headless and its results screen open. For each point it prints the bytes the console
read of the file (head and tail through the log agent) and the time from the file landing (its
mtime) to the row's status turning `done` (the screen is sampled every 10 ms). Then it reads a
~--size-mb MB result file through each transport with `read_remote_points` and prints the
bytes read.

    .venv/bin/python benchmarks/bench_points.py [--speed 2] [--size-mb 300] [--no-ssh] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from console.clusters import load_profiles, local_profile
from console.config import load_config
from console.engine import Engine
from console.results import read_remote_points
from console.store import Store
from console.transport.base import Transport

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes" / "demo" / "mi355x-1p1d-tp8.yaml"
CLUSTER_ENV = Path(os.environ.get("SRT_CLUSTER_BASE", "/var/lib/srt-console-cluster")) / "cluster.env"
POINTS = (4, 8, 16, 32, 64, 128)


def _env(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip().strip("'\"")
    return values


async def _mtime(engine: Engine, cluster: str, path: str) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        pass
    result = await engine.runtime(cluster).transport.run(["stat", "-c", "%.9Y", "--", path], timeout=20)
    try:
        return float(result.stdout.strip())
    except ValueError:
        return None


async def run_app(engine: Engine, cluster: str, timeout: float) -> dict[str, Any]:
    """Launch the 1P1D twin with the app headless and its results screen open; time each row."""
    from textual.widgets import DataTable

    from screens.app import make_app
    from screens.results import ResultsScreen
    from screens.sweeps import SweepsScreen

    sweep = await engine.launch([str(RECIPE)], cluster)
    (arm,) = engine.store.arms(sweep)
    (attempt,) = engine.store.attempts(arm.id)
    app = make_app([RECIPE.parent], engine=engine)
    seen: dict[int, float] = {}
    bytes_read: dict[int, int] = {}
    files: dict[int, str] = {}
    async with app.run_test(size=(180, 50)) as pilot:
        await pilot.press("s")
        while not isinstance(app.screen, SweepsScreen):
            await pilot.pause(0.01)
        await pilot.press("p")
        while not isinstance(app.screen, ResultsScreen):
            await pilot.pause(0.01)
        screen = app.screen
        table: DataTable[Any] = screen.table(arm.id)
        deadline = time.monotonic() + timeout
        while len(seen) < len(POINTS) and time.monotonic() < deadline:
            for conc in POINTS:
                if conc not in seen and str(table.get_cell(str(conc), "status")) == "done":
                    seen[conc] = time.time()
                    point = screen.arms[arm.id].shown[conc]
                    bytes_read[conc] = point.bytes_read
                    files[conc] = point.file or ""
            await pilot.pause(0.01)
        # Inside the app: leaving it closes the engine's connections.
        while engine.store.attempt(attempt.id).live and time.monotonic() < deadline:
            await pilot.pause(0.2)
        rows: list[dict[str, Any]] = []
        for conc in POINTS:
            if conc not in seen:
                rows.append({"concurrency": conc, "status": "not seen"})
                continue
            path = files[conc]
            if not os.path.isabs(path):
                path = os.path.normpath(os.path.join(attempt.output_dir or "", path))
            landed = await _mtime(engine, cluster, path)
            rows.append(
                {
                    "concurrency": conc,
                    "file": path,
                    "bytes_read": bytes_read[conc],
                    "landing_to_row_ms": (seen[conc] - landed) * 1000 if landed is not None else None,
                }
            )
    latencies = [r["landing_to_row_ms"] for r in rows if r.get("landing_to_row_ms") is not None]
    return {
        "cluster": cluster,
        "points": rows,
        "latency_ms_median": statistics.median(latencies) if latencies else None,
        "latency_ms_max": max(latencies) if latencies else None,
    }


def _bench_results() -> Any:
    spec = importlib.util.spec_from_file_location("bench_results", ROOT / "benchmarks" / "bench_results.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def big_file(transport: Transport, job_dir: Path, size_mb: int) -> dict[str, Any]:
    sub = job_dir / "logs" / "sa-bench_isl_8192_osl_1024"
    sub.mkdir(parents=True, exist_ok=True)
    path = sub / "results_concurrency_2048_gpus_24_ctx_8_gen_16.json"
    _bench_results().write_result(path, size_mb * 1024 * 1024)
    return await _read_big(transport, job_dir, path)


async def _read_big(transport: Transport, job_dir: Path, path: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    got = await read_remote_points(transport, str(job_dir), gpus=24)
    elapsed = time.perf_counter() - t0
    (point,) = got.points
    return {
        "file_bytes": path.stat().st_size,
        "status": point.status,
        "bytes_read": got.bytes_read,
        "time_ms": elapsed * 1000,
    }


def _print(label: str, result: dict[str, Any]) -> None:
    print(f"{label}: 1P1D twin on {result['cluster']}")
    for row in result["points"]:
        if "bytes_read" not in row:
            print(f"  c={row['concurrency']:<4} {row['status']}")
            continue
        latency = row["landing_to_row_ms"]
        lat = f"{latency:8.0f} ms" if latency is not None else "       ?"
        print(f"  c={row['concurrency']:<4} bytes read {row['bytes_read']:>7,}   landing -> row {lat}")
    if result["latency_ms_median"] is not None:
        print(f"  landing -> row: median {result['latency_ms_median']:.0f} ms, max {result['latency_ms_max']:.0f} ms")


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    os.environ["SRT_DEMO_SPEED"] = str(args.speed)
    if not args.no_local:
        await _local(args, figures)
    await _ssh(args, figures)
    return figures


async def _local(args: argparse.Namespace, figures: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-points-") as tmp:
        data = Path(tmp) / "data"
        engine = Engine(Store(data / "console.sqlite3"), {"local": local_profile(data)}, data)
        figures["local"] = await run_app(engine, "local", args.timeout)
        _print("local", figures["local"])
        figures["local_big_file"] = await big_file(engine.runtime("local").transport, Path(tmp) / "41001", args.size_mb)
        big = figures["local_big_file"]
        print(
            f"  {big['file_bytes'] / 1024 / 1024:.0f} MiB result file through the local transport: "
            f"{big['bytes_read']:,} bytes read in {big['time_ms']:.1f} ms ({big['status']})"
        )
        await engine.close()


async def _ssh(args: argparse.Namespace, figures: dict[str, Any]) -> None:
    if args.no_ssh or not CLUSTER_ENV.exists():
        print("ssh: skipped (no test cluster)" if not args.no_ssh else "ssh: skipped (--no-ssh)")
        return
    env = _env(CLUSTER_ENV)
    with tempfile.TemporaryDirectory(prefix="bench-points-ssh-") as tmp:
        run_root = Path(env["SRT_CLUSTER_WORKDIR"]) / f"bench-points-{uuid.uuid4().hex[:8]}"
        config = {
            "clusters": {
                "testcluster": {
                    "ssh": {
                        "host": env["SRT_CLUSTER_SSH_HOST"],
                        "port": int(env["SRT_CLUSTER_SSH_PORT"]),
                        "user": env["SRT_CLUSTER_SSH_USER"],
                        "identity_file": env["SRT_CLUSTER_SSH_IDENTITY"],
                        "known_hosts": env["SRT_CLUSTER_SSH_KNOWN_HOSTS"],
                    },
                    "launcher": "demo",
                    "workdir": str(run_root / "console"),
                    "partition": env["SRT_CLUSTER_PARTITION"],
                    "python": "/usr/bin/python3",
                    "demo_speed": args.speed,
                }
            }
        }
        config_path = Path(tmp) / "config.yaml"
        config_path.write_text(json.dumps(config))
        data = Path(tmp) / "data"
        profiles, problems = load_profiles(load_config(config_path), data)
        if problems:
            print("ssh: config problems: " + "; ".join(problems))
            return
        engine = Engine(Store(data / "console.sqlite3"), profiles, data)
        figures["ssh"] = await run_app(engine, "testcluster", args.timeout)
        _print("ssh", figures["ssh"])
        await engine.close()
        engine = Engine(Store(data / "console.sqlite3"), profiles, data)  # the app closed the first one
        job_dir = run_root / "big" / "41001"
        try:
            figures["ssh_big_file"] = await big_file(engine.runtime("testcluster").transport, job_dir, args.size_mb)
            big = figures["ssh_big_file"]
            print(
                f"  {big['file_bytes'] / 1024 / 1024:.0f} MiB result file over SSH: "
                f"{big['bytes_read']:,} bytes read in {big['time_ms']:.1f} ms ({big['status']})"
            )
        except OSError as exc:
            print(f"  big file over SSH: skipped ({exc})")
        finally:
            shutil.rmtree(run_root / "big", ignore_errors=True)
        await engine.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--speed", type=float, default=2.0, help="demo speed-up (default 2)")
    parser.add_argument("--size-mb", type=int, default=300, help="size of the big result file (default 300)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for all points")
    parser.add_argument("--no-ssh", action="store_true", help="only the local profile")
    parser.add_argument("--no-local", action="store_true", help="only the test cluster over SSH")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    figures = asyncio.run(main_async(args))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
