"""The console's memory: sweeps, arms (with exactly what was submitted), attempts and their states.

SQLite in WAL mode under the user data dir. Every write is one short transaction, so a console
killed at any moment loses nothing it had already recorded, and a restarted console reattaches
to its live attempts from here.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.scheduler import JobState, JobStatus

ENV_DATA_DIR = "SRT_CONSOLE_DATA"


def default_data_dir() -> Path:
    override = os.environ.get(ENV_DATA_DIR)
    if override:
        return Path(override).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("srt-console", appauthor=False))


# Each entry upgrades the schema by one version; never edit a released step, append a new one.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE sweeps (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        cluster TEXT NOT NULL,
        targets TEXT NOT NULL,            -- JSON list of what the operator launched
        created_at REAL NOT NULL
    );
    CREATE TABLE arms (
        id INTEGER PRIMARY KEY,
        sweep_id INTEGER NOT NULL REFERENCES sweeps(id),
        name TEXT NOT NULL,
        recipe_path TEXT NOT NULL,
        selector TEXT,
        variant TEXT,
        config_yaml TEXT NOT NULL,        -- the resolved config, exactly as submitted first
        summary TEXT NOT NULL,            -- JSON: topology, grid, pins (Arm.summary())
        created_at REAL NOT NULL
    );
    CREATE TABLE attempts (
        id INTEGER PRIMARY KEY,
        arm_id INTEGER NOT NULL REFERENCES arms(id),
        number INTEGER NOT NULL,          -- 1 for the first submission of the arm, 2 for its rerun...
        cluster TEXT NOT NULL,
        launcher TEXT NOT NULL,
        job_id TEXT,
        output_dir TEXT,
        results_dir TEXT,
        config_yaml TEXT NOT NULL,        -- exactly what this attempt ran
        concurrencies TEXT NOT NULL,      -- JSON list of the points this attempt runs
        state TEXT NOT NULL,
        reason TEXT,
        exit_code TEXT,
        nodelist TEXT,
        error TEXT,                       -- why a submission failed (no job id then)
        submitted_at REAL NOT NULL,
        started_at REAL,
        ended_at REAL,
        updated_at REAL NOT NULL,
        UNIQUE (arm_id, number)
    );
    CREATE INDEX attempts_live ON attempts(state);
    CREATE TABLE attempt_states (
        attempt_id INTEGER NOT NULL REFERENCES attempts(id),
        at REAL NOT NULL,
        state TEXT NOT NULL,
        reason TEXT,
        source TEXT
    );
    CREATE TABLE follow_offsets (
        attempt_id INTEGER NOT NULL REFERENCES attempts(id),
        file TEXT NOT NULL,
        offset INTEGER NOT NULL,
        PRIMARY KEY (attempt_id, file)
    );
    """,
    # The operator asked to cancel (a cancel is then "by you", not a failure to diagnose).
    """
    ALTER TABLE attempts ADD COLUMN cancel_requested_at REAL;
    """,
    # The scheduler's own submit, start and end times (squeue %V/%S/%e, sacct Submit/Start/End,
    # scontrol SubmitTime/StartTime/EndTime), as epoch seconds; NULL until the scheduler said.
    """
    ALTER TABLE attempts ADD COLUMN sched_submit_at REAL;
    ALTER TABLE attempts ADD COLUMN sched_start_at REAL;
    ALTER TABLE attempts ADD COLUMN sched_end_at REAL;
    """,
)

# Attempt states beyond Slurm's: before a job id exists, and when submission failed.
SUBMITTING = "SUBMITTING"
SUBMIT_FAILED = "SUBMIT_FAILED"
# The launcher whose attempts are simulated (the demo engine): marked wherever shown or exported.
SIMULATED_LAUNCHER = "demo"
LIVE_STATES = (SUBMITTING, *(s.value for s in JobState if not s.finished))


class StoreError(Exception):
    """The store file cannot be used (corrupt, from a newer srt-console, unwritable)."""


@dataclass(frozen=True)
class SweepRow:
    id: int
    name: str
    cluster: str
    targets: list[str]
    created_at: float


