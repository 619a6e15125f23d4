"""SlurmScheduler over SshTransport, as the cluster's test user, against real Slurm 22.05."""

from __future__ import annotations

import asyncio
import collections
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING

import pytest

from console.scheduler import JobState, JobStatus, Scheduler, SchedulerError, Submission
from console.slurm import SlurmScheduler, elapsed_seconds
from console.transport import SshTransport, TransportError

if TYPE_CHECKING:
    from .conftest import ClusterInfo

pytestmark = pytest.mark.cluster

POLL_S = 0.05
JOB_DEADLINE_S = 60.0
# slurmdbd may lag squeue by a few seconds; the final word is accounting's.
SACCT_DEADLINE_S = 30.0
NASTY = 'dir with space/it\'s "q"; $(touch CANARY) `touch CANARY`'

# Runs one task per node, then waits for `release` in the submit dir (or gives up after 120 s).
HOLD_SCRIPT = """\
#!/bin/bash
set -eu
srun --ntasks-per-node=1 bash -c 'echo "node=$SLURMD_NODENAME greeting=$SRT_GREETING"'
for _ in $(seq 1200); do
    if [ -e release ]; then exit 0; fi
    sleep 0.1
done
exit 9
"""
FAIL_SCRIPT = "#!/bin/bash\necho failing\nexit 3\n"
SLEEP_SCRIPT = "#!/bin/bash\necho started\nsleep 600\n"
TRUE_SCRIPT = "#!/bin/bash\ntrue\n"


class Jobs:
    """Submits through the scheduler under test and cancels whatever is left at the end."""

    def __init__(self, scheduler: SlurmScheduler, cluster: ClusterInfo, directory: str) -> None:
        self.scheduler = scheduler
        self.cluster = cluster
        self.directory = directory
        self.ids: list[str] = []

    async def script(self, name: str, text: str, directory: str | None = None) -> str:
        path = f"{directory or self.directory}/{name}"
        await self.scheduler.transport.write_file(path, text.encode())
        return path

    async def submit(
        self,
        script: str,
        *,
        nodes: int = 1,
        extra: Sequence[str] = (),
        directory: str | None = None,
        env: dict[str, str] | None = None,
        time_limit: str | None = None,
    ) -> str:
        workdir = directory or self.directory
        submission = Submission(
            script=script,
            job_name=f"srt-test-{uuid.uuid4().hex[:6]}",
            output=f"{workdir}/slurm-%j.out",
            workdir=workdir,
            nodes=nodes,
            partition=self.cluster.partition,
            time_limit=time_limit,
            env=env or {},
        )
        job_id = await self.scheduler.submit(submission, extra_args=extra)
        self.ids.append(job_id)
        return job_id

    async def wait(
        self,
        job_ids: list[str],
        done: Callable[[dict[str, JobStatus]], bool],
        what: str,
        timeout: float = JOB_DEADLINE_S,
    ) -> dict[str, JobStatus]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            statuses = await self.scheduler.poll(job_ids)
            if done(statuses):
                return statuses
            if loop.time() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last seen {statuses}")
            await asyncio.sleep(POLL_S)

    async def final(self, job_id: str, timeout: float = JOB_DEADLINE_S + SACCT_DEADLINE_S) -> JobStatus:
        """The job's end as accounting records it."""
        statuses = await self.wait(
            [job_id],
            lambda s: s[job_id].state.finished and s[job_id].source == "sacct",
            f"job {job_id} to end in sacct",
            timeout,
        )
        return statuses[job_id]


@pytest.fixture
async def transport(slurm_cluster: ClusterInfo) -> AsyncIterator[SshTransport]:
    t = SshTransport(
        {
            "host": slurm_cluster.host,
            "port": slurm_cluster.port,
            "user": slurm_cluster.user,
            "identity_file": str(slurm_cluster.identity_file),
            "known_hosts": str(slurm_cluster.known_hosts),
            "ssh_config": [],
        },
        name="test-cluster",
    )
    try:
        yield t
    finally:
        await t.close()


@pytest.fixture
async def jobs(slurm_cluster: ClusterInfo, transport: SshTransport) -> AsyncIterator[Jobs]:
    directory = f"{slurm_cluster.workdir}/pytest-slurm-{uuid.uuid4().hex[:12]}"
    await transport.run(["mkdir", "-p", directory], check=True)
    scheduler = SlurmScheduler(transport)
    helper = Jobs(scheduler, slurm_cluster, directory)
    try:
        yield helper
    finally:
        if helper.ids:
            await scheduler.cancel(helper.ids)
        await transport.run(["rm", "-rf", directory])


@pytest.fixture
async def uid(transport: SshTransport) -> str:
    return (await transport.run(["id", "-u"], check=True)).stdout.strip()


