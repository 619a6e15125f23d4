"""Real Slurm jobs over real SSH against the local cluster (tests/cluster/up.sh)."""

from __future__ import annotations

import asyncio
import re
import shlex
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import asyncssh
import pytest

if TYPE_CHECKING:
    from .conftest import ClusterInfo, ConnectFn

pytestmark = pytest.mark.cluster

T = TypeVar("T")

POLL_INTERVAL_S = 0.1
JOB_DEADLINE_S = 60.0
# slurmdbd gets a job's full record (NodeList of every node) from slurmctld's
# periodic pass, up to ~5 s after squeue already shows the job as finished; until
# then `sacct -X` may list only the batch host.
SACCT_DEADLINE_S = 30.0

# squeue/sacct states of jobs that have not finished yet.
ACTIVE_STATES = {
    "PENDING",
    "CONFIGURING",
    "RUNNING",
    "COMPLETING",
    "SUSPENDED",
    "REQUEUED",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "RESIZING",
    "SIGNALING",
    "STAGE_OUT",
    "STOPPED",
}


async def run(conn: asyncssh.SSHClientConnection, command: str, *, stdin: str | None = None) -> str:
    """Run a remote command, fail the test on a non-zero exit, return its stdout."""
    result = await conn.run(command, input=stdin, check=False, timeout=30)
    assert result.exit_status == 0, (
        f"{command!r} exited with {result.exit_status}\nstdout: {result.stdout!r}\nstderr: {result.stderr!r}"
    )
    return str(result.stdout)


async def wait_until(
    probe: Callable[[], Awaitable[tuple[bool, T]]], *, what: str, timeout: float = JOB_DEADLINE_S
) -> T:
    """Poll ``probe`` until it reports done; return its last observation."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        done, observed = await probe()
        if done:
            return observed
        if loop.time() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last seen: {observed!r}")
        await asyncio.sleep(POLL_INTERVAL_S)


async def write_remote(conn: asyncssh.SSHClientConnection, path: str, text: str) -> None:
    await run(conn, f"cat > {shlex.quote(path)}", stdin=text)


async def sbatch(conn: asyncssh.SSHClientConnection, workdir: str, script: str, *options: str) -> str:
    argv = ["sbatch", "--parsable", *options, script]
    out = await run(conn, f"cd {shlex.quote(workdir)} && {shlex.join(argv)}")
    job_id = out.strip().split(";")[0]
    assert job_id.isdigit(), f"sbatch --parsable printed {out!r}"
    return job_id


async def squeue_states(conn: asyncssh.SSHClientConnection, job_ids: list[str]) -> dict[str, str]:
    """State of each job that slurmctld still knows about (finished ones included)."""
    out = await run(conn, f"squeue -h --states=all -j {','.join(job_ids)} -o '%i %T'")
    return dict(line.split() for line in out.splitlines() if line.strip())


async def wait_left_queue(conn: asyncssh.SSHClientConnection, job_ids: list[str]) -> dict[str, str]:
    async def probe() -> tuple[bool, dict[str, str]]:
        states = await squeue_states(conn, job_ids)
        done = len(states) == len(job_ids) and not (set(states.values()) & ACTIVE_STATES)
        return done, states

    return await wait_until(probe, what=f"jobs {job_ids} to leave the queue")


async def hostnames(conn: asyncssh.SSHClientConnection, nodelist: str) -> list[str]:
    out = await run(conn, f"scontrol show hostnames {shlex.quote(nodelist)}")
    return out.split()


async def wait_sacct_final(conn: asyncssh.SSHClientConnection, job_id: str, fields: str, *, nnodes: int) -> list[str]:
    """``sacct -X`` row of a finished job once slurmdbd has its full node list."""

    async def probe() -> tuple[bool, str]:
        out = await run(conn, f"sacct -X -P -n -o {fields},NNodes -j {job_id}")
        row = out.strip()
        if not row or row.split("|")[0] in ACTIVE_STATES:
            return False, row
        return int(row.rsplit("|", 1)[1]) == nnodes and len(row.splitlines()) == 1, row

    row = await wait_until(probe, what=f"sacct record of job {job_id}", timeout=SACCT_DEADLINE_S)
    return row.rsplit("|", 1)[0].split("|")


async def wait_sacct_nodelist(
    conn: asyncssh.SSHClientConnection, job_id: str, *, nnodes: int
) -> tuple[str, str, list[str]]:
    """(State, ExitCode, nodes) from ``sacct -X -P -n -o State,ExitCode,NodeList``."""

    async def probe() -> tuple[bool, tuple[str, str, list[str]]]:
        out = await run(conn, f"sacct -X -P -n -o State,ExitCode,NodeList -j {job_id}")
        parts = out.strip().split("|")
        if len(parts) != 3 or parts[0] in ACTIVE_STATES:
            return False, (out.strip(), "", [])
        state, exit_code, nodelist = parts
        nodes = await hostnames(conn, nodelist)
        return len(nodes) == nnodes, (state, exit_code, nodes)

    return await wait_until(probe, what=f"sacct record of job {job_id}", timeout=SACCT_DEADLINE_S)


@pytest.fixture
async def remote_dir(slurm_cluster: ClusterInfo, cluster_ssh: asyncssh.SSHClientConnection) -> AsyncIterator[str]:
    """A fresh directory in the test user's workdir, removed afterwards."""
    path = f"{slurm_cluster.workdir}/pytest-{uuid.uuid4().hex[:12]}"
    await run(cluster_ssh, f"mkdir -p {shlex.quote(path)}")
    try:
        yield path
    finally:
        await run(cluster_ssh, f"rm -rf {shlex.quote(path)}")


