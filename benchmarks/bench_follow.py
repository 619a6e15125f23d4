"""Log following: bytes moved to triage a big log, time to first candidate, write-to-delivery latency.

Writes a realistic worker log of about --size-mb MB (mostly SGLang decode/prefill/HTTP lines, a
few benign lines holding prefilter keywords, and a handful of real failure lines at known places),
then follows it with the agent over the local transport (and over SSH to the local test cluster
when tests/cluster/up.sh has run and the cluster's home is on this machine):

- triage: bytes received by the console until it has caught up with the file, time to the first
  candidate line, time until caught up, and whether every failure line came over;
- latency: lines appended one by one every --interval-ms, time from write() to the LinesEvent;
- streaming: --stream-mb MB appended at once (after following started), lines per second delivered.

    .venv/bin/python benchmarks/bench_follow.py [--size-mb 1024] [--lines 200] [--stream-mb 200]
                                                [--no-ssh] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from console.follow import CandidatesEvent, Follower, LinesEvent
from console.signatures import default_matcher
from console.transport.base import Transport
from console.transport.local import LocalTransport

CLUSTER_ENV = Path(os.environ.get("SRT_CLUSTER_BASE", "/var/lib/srt-console-cluster")) / "cluster.env"

ORDINARY = [
    b"[2026-08-21 10:00:01 DP0 TP0] Decode batch. #running-req: 64, #token: 81234, token usage: 0.41, "
    b"cuda graph: True, gen throughput (token/s): 2345.67, #queue-req: 0\n",
    b"[2026-08-21 10:00:01 DP3 TP3] Prefill batch. #new-seq: 2, #new-token: 16384, #cached-token: 0, "
    b"token usage: 0.40, #running-req: 63, #queue-req: 0\n",
    b'[2026-08-21 10:00:01] INFO:     10.0.0.7:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n',
    b"[2026-08-21 10:00:02 DP1 TP1] KV cache pool: 524288 tokens, 61.2 GB used, 12.8 GB free\n",
]
BENIGN_WITH_KEYWORD = b"[2026-08-21 10:00:02 DP0 TP0] Health check passed; 0 requests failed so far\n"
FAILURES = [
    b"[2026-08-21 10:00:00 DP1 TP1] zmq.error.ZMQError: Address already in use (addr='tcp://10.0.0.1:5557')",
    b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 191 GiB",
    b"[rank5]:[E821 10:31:02] ProcessGroupNCCL.cpp:1484] Watchdog caught collective operation timeout",
    b"RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled system error",
]


def write_log(path: Path, size: int) -> dict[int, bytes]:
    """About ``size`` bytes of log with the failure lines spread over it; returns {line_no: line}."""
    block_lines = [ORDINARY[i % len(ORDINARY)] for i in range(40_000)]
    block_lines[20_000] = BENIGN_WITH_KEYWORD
    block = b"".join(block_lines)
    blocks = max(1, size // len(block))
    failure_blocks = {int(blocks * k / len(FAILURES)) + (1 if k == 0 else 0): k for k in range(len(FAILURES))}
    where: dict[int, bytes] = {}
    line_no = 0
    with path.open("wb") as handle:
        for b in range(blocks):
            k = failure_blocks.get(b)
            if k is not None and b < blocks - 1:
                handle.write(FAILURES[k] + b"\n")
                line_no += 1
                where[line_no] = FAILURES[k]
            handle.write(block)
            line_no += len(block_lines)
    return where


async def triage(transport: Transport, directory: str, size: int, failures: dict[int, bytes]) -> dict[str, Any]:
    follower = Follower(transport, keywords=default_matcher().keywords)
    started = time.perf_counter()
    first_candidate: float | None = None
    hits: dict[int, str] = {}
    await follower.start()
    await follower.watch(directory)
    async for event in follower.events():
        if isinstance(event, CandidatesEvent):
            for c in event.candidates:
                hits[c.line_no] = c.text
            if hits and first_candidate is None:
                first_candidate = time.perf_counter() - started
        elif isinstance(event, LinesEvent) and event.end_offset >= size:
            break
    elapsed = time.perf_counter() - started
    await follower.close()
    found = sum(1 for line_no, text in failures.items() if hits.get(line_no) == text.decode())
    return {
        "log_bytes": size,
        "bytes_moved": follower.bytes_received,
        "moved_percent": round(100 * follower.bytes_received / size, 4),
        "first_candidate_s": round(first_candidate or -1, 3),
        "caught_up_s": round(elapsed, 3),
        "candidate_lines": len(hits),
        "failure_lines_found": f"{found}/{len(failures)}",
        "scan_mb_per_s": round(size / 1e6 / elapsed, 1),
    }


async def latency(transport: Transport, directory: str, path: Path, count: int, interval: float) -> dict[str, Any]:
    follower = Follower(transport)
    written: dict[str, float] = {}
    delays: list[float] = []
    await follower.start()
    await follower.watch(directory)
    ready = asyncio.Event()
    done = asyncio.Event()

    async def consume() -> None:
        async for event in follower.events():
            if not isinstance(event, LinesEvent) or not event.file.endswith(path.name):
                continue
            ready.set()
            now = time.perf_counter()
            for line in event.lines:
                if line in written:
                    delays.append(now - written.pop(line))
            if len(delays) >= count:
                done.set()

    consumer = asyncio.create_task(consume())
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"warm-up\n")
        await asyncio.wait_for(ready.wait(), 30)
        for i in range(count):
            line = f"latency probe {i}"
            written[line] = time.perf_counter()
            os.write(fd, line.encode() + b"\n")
            await asyncio.sleep(interval)
        await asyncio.wait_for(done.wait(), 30)
    finally:
        os.close(fd)
        await follower.close()
        consumer.cancel()
    delays.sort()
    return {
        "lines": len(delays),
        "p50_ms": round(1000 * statistics.median(delays), 1),
        "p95_ms": round(1000 * delays[int(0.95 * (len(delays) - 1))], 1),
        "max_ms": round(1000 * delays[-1], 1),
    }


async def throughput(transport: Transport, directory: str, path: Path, size: int) -> dict[str, Any]:
    """Lines appended faster than they can be followed: how fast do they arrive?"""
    follower = Follower(transport)
    await follower.start()
    await follower.watch(directory)
    line = ORDINARY[0]
    block = line * 10_000
    blocks = max(1, size // len(block))
    total = blocks * 10_000
    received = 0
    started = 0.0
    ready = asyncio.Event()

    async def consume() -> None:
        nonlocal received
        async for event in follower.events():
            # Only this file: once it is being streamed, appends are streamed too (not triaged).
            if isinstance(event, LinesEvent) and event.file.endswith(path.name):
                ready.set()
                received += len(event.lines)
                if received >= total + 1:
                    return

    consumer = asyncio.create_task(consume())
    with path.open("ab") as handle:
        handle.write(b"start\n")
        handle.flush()
        await asyncio.wait_for(ready.wait(), 30)
        started = time.perf_counter()
        for _ in range(blocks):
            handle.write(block)
        handle.flush()
    await asyncio.wait_for(consumer, 120)
    elapsed = time.perf_counter() - started
    await follower.close()
    return {
        "lines": total,
        "mb_per_s": round(total * len(line) / 1e6 / elapsed, 1),
        "lines_per_s": round(total / elapsed),
    }


def ssh_transport() -> tuple[Transport, Path] | None:
    """The local test cluster over SSH, and a dir in its (local) home, when it is up."""
    if not CLUSTER_ENV.exists():
        return None
    from console.transport.ssh import SshTransport

    values: dict[str, str] = {}
    for raw in CLUSTER_ENV.read_text().splitlines():
        if "=" in raw and not raw.lstrip().startswith("#"):
            key, _, value = raw.partition("=")
            values[key.strip()] = value.strip().strip("'\"")
    home = Path(values["SRT_CLUSTER_WORKDIR"])
    if not home.is_dir():
        return None
    transport = SshTransport(
        {
            "host": values["SRT_CLUSTER_SSH_HOST"],
            "port": int(values["SRT_CLUSTER_SSH_PORT"]),
            "user": values["SRT_CLUSTER_SSH_USER"],
            "identity_file": values["SRT_CLUSTER_SSH_IDENTITY"],
            "known_hosts": values["SRT_CLUSTER_SSH_KNOWN_HOSTS"],
            "ssh_config": [],
        },
        name="bench",
    )
    return transport, home


async def run(args: argparse.Namespace) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    targets: list[tuple[str, Transport, Path]] = []
    local_root = Path(tempfile.mkdtemp(prefix="bench-follow-"))
    targets.append(("local", LocalTransport(), local_root))
    remote = None if args.no_ssh else ssh_transport()
    if remote is not None:
        ssh_root = Path(tempfile.mkdtemp(prefix="bench-follow-", dir=remote[1]))
        os.chmod(ssh_root, 0o755)
        targets.append(("ssh", remote[0], ssh_root))
    try:
        big_dir = local_root / "outputs" / "1" / "logs"
        big_dir.mkdir(parents=True)
        big = big_dir / "node1_prefill_w0.out"
        t = time.perf_counter()
        failures = write_log(big, args.size_mb << 20)
        size = big.stat().st_size
        print(f"wrote {size / 2**20:.0f} MiB log in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        for name, transport, root in targets:
            job = root / "outputs" / "1"
            if root is not local_root:
                (job / "logs").mkdir(parents=True)
                if big.stat().st_dev == root.stat().st_dev:
                    os.link(big, job / "logs" / big.name)
                else:
                    shutil.copy(big, job / "logs" / big.name)
                for p in (root, root / "outputs", job, job / "logs"):
                    os.chmod(p, 0o755)
                os.chmod(job / "logs" / big.name, 0o644)
            figures[f"triage_{name}"] = await triage(transport, str(job), size, failures)
            print(f"triage over {name}: {figures[f'triage_{name}']}", file=sys.stderr)
            live_job = root / "outputs" / "2"
            (live_job / "logs").mkdir(parents=True)
            for p in (root / "outputs" / "2", live_job / "logs"):
                os.chmod(p, 0o755)
            figures[f"latency_{name}"] = await latency(
                transport, str(live_job), live_job / "logs" / "node1_decode_w0.out", args.lines, args.interval_ms / 1000
            )
            print(f"latency over {name}: {figures[f'latency_{name}']}", file=sys.stderr)
            figures[f"stream_{name}"] = await throughput(
                transport, str(live_job), live_job / "logs" / "node2_decode_w0.out", args.stream_mb << 20
            )
            print(f"streaming over {name}: {figures[f'stream_{name}']}", file=sys.stderr)
            await transport.close()
    finally:
        shutil.rmtree(local_root, ignore_errors=True)
        if remote is not None:
            shutil.rmtree(targets[-1][2], ignore_errors=True)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="size of the big log (MiB)")
    parser.add_argument("--lines", type=int, default=200, help="lines appended for the latency figure")
    parser.add_argument("--interval-ms", type=float, default=20.0, help="time between appended lines")
    parser.add_argument("--stream-mb", type=int, default=200, help="bytes appended for the streaming figure (MiB)")
    parser.add_argument("--no-ssh", action="store_true", help="only the local transport")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    figures = asyncio.run(run(args))
    for section, values in figures.items():
        print(f"{section}:")
        for key, value in values.items():
            print(f"  {key:>22}: {value}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
