"""Attempt screen log view: write-to-screen latency and how many lines per second it absorbs.

- latency: the attempt screen of a (finished) attempt on the local profile follows a log in a
  temporary output dir; lines are appended one at a time every --interval-ms; each is timed from
  write() until it is on screen (the LogView's rendered rows hold it). Polled every 2 ms, so the
  figures include up to 2 ms of polling. The agent's own poll interval (0.1 s for a busy file,
  1 s for one idle for a while) dominates: the first lines after an idle spell take longest.
- doomed: the demo 2P1D twin (ZMQ bind fault) launched on the local profile with the attempt
  screen open; time from the first `Address already in use` line reaching a worker log on disk
  (watched every 2 ms) to the banner saying doomed with that root cause, and to "deterministic"
  (every worker of a role hit).
- absorb: --absorb lines (default 200,000) handed to the LogView in batches of --batch lines (as
  one CoreUpdate message carries each batch), with the app running headless; lines/s until the last line is
  on screen, flushes (refreshes) it took, and lines held at the end (memory bound).

    .venv/bin/python benchmarks/bench_log_view.py [--lines 40] [--interval-ms 50] [--absorb 200000]
                                                  [--batch 500] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from textual.app import App, ComposeResult

from console.clusters import local_profile
from console.engine import Engine
from console.scheduler import JobState, JobStatus
from console.store import Store
from screens.app import make_app
from screens.attempt import AttemptScreen
from screens.widgets.log_view import LogView


async def _until(predicate: Any, pause: Any, timeout: float = 30.0, step: float = 0.002) -> float:
    deadline = time.perf_counter() + timeout
    while not predicate():
        if time.perf_counter() > deadline:
            raise TimeoutError("condition not met")
        await pause(step)
    return time.perf_counter()


async def latency(lines: int, interval_s: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        data = base / "data"
        engine = Engine(Store(data / "console.sqlite3"), {"local": local_profile(data)}, data)
        out = base / "outputs" / "9001"
        (out / "logs").mkdir(parents=True)
        log = out / "logs" / "sweep_9001.log"
        log.write_text("start\n")
        store = engine.store
        sweep = store.add_sweep("bench", "local", ["bench.yaml"])
        arm = store.add_arm(sweep, "bench", "bench.yaml", None, None, "name: bench\n", {"node_demand": 1})
        attempt = store.add_attempt(arm, "local", "demo", "name: bench\n", [1])
        store.mark_submitted(attempt.id, "9001", str(out), None)
        store.record_status(attempt.id, JobStatus("9001", JobState.COMPLETED, source="sacct"))
        app = make_app([], engine=engine)
        samples: list[float] = []
        async with app.run_test(size=(160, 50)) as pilot:
            await _until(lambda: app.monitor is not None, pilot.pause)
            assert app.monitor is not None
            await app.push_screen(AttemptScreen(app.session, attempt.id))
            view = app.screen.query_one(LogView)
            await _until(lambda: any("start" in row for row in view.body.rendered_text()), pilot.pause)
            with open(log, "a") as handle:
                for i in range(lines):
                    marker = f"latency-probe {i:06d}"
                    handle.write(marker + "\n")
                    handle.flush()
                    written = time.perf_counter()
                    shown = await _until(lambda m=marker: any(m in row for row in view.body.rendered_text()),
                                         pilot.pause)  # fmt: skip
                    samples.append((shown - written) * 1000)
                    await asyncio.sleep(interval_s)
    samples.sort()
    return {
        "lines": lines,
        "interval_ms": interval_s * 1000,
        "median_ms": round(statistics.median(samples), 1),
        "p90_ms": round(samples[int(len(samples) * 0.9) - 1], 1),
        "max_ms": round(samples[-1], 1),
        "min_ms": round(samples[0], 1),
    }


async def doomed_banner(recipe: Path) -> dict[str, Any]:
    from screens.widgets.findings import DiagnosisBanner

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        engine = Engine(Store(data / "console.sqlite3"), {"local": local_profile(data)}, data)
        await engine.launch([str(recipe)], "local")
        (attempt,) = engine.store.attempts()
        app = make_app([], engine=engine)
        written: float | None = None
        async with app.run_test(size=(160, 50)) as pilot:
            await _until(lambda: app.monitor is not None, pilot.pause)
            assert app.monitor is not None
            await app.push_screen(AttemptScreen(app.session, attempt.id))
            banner = app.screen.query_one(DiagnosisBanner)

            def on_disk() -> bool:
                nonlocal written
                if written is None:
                    row = engine.store.attempt(attempt.id)
                    logs = Path(row.output_dir or "/nonexistent") / "logs"
                    for path in logs.glob("*_w*.out") if logs.is_dir() else []:
                        if b"Address already in use" in path.read_bytes():
                            written = time.perf_counter()
                            break
                return written is not None

            def shown(deterministic: bool) -> bool:
                on_disk()
                d = banner.diagnosis
                return (
                    d is not None
                    and d.verdict == "doomed"
                    and d.root_cause is not None
                    and d.root_cause.id == "zmq-bind-in-use"
                    and (d.deterministic or not deterministic)
                )

            doomed_at = await _until(lambda: shown(False), pilot.pause, timeout=120)
            deterministic_at = await _until(lambda: shown(True), pilot.pause, timeout=120)
            await engine.cancel([engine.store.attempt(attempt.id)])
        assert written is not None
        return {
            "doomed_ms": round((doomed_at - written) * 1000, 1),
            "deterministic_ms": round((deterministic_at - written) * 1000, 1),
        }


class _Harness(App[None]):
    def compose(self) -> ComposeResult:
        yield LogView()


async def absorb(total: int, batch: int) -> dict[str, Any]:
    app = _Harness()
    line = (
        "[2026-08-21 10:00:01 DP0 TP0] Decode batch. #running-req: 64, #token: 81234, token usage: 0.41, gen tok/s {}"
    )
    async with app.run_test(size=(160, 50)) as pilot:
        view = app.query_one(LogView)
        view.add_files(["logs/sweep_1.log"])
        buf = view.body.buffer("logs/sweep_1.log")
        buf.loading = False
        buf.loaded = True
        flushes = view.body.flushes
        started = time.perf_counter()
        n = 1
        while n <= total:
            count = min(batch, total - n + 1)
            view.append("logs/sweep_1.log", n, [line.format(i) for i in range(n, n + count)])
            n += count
            await pilot.pause(0)  # the app handles messages and refreshes between batches
        last = f"gen tok/s {total}"
        await _until(lambda: any(last in row for row in view.body.rendered_text()), pilot.pause, step=0.001)
        elapsed = time.perf_counter() - started
        return {
            "lines": total,
            "batch": batch,
            "seconds": round(elapsed, 3),
            "lines_per_s": round(total / elapsed),
            "flushes": view.body.flushes - flushes,
            "held_lines": len(buf.lines),
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=40)
    parser.add_argument("--interval-ms", type=float, default=50.0)
    parser.add_argument("--absorb", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    report: dict[str, Any] = {}
    report["latency"] = asyncio.run(latency(args.lines, args.interval_ms / 1000))
    lat = report["latency"]
    print(
        f"write-to-screen latency ({lat['lines']} lines, one every {lat['interval_ms']:.0f} ms): "
        f"median {lat['median_ms']} ms, p90 {lat['p90_ms']} ms, max {lat['max_ms']} ms, min {lat['min_ms']} ms"
    )
    recipe = Path(__file__).resolve().parents[1] / "recipes" / "demo" / "mi355x-2p1d-dpa-tp8.yaml"
    report["doomed"] = asyncio.run(doomed_banner(recipe))
    print(
        f"doomed 2P1D twin: first bind error on disk -> banner doomed {report['doomed']['doomed_ms']} ms, "
        f"-> deterministic {report['doomed']['deterministic_ms']} ms"
    )
    report["absorb"] = []
    for batch in sorted({args.batch, 50, 5000}):
        result = asyncio.run(absorb(args.absorb, batch))
        report["absorb"].append(result)
        print(
            f"absorb {result['lines']:,} lines in batches of {batch}: {result['seconds']} s, "
            f"{result['lines_per_s']:,} lines/s, {result['flushes']} flushes, {result['held_lines']:,} lines held"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