@pytest.fixture
async def submitted(cluster_ssh: asyncssh.SSHClientConnection) -> AsyncIterator[list[str]]:
    """Job ids a test appends here are cancelled afterwards (a no-op once finished)."""
    job_ids: list[str] = []
    try:
        yield job_ids
    finally:
        if job_ids:
            await cluster_ssh.run(f"scancel {' '.join(job_ids)}", check=False, timeout=30)


TWO_NODE_SCRIPT = """\
#!/bin/bash
set -eu
srun --ntasks-per-node=1 bash -c 'echo "node=$SLURMD_NODENAME task=$SLURM_PROCID"'
"""


async def test_two_node_job_over_ssh(
    slurm_cluster: ClusterInfo,
    cluster_ssh: asyncssh.SSHClientConnection,
    remote_dir: str,
    submitted: list[str],
) -> None:
    conn = cluster_ssh
    assert (await run(conn, "id -un")).strip() == slurm_cluster.user

    await write_remote(conn, f"{remote_dir}/two_nodes.sh", TWO_NODE_SCRIPT)
    job_id = await sbatch(
        conn,
        remote_dir,
        "two_nodes.sh",
        "-N2",
        "--ntasks-per-node=1",
        f"--partition={slurm_cluster.partition}",
        "--job-name=srt-two-nodes",
        "--output=slurm-%j.out",
    )
    submitted.append(job_id)

    states = await wait_left_queue(conn, [job_id])
    assert states[job_id] == "COMPLETED", states

    state, exit_code, nodes = await wait_sacct_nodelist(conn, job_id, nnodes=2)
    assert (state, exit_code) == ("COMPLETED", "0:0")
    assert len(set(nodes)) == 2, nodes

    out = await run(conn, f"cat {shlex.quote(f'{remote_dir}/slurm-{job_id}.out')}")
    seen = set(re.findall(r"^node=(\S+) task=\d+$", out, flags=re.MULTILINE))
    assert len(seen) == 2, out
    assert seen == set(nodes), (seen, nodes)


async def test_unknown_host_key_is_refused(
    slurm_cluster: ClusterInfo, cluster_connect: ConnectFn, tmp_path: Path
) -> None:
    other_key = asyncssh.generate_private_key("ssh-ed25519")
    public = other_key.export_public_key().decode().strip()
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(
        f"[{slurm_cluster.host}]:{slurm_cluster.port} {public}\n[localhost]:{slurm_cluster.port} {public}\n"
    )

    with pytest.raises(asyncssh.HostKeyNotVerifiable):
        conn = await cluster_connect(known_hosts=known_hosts)
        conn.close()

    # The real known_hosts file is accepted by the same code path.
    conn = await cluster_connect()
    try:
        assert (await run(conn, "id -un")).strip() == slurm_cluster.user
    finally:
        conn.close()
        await conn.wait_closed()


# Holds its allocation until the test creates `release` in the submit directory
# (or gives up after 120 s and fails).
HOLD_SCRIPT = """\
#!/bin/bash
set -eu
srun --ntasks-per-node=1 bash -c 'echo "node=$SLURMD_NODENAME"'
for _ in $(seq 1200); do
    if [ -e release ]; then exit 0; fi
    sleep 0.1
done
echo "never released" >&2
exit 3
"""


def _sacct_time(value: str) -> datetime:
    return datetime.fromisoformat(value)


async def test_two_and_three_node_jobs_run_at_the_same_time(
    slurm_cluster: ClusterInfo,
    cluster_ssh: asyncssh.SSHClientConnection,
    remote_dir: str,
    submitted: list[str],
) -> None:
    assert slurm_cluster.nodes >= 3
    conn = cluster_ssh
    await write_remote(conn, f"{remote_dir}/hold.sh", HOLD_SCRIPT)
    common = ["--ntasks-per-node=1", f"--partition={slurm_cluster.partition}", "--output=slurm-%j.out"]
    job_a = await sbatch(conn, remote_dir, "hold.sh", "-N2", "--job-name=srt-hold-2", *common)
    submitted.append(job_a)
    job_b = await sbatch(conn, remote_dir, "hold.sh", "-N3", "--job-name=srt-hold-3", *common)
    submitted.append(job_b)

    async def both_running() -> tuple[bool, dict[str, str]]:
        states = await squeue_states(conn, [job_a, job_b])
        if set(states.values()) - ACTIVE_STATES:
            raise AssertionError(f"a job finished before both were seen running: {states}")
        return states.get(job_a) == "RUNNING" and states.get(job_b) == "RUNNING", states

    await wait_until(both_running, what="both jobs RUNNING at the same time")

    await run(conn, f"touch {shlex.quote(f'{remote_dir}/release')}")
    states = await wait_left_queue(conn, [job_a, job_b])
    assert states == {job_a: "COMPLETED", job_b: "COMPLETED"}

    a_state, a_exit, a_start, a_end = await wait_sacct_final(conn, job_a, "State,ExitCode,Start,End", nnodes=2)
    b_state, b_exit, b_start, b_end = await wait_sacct_final(conn, job_b, "State,ExitCode,Start,End", nnodes=3)
    assert (a_state, a_exit, b_state, b_exit) == ("COMPLETED", "0:0", "COMPLETED", "0:0")
    # sacct times have one-second resolution: the intervals overlap (or touch).
    assert _sacct_time(a_start) <= _sacct_time(b_end)
    assert _sacct_time(b_start) <= _sacct_time(a_end)

    for job_id, count in ((job_a, 2), (job_b, 3)):
        out = await run(conn, f"cat {shlex.quote(f'{remote_dir}/slurm-{job_id}.out')}")
        assert len(set(re.findall(r"^node=(\S+)$", out, flags=re.MULTILINE))) == count, out
