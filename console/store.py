"""The console's memory: sweeps, arms (with exactly what was submitted), attempts and their states.

SQLite in WAL mode under the user data dir. Every write is one short transaction, so a console
killed at any moment loses nothing it had already recorded, and a restarted console reattaches
to its live attempts from here.

Whatever goes wrong with the file is a :class:`StoreError` naming the cause (no space left on
its device, a folder it cannot write, another process holding its lock for too long, a file
that is not a store), never a bare SQLite message. A store locked by another process is
waited for, up to ``LOCK_WAIT_S``, with a message as soon as the wait begins.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import socket
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.ids import attempt_ref
from console.scheduler import JobState, JobStatus

ENV_DATA_DIR = "SRT_CONSOLE_DATA"


def default_data_dir() -> Path:
    override = os.environ.get(ENV_DATA_DIR)
    if override:
        return Path(os.path.expanduser(override))
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
    # A submission is found again after a crash: the marker is set on the job (its comment),
    # the submitter says which process was submitting; a sweep's cancel stops its submissions.
    """
    ALTER TABLE attempts ADD COLUMN marker TEXT;
    ALTER TABLE attempts ADD COLUMN submitter TEXT;
    ALTER TABLE sweeps ADD COLUMN cancel_requested_at REAL;
    """,
    # What the attempt ran (JSON, console.provenance): checkout commit, srtctl, image, pins, recipe.
    """
    ALTER TABLE attempts ADD COLUMN provenance TEXT;
    """,
    # What ended each attempt (its root cause's key: the same one ending an arm's next attempt
    # makes the failure deterministic), and the error-level line templates of healthy attempts
    # (what a later attempt of the arm or engine is compared with).
    """
    ALTER TABLE attempts ADD COLUMN root_cause TEXT;
    CREATE TABLE healthy_templates (
        attempt_id INTEGER NOT NULL REFERENCES attempts(id),
        arm_id INTEGER NOT NULL REFERENCES arms(id),
        engine TEXT,
        template TEXT NOT NULL,
        PRIMARY KEY (attempt_id, template)
    );
    CREATE INDEX healthy_templates_engine ON healthy_templates(engine);
    """,
    # The scheduler's own submit, start and end times (squeue %V/%S/%e, sacct Submit/Start/End,
    # scontrol SubmitTime/StartTime/EndTime), as epoch seconds; NULL until the scheduler said.
    """
    ALTER TABLE attempts ADD COLUMN sched_submit_at REAL;
    ALTER TABLE attempts ADD COLUMN sched_start_at REAL;
    ALTER TABLE attempts ADD COLUMN sched_end_at REAL;
    """,
)

# How long a store locked by another process is waited for, and after how long that is said.
LOCK_WAIT_S = 30.0
LOCK_NOTICE_S = 2.0
# Less free space than this on the store's device, and SQLite's I/O errors mean a full disk.
LOW_SPACE_BYTES = 1 << 20

# Attempt states beyond Slurm's: before a job id exists, and when submission failed.
SUBMITTING = "SUBMITTING"
SUBMIT_FAILED = "SUBMIT_FAILED"
# The launcher whose attempts are simulated (the demo engine): marked wherever shown or exported.
SIMULATED_LAUNCHER = "demo"
LIVE_STATES = (SUBMITTING, *(s.value for s in JobState if not s.finished))


class StoreError(Exception):
    """The store file cannot be used (corrupt, from a newer srt-console, unwritable, full disk, locked)."""


def this_process() -> str:
    """``host:pid:start`` of this process: who is submitting an attempt (start tells pid reuse)."""
    return f"{socket.gethostname()}:{os.getpid()}:{_start_ticks(os.getpid()) or 0}"


def _start_ticks(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return int(f.read().rsplit(")", 1)[-1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def process_gone(submitter: str | None) -> bool:
    """Whether the process that recorded ``submitter`` has ended (on this host; another host's
    submitter is never taken for gone)."""
    if not submitter:
        return True  # recorded before submitters were kept
    host, _, rest = submitter.partition(":")
    pid_text, _, ticks_text = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    ticks = _start_ticks(pid)
    return ticks is not None and ticks_text.isdigit() and int(ticks_text) not in (0, ticks)


@dataclass(frozen=True)
class SweepRow:
    id: int
    name: str
    cluster: str
    targets: list[str]
    created_at: float
    cancel_requested_at: float | None = None


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
    marker: str | None = None
    submitter: str | None = None
    provenance: dict[str, Any] | None = None
    root_cause: str | None = None  # the key of what ended it (failed, doomed, or cancelled after a cause)
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
    """One SQLite file. Safe to open from several processes (WAL, a bounded wait for the lock).

    ``on_wait`` is told, once per wait, that another process holds the store's lock; ``notes``
    holds what the operator should know about the file (an empty file taken for a new store)."""

    def __init__(self, path: Path, *, on_wait: Callable[[str], None] | None = None) -> None:
        self.path = path
        self.notes: list[str] = []
        self._on_wait = on_wait
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.is_file() and path.stat().st_size == 0:
                self.notes.append(
                    f"{path} is empty (0 bytes): it is taken as a new store, and the history starts again there"
                )
            self._db = sqlite3.connect(path, timeout=LOCK_NOTICE_S, isolation_level=None)
            self._db.row_factory = sqlite3.Row
            self._retrying(lambda: self._db.execute("PRAGMA journal_mode=WAL").fetchone())
            self._db.execute("PRAGMA foreign_keys=ON")
            self._retrying(self._migrate)
        except sqlite3.Error as exc:
            cause = self._cause(exc, "cannot use the store")
            if "no space left" not in cause or not self._open_for_reading():
                raise StoreError(cause) from None
            self.notes.append(f"{cause}: opened for reading only (jobs can be seen and cancelled; "
                              "nothing new is recorded until space is freed)")  # fmt: skip
        except OSError as exc:
            raise StoreError(self._os_cause(exc, "cannot create the store")) from None

    def _open_for_reading(self) -> bool:
        """At 0 bytes free SQLite cannot grow the WAL index file: exclusive locking keeps that
        index in memory, so the store can still be read (and a cancel sent). False when it
        cannot be read either, or needs an upgrade (a write)."""
        with contextlib.suppress(sqlite3.Error):
            self._db.close()
        try:
            self._db = sqlite3.connect(self.path, timeout=LOCK_NOTICE_S, isolation_level=None)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA locking_mode=EXCLUSIVE")
            version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
            self._db.execute("SELECT COUNT(*) FROM attempts").fetchone()
        except sqlite3.Error:
            return False
        return version == len(MIGRATIONS)

    # --- what went wrong -----------------------------------------------------------------

    def _os_cause(self, exc: OSError, doing: str) -> str:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return f"{self.path}: {doing}: no space left on its device"
        return f"{self.path}: {doing}: {exc.strerror or exc}"

    def _free_bytes(self) -> int | None:
        try:
            return shutil.disk_usage(self.path.parent).free
        except OSError:
            return None

    def _cause(self, exc: sqlite3.Error, doing: str) -> str:
        """The operator's words for a SQLite error: what is wrong with the file or its folder."""
        text = str(exc)
        folder = self.path.parent
        free = self._free_bytes()
        if "full" in text or ("I/O error" in text and free is not None and free < LOW_SPACE_BYTES):
            return f"{self.path}: {doing}: no space left on its device ({free} bytes free in {folder})"
        if "locked" in text or "busy" in text:
            return (
                f"{self.path}: {doing}: another process has held the store's lock for over {LOCK_WAIT_S:g} s "
                "(another srt-console, or a tool reading it); try again when it is done"
            )
        unwritable = not os.access(folder, os.W_OK) or (self.path.exists() and not os.access(self.path, os.W_OK))
        if ("readonly" in text or "unable to open" in text or "read-only" in text) and unwritable:
            return (
                f"{self.path}: {doing}: read-only (the store needs to write the file and to create its "
                f"-wal and -shm files in {folder}; check the permissions, or set $SRT_CONSOLE_DATA)"
            )
        if "not a database" in text or "malformed" in text:
            return f"{self.path}: {doing}: not an srt-console store, or damaged ({text})"
        return f"{self.path}: {doing}: {text}"

    def _retrying(self, work: Callable[[], Any]) -> Any:
        """``work()``, waited for while another process holds the lock (up to LOCK_WAIT_S)."""
        deadline = time.monotonic() + LOCK_WAIT_S
        told = False
        while True:
            try:
                return work()
            except sqlite3.OperationalError as exc:
                text = str(exc)
                if ("locked" not in text and "busy" not in text) or time.monotonic() >= deadline:
                    raise
                if not told and self._on_wait is not None:
                    told = True
                    self._on_wait(f"{self.path}: another process holds the store's lock; waiting up to "
                                  f"{LOCK_WAIT_S:g} s")  # fmt: skip

    @classmethod
    def open_default(cls) -> Store:
        return cls(default_data_dir() / "console.sqlite3")

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; a SQLite failure is a StoreError with its cause, nothing half-written."""
        try:
            self._retrying(lambda: self._db.execute("BEGIN IMMEDIATE"))
        except sqlite3.Error as exc:
            raise StoreError(self._cause(exc, "cannot write")) from None
        try:
            yield self._db
            self._db.execute("COMMIT")
        except BaseException as exc:
            if self._db.in_transaction:
                with contextlib.suppress(sqlite3.Error):  # SQLite rolls back itself after some errors
                    self._db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise StoreError(self._cause(exc, "cannot write")) from None
            raise

    def _read(self, sql: str, args: Sequence[object] = ()) -> list[sqlite3.Row]:
        try:
            return list(self._retrying(lambda: self._db.execute(sql, args).fetchall()))
        except sqlite3.Error as exc:
            raise StoreError(self._cause(exc, "cannot read")) from None

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
        self,
        arm_id: int,
        cluster: str,
        launcher: str,
        config_yaml: str,
        concurrencies: Sequence[int],
        *,
        marker: str | None = None,
    ) -> AttemptRow:
        """A new attempt in state SUBMITTING, numbered after the arm's earlier attempts: the intent,
        recorded before anything is submitted, with the marker its job will carry."""
        with self._tx() as db:
            attempt_id = _insert_attempt(db, arm_id, cluster, launcher, config_yaml, concurrencies, marker)
        return self.attempt(attempt_id)

    def add_launch(
        self,
        name: str,
        cluster: str,
        targets: Sequence[str],
        launcher: str,
        arms: Sequence[LaunchArm],
    ) -> tuple[int, list[AttemptRow]]:
        """A sweep, its arms and one SUBMITTING attempt each, in one transaction: a launch is
        recorded whole or not at all (a full disk leaves no empty sweep behind)."""
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO sweeps (name, cluster, targets, created_at) VALUES (?, ?, ?, ?)",
                (name, cluster, json.dumps(list(targets)), time.time()),
            )
            sweep_id = int(cur.lastrowid or 0)
            ids: list[int] = []
            for arm in arms:
                cur = db.execute(
                    "INSERT INTO arms (sweep_id, name, recipe_path, selector, variant, config_yaml, summary,"
                    " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (sweep_id, arm.name, arm.recipe_path, arm.selector, arm.variant, arm.config_yaml,
                     json.dumps(arm.summary), time.time()),
                )  # fmt: skip
                arm_id = int(cur.lastrowid or 0)
                ids.append(
                    _insert_attempt(db, arm_id, cluster, launcher, arm.config_yaml, arm.concurrencies, arm.marker)
                )
        return sweep_id, [self.attempt(i) for i in ids]

    def mark_sweep_cancel_requested(self, sweep_id: int) -> None:
        """The operator cancelled the sweep: its submissions that have not started do not start."""
        with self._tx() as db:
            db.execute(
                "UPDATE sweeps SET cancel_requested_at = COALESCE(cancel_requested_at, ?) WHERE id = ?",
                (time.time(), sweep_id),
            )

    def sweep_cancel_requested(self, sweep_id: int) -> bool:
        rows = self._read("SELECT cancel_requested_at FROM sweeps WHERE id = ?", (sweep_id,))
        return bool(rows) and rows[0]["cancel_requested_at"] is not None

    def mark_not_submitted(self, attempt_id: int, reason: str) -> None:
        """An attempt that will never be submitted because the operator cancelled it first."""
        now = time.time()
        with self._tx() as db:
            db.execute(
                "UPDATE attempts SET state = ?, reason = ?, cancel_requested_at = COALESCE(cancel_requested_at, ?),"
                " ended_at = ?, updated_at = ? WHERE id = ? AND state = ?",
                (JobState.CANCELLED.value, reason, now, now, now, attempt_id, SUBMITTING),
            )
            db.execute(
                "INSERT INTO attempt_states (attempt_id, at, state, reason, source) VALUES (?, ?, ?, ?, ?)",
                (attempt_id, now, JobState.CANCELLED.value, reason, "console"),
            )

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

    def set_provenance(self, attempt_id: int, provenance: Mapping[str, Any]) -> None:
        """Record what the attempt runs (written once, when it is submitted)."""
        with self._tx() as db:
            db.execute(
                "UPDATE attempts SET provenance = ?, updated_at = ? WHERE id = ?",
                (json.dumps(dict(provenance)), time.time(), attempt_id),
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

    def set_root_cause(self, attempt_id: int, key: str | None) -> None:
        """Record what ended the attempt (None: nothing, or not known)."""
        with self._tx() as db:
            db.execute("UPDATE attempts SET root_cause = ? WHERE id = ?", (key, attempt_id))

    def save_healthy_templates(self, attempt_id: int, templates: Iterable[str]) -> None:
        """Keep a healthy attempt's error-level line templates (added to those kept before)."""
        with self._tx() as db:
            row = db.execute(
                "SELECT a.arm_id, r.summary FROM attempts a JOIN arms r ON r.id = a.arm_id WHERE a.id = ?",
                (attempt_id,),
            ).fetchone()
            if row is None:
                return
            engine = _engine(row["summary"])
            db.executemany(
                "INSERT OR IGNORE INTO healthy_templates (attempt_id, arm_id, engine, template) VALUES (?, ?, ?, ?)",
                [(attempt_id, row["arm_id"], engine, t) for t in templates],
            )
            # An attempt with nothing error-level is a baseline too (the empty one).
            db.execute(
                "INSERT OR IGNORE INTO healthy_templates (attempt_id, arm_id, engine, template) VALUES (?, ?, ?, '')",
                (attempt_id, row["arm_id"], engine),
            )

    def earlier_root_causes(self, attempt: AttemptRow) -> list[tuple[str, str]]:
        """``(attempt ref, root cause key)`` of the arm's attempts before this one that a root
        cause ended, oldest first."""
        return [
            (attempt_ref(a.arm_id, a.number), a.root_cause)
            for a in self.attempts(attempt.arm_id)
            if a.number < attempt.number and a.root_cause
        ]

    def baseline_templates(self, attempt_id: int) -> frozenset[str] | None:
        """The templates of the healthy attempts of this attempt's arm, else of its engine's (other
        arms); None when there is no healthy attempt to compare with."""
        row = self._db.execute(
            "SELECT a.arm_id, r.summary FROM attempts a JOIN arms r ON r.id = a.arm_id WHERE a.id = ?", (attempt_id,)
        ).fetchone()
        if row is None:
            return None
        # The column names are the two literals here, never input.
        for column, value in (("arm_id", row["arm_id"]), ("engine", _engine(row["summary"]))):
            if value is None:
                continue
            rows = self._db.execute(
                f"SELECT template FROM healthy_templates WHERE {column} = ? AND attempt_id != ?",
                (value, attempt_id),
            ).fetchall()
            if rows:
                return frozenset(r["template"] for r in rows if r["template"])
        return None

    # --- reads -------------------------------------------------------------------------

    def sweeps(self) -> list[SweepRow]:
        rows = self._read("SELECT * FROM sweeps ORDER BY id")
        return [
            SweepRow(
                r["id"], r["name"], r["cluster"], json.loads(r["targets"]), r["created_at"], r["cancel_requested_at"]
            )
            for r in rows
        ]

    def sweep(self, sweep_id: int) -> SweepRow | None:
        return next((s for s in self.sweeps() if s.id == sweep_id), None)

    def arms(self, sweep_id: int | None = None) -> list[ArmRow]:
        if sweep_id is None:
            rows = self._read("SELECT * FROM arms ORDER BY id")
        else:
            rows = self._read("SELECT * FROM arms WHERE sweep_id = ? ORDER BY id", (sweep_id,))
        return [_arm(r) for r in rows]

    def arm(self, arm_id: int) -> ArmRow | None:
        rows = self._read("SELECT * FROM arms WHERE id = ?", (arm_id,))
        return _arm(rows[0]) if rows else None

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
        rows = self._read(sql + " ORDER BY id", args)
        return [_attempt(r) for r in rows]

    def attempt(self, attempt_id: int) -> AttemptRow:
        rows = self._read("SELECT * FROM attempts WHERE id = ?", (attempt_id,))
        if not rows:
            raise KeyError(attempt_id)
        return _attempt(rows[0])

    def get_offsets(self, attempt_id: int) -> dict[str, int]:
        """The follow offsets recorded for an attempt's files."""
        rows = self._read("SELECT file, offset FROM follow_offsets WHERE attempt_id = ? ORDER BY file", (attempt_id,))
        return {r["file"]: int(r["offset"]) for r in rows}

    def history(self, attempt_id: int) -> list[tuple[float, str, str | None, str | None]]:
        rows = self._read(
            "SELECT at, state, reason, source FROM attempt_states WHERE attempt_id = ? ORDER BY rowid", (attempt_id,)
        )
        return [(r["at"], r["state"], r["reason"], r["source"]) for r in rows]