@dataclass(frozen=True)
class ArmRow:
    id: int
    sweep_id: int
    name: str
    recipe_path: str
    selector: str | None
    variant: str | None
    config_yaml: str
    summary: dict[str, Any]
    created_at: float


@dataclass(frozen=True)
class AttemptRow:
    id: int
    arm_id: int
    number: int
    cluster: str
    launcher: str
    job_id: str | None
    output_dir: str | None
    results_dir: str | None
    config_yaml: str
    concurrencies: list[int]
    state: str
    reason: str | None
    exit_code: str | None
    nodelist: str | None
    error: str | None
    submitted_at: float
    started_at: float | None
    ended_at: float | None
    updated_at: float
    cancel_requested_at: float | None = None
    sched_submit_at: float | None = None
    sched_start_at: float | None = None
    sched_end_at: float | None = None

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES

    @property
    def simulated(self) -> bool:
        """Run by the demo launcher: its numbers come from the demo engine, not from hardware."""
        return self.launcher == SIMULATED_LAUNCHER

    @property
    def submit_time(self) -> float:
        """When the job was submitted: the scheduler's word, else when the console submitted it."""
        return self.sched_submit_at or self.submitted_at

    @property
    def start_time(self) -> float | None:
        """When the job started, as the scheduler says (else when the console first saw it run)."""
        return self.sched_start_at or self.started_at

    @property
    def end_time(self) -> float | None:
        return self.sched_end_at or self.ended_at

    @property
    def cancelled_by_operator(self) -> bool:
        """The operator asked to cancel it, and it did not complete before the cancel took."""
        return self.cancel_requested_at is not None and self.state != JobState.COMPLETED.value

    def elapsed(self, now: float | None = None) -> float | None:
        """Run time: from the scheduler's start to its end (or now), as sacct's Elapsed counts it."""
        start = self.start_time
        if start is None:
            return None
        end = (self.sched_end_at or self.ended_at) if not self.live else None
        return max(0.0, (end or now or time.time()) - start)


