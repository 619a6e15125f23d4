"""The SQLite store: what is recorded survives a restart, and bad files give clear errors."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from console.scheduler import JobState, JobStatus
from console.store import SUBMIT_FAILED, SUBMITTING, Store, StoreError


def test_records_a_sweep_and_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "data" / "console.sqlite3"
    store = Store(path)
    sweep = store.add_sweep("seed", "local", ["recipes/demo"])
    arm = store.add_arm(sweep, "a1", "recipes/demo/quick.yaml", None, None, "name: a1\n", {"node_demand": 1})
    first = store.add_attempt(arm, "local", "demo", "name: a1\n", [1, 4, 16])
    assert (first.number, first.state, first.live) == (1, SUBMITTING, True)
    store.mark_submitted(first.id, "1001", "/out/1001", None)
    assert store.record_status(first.id, JobStatus("1001", JobState.RUNNING, nodelist="node1"))
    assert not store.record_status(first.id, JobStatus("1001", JobState.RUNNING))
    store.close()

    again = Store(path)  # a restarted console
    (live,) = again.attempts(live=True)
    assert (live.job_id, live.state, live.nodelist, live.concurrencies) == ("1001", "RUNNING", "node1", [1, 4, 16])
    assert live.started_at is not None and live.ended_at is None
    again.record_status(live.id, JobStatus("1001", JobState.CANCELLED, reason="by 1001", exit_code="0:15"))
    done = again.attempt(live.id)
    assert (done.state, done.reason, done.exit_code, done.live) == ("CANCELLED", "by 1001", "0:15", False)
    assert [h[1] for h in again.history(live.id)] == ["SUBMITTING", "PENDING", "RUNNING", "CANCELLED"]
    second = again.add_attempt(arm, "local", "demo", "name: a1\n", [16])
    assert second.number == 2 and [a.number for a in again.attempts(arm)] == [1, 2]
    again.mark_submit_failed(second.id, "sbatch: error: invalid partition")
    assert again.attempt(second.id).state == SUBMIT_FAILED and again.attempts(live=True) == []


def test_store_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "console.sqlite3"
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(StoreError, match="newer srt-console"):
        Store(path)


def test_corrupt_store_gives_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "console.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match=r"console.sqlite3: cannot use the store"):
        Store(path)


def test_the_schedulers_times_are_kept_and_elapsed_counts_from_them(tmp_path: Path) -> None:
    store = Store(tmp_path / "console.sqlite3")
    arm = store.add_arm(store.add_sweep("s", "c", []), "a", "r.yaml", None, None, "x: 1\n", {})
    attempt = store.add_attempt(arm, "c", "srtctl", "x: 1\n", [1])
    store.mark_submitted(attempt.id, "7", "/out/7", None)
    # The console noticed the start late; Slurm's own start is what counts.
    assert store.record_status(attempt.id, JobStatus("7", JobState.RUNNING, submit_time=1000.0, start_time=1010.0))
    running = store.attempt(attempt.id)
    assert (running.submit_time, running.start_time) == (1000.0, 1010.0)
    assert running.elapsed(now=1070.0) == 60.0
    # The same state with an end time arriving from sacct is a change worth announcing, not a new state.
    store.record_status(attempt.id, JobStatus("7", JobState.COMPLETED, start_time=1010.0))
    assert store.record_status(attempt.id, JobStatus("7", JobState.COMPLETED, end_time=1100.0))
    done = store.attempt(attempt.id)
    assert (done.sched_submit_at, done.end_time, done.elapsed(now=99999.0)) == (1000.0, 1100.0, 90.0)
    assert [h[1] for h in store.history(attempt.id)].count("COMPLETED") == 1
    assert not done.simulated and store.add_attempt(arm, "c", "demo", "x: 1\n", [1]).simulated


def test_a_store_of_the_previous_schema_is_upgraded_in_place(tmp_path: Path) -> None:
    from console.store import MIGRATIONS

    path = tmp_path / "console.sqlite3"
    db = sqlite3.connect(path)
    for step in MIGRATIONS[:2]:
        db.executescript(step)
    db.execute("PRAGMA user_version = 2")
    db.execute("INSERT INTO sweeps (name, cluster, targets, created_at) VALUES ('s', 'c', '[]', 1)")
    db.commit()
    db.close()
    store = Store(path)
    assert store.schema_version == len(MIGRATIONS) and [s.name for s in store.sweeps()] == ["s"]


def test_a_store_of_the_schema_before_the_schedulers_times_keeps_its_attempts(tmp_path: Path) -> None:
    """A store with every step but the last (marker, submitter, provenance already there) gains the
    scheduler's times as empty, and its attempts keep what they recorded."""
    from console.store import MIGRATIONS

    path = tmp_path / "console.sqlite3"
    db = sqlite3.connect(path)
    for step in MIGRATIONS[:-1]:
        db.executescript(step)
    db.execute(f"PRAGMA user_version = {len(MIGRATIONS) - 1}")
    db.execute("INSERT INTO sweeps (name, cluster, targets, created_at) VALUES ('s', 'c', '[]', 1)")
    db.execute(
        "INSERT INTO arms (sweep_id, name, recipe_path, config_yaml, summary, created_at)"
        " VALUES (1, 'a', 'r.yaml', 'x: 1', '{}', 1)"
    )
    db.execute(
        "INSERT INTO attempts (arm_id, number, cluster, launcher, job_id, config_yaml, concurrencies, state,"
        " submitted_at, started_at, updated_at, marker, provenance)"
        " VALUES (1, 1, 'c', 'srtctl', '42', 'x: 1', '[1]', 'RUNNING', 10, 20, 20, 'm-1', '{\"commit\": \"abc\"}')"
    )
    db.commit()
    db.close()
    store = Store(path)
    assert store.schema_version == len(MIGRATIONS)
    (attempt,) = store.attempts()
    assert (attempt.job_id, attempt.marker, attempt.provenance) == ("42", "m-1", {"commit": "abc"})
    assert attempt.sched_submit_at is None and (attempt.submit_time, attempt.start_time) == (10.0, 20.0)
