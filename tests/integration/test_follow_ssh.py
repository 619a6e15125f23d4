"""Following logs over real SSH while the connection is killed again and again: every line exactly once."""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncssh
import pytest

from console.follow import AgentState, AgentStatus, CandidatesEvent, Follower, LinesEvent, ResultEvent
from console.transport import SshTransport

if TYPE_CHECKING:
    from .conftest import ClusterInfo

pytestmark = pytest.mark.cluster

DEADLINE_S = 60.0
LINES = 20_000
KILLS = 5

# Appends sequence-numbered lines; every fifth line is written in two parts, so the follower
# sees partial lines at the moment the connection dies.
WRITER = r"""
import os, sys, time
path, count = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
for i in range(count):
    line = ("seq %06d " % i) + "x" * (i % 97) + "\n"
    if i % 5 == 0:
        os.write(fd, line[:7].encode())
        time.sleep(0.0005)
        os.write(fd, line[7:].encode())
    else:
        os.write(fd, line.encode())
    if i % 20 == 0:
        time.sleep(0.005)
os.close(fd)
"""


def expected_line(i: int) -> str:
    return f"seq {i:06d} " + "x" * (i % 97)


def profile(cluster: ClusterInfo) -> dict[str, Any]:
    return {
        "host": cluster.host,
        "port": cluster.port,
        "user": cluster.user,
        "identity_file": str(cluster.identity_file),
        "known_hosts": str(cluster.known_hosts),
        "ssh_config": [],
    }


