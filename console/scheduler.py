"""What the console needs of a batch scheduler, whether Slurm over a transport or the local one.

Job states are normalised to Slurm's words so the rest of the console never cares which
scheduler ran a job. A lost connection is never a job state: it is a transport problem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

JOB_ID = re.compile(r"^[0-9]{1,12}(?:_[0-9]{1,8})?$")
MARKER = re.compile(r"^srt-console:[0-9a-f]{8,64}$")


def valid_marker(marker: str) -> str:
    """The marker, or ValueError: markers reach remote command lines and batch headers."""
    if not MARKER.match(marker):
        raise ValueError(f"not an srt-console marker: {marker!r}")
    return marker


def valid_job_id(job_id: str) -> str:
    """The job id, or ValueError: ids reach remote command lines, so they are checked."""
    if not JOB_ID.match(job_id):
        raise ValueError(f"not a Slurm job id: {job_id!r}")
    return job_id


class JobState(str, Enum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    PREEMPTED = "PREEMPTED"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    SUSPENDED = "SUSPENDED"
    UNKNOWN = "UNKNOWN"  # the scheduler no longer knows the job and has no record of it

    @property
    def finished(self) -> bool:
        return self not in _LIVE

    @property
    def succeeded(self) -> bool:
        return self is JobState.COMPLETED


_LIVE = {JobState.PENDING, JobState.RUNNING, JobState.COMPLETING, JobState.SUSPENDED}


@dataclass(frozen=True)
class JobStatus:
    """One job as the scheduler reports it."""

    job_id: str
    state: JobState
    reason: str | None = None  # pending reason, or `by <uid>` for a cancel
    exit_code: str | None = None  # Slurm's "code:signal"
    derived_exit_code: str | None = None
    elapsed: str | None = None
    nodelist: str | None = None
    raw_state: str | None = None  # exactly what the scheduler said, e.g. "CANCELLED by 1001"
    source: str = "squeue"  # squeue | sacct | scontrol | local
    # The scheduler's own times (epoch seconds), when it gave them.
    submit_time: float | None = None
    start_time: float | None = None
    end_time: float | None = None


@dataclass(frozen=True)
class Submission:
    """What a launcher asks a scheduler to run."""

    script: str  # path of the batch script on the scheduler's machine
    job_name: str
    output: str | None = None  # stdout+stderr path (%j expands to the job id)
    workdir: str | None = None
    nodes: int | None = None
    partition: str | None = None
    account: str | None = None
    time_limit: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    # Submit held (`sbatch --hold`): the launcher creates the job's output dir, which needs the
    # job id, then releases it, so Slurm never starts a job whose --output dir is missing.
    hold: bool = False
    # Set on the job (Slurm's --comment) so that the console finds it again after a crash.
    comment: str | None = None


@dataclass(frozen=True)
class JobInfo:
    """What the scheduler knows of a job the console may not have launched (to adopt it)."""

    job_id: str
    name: str
    state: JobState
    stdout: str | None  # the batch script's output file
    workdir: str | None
    nodes: int | None


class Scheduler(Protocol):
    """Slurm (console.slurm) or the local scheduler (console.demo.localsched)."""

    name: str

    async def submit(self, submission: Submission) -> str:
        """Submit and return the job id; raise SchedulerError with the scheduler's words."""

    async def poll(self, job_ids: list[str]) -> dict[str, JobStatus]:
        """The state of every given job in as few scheduler calls as possible (one for live jobs)."""

    async def cancel(self, job_ids: list[str]) -> None:
        """Ask the scheduler to cancel; the state change shows up in a later poll."""

    async def release(self, job_id: str) -> None:
        """Let a job submitted with `hold` run."""

    async def describe(self, job_id: str) -> JobInfo | None:
        """Name, state and output file of any job the scheduler still knows; None when it does not."""

    async def find_marked(self, markers: list[str]) -> dict[str, str]:
        """The user's jobs (queued, or ended recently) whose comment is one of ``markers``:
        marker -> job id. Raises SchedulerError (or TransportError) when it cannot tell."""


class SchedulerError(Exception):
    """The scheduler refused or failed (not a transport problem)."""
