"""The poll cadence: a steady pace while nothing is expected to change, quick while something is
(a submission, a cancel, a job completing), and a change after a submit or a cancel seen within
2 s. Proved on the real local scheduler, whose jobs start and end when told, with the cadence's
intervals scaled so that a steady pace is longer than the 2 s a change may take to be seen."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from console.cadence import BURST_FOR_S, BURST_S, QUICK_S, STEADY_S, Cadence
from console.clusters import Profile, local_profile
from console.demo.localsched import LocalScheduler, read_job
from console.engine import ClusterRuntime, Engine, build_runtime
from console.launchers import DemoLauncher
from console.scheduler import JobState, JobStatus, Submission
from console.store import SUBMITTING, AttemptRow, LaunchArm, Store
from tests.conftest import RECIPES

SEEN_WITHIN_S = 2.0
# Scaled: the steady pace is longer than SEEN_WITHIN_S, so a change seen in time was seen by
# quickening, not by a steady poll that happened to come soon. A change is expected for longer
# than the local scheduler's 1 s grace before a cancelled job ends, on a loaded machine too.
SCALED = Cadence(steady_s=3.0, quick_s=0.1, expect_s=3.0, burst_s=0.05, burst_for_s=0.5)
DEADLINE_S = 60.0


class CountingScheduler(LocalScheduler):
    """The real local scheduler, noting when it is polled."""

    def __init__(self, state_dir: Path) -> None:
        super().__init__(state_dir, grace_seconds=1.0)
        self.polls: list[float] = []

    async def poll(self, job_ids: list[str]) -> dict[str, JobStatus]:
        self.polls.append(time.monotonic())
        return await super().poll(job_ids)


def engine_for(data: Path) -> tuple[Engine, CountingScheduler]:
    sched = CountingScheduler(data / "local-jobs")

    def factory(profile: Profile, data_dir: Path) -> ClusterRuntime:
        runtime = build_runtime(profile, data_dir)
        runtime.scheduler = sched
        runtime.launcher = DemoLauncher(profile, runtime.transport, sched)
        return runtime

    engine = Engine(Store(data / "console.sqlite3"), {"local": local_profile(data)}, data, factory, cadence=SCALED)
    return engine, sched


async def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"not within {DEADLINE_S} s: {what}"
        await asyncio.sleep(0.02)


def recorded(engine: Engine, attempt_id: int, state: str) -> float:
    return next(at for at, s, *_ in engine.store.history(attempt_id) if s == state)


def held_recipe(tmp_path: Path) -> Path:
    """The quick demo recipe, held in its startup for a quarter of an hour."""
    text = (RECIPES / "demo" / "quick.yaml").read_text().replace("startup_seconds: 2", "startup_seconds: 900")
    path = tmp_path / "held.yaml"
    path.write_text(text)
    return path


def attempt_row(**fields: object) -> AttemptRow:
    now = time.time()
    base = AttemptRow(1, 1, 1, "local", "demo", "7", "/o", None, "", [], "RUNNING", None, None, None, None,
                      now - 3600, now - 3500, None, now)  # fmt: skip
    return replace(base, **fields)  # type: ignore[arg-type]


# --- the rule ------------------------------------------------------------------------------------


def test_the_steady_pace_keeps_squeue_within_twelve_calls_a_minute() -> None:
    assert 60 / STEADY_S <= 12
    assert QUICK_S * 2 <= SEEN_WITHIN_S


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({}, None),
        ({"state": "PENDING"}, None),  # pending for an hour: nothing says it starts now
        ({"state": "COMPLETING"}, "completing"),
        ({"submitted_at": -20, "started_at": None, "state": "PENDING"}, "submitted"),
        ({"submitted_at": -20, "state": SUBMITTING, "job_id": None}, "being submitted"),
        ({"cancel_requested_at": -20}, "cancel requested"),
        ({"cancel_requested_at": -3600}, None),  # asked long ago: the job ignores it
    ],
)
def test_what_is_expected_to_change(fields: dict[str, object], why: str | None) -> None:
    """(Times are seconds before now.)"""
    cadence = Cadence()
    now = time.time()
    attempt = attempt_row(**{k: now + v if k.endswith("_at") and isinstance(v, int) else v for k, v in fields.items()})
    assert cadence.expecting(attempt, time.time()) == why
    assert cadence.interval([attempt], time.time()) == (cadence.quick_s if why else cadence.steady_s)


def test_twenty_long_running_attempts_are_polled_at_the_steady_pace_unless_nudged() -> None:
    cadence = Cadence()
    attempts = [attempt_row(id=i, job_id=str(100 + i)) for i in range(20)]
    assert cadence.interval(attempts, time.time()) == STEADY_S
    assert cadence.interval(attempts, time.time(), nudged_ago=BURST_FOR_S + 1) == QUICK_S
    assert cadence.interval(attempts, time.time(), nudged_ago=cadence.expect_s + 1) == STEADY_S
    one_cancelled = [*attempts[:19], replace(attempts[19], cancel_requested_at=time.time() - BURST_FOR_S - 1)]
    assert cadence.interval(one_cancelled, time.time()) == QUICK_S
    assert Cadence.fixed(0.5).interval(one_cancelled, time.time()) == 0.5


def test_the_first_seconds_after_a_submission_or_a_cancel_are_a_burst() -> None:
    """Slurm ends a cancelled job and starts a submitted one within a second or two: polled
    every BURST_S then, so the change is seen well within 2 s even over SSH."""
    cadence = Cadence()
    now = time.time()
    attempts = [attempt_row(id=i, job_id=str(100 + i)) for i in range(20)]
    assert BURST_S * 3 <= SEEN_WITHIN_S / 2
    assert cadence.interval(attempts, now, nudged_ago=0.5) == BURST_S
    cancelled = [*attempts[:19], replace(attempts[19], cancel_requested_at=now - 1)]
    assert cadence.interval(cancelled, now) == BURST_S  # asked by another console
    submitted = [*attempts[:19], replace(attempts[19], submitted_at=now - 1, state="PENDING")]
    assert cadence.interval(submitted, now) == BURST_S
    ended = [*attempts[:19], replace(attempts[19], cancel_requested_at=now - 1, state="CANCELLED")]
    assert cadence.interval(ended, now) == STEADY_S  # only live attempts count
    # The burst is short: about ten calls for each submission or cancel.
    assert BURST_FOR_S / BURST_S <= 20


# --- the loop on the local scheduler --------------------------------------------------------------


@pytest.mark.slow
async def test_submit_and_cancel_are_seen_quickly_and_the_steady_pace_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SRT_CONSOLE_DATA", str(tmp_path / "data"))
    engine, sched = engine_for(tmp_path / "data")
    stop = False
    loop = asyncio.create_task(engine.watch(until=lambda: stop))
    try:
        await engine.launch([str(held_recipe(tmp_path))], "local")
        (attempt,) = engine.store.attempts()
        assert attempt.job_id is not None
        await until(lambda: engine.store.attempt(attempt.id).state == "RUNNING", "the job runs")
        started = read_job(sched.state_dir, attempt.job_id)["start_time"]  # type: ignore[index]
        assert recorded(engine, attempt.id, "RUNNING") - started < SEEN_WITHIN_S

        # Steady state: once the submission is a while ago, no poll comes sooner than the steady pace.
        quiet_from = time.monotonic() + SCALED.expect_s + SCALED.quick_s
        await until(lambda: len([t for t in sched.polls if t > quiet_from]) >= 3, "three steady polls")
        steady = [t for t in sched.polls if t > quiet_from]
        gaps = [b - a for a, b in itertools.pairwise(steady)]
        assert gaps and min(gaps) >= SCALED.steady_s * 0.95, gaps

        # A cancel through this engine: polled at once, then quickly until the job has ended.
        asked = time.monotonic()
        await engine.cancel([engine.store.attempt(attempt.id)])
        await until(lambda: not engine.store.attempt(attempt.id).live, "the cancel is seen")
        assert min(t for t in sched.polls if t >= asked) - asked < SCALED.steady_s / 2
        ended = read_job(sched.state_dir, attempt.job_id)["end_time"]  # type: ignore[index]
        assert engine.store.attempt(attempt.id).state == JobState.CANCELLED.value
        assert recorded(engine, attempt.id, "CANCELLED") - ended < SEEN_WITHIN_S

        # Nothing live: the scheduler is not asked at all.
        polls = len(sched.polls)
        await asyncio.sleep(SCALED.steady_s * 1.5)  # a span of time is what is observed here
        assert len(sched.polls) == polls
    finally:
        stop = True
        await asyncio.wait_for(loop, DEADLINE_S)
        for job_id in sched.job_ids():
            sched.request_cancel(job_id)
        await engine.close()


@pytest.mark.slow
async def test_a_cancel_by_another_console_quickens_the_pace(tmp_path: Path) -> None:
    engine, sched = engine_for(tmp_path / "data")
    script = tmp_path / "hold.sh"
    script.write_text("#!/bin/sh\nexec sleep 600\n")
    job_id = await sched.submit(Submission(str(script), "held", output=str(tmp_path / "out.log")))
    store = engine.store
    arm = LaunchArm("held", "x.yaml", None, None, "", {}, [], "srt-console:00000000000000aa")
    _, (attempt,) = store.add_launch("s", "local", ["x"], "demo", [arm])
    store.mark_submitted(attempt.id, job_id, str(tmp_path), None)
    stop = False
    loop = asyncio.create_task(engine.watch(until=lambda: stop))
    try:
        await until(lambda: store.attempt(attempt.id).state == "RUNNING", "the job runs")
        # Long enough after the submission that the steady pace holds.
        quiet_from = time.monotonic() + SCALED.expect_s + SCALED.quick_s
        await until(lambda: len([t for t in sched.polls if t > quiet_from]) >= 2, "steady polls")
        # Another console records the request and cancels the job; this engine is not told.
        other = Store(tmp_path / "data" / "console.sqlite3")
        other.mark_cancel_requested([attempt.id])
        LocalScheduler(sched.state_dir, grace_seconds=1.0).request_cancel(job_id)
        await until(lambda: not store.attempt(attempt.id).live, "the cancel is seen")
        ended = read_job(sched.state_dir, job_id)["end_time"]  # type: ignore[index]
        assert recorded(engine, attempt.id, "CANCELLED") - ended < SEEN_WITHIN_S
        other.close()
    finally:
        stop = True
        await asyncio.wait_for(loop, DEADLINE_S)
        sched.request_cancel(job_id)
        await engine.close()
