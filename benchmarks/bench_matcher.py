"""Throughput of the failure-signature matcher on a synthetic worker log.

Synthesizes a realistic mix of SGLang, vLLM, ATOM, NCCL and srtctl lines (mostly ordinary
INFO/progress lines, a few failure lines), runs ``Matcher.match_line`` over every line and
prints lines/s and the findings. Figures, not a test.

    .venv/bin/python benchmarks/bench_matcher.py [--lines 1000000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console.signatures import MAX_LINE_CHARS, Matcher, default_matcher


def _ts(rng: random.Random) -> str:
    return f"2026-08-25 {rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}"


def _normal_line(rng: random.Random) -> str:
    k = rng.randrange(16)
    tp = rng.randrange(8)
    if k == 0:
        return (
            f"[{_ts(rng)} DP{rng.randrange(8)} TP{tp}] Decode batch. #running-req: {rng.randrange(256)}, "
            f"#token: {rng.randrange(10**6)}, token usage: {rng.random():.2f}, cuda graph: True, "
            f"gen throughput (token/s): {rng.uniform(100, 9000):.2f}, #queue-req: {rng.randrange(64)}"
        )
    if k == 1:
        return (
            f"[{_ts(rng)} TP{tp}] Prefill batch. #new-seq: {rng.randrange(8)}, #new-token: {rng.randrange(16384)}, "
            f"#cached-token: {rng.randrange(8192)}, token usage: {rng.random():.2f}, #running-req: {rng.randrange(64)}"
        )
    if k == 2:
        return (
            f"(APIServer pid={rng.randrange(10**5)}) INFO 08-25 {rng.randrange(24):02d}:14:{rng.randrange(60):02d} "
            f"[loggers.py:123] Engine 000: Avg prompt throughput: {rng.uniform(0, 9e4):.1f} tokens/s, "
            f"Avg generation throughput: {rng.uniform(0, 9e3):.1f} tokens/s, Running: {rng.randrange(256)} reqs, "
            f"Waiting: 0 reqs, GPU KV cache usage: {rng.uniform(0, 100):.1f}%, Prefix cache hit rate: 0.0%"
        )
    if k == 3:
        return (
            f"[atom {rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}] "
            f"Engine Core Mgr: DP rank {rng.randrange(8)} step {rng.randrange(10**6)}: "
            f"scheduled {rng.randrange(256)} seqs, {rng.randrange(10**5)} tokens, kv blocks free {rng.randrange(10**5)}"
        )
    if k == 4:
        return (
            f"[atom {rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}] [CONSUMER] "
            f"write_request sent for req cmpl-{rng.getrandbits(64):016x} to tcp://10.0.{rng.randrange(255)}.{rng.randrange(255)}:6301"
        )
    if k == 5:
        n = rng.randrange(1, 65)
        return (
            f"Loading safetensors checkpoint shards: {n * 100 // 64:3d}% Completed | {n}/64 "
            f"[{rng.randrange(60):02d}:{rng.randrange(60):02d}<{rng.randrange(60):02d}:{rng.randrange(60):02d}, "
            f"{rng.uniform(0.5, 30):.2f}s/it]"
        )
    if k == 6:
        return (
            f"node-{rng.randrange(64):02d}:{rng.randrange(10**5)}:{rng.randrange(10**5)} [{tp}] NCCL INFO Channel "
            f"{rng.randrange(32):02d}/0 : {tp}[{tp}] -> {(tp + 1) % 8}[{(tp + 1) % 8}] via P2P/IPC/read"
        )
    if k == 7:
        return (
            f"INFO:     10.0.{rng.randrange(255)}.{rng.randrange(255)}:{rng.randrange(1024, 65535)} - "
            f'"POST /v1/completions HTTP/1.1" 200 OK'
        )
    if k == 8:
        return (
            f"{_ts(rng)} [INFO] Model is not ready, waiting for {rng.randrange(3)} prefills and "
            f"{rng.randrange(2)} decodes. Have {rng.randrange(3)} prefills and {rng.randrange(2)} decodes."
        )
    if k == 9:
        return (
            f"[{_ts(rng)} TP{tp}] Capture cuda graph bs {rng.choice([1, 2, 4, 8, 16, 32, 64, 128, 256])} "
            f"avail mem={rng.uniform(10, 180):.2f} GB"
        )
    if k == 10:
        return (
            f"INFO {rng.randrange(24):02d}:00:00 [gpu_model_runner.py:2007] Model loading took "
            f"{rng.uniform(10, 400):.4f} GiB and {rng.uniform(10, 900):.6f} seconds"
        )
    if k == 11:
        return (
            f"Processed prompts: {rng.randrange(100)}%|████▌     | {rng.randrange(4096)}/4096 "
            f"[{rng.randrange(60):02d}:{rng.randrange(60):02d}<00:{rng.randrange(60):02d}, "
            f"{rng.uniform(1, 99):.2f}it/s]"
        )
    if k == 12:
        return f"Mean TTFT (ms):                          {rng.uniform(10, 9000):.2f}"
    if k == 13:
        return f'[{_ts(rng)}] INFO:     127.0.0.1:{rng.randrange(1024, 65535)} - "GET /health HTTP/1.1" 200 OK'
    if k == 14:
        return (
            f"[aiter] [fused_moe] using 1stage default for ({rng.randrange(1, 512)}, 7168, 2048, 256, 8, "
            f"'ActivationType.Silu', 'torch.bfloat16', 'torch.float4_e2m1fn_x2', 'QuantType.per_1x32')"
        )
    return f"{_ts(rng)} [INFO] Benchmark progress: concurrency {rng.choice([4, 8, 16, 32, 64, 128])}, point ok"


FAILURE_LINES = (
    "[atom 12:19:54] (EngineCore_DP3 pid=4242) zmq.error.ZMQError: Address already in use (addr='tcp://10.0.0.5:5557')",
    "[atom 12:19:55] Engine Core Mgr: Some processes failed to start, shutting down all",
    "[2026-08-25 08:53:08 TP2] Scheduler hit an exception: Traceback (most recent call last):",
    "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 12.95 GiB. GPU 3 has a total capacity "
    "of 287.98 GiB of which 18.55 GiB is free.",
    "2026-08-25 09:00:00 [ERROR] Model did not get healthy in 3600 seconds",
    "srun: error: mi355-07: task 0: Exited with exit code 1",
    "slurmstepd: error: *** JOB 39443 ON mi355-07 CANCELLED AT 2026-08-25T09:00:01 DUE TO TIME LIMIT ***",
)


def synthesize(n_lines: int, n_failures: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    lines = [_normal_line(rng) for _ in range(n_lines)]
    for i in range(n_failures):
        lines[rng.randrange(n_lines)] = FAILURE_LINES[i % len(FAILURE_LINES)]
    return lines


def run(matcher: Matcher, lines: list[str]) -> tuple[float, Counter[str]]:
    found: Counter[str] = Counter()
    match = matcher.match_line
    start = time.perf_counter()
    for line in lines:
        finding = match(line)
        if finding is not None:
            found[finding.signature_id] += 1
    return time.perf_counter() - start, found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--failures", type=int, default=21)
    parser.add_argument("--repeat", type=int, default=3, help="report the best of N runs")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)

    matcher = default_matcher()
    lines = synthesize(args.lines, args.failures)
    total_bytes = sum(len(line) + 1 for line in lines)
    gate_hits = sum(1 for line in lines if any(k in line.lower() for k in matcher.keywords))

    best = float("inf")
    found: Counter[str] = Counter()
    for _ in range(max(1, args.repeat)):
        elapsed, found = run(matcher, lines)
        best = min(best, elapsed)

    # The other extreme: every line a failure line (all of them reach the regexes).
    failing = [FAILURE_LINES[i % len(FAILURE_LINES)] for i in range(min(len(lines), 100_000))]
    failing_seconds, _ = run(matcher, failing)

    long_line = "x" * (10 * 1024 * 1024)
    start = time.perf_counter()
    matcher.match_all(long_line)
    long_ms = (time.perf_counter() - start) * 1000

    figures = {
        "lines": len(lines),
        "megabytes": round(total_bytes / 1e6, 1),
        "signatures": len(matcher.signatures),
        "keywords": len(matcher.keywords),
        "keyword_candidate_lines": gate_hits,
        "seconds": round(best, 3),
        "lines_per_second": round(len(lines) / best),
        "megabytes_per_second": round(total_bytes / 1e6 / best, 1),
        "findings": sum(found.values()),
        "findings_by_signature": dict(found.most_common()),
        "failure_lines_per_second": round(len(failing) / failing_seconds),
        "ten_mb_line_ms": round(long_ms, 2),
        "max_line_chars": MAX_LINE_CHARS,
    }
    print(f"signatures            {figures['signatures']} ({figures['keywords']} prefilter keywords)")
    print(f"lines                 {figures['lines']:,} ({figures['megabytes']} MB)")
    print(f"keyword candidates    {gate_hits:,} lines")
    print(f"match_line            {best:.3f} s (best of {args.repeat})")
    print(f"throughput            {figures['lines_per_second']:,} lines/s, {figures['megabytes_per_second']} MB/s")
    print(f"findings              {figures['findings']}")
    for sig_id, count in found.most_common():
        print(f"  {sig_id:32} {count}")
    print(f"failure lines only    {figures['failure_lines_per_second']:,} lines/s")
    print(f"10 MB single line     {long_ms:.2f} ms")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