def session_pids(local_port: int, server_port: int) -> list[int]:
    """The sshd processes serving this very connection (never another session on the cluster)."""
    out = subprocess.run(
        ["ss", "-Htnp", "state", "established", f"( sport = :{server_port} and dport = :{local_port} )"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted(
        {int(part.split("=", 1)[1]) for part in out.replace(",", " ").replace(")", " ").split() if "pid=" in part}
    )


async def wait_for(predicate: Any, what: str, timeout: float = DEADLINE_S) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(0.02)


@pytest.fixture
async def job_dir(slurm_cluster: ClusterInfo, cluster_ssh: asyncssh.SSHClientConnection) -> AsyncIterator[str]:
    root = f"{slurm_cluster.workdir}/pytest-follow-{uuid.uuid4().hex[:12]}"
    directory = f"{root}/outputs/4242"
    await cluster_ssh.run(f"mkdir -p {shlex.quote(directory + '/logs')}", check=True, timeout=30)
    try:
        yield directory
    finally:
        await cluster_ssh.run(f"rm -rf {shlex.quote(root)}", check=False, timeout=30)


async def test_lines_arrive_exactly_once_while_the_ssh_session_is_killed(
    slurm_cluster: ClusterInfo, job_dir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The cluster's home is on this machine: the writer runs here (as root) in hpcuser's dir.
    log = Path(job_dir) / "logs" / "node1_prefill_w0.out"
    name = "logs/node1_prefill_w0.out"
    transport = SshTransport(profile(slurm_cluster), name="follow-test", backoff_initial=0.05, backoff_max=0.5)
    stored: dict[str, int] = {}
    follower = Follower(
        transport, backoff_initial=0.05, backoff_max=0.5, on_offsets=lambda _dir, offsets: stored.update(offsets)
    )
    received: list[tuple[int, str]] = []
    statuses: list[AgentStatus] = []

    async def consume() -> None:
        async for event in follower.events():
            if isinstance(event, LinesEvent) and event.file == name:
                received.extend((event.first_line_no + i, line) for i, line in enumerate(event.lines))
            elif isinstance(event, AgentStatus):
                statuses.append(event)

    consumer = asyncio.create_task(consume())
    writer: asyncio.subprocess.Process | None = None
    started = time.perf_counter()
    try:
        await follower.start()
        await follower.watch(job_dir)
        await wait_for(lambda: bool(follower.agent_info), "the agent to start over SSH")
        writer = await asyncio.create_subprocess_exec(sys.executable, "-c", WRITER, str(log), str(LINES))
        kills = 0
        while kills < KILLS:
            before = len(received)
            await wait_for(lambda b=before: len(received) > b + 200, "lines to flow")  # type: ignore[misc]
            address = transport.local_address
            assert address is not None
            pids = session_pids(address[1], slurm_cluster.port)
            assert pids, "no sshd process found for the follower's connection"
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            kills += 1
            await wait_for(
                lambda a=address: (
                    transport.local_address not in (None, a) and follower.status.state is AgentState.RUNNING
                ),  # type: ignore[misc]
                "reconnect and agent restart",
            )
        assert await asyncio.wait_for(writer.wait(), DEADLINE_S) == 0
        await wait_for(lambda: len(received) >= LINES, f"all {LINES} lines")
        await asyncio.sleep(0.5)  # anything more would be a duplicate
    finally:
        if writer is not None and writer.returncode is None:
            writer.kill()
            await writer.wait()
        await follower.close()
        consumer.cancel()
    assert stored == {name: log.stat().st_size}

    # A restarted console: offsets from the store (no line counts), more lines written meanwhile.
    with log.open("a") as handle:
        handle.write("".join(expected_line(i) + "\n" for i in range(LINES, LINES + 100)))
    again = Follower(transport)
    resumed: list[tuple[int, str]] = []

    async def consume_again() -> None:
        async for event in again.events():
            if isinstance(event, LinesEvent) and event.file == name:
                resumed.extend((event.first_line_no + i, line) for i, line in enumerate(event.lines))

    consumer = asyncio.create_task(consume_again())
    try:
        await again.start()
        await again.watch(job_dir, offsets=stored)
        await wait_for(lambda: len(resumed) >= 100, "the lines written while the console was away")
        await asyncio.sleep(0.3)
    finally:
        await again.close()
        consumer.cancel()
        await transport.close()
    assert resumed == [(i + 1, expected_line(i)) for i in range(LINES, LINES + 100)]
    elapsed = time.perf_counter() - started
    numbers = [line_no for line_no, _ in received]
    assert len(received) == LINES, f"{len(received)} lines received for {LINES} written"
    assert numbers == list(range(1, LINES + 1))
    assert [text for _, text in received] == [expected_line(i) for i in range(LINES)]
    assert follower.restarts >= KILLS
    assert sum(1 for s in statuses if s.state is AgentState.RESTARTING) >= KILLS
    with capsys.disabled():
        print(
            f"\n[figure] {LINES} lines over SSH with {KILLS} killed sessions: 0 lost, 0 duplicated, "
            f"{follower.restarts} agent restarts, {elapsed:.1f} s"
        )


async def test_results_and_triage_over_ssh(
    slurm_cluster: ClusterInfo, job_dir: str, cluster_ssh: asyncssh.SSHClientConnection
) -> None:
    logs = Path(job_dir) / "logs"
    big = logs / "node2_decode_w0.out"
    with big.open("wb") as handle:
        block = b"[2026-08-21 10:00:01 DP0 TP0] Decode batch. #running-req: 64, #token: 81234\n" * 10_000
        for _ in range(8):
            handle.write(block)
        handle.write(b"zmq.error.ZMQError: Address already in use (addr='tcp://10.0.0.1:5557')\n")
        for _ in range(8):
            handle.write(block)
    size = big.stat().st_size
    sa_bench = logs / "sa-bench_isl_1024_osl_1024"
    await cluster_ssh.run(f"mkdir {shlex.quote(str(sa_bench))}", check=True, timeout=30)  # hpcuser's, to clean up
    (sa_bench / "results_concurrency_4_gpus_16.json").write_bytes(
        b'{"completed": 8, "input_lens": [' + b"1, " * 100_000 + b"1]}"
    )
    await cluster_ssh.run(f"test -r {shlex.quote(str(big))}", check=True, timeout=30)
    transport = SshTransport(profile(slurm_cluster), name="follow-test")
    follower = Follower(transport, keywords=["address already in use", "error"])
    candidates: list[CandidatesEvent] = []
    results: list[ResultEvent] = []
    caught_up = asyncio.Event()

    async def consume() -> None:
        async for event in follower.events():
            if isinstance(event, CandidatesEvent):
                candidates.append(event)
            elif isinstance(event, ResultEvent):
                results.append(event)
            elif isinstance(event, LinesEvent) and event.end_offset == size:
                caught_up.set()

    consumer = asyncio.create_task(consume())
    try:
        await follower.start()
        await follower.watch(job_dir)
        await asyncio.wait_for(caught_up.wait(), DEADLINE_S)
        await wait_for(lambda: bool(results), "the result file")
        page = await follower.read_range(job_dir, "logs/node2_decode_w0.out", 0, 100)
    finally:
        await follower.close()
        consumer.cancel()
        await transport.close()
    hits = [c for event in candidates for c in event.candidates]
    assert [c.line_no for c in hits] == [80_001]
    assert "Address already in use" in hits[0].text
    assert follower.bytes_received < size // 5
    assert results[0].size > 300_000 and len(results[0].head) + len(results[0].tail) <= 32 << 10
    assert page.startswith(b"[2026-08-21 10:00:01 DP0 TP0] Decode batch.")


async def test_tail_fallback_where_the_login_node_has_no_python(slurm_cluster: ClusterInfo, job_dir: str) -> None:
    log = Path(job_dir) / "logs" / "sweep_4242.log"
    log.write_bytes(b"one\ntwo\n")
    transport = SshTransport(profile(slurm_cluster), name="follow-test")
    follower = Follower(transport, agent_python="/nonexistent/python3", mode="auto", tail_poll_s=0.2)
    received: list[tuple[int, str]] = []

    async def consume() -> None:
        async for event in follower.events():
            if isinstance(event, LinesEvent):
                received.extend((event.first_line_no + i, line) for i, line in enumerate(event.lines))

    consumer = asyncio.create_task(consume())
    try:
        await follower.start()
        await follower.watch(job_dir, offsets={"logs/sweep_4242.log": 4}, lines={"logs/sweep_4242.log": 1})
        await wait_for(lambda: received == [(2, "two")], "the line after the stored offset")
        with log.open("ab") as handle:
            handle.write(b"three\n")
        await wait_for(lambda: len(received) == 2, "an appended line")
        assert follower.mode == "tail"
        assert follower.offsets(job_dir)["logs/sweep_4242.log"] == len(b"one\ntwo\nthree\n")
    finally:
        await follower.close()
        consumer.cancel()
        await transport.close()
    assert received == [(2, "two"), (3, "three")]
