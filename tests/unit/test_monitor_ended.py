"""An attempt that ended before the monitor first follows it is diagnosed from its state, even with
no log line to come; what the store keeps of it waits for its lines."""

from __future__ import annotations

import asyncio
from pathlib import Path

from console.clusters import local_profile
from console.engine import Engine
from console.scheduler import JobState, JobStatus
from console.session import Session
from console.store import Store


def an_ended_attempt(engine: Engine, output_dir: Path, state: JobState, reason: str) -> int:
    """A job that left the queue without writing a line (cancelled while it was pending)."""
    store = engine.store
    sweep = store.add_sweep("by-hand", "local", ["by-hand.yaml"])
    arm = store.add_arm(sweep, "by-hand", "by-hand.yaml", None, None, "name: by-hand\n", {})
    attempt = store.add_attempt(arm, "local", "srtctl", "name: by-hand\n", [8, 16])
    output_dir.mkdir(parents=True)
    store.mark_submitted(attempt.id, "4242", str(output_dir), None)
    store.mark_cancel_requested([attempt.id])
    store.record_status(attempt.id, JobStatus("4242", state, reason=reason, source="sacct"))
    return attempt.id


def test_a_job_cancelled_before_it_started_is_diagnosed_cancelled(tmp_path: Path) -> None:
    data = tmp_path / "data"
    engine = Engine(Store(data / "console.sqlite3"), {"local": local_profile(data)}, data)
    attempt_id = an_ended_attempt(engine, tmp_path / "outputs" / "4242", JobState.CANCELLED, "by 0")
    engine.store.set_root_cause(attempt_id, "kept-from-before")
    session = Session.of(engine)

    async def scenario() -> None:
        view = await session.monitor.follow(engine.store.attempt(attempt_id))
        assert view.diagnosis is not None and view.diagnosis.verdict == "cancelled"
        # Nothing the store kept is rewritten before the attempt's lines are read.
        assert engine.store.attempt(attempt_id).root_cause == "kept-from-before"
        await session.close()

    asyncio.run(scenario())