def test_it_is_a_scheduler(jobs: Jobs) -> None:
    assert isinstance(jobs.scheduler, SlurmScheduler)
    scheduler: Scheduler = jobs.scheduler
    assert scheduler.name == "test-cluster"


async def test_two_node_job_runs_and_completes(
    jobs: Jobs, transport: SshTransport, capsys: pytest.CaptureFixture[str]
) -> None:
    script = await jobs.script("hold.sh", HOLD_SCRIPT)
    submitted = time.perf_counter()
    job_id = await jobs.submit(script, nodes=2, extra=["--ntasks-per-node=1"], env={"SRT_GREETING": "hello, world"})

    seen: list[JobState] = []

    def running(statuses: dict[str, JobStatus]) -> bool:
        seen.append(statuses[job_id].state)
        if statuses[job_id].state.finished:
            raise AssertionError(f"job ended before it was seen running: {statuses}")
        return statuses[job_id].state is JobState.RUNNING

    statuses = await jobs.wait([job_id], running, "the job to run")
    to_running = time.perf_counter() - submitted
    assert set(seen) <= {JobState.PENDING, JobState.RUNNING}
    assert statuses[job_id].source == "squeue"
    nodelist = statuses[job_id].nodelist
    assert nodelist is not None

    await transport.write_file(f"{jobs.directory}/release", b"")
    final = await jobs.final(job_id)
    assert (final.state, final.exit_code, final.source) == (JobState.COMPLETED, "0:0", "sacct")
    assert final.raw_state == "COMPLETED"
    assert final.nodelist is not None
    hosts = (await transport.run(["scontrol", "show", "hostnames", final.nodelist], check=True)).stdout.split()
    assert len(hosts) == 2, final

    out = (await transport.read_file(f"{jobs.directory}/slurm-{job_id}.out")).decode()
    lines = sorted(line for line in out.splitlines() if line.startswith("node="))
    assert lines == sorted(f"node={host} greeting=hello, world" for host in hosts)
    with capsys.disabled():
        print(f"\n[figure] submit -> RUNNING over SSH (poll every {POLL_S * 1000:.0f} ms): {to_running * 1000:.0f} ms")


async def test_failing_job_is_failed_with_its_exit_code(jobs: Jobs) -> None:
    job_id = await jobs.submit(await jobs.script("fail.sh", FAIL_SCRIPT))
    final = await jobs.final(job_id)
    assert (final.state, final.exit_code) == (JobState.FAILED, "3:0")
    assert not final.state.succeeded


async def test_cancel_a_running_job(jobs: Jobs, uid: str) -> None:
    job_id = await jobs.submit(await jobs.script("sleep.sh", SLEEP_SCRIPT))
    await jobs.wait([job_id], lambda s: s[job_id].state is JobState.RUNNING, "the job to run")
    await jobs.scheduler.cancel([job_id])
    final = await jobs.final(job_id)
    assert (final.state, final.reason, final.raw_state) == (JobState.CANCELLED, f"by {uid}", f"CANCELLED by {uid}")


async def test_pending_job_shows_its_reason_then_cancel(jobs: Jobs, uid: str) -> None:
    job_id = await jobs.submit(await jobs.script("later.sh", TRUE_SCRIPT), extra=["--begin=now+1hour"])
    statuses = await jobs.wait(
        [job_id], lambda s: s[job_id].reason == "BeginTime", "the pending reason to be BeginTime"
    )
    assert statuses[job_id].state is JobState.PENDING
    await jobs.scheduler.cancel([job_id])
    final = await jobs.final(job_id)
    assert (final.state, final.reason) == (JobState.CANCELLED, f"by {uid}")
    # Cancelling a job that already ended is not an error.
    await jobs.scheduler.cancel([job_id])


async def test_held_job_waits_for_release(jobs: Jobs) -> None:
    script = await jobs.script("true.sh", TRUE_SCRIPT)
    submission = Submission(script=script, job_name="srt-held", workdir=jobs.directory, output="/dev/null", hold=True)
    job_id = await jobs.scheduler.submit(submission)
    jobs.ids.append(job_id)
    status = (await jobs.scheduler.poll([job_id]))[job_id]
    assert (status.state, status.reason) == (JobState.PENDING, "JobHeldUser")
    await jobs.scheduler.release(job_id)
    final = await jobs.final(job_id)
    assert (final.state, final.exit_code) == (JobState.COMPLETED, "0:0")
    with pytest.raises(SchedulerError, match="already finished"):
        await jobs.scheduler.release(job_id)