class Store:
    """One SQLite file. Safe to open from several processes (WAL, busy timeout)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, timeout=10, isolation_level=None)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{path}: cannot use the store: {exc}") from None
        except OSError as exc:
            raise StoreError(f"{path}: cannot create the store: {exc.strerror or exc}") from None

    @classmethod
    def open_default(cls) -> Store:
        return cls(default_data_dir() / "console.sqlite3")

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _migrate(self) -> None:
        version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
        if version > len(MIGRATIONS):
            raise StoreError(
                f"{self.path}: written by a newer srt-console (schema {version}, this one knows {len(MIGRATIONS)})"
            )
        for number in range(version, len(MIGRATIONS)):
            with self._tx() as db:
                for statement in MIGRATIONS[number].split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute(f"PRAGMA user_version = {number + 1}")

    @property
    def schema_version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    # --- writes ------------------------------------------------------------------------

    def add_sweep(self, name: str, cluster: str, targets: Sequence[str]) -> int:
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO sweeps (name, cluster, targets, created_at) VALUES (?, ?, ?, ?)",
                (name, cluster, json.dumps(list(targets)), time.time()),
            )
            return int(cur.lastrowid or 0)

    def add_arm(
        self,
        sweep_id: int,
        name: str,
        recipe_path: str,
        selector: str | None,
        variant: str | None,
        config_yaml: str,
        summary: dict[str, Any],
    ) -> int:
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO arms (sweep_id, name, recipe_path, selector, variant, config_yaml, summary, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (sweep_id, name, recipe_path, selector, variant, config_yaml, json.dumps(summary), time.time()),
            )
            return int(cur.lastrowid or 0)

    def add_attempt(
        self, arm_id: int, cluster: str, launcher: str, config_yaml: str, concurrencies: Sequence[int]
    ) -> AttemptRow:
        """A new attempt in state SUBMITTING, numbered after the arm's earlier attempts."""
        now = time.time()
        with self._tx() as db:
            number = int(
                db.execute("SELECT COALESCE(MAX(number), 0) + 1 FROM attempts WHERE arm_id = ?", (arm_id,)).fetchone()[
                    0
                ]
            )
            cur = db.execute(
                "INSERT INTO attempts (arm_id, number, cluster, launcher, config_yaml, concurrencies, state,"
                " submitted_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (arm_id, number, cluster, launcher, config_yaml, json.dumps(list(concurrencies)), SUBMITTING, now, now),
            )
            attempt_id = int(cur.lastrowid or 0)
            db.execute(
                "INSERT INTO attempt_states (attempt_id, at, state, source) VALUES (?, ?, ?, ?)",
                (attempt_id, now, SUBMITTING, "console"),
            )
        return self.attempt(attempt_id)

    def mark_submitted(self, attempt_id: int, job_id: str, output_dir: str, results_dir: str | None) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE attempts SET job_id = ?, output_dir = ?, results_dir = ?, state = ?, updated_at = ?"
                " WHERE id = ?",
                (job_id, output_dir, results_dir, JobState.PENDING.value, time.time(), attempt_id),
            )
            db.execute(
                "INSERT INTO attempt_states (attempt_id, at, state, source) VALUES (?, ?, ?, ?)",
                (attempt_id, time.time(), JobState.PENDING.value, "submit"),
            )

    def mark_submit_failed(self, attempt_id: int, error: str) -> None:
        now = time.time()
        with self._tx() as db:
            db.execute(
                "UPDATE attempts SET state = ?, error = ?, ended_at = ?, updated_at = ? WHERE id = ?",
                (SUBMIT_FAILED, error, now, now, attempt_id),
            )
            db.execute(
                "INSERT INTO attempt_states (attempt_id, at, state, reason, source) VALUES (?, ?, ?, ?, ?)",
                (attempt_id, now, SUBMIT_FAILED, error[:500], "submit"),
            )

    def mark_cancel_requested(self, attempt_ids: Sequence[int]) -> None:
        """The operator asked to cancel these attempts (the first request's time is kept)."""
        now = time.time()
        with self._tx() as db:
            db.executemany(
                "UPDATE attempts SET cancel_requested_at = COALESCE(cancel_requested_at, ?), updated_at = ?"
                " WHERE id = ?",
                [(now, now, i) for i in attempt_ids],
            )

    def record_status(self, attempt_id: int, status: JobStatus) -> bool:
        """Store what the scheduler said; True when the state, reason or the scheduler's times changed."""
        now = time.time()
        with self._tx() as db:
            row = db.execute(
                "SELECT state, reason, started_at, ended_at, sched_submit_at, sched_start_at, sched_end_at"
                " FROM attempts WHERE id = ?",
                (attempt_id,),
            ).fetchone()
            if row is None:
                return False
            state = status.state.value
            changed = (row["state"], row["reason"]) != (state, status.reason)
            started = row["started_at"]
            if started is None and status.state not in (JobState.PENDING, JobState.UNKNOWN):
                started = now
            ended = row["ended_at"]
            if ended is None and status.state.finished:
                ended = now
            times = (status.submit_time, status.start_time, status.end_time)
            stored = (row["sched_submit_at"], row["sched_start_at"], row["sched_end_at"])
            new_times = any(t is not None and t != old for t, old in zip(times, stored, strict=True))
            db.execute(
                "UPDATE attempts SET state = ?, reason = ?, exit_code = COALESCE(?, exit_code),"
                " nodelist = COALESCE(?, nodelist), started_at = ?, ended_at = ?, updated_at = ?,"
                " sched_submit_at = COALESCE(?, sched_submit_at), sched_start_at = COALESCE(?, sched_start_at),"
                " sched_end_at = COALESCE(?, sched_end_at) WHERE id = ?",
                (state, status.reason, status.exit_code, status.nodelist, started, ended, now, *times, attempt_id),
            )
            if changed:
                db.execute(
                    "INSERT INTO attempt_states (attempt_id, at, state, reason, source) VALUES (?, ?, ?, ?, ?)",
                    (attempt_id, now, state, status.reason, status.source),
                )
            return changed or new_times

    def set_offsets(self, attempt_id: int, offsets: Mapping[str, int]) -> None:
        """Record how far each of an attempt's files has been followed (one transaction)."""
        if not offsets:
            return
        with self._tx() as db:
            db.executemany(
                "INSERT INTO follow_offsets (attempt_id, file, offset) VALUES (?, ?, ?)"
                " ON CONFLICT (attempt_id, file) DO UPDATE SET offset = excluded.offset",
                [(attempt_id, file, int(offset)) for file, offset in offsets.items()],
            )

    # --- reads -------------------------------------------------------------------------

    def sweeps(self) -> list[SweepRow]:
        rows = self._db.execute("SELECT * FROM sweeps ORDER BY id").fetchall()
        return [SweepRow(r["id"], r["name"], r["cluster"], json.loads(r["targets"]), r["created_at"]) for r in rows]

    def sweep(self, sweep_id: int) -> SweepRow | None:
        return next((s for s in self.sweeps() if s.id == sweep_id), None)

    def arms(self, sweep_id: int | None = None) -> list[ArmRow]:
        if sweep_id is None:
            rows = self._db.execute("SELECT * FROM arms ORDER BY id").fetchall()
        else:
            rows = self._db.execute("SELECT * FROM arms WHERE sweep_id = ? ORDER BY id", (sweep_id,)).fetchall()
        return [_arm(r) for r in rows]

    def arm(self, arm_id: int) -> ArmRow | None:
        row = self._db.execute("SELECT * FROM arms WHERE id = ?", (arm_id,)).fetchone()
        return _arm(row) if row else None

    def attempts(self, arm_id: int | None = None, *, live: bool = False) -> list[AttemptRow]:
        sql = "SELECT * FROM attempts"
        args: list[object] = []
        clauses = []
        if arm_id is not None:
            clauses.append("arm_id = ?")
            args.append(arm_id)
        if live:
            clauses.append(f"state IN ({', '.join('?' * len(LIVE_STATES))})")
            args.extend(LIVE_STATES)
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        rows = self._db.execute(sql + " ORDER BY id", args).fetchall()
        return [_attempt(r) for r in rows]

    def attempt(self, attempt_id: int) -> AttemptRow:
        row = self._db.execute("SELECT * FROM attempts WHERE id = ?", (attempt_id,)).fetchone()
        if row is None:
            raise KeyError(attempt_id)
        return _attempt(row)

    def get_offsets(self, attempt_id: int) -> dict[str, int]:
        """The follow offsets recorded for an attempt's files."""
        rows = self._db.execute(
            "SELECT file, offset FROM follow_offsets WHERE attempt_id = ? ORDER BY file", (attempt_id,)
        ).fetchall()
        return {r["file"]: int(r["offset"]) for r in rows}

    def history(self, attempt_id: int) -> list[tuple[float, str, str | None, str | None]]:
        rows = self._db.execute(
            "SELECT at, state, reason, source FROM attempt_states WHERE attempt_id = ? ORDER BY rowid", (attempt_id,)
        ).fetchall()
        return [(r["at"], r["state"], r["reason"], r["source"]) for r in rows]


def _arm(r: sqlite3.Row) -> ArmRow:
    return ArmRow(
        r["id"], r["sweep_id"], r["name"], r["recipe_path"], r["selector"], r["variant"], r["config_yaml"],
        json.loads(r["summary"]), r["created_at"],
    )  # fmt: skip


def _attempt(r: sqlite3.Row) -> AttemptRow:
    return AttemptRow(
        r["id"], r["arm_id"], r["number"], r["cluster"], r["launcher"], r["job_id"], r["output_dir"],
        r["results_dir"], r["config_yaml"], json.loads(r["concurrencies"]), r["state"], r["reason"],
        r["exit_code"], r["nodelist"], r["error"], r["submitted_at"], r["started_at"], r["ended_at"],
        r["updated_at"], r["cancel_requested_at"], r["sched_submit_at"], r["sched_start_at"], r["sched_end_at"],
    )  # fmt: skip
