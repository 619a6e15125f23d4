"""`srt-console scan` of one local file beside grep, on the same file in the same run.

The file is real healthy serving log lines (the healthy logs under tests/data/real-logs: SGLang,
vLLM, TRT-LLM, Dynamo, Mooncake), drawn at random with a fixed seed until it holds ``--mb``
megabytes. Prints, for each: wall time and MB/s; for the scan also its findings and peak memory;
for grep (``-c -E -i`` and ``-c -P -i``) the lines matching a dozen failure keywords.

    .venv/bin/python benchmarks/bench_scan.py [--mb 100] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REAL_LOGS = ROOT / "tests" / "data" / "real-logs"
# The failure words an operator would grep a serving log for.
KEYWORDS = [
    "error", "exception", "traceback", "fatal", "out of memory", "oom", "killed", "segmentation fault",
    "nccl", "timeout", "abort", "failed",
]  # fmt: skip


def healthy_lines() -> list[bytes]:
    lines: list[bytes] = []
    for path in sorted(REAL_LOGS.glob("healthy-*.log")):
        lines += [line for line in path.read_bytes().splitlines() if line.strip()]
    return lines


def build(path: Path, megabytes: float) -> tuple[int, int]:
    """Write the mix; returns (bytes, lines)."""
    rng = random.Random(13)
    pool = healthy_lines()
    target = int(megabytes * 1e6)
    size = count = 0
    with path.open("wb") as out:
        while size < target:
            chunk = b"".join(line + b"\n" for line in rng.choices(pool, k=10_000))
            out.write(chunk)
            size += len(chunk)
            count += 10_000
    return size, count


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, subprocess.CompletedProcess[str], int]:
    """Wall seconds, the result, and the child's peak RSS in MB (from this process's children)."""
    started = time.perf_counter()
    result = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    elapsed = time.perf_counter() - started
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return elapsed, result, peak_kb // 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, default=100.0)
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args()
    console = shutil.which("srt-console", path=str(Path(sys.executable).parent)) or "srt-console"
    with tempfile.TemporaryDirectory(prefix="bench-scan-") as tmp:
        log = Path(tmp) / "healthy.log"
        size, lines = build(log, args.mb)
        mb = size / 1e6
        figures: dict[str, object] = {
            "file_mb": round(mb, 1),
            "lines": lines,
            "bytes_per_line": round(size / lines, 1),
        }
        # Warm the page cache so every reader sees the same file in memory.
        subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)
        # The first scan of a machine builds the prefilter's databases (kept in the user's cache
        # folder, here one of this run); later ones read them.
        env = {**os.environ, "XDG_CACHE_HOME": str(Path(tmp) / "cache")}
        for run in ("scan, first run (cache built)", "scan"):
            elapsed, result, peak = timed([console, "scan", "--json", str(log)], env)
            if result.returncode not in (0, 1):  # (1: its verdict is failed, which says nothing of speed)
                print(result.stderr, file=sys.stderr)
                return 1
            document = json.loads(result.stdout)
            figures[run] = {
                "seconds": round(elapsed, 2),
                "mb_per_s": round(mb / elapsed, 1),
                "findings": len(document["findings"]),
                "peak_rss_mb_max_of_children": peak,
            }
        pattern = "|".join(KEYWORDS)
        for flag in ("-E", "-P"):
            elapsed, result, _ = timed(["grep", "-c", flag, "-i", pattern, str(log)])
            figures[f"grep {flag} -i"] = {
                "seconds": round(elapsed, 2),
                "mb_per_s": round(mb / elapsed, 1),
                "matching_lines": int(result.stdout.strip() or 0),
            }
        figures["keywords"] = KEYWORDS
    for key, value in figures.items():
        print(f"{key:>16}: {value}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