async def test_polling_ten_jobs_costs_one_squeue_call(jobs: Jobs) -> None:
    script = await jobs.script("later.sh", TRUE_SCRIPT)
    ids = [await jobs.submit(script, extra=["--begin=now+1hour"]) for _ in range(10)]
    calls = jobs.scheduler.calls
    for _ in range(3):
        before = collections.Counter(calls)
        statuses = await jobs.scheduler.poll(ids)
        assert calls - before == collections.Counter({"squeue": 1}), calls - before
        assert {s.state for s in statuses.values()} == {JobState.PENDING}

    await jobs.scheduler.cancel(ids)
    statuses = await jobs.wait(ids, lambda s: all(x.state.finished for x in s.values()), "all ten to be cancelled")
    before = collections.Counter(calls)
    statuses = await jobs.scheduler.poll(ids)
    # Finished jobs: still one squeue, plus one sacct for all of them.
    assert calls - before == collections.Counter({"squeue": 1, "sacct": 1}), calls - before
    assert {s.state for s in statuses.values()} == {JobState.CANCELLED}


async def test_unknown_job_ids_are_unknown(jobs: Jobs) -> None:
    assert (await jobs.scheduler.poll(["1"]))["1"].state is JobState.UNKNOWN
    job_id = await jobs.submit(await jobs.script("later.sh", TRUE_SCRIPT), extra=["--begin=now+1hour"])
    statuses = await jobs.scheduler.poll([job_id, "1", "2"])
    assert statuses[job_id].state is JobState.PENDING
    assert statuses["1"].state is JobState.UNKNOWN
    assert statuses["2"].state is JobState.UNKNOWN


async def test_sbatch_refusal_is_a_scheduler_error(jobs: Jobs) -> None:
    script = await jobs.script("true.sh", TRUE_SCRIPT)
    submission = Submission(script=script, job_name="srt-bad", partition="nosuch", workdir=jobs.directory)
    with pytest.raises(SchedulerError, match="Invalid partition name specified"):
        await jobs.scheduler.submit(submission)


async def test_nasty_paths_submit_and_run_without_running_anything_else(jobs: Jobs, transport: SshTransport) -> None:
    directory = f"{jobs.directory}/{NASTY}"
    await transport.run(["mkdir", "-p", directory], check=True)
    script = await jobs.script("job $(touch CANARY).sh", '#!/bin/bash\necho "in $PWD"\n', directory)
    job_id = await jobs.submit(script, directory=directory)
    final = await jobs.final(job_id)
    assert final.state is JobState.COMPLETED, final
    out = await transport.read_file(f"{directory}/slurm-{job_id}.out")
    assert out.decode() == f"in {directory}\n"
    found = await transport.run(["find", jobs.cluster.workdir, "-name", "CANARY*"], check=True)
    assert found.stdout == ""


async def test_transport_errors_are_not_job_states() -> None:
    # Nothing listens on port 1: the poll fails with a TransportError, never a job's state.
    scheduler = SlurmScheduler(SshTransport({"host": "127.0.0.1", "port": 1, "ssh_config": []}), timeout=1)
    try:
        with pytest.raises(TransportError, match="cannot connect"):
            await scheduler.poll(["1"])
        assert scheduler.calls == {"squeue": 1}
    finally:
        await scheduler.transport.close()


@pytest.mark.slow
async def test_time_limit_gives_timeout(jobs: Jobs) -> None:
    # Slurm enforces limits at minute granularity and checks every ~30 s: 60-90 s.
    job_id = await jobs.submit(await jobs.script("sleep.sh", SLEEP_SCRIPT), time_limit="1")
    await jobs.wait([job_id], lambda s: s[job_id].state is JobState.RUNNING, "the job to run")
    final = await jobs.final(job_id, timeout=180)
    assert final.state is JobState.TIMEOUT, final


async def test_the_schedulers_own_times_as_epoch_seconds(jobs: Jobs) -> None:
    """squeue's and sacct's submit, start and end times (SLURM_TIME_FORMAT=%s), and an elapsed
    time counted between them as sacct counts it."""
    before = time.time()
    job_id = await jobs.submit(await jobs.script("sleep2.sh", "#!/bin/bash\nsleep 2\n"))
    running = await jobs.wait([job_id], lambda s: s[job_id].state is JobState.RUNNING, "the job to run")
    live = running[job_id]
    assert live.submit_time is not None and before - 5 <= live.submit_time <= time.time() + 5
    assert live.start_time is not None and live.start_time >= live.submit_time
    assert live.end_time is None  # a live job's end is only its time limit
    final = await jobs.final(job_id)
    assert final.start_time is not None and final.end_time is not None
    assert final.submit_time == live.submit_time and final.start_time == live.start_time
    measured = final.end_time - final.start_time
    assert abs(measured - (elapsed_seconds(final.elapsed) or 0)) <= 1.0 and measured >= 2
