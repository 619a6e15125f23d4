"""The local scheduler: Slurm-like ids, states and exit codes, cancel, time limit, restarts."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from console.demo.bundle import engine_script
from console.demo.localsched import LocalScheduler, exit_code_text, format_elapsed, parse_time_limit
from console.demo.sbatch import render_batch_script, sweep_log_path, write_arm_config
from console.recipes import load_recipe
from console.results import read_points
from console.scheduler import JobState, JobStatus, SchedulerError, Submission
from tests.conftest import RECIPES

DEADLINE_S = 30.0


def script(tmp_path: Path, body: str, name: str = "job.sh") -> Path:
    path = tmp_path / name
    path.write_text("#!/bin/bash\n" + textwrap.dedent(body).lstrip("\n"), encoding="utf-8")
    return path


async def wait_for(
    sched: LocalScheduler, job_id: str, pred: Callable[[JobStatus], bool], timeout: float = DEADLINE_S
) -> JobStatus:
    deadline = time.monotonic() + timeout
    while True:
        status = (await sched.poll([job_id]))[job_id]
        if pred(status):
            return status
        if time.monotonic() > deadline:
            pytest.fail(f"job {job_id}: condition not met within {timeout} s; last {status}")
        await asyncio.sleep(0.03)


def finished(status: JobStatus) -> bool:
    return status.state.finished


async def wait_file(path: Path, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        await asyncio.sleep(0.02)


# --------------------------------------------------------------------------- formats


def test_time_limits_in_slurm_formats() -> None:
    assert parse_time_limit("5") == 300
    assert parse_time_limit(5) == 300
    assert parse_time_limit("0:02") == 2
    assert parse_time_limit("1:02:03") == 3723
    assert parse_time_limit("2-3") == 2 * 86400 + 3 * 3600
    assert parse_time_limit("1-0:30") == 86400 + 1800
    assert parse_time_limit("1-00:00:10") == 86410
    assert parse_time_limit("UNLIMITED") is None and parse_time_limit(None) is None
    with pytest.raises(ValueError):
        parse_time_limit("soon")


def test_exit_codes_and_elapsed_as_slurm_prints_them() -> None:
    assert exit_code_text(0) == "0:0" and exit_code_text(3) == "3:0" and exit_code_text(-15) == "0:15"
    assert format_elapsed(65) == "00:01:05" and format_elapsed(90061) == "1-01:01:01"


# --------------------------------------------------------------------------- lifecycle


async def test_quick_demo_runs_to_completed_through_pending_and_running(tmp_path: Path) -> None:
    arm = load_recipe(RECIPES / "demo" / "quick.yaml").arms[0]
    template = str(tmp_path / "outputs" / "%j")
    body = render_batch_script(
        arm,
        job_dir_template=template,
        engine_path=str(engine_script()),
        config_path=str(write_arm_config(arm, tmp_path)),
        python=sys.executable,
        speed=20.0,
    )
    path = tmp_path / "quick.sh"
    path.write_text(body, encoding="utf-8")
    sched = LocalScheduler(tmp_path / "local-jobs")
    job_id = await sched.submit(
        Submission(script=str(path), job_name=arm.name, output=sweep_log_path(template), nodes=1)
    )
    first = (await sched.poll([job_id]))[job_id]
    assert first.state in (JobState.PENDING, JobState.RUNNING) and first.source == "local"
    seen = {first.state}
    deadline = time.monotonic() + DEADLINE_S
    while not (status := (await sched.poll([job_id]))[job_id]).state.finished:
        seen.add(status.state)
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    assert JobState.RUNNING in seen
    assert status.state is JobState.COMPLETED and status.exit_code == "0:0" and status.reason is None
    assert status.elapsed is not None and status.nodelist == "node1"
    job_dir = tmp_path / "outputs" / job_id
    assert [p.status for p in read_points(job_dir)] == ["done"] * 3
    assert "✓ Sweep completed successfully" in (job_dir / "logs" / f"sweep_{job_id}.log").read_text(encoding="utf-8")


async def test_ids_increase_and_the_environment_is_slurm_like(tmp_path: Path) -> None:
    path = script(
        tmp_path,
        """
        echo "id=$SLURM_JOB_ID nodes=$SLURM_JOB_NUM_NODES name=$SLURM_JOB_NAME"
        echo "nodelist=$SLURM_JOB_NODELIST extra=$EXTRA daemon=${SLURMD_NODENAME-unset} pwd=$PWD"
        """,
    )
    sched = LocalScheduler(tmp_path / "state")
    os.environ["SLURMD_NODENAME"] = "leaked"  # a console started inside a Slurm step
    try:
        ids = [
            await sched.submit(
                Submission(
                    script=str(path),
                    job_name="env-check",
                    output=str(tmp_path / "out" / "%j" / "log_%j_%x.txt"),
                    nodes=3,
                    workdir=str(tmp_path),
                    env={"EXTRA": "yes"},
                )
            )
            for _ in range(2)
        ]
    finally:
        del os.environ["SLURMD_NODENAME"]
    assert int(ids[1]) == int(ids[0]) + 1
    for job_id in ids:
        status = await wait_for(sched, job_id, finished)
        assert status.state is JobState.COMPLETED
        text = (tmp_path / "out" / job_id / f"log_{job_id}_env-check.txt").read_text()
        assert f"id={job_id} nodes=3 name=env-check" in text
        assert f"nodelist=node[1-3] extra=yes daemon=unset pwd={tmp_path}" in text
    assert sorted(LocalScheduler(tmp_path / "state").job_ids(), key=int) == ids


async def test_failures_give_slurm_exit_codes(tmp_path: Path) -> None:
    sched = LocalScheduler(tmp_path / "state")
    failing = script(tmp_path, "echo about to fail\nexit 3\n", "fail.sh")
    killed = script(tmp_path, "kill -9 $$\n", "killed.sh")
    a = await sched.submit(Submission(script=str(failing), job_name="fail", output=str(tmp_path / "a.out")))
    b = await sched.submit(Submission(script=str(killed), job_name="killed", output=str(tmp_path / "b.out")))
    sa = await wait_for(sched, a, finished)
    sb = await wait_for(sched, b, finished)
    assert (sa.state, sa.exit_code, sa.reason) == (JobState.FAILED, "3:0", "NonZeroExitCode")
    assert (sb.state, sb.exit_code) == (JobState.FAILED, "0:9")
    assert (tmp_path / "a.out").read_text() == "about to fail\n"


async def test_bad_submissions_are_refused(tmp_path: Path) -> None:
    sched = LocalScheduler(tmp_path / "state")
    plain = tmp_path / "plain.sh"
    plain.write_text("echo no interpreter line\n")
    with pytest.raises(SchedulerError, match="does not look like a batch script"):
        await sched.submit(Submission(script=str(plain), job_name="x", workdir=str(tmp_path)))
    with pytest.raises(SchedulerError, match="Unable to open file"):
        await sched.submit(Submission(script=str(tmp_path / "missing.sh"), job_name="x", workdir=str(tmp_path)))
    good = script(tmp_path, "true\n")
    with pytest.raises(SchedulerError, match="Invalid --time"):
        await sched.submit(Submission(script=str(good), job_name="x", time_limit="soon", workdir=str(tmp_path)))
    status = (await sched.poll(["424242"]))["424242"]
    assert status.state is JobState.UNKNOWN
    with pytest.raises(ValueError):
        await sched.poll(["1; rm -rf /"])


async def test_the_script_is_copied_at_submission(tmp_path: Path) -> None:
    path = script(tmp_path, "echo original\n")
    sched = LocalScheduler(tmp_path / "state")
    job_id = await sched.submit(Submission(script=str(path), job_name="copy", output=str(tmp_path / "copy.out")))
    path.write_text("#!/bin/bash\necho edited\n")
    await wait_for(sched, job_id, finished)
    assert (tmp_path / "copy.out").read_text() == "original\n"


# --------------------------------------------------------------------------- cancel and time limit


async def test_cancel_gives_cancelled_by_uid(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    path = script(tmp_path, f"trap 'echo got SIGTERM; exit 0' TERM\ntouch {marker}\nsleep 60 & wait\n")
    sched = LocalScheduler(tmp_path / "state")
    job_id = await sched.submit(Submission(script=str(path), job_name="c", output=str(tmp_path / "c.out")))
    await wait_file(marker)
    assert (await sched.poll([job_id]))[job_id].state is JobState.RUNNING
    await sched.cancel([job_id])
    status = await wait_for(sched, job_id, finished, timeout=10)
    assert status.state is JobState.CANCELLED
    assert status.raw_state == f"CANCELLED by {os.getuid()}" and status.reason == f"by {os.getuid()}"
    out = (tmp_path / "c.out").read_text()
    assert f"*** JOB {job_id} ON node1 CANCELLED AT" in out and "got SIGTERM" in out
    await sched.cancel([job_id])  # cancelling a finished job is a no-op


async def test_cancel_kills_a_script_that_ignores_sigterm_after_the_grace(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    path = script(tmp_path, f"trap '' TERM\ntouch {marker}\nwhile true; do sleep 0.1; done\n")
    sched = LocalScheduler(tmp_path / "state", grace_seconds=0.5)
    job_id = await sched.submit(Submission(script=str(path), job_name="stubborn", output=str(tmp_path / "s.out")))
    await wait_file(marker)
    started = time.monotonic()
    await sched.cancel([job_id])
    status = await wait_for(sched, job_id, finished, timeout=10)
    assert status.state is JobState.CANCELLED and status.exit_code == "0:9"
    assert time.monotonic() - started < 5


async def test_time_limit_gives_timeout(tmp_path: Path) -> None:
    path = script(tmp_path, "echo start\nsleep 60 & wait\n")
    sched = LocalScheduler(tmp_path / "state", grace_seconds=1.0)
    job_id = await sched.submit(
        Submission(script=str(path), job_name="slow", output=str(tmp_path / "t.out"), time_limit="0:01")
    )
    status = await wait_for(sched, job_id, finished, timeout=15)
    assert status.state is JobState.TIMEOUT and status.reason == "TimeLimit"
    assert "DUE TO TIME LIMIT ***" in (tmp_path / "t.out").read_text()


# --------------------------------------------------------------------------- restarts


async def test_a_restarted_scheduler_sees_running_and_finished_jobs(tmp_path: Path) -> None:
    release = tmp_path / "release"
    marker = tmp_path / "started"
    path = script(tmp_path, f"touch {marker}\nwhile [ ! -e {release} ]; do sleep 0.05; done\nexit 4\n")
    state = tmp_path / "state"
    # Submit from a console process that exits at once: the job must not depend on it.
    code = textwrap.dedent(
        f"""
        import asyncio
        from console.demo.localsched import LocalScheduler
        from console.scheduler import Submission
        sub = Submission(script={str(path)!r}, job_name="restart", output={str(tmp_path / "r.out")!r})
        print(asyncio.run(LocalScheduler({str(state)!r}).submit(sub)))
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=DEADLINE_S, check=True)
    job_id = proc.stdout.strip()
    await wait_file(marker)

    later = LocalScheduler(state)  # a restarted console
    assert (await later.poll([job_id]))[job_id].state is JobState.RUNNING
    release.touch()
    status = await wait_for(later, job_id, finished)
    assert (status.state, status.exit_code) == (JobState.FAILED, "4:0")
    again = LocalScheduler(state)
    assert (await again.poll([job_id]))[job_id] == status

    # The next id continues after the earlier console's jobs.
    nxt = Submission(script=str(script(tmp_path, "true\n", "t.sh")), job_name="next", workdir=str(tmp_path))
    other = await again.submit(nxt)
    assert int(other) == int(job_id) + 1


async def test_a_job_whose_runner_died_is_node_fail(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    path = script(tmp_path, f"touch {marker}\nsleep 60\n")
    sched = LocalScheduler(tmp_path / "state")
    job_id = await sched.submit(Submission(script=str(path), job_name="lost", output=str(tmp_path / "l.out")))
    await wait_file(marker)
    record = json.loads((tmp_path / "state" / f"{job_id}.json").read_text())
    os.kill(record["runner_pid"], signal.SIGKILL)
    try:
        status = await wait_for(sched, job_id, finished, timeout=10)
        assert status.state is JobState.NODE_FAIL and status.reason == "local runner lost"
    finally:
        os.killpg(record["script_pid"], signal.SIGKILL)