@dataclass(frozen=True)
class LaunchArm:
    """One arm of a launch as :meth:`Store.add_launch` records it."""

    name: str
    recipe_path: str
    selector: str | None
    variant: str | None
    config_yaml: str
    summary: dict[str, Any]
    concurrencies: Sequence[int]
    marker: str | None = None


def _insert_attempt(
    db: sqlite3.Connection,
    arm_id: int,
    cluster: str,
    launcher: str,
    config_yaml: str,
    concurrencies: Sequence[int],
    marker: str | None,
) -> int:
    now = time.time()
    number = int(
        db.execute("SELECT COALESCE(MAX(number), 0) + 1 FROM attempts WHERE arm_id = ?", (arm_id,)).fetchone()[0]
    )
    cur = db.execute(
        "INSERT INTO attempts (arm_id, number, cluster, launcher, config_yaml, concurrencies, state,"
        " submitted_at, updated_at, marker, submitter) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (arm_id, number, cluster, launcher, config_yaml, json.dumps(list(concurrencies)), SUBMITTING, now, now,
         marker, this_process()),
    )  # fmt: skip
    attempt_id = int(cur.lastrowid or 0)
    db.execute(
        "INSERT INTO attempt_states (attempt_id, at, state, source) VALUES (?, ?, ?, ?)",
        (attempt_id, now, SUBMITTING, "console"),
    )
    return attempt_id


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
        r["updated_at"], r["cancel_requested_at"], r["marker"], r["submitter"], _json_doc(r["provenance"]),
        r["root_cause"],
        r["sched_submit_at"], r["sched_start_at"], r["sched_end_at"],
    )  # fmt: skip


def _json_doc(text: str | None) -> dict[str, Any] | None:
    """A stored JSON object, or None (absent, or unreadable: a damaged record is not fatal)."""
    if not text:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _engine(summary: str) -> str | None:
    """The engine (srtctl backend) of an arm's stored summary."""
    try:
        backend = json.loads(summary).get("backend")
    except (ValueError, AttributeError):
        return None
    return str(backend) if backend else None
