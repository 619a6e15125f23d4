"""Reading one very large benchmark result file: time, bytes read, memory.

Writes a sa-bench result of about --size-mb MB (big ``itls`` and ``generated_texts`` arrays,
one line, no trailing newline, as benchmark_serving's ``json.dump`` writes it) into a temporary
directory, reads it with ``console.results.read_point`` several times, prints the figures
(and writes them as JSON with --json), then removes the file.

    .venv/bin/python benchmarks/bench_results.py [--size-mb 300] [--repeat 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any, BinaryIO

from console.results import read_point

CONC = 2048
OSL = 1024
ISL = 8192
GPUS = 24


def _io_rchar() -> int | None:
    """Bytes this process has read through read(2), by the kernel's count (Linux only)."""
    try:
        with open("/proc/self/io", "rb") as f:
            for line in f:
                if line.startswith(b"rchar:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _maxrss_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024


def _write_rows(f: BinaryIO, row: bytes, rows: int) -> None:
    # In batches, so writing never holds the file in memory and max RSS stays a fair baseline.
    batch = 64
    for start in range(0, rows, batch):
        count = min(batch, rows - start)
        f.write((b", " if start else b"") + b", ".join([row] * count))


def write_result(path: Path, target_bytes: int) -> dict[str, Any]:
    """Stream a sa-bench-schema result of about ``target_bytes`` to ``path``; return its scalars."""
    n = CONC * 10
    duration = 1800.5
    out_tokens = n * OSL
    in_tokens = n * ISL
    head = {
        "date": "20260821-103000",
        "backend": "dynamo",
        "model_id": "deepseek-ai/DeepSeek-V4",
        "tokenizer_id": "deepseek-ai/DeepSeek-V4",
        "best_of": 1,
        "num_prompts": n,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": CONC,
        "duration": duration,
        "completed": n,
        "total_input_tokens": in_tokens,
        "total_output_tokens": out_tokens,
        "request_throughput": n / duration,
        "request_goodput": None,
        "output_throughput": out_tokens / duration,
        "peak_output_tokens_per_s": out_tokens / duration * 1.7,
        "total_token_throughput": (in_tokens + out_tokens) / duration,
    }
    tail: dict[str, Any] = {}
    for metric, base in (("ttft", 2100.5), ("tpot", 41.25), ("itl", 40.5), ("e2el", 44000.0)):
        tail |= {
            f"mean_{metric}_ms": base,
            f"median_{metric}_ms": base * 0.98,
            f"std_{metric}_ms": base * 0.1,
            f"p99_{metric}_ms": base * 1.6,
        }
    tail["reuse_http_connections"] = True

    itl_row = ("[" + ", ".join(f"{0.0401 + (i % 89) * 1e-5:.10f}" for i in range(OSL - 1)) + "]").encode()
    text = json.dumps("The quick brown fox jumps over the lazy dog. " * 20).encode()
    # Each request costs one itls row and one generated text; the rest is small in comparison.
    rows = max(n, target_bytes // (len(itl_row) + len(text) + 4))
    with path.open("wb") as f:
        f.write(json.dumps(head)[:-1].encode())
        f.write(b', "input_lens": ' + json.dumps([ISL] * rows).encode())
        f.write(b', "output_lens": ' + json.dumps([OSL] * rows).encode())
        f.write(b', "ttfts": ' + json.dumps([2.1] * rows).encode())
        f.write(b', "itls": [')
        _write_rows(f, itl_row, rows)
        f.write(b'], "generated_texts": [')
        _write_rows(f, text, rows)
        f.write(b'], "errors": ' + json.dumps([""] * rows).encode())
        f.write(b", " + json.dumps(tail)[1:].encode())
    return head | tail


def measure(path: Path, repeat: int) -> dict[str, Any]:
    # The file was just written, so it is in the page cache: the figures are about the work the
    # reader does (bytes moved, parsing, memory), not about disk speed.
    times: list[float] = []
    rss_before = _maxrss_bytes()
    rchar_before = _io_rchar()
    point = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        point = read_point(path, gpus=GPUS)
        times.append(time.perf_counter() - t0)
    rchar_after = _io_rchar()
    rss_after = _maxrss_bytes()
    # Allocation tracing slows Python down, so the traced read is kept out of the timings.
    tracemalloc.start()
    read_point(path, gpus=GPUS)
    _, peak_alloc = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert point is not None
    return {
        "status": point.status,
        "concurrency": point.concurrency,
        "tok_s_per_gpu": point.tok_s_per_gpu,
        "tok_s_per_user": point.tok_s_per_user,
        "bytes_read_per_read": point.bytes_read,
        "kernel_bytes_read_per_read": (
            (rchar_after - rchar_before) // repeat if rchar_before is not None and rchar_after is not None else None
        ),
        "time_ms_min": min(times) * 1000,
        "time_ms_median": statistics.median(times) * 1000,
        "time_ms_max": max(times) * 1000,
        "tracemalloc_peak_bytes": peak_alloc,
        "maxrss_before_bytes": rss_before,
        "maxrss_delta_bytes": rss_after - rss_before,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=300, help="approximate result file size (default 300)")
    parser.add_argument("--repeat", type=int, default=20, help="reads to time (default 20)")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="bench-results-") as tmp:
        path = Path(tmp) / f"results_concurrency_{CONC}_gpus_{GPUS}_ctx_8_gen_16.json"
        t0 = time.perf_counter()
        fields = write_result(path, args.size_mb * 1024 * 1024)
        write_s = time.perf_counter() - t0
        size = path.stat().st_size
        figures = {"file_bytes": size, "write_s": write_s, "repeat": args.repeat} | measure(path, args.repeat)
        os.unlink(path)

    expected_per_gpu = fields["total_token_throughput"] / GPUS
    ok = figures["status"] == "done" and abs(figures["tok_s_per_gpu"] - expected_per_gpu) < 1e-6
    figures["values_match"] = ok

    print(f"result file           {size / 1024 / 1024:,.1f} MiB ({size:,} bytes), written in {write_s:.1f} s")
    print(f"point                 c={figures['concurrency']} status={figures['status']} values_match={ok}")
    print(f"bytes read per read   {figures['bytes_read_per_read']:,} (reader's count)")
    if figures["kernel_bytes_read_per_read"] is not None:
        print(f"                      {figures['kernel_bytes_read_per_read']:,} (kernel rchar, /proc/self/io)")
    print(
        f"time per read         min {figures['time_ms_min']:.3f} ms, median {figures['time_ms_median']:.3f} ms, "
        f"max {figures['time_ms_max']:.3f} ms over {args.repeat}"
    )
    print(f"peak Python alloc     {figures['tracemalloc_peak_bytes']:,} bytes (tracemalloc, one read)")
    print(
        f"max RSS delta         {figures['maxrss_delta_bytes']:,} bytes over the reads "
        f"(getrusage; high-water mark before: {figures['maxrss_before_bytes'] / 1024 / 1024:.1f} MiB)"
    )
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
