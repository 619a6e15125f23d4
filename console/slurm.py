"""Slurm over a transport: argv builders, output parsers and the Scheduler that uses them.

Polling costs one ``squeue`` per tick for every live job of the transport. Jobs that left the queue
(or finished in it) are then read with one ``sacct -X`` call; ``scontrol show job`` is asked per
job squeue saw finish when accounting cannot tell its end (disabled, failing, or lagging). A TransportError is
never turned into a job state: the caller shows "disconnected" and asks again later.
"""

from __future__ import annotations

import collections
import logging
import re
from collections.abc import Iterable, Mapping, Sequence

from .scheduler import JOB_ID, JobInfo, JobState, JobStatus, SchedulerError, Submission, valid_job_id, valid_marker
from .transport.base import CommandResult, Transport

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 30.0

# squeue's reason is the only free-text field, so it goes last and may contain the delimiter.
# %V %S %e: the scheduler's submit, start and end times (epoch seconds under TIME_ENV).
SQUEUE_FORMAT = "%i|%T|%M|%N|%V|%S|%e|%r"
SACCT_FIELDS = (
    "JobID", "State", "ExitCode", "DerivedExitCode", "Elapsed", "NodeList", "Submit", "Start", "End", "Reason",
)  # fmt: skip
# Slurm prints times in the cluster's local time unless told a format: epoch seconds (strftime
# %s) need no time zone. Older answers (ISO local time) are still read.
TIME_ENV = {"SLURM_TIME_FORMAT": "%s"}
_ISO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$")

INVALID_JOB_ID = "Invalid job id specified"
ACCOUNTING_DISABLED = "accounting storage is disabled"

# Slurm's state words (long and squeue's compact forms) and what the console calls them.
_STATES: dict[str, JobState] = {
    "PENDING": JobState.PENDING,
    "PD": JobState.PENDING,
    "REQUEUED": JobState.PENDING,  # back in the queue, will run again
    "RQ": JobState.PENDING,
    "REQUEUE_HOLD": JobState.PENDING,
    "RH": JobState.PENDING,
    "REQUEUE_FED": JobState.PENDING,
    "RF": JobState.PENDING,
    "RESV_DEL_HOLD": JobState.PENDING,
    "RD": JobState.PENDING,
    "RUNNING": JobState.RUNNING,
    "R": JobState.RUNNING,
    "CONFIGURING": JobState.RUNNING,  # nodes allocated, booting
    "CF": JobState.RUNNING,
    "RESIZING": JobState.RUNNING,
    "RS": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING,
    "SI": JobState.RUNNING,
    "COMPLETING": JobState.COMPLETING,
    "CG": JobState.COMPLETING,
    "STAGE_OUT": JobState.COMPLETING,
    "SO": JobState.COMPLETING,
    "SUSPENDED": JobState.SUSPENDED,
    "S": JobState.SUSPENDED,
    "STOPPED": JobState.SUSPENDED,
    "ST": JobState.SUSPENDED,
    "COMPLETED": JobState.COMPLETED,
    "CD": JobState.COMPLETED,
    "FAILED": JobState.FAILED,
    "F": JobState.FAILED,
    "SPECIAL_EXIT": JobState.FAILED,
    "SE": JobState.FAILED,
    "CANCELLED": JobState.CANCELLED,
    "CA": JobState.CANCELLED,
    "REVOKED": JobState.CANCELLED,  # a federation sibling ran it instead
    "RV": JobState.CANCELLED,
    "TIMEOUT": JobState.TIMEOUT,
    "TO": JobState.TIMEOUT,
    "NODE_FAIL": JobState.NODE_FAIL,
    "NF": JobState.NODE_FAIL,
    "OUT_OF_MEMORY": JobState.OUT_OF_MEMORY,
    "OOM": JobState.OUT_OF_MEMORY,
    "PREEMPTED": JobState.PREEMPTED,
    "PR": JobState.PREEMPTED,
    "BOOT_FAIL": JobState.BOOT_FAIL,
    "BF": JobState.BOOT_FAIL,
    "DEADLINE": JobState.DEADLINE,
    "DL": JobState.DEADLINE,
}

_ELAPSED = re.compile(r"^(?:(?:(\d+)-)?(\d+):)?(\d+):(\d+)(?:\.\d+)?$")
_SCONTROL_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_/:.]*)=")


# -- states -----------------------------------------------------------------------------------


def normalize_state(raw: str) -> tuple[JobState, str | None]:
    """(state, reason it implies) from Slurm's word: ``CANCELLED by 1001`` → (CANCELLED, "by 1001").

    Unknown words give UNKNOWN (the raw word is kept by the caller), never an exception.
    """
    text = raw.strip()
    word, _, rest = text.partition(" ")
    word = word.rstrip("+").upper()  # sacct marks truncated/extended states with "+"
    state = _STATES.get(word, JobState.UNKNOWN)
    rest = rest.strip()
    implied = rest if state is JobState.CANCELLED and rest.startswith("by ") else None
    return state, implied


def _reason(value: str | None) -> str | None:
    value = (value or "").strip()
    return None if value in ("", "None", "(null)") else value


def _nodelist(value: str | None) -> str | None:
    value = (value or "").strip()
    return None if value in ("", "None assigned", "(null)", "None") else value


def slurm_time(value: str | None) -> float | None:
    """Epoch seconds from Slurm's time field (``%s`` digits or ISO local time); None for
    ``Unknown``, ``N/A``, ``None`` and anything else."""
    text = (value or "").strip()
    if text.isdigit():
        seconds = float(text)
        return seconds if seconds > 0 else None
    if _ISO_TIME.match(text):
        import time

        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    return None


def _exit(value: str | None) -> str | None:
    value = (value or "").strip()
    return value or None


def _status(
    job_id: str,
    raw_state: str,
    *,
    reason: str | None,
    exit_code: str | None = None,
    derived_exit_code: str | None = None,
    elapsed: str | None = None,
    nodelist: str | None = None,
    source: str,
    times: tuple[str | None, str | None, str | None] = (None, None, None),
) -> JobStatus:
    state, implied = normalize_state(raw_state)
    submit, start, end = (slurm_time(t) for t in times)
    # A pending job's start is Slurm's forecast, a live job's end its time limit: not facts yet.
    if state in (JobState.PENDING, JobState.UNKNOWN):
        start = None
    if not state.finished:
        end = None
    return JobStatus(
        job_id=job_id,
        state=state,
        reason=implied or _reason(reason),
        exit_code=_exit(exit_code),
        derived_exit_code=_exit(derived_exit_code),
        elapsed=(elapsed or "").strip() or None,
        nodelist=_nodelist(nodelist),
        raw_state=raw_state.strip(),
        source=source,
        submit_time=submit,
        start_time=start,
        end_time=end,
    )


def elapsed_seconds(text: str | None) -> int | None:
    """Seconds from Slurm's ``[D-][HH:]MM:SS``; None for anything else (``INVALID``, empty)."""
    match = _ELAPSED.match((text or "").strip())
    if not match:
        return None
    days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


# -- argv builders ----------------------------------------------------------------------------


def _job_ids(job_ids: Iterable[str]) -> list[str]:
    """Validated, de-duplicated, in order."""
    return list(dict.fromkeys(valid_job_id(job_id) for job_id in job_ids))


def sbatch_argv(submission: Submission, extra_args: Sequence[str] = ()) -> list[str]:
    """``sbatch --parsable ...``; every value is its own argv element (``--opt=value``)."""
    if not submission.script or submission.script.startswith("-"):
        raise ValueError(f"batch script path must not be empty or start with '-': {submission.script!r}")
    if not submission.job_name.strip():
        raise ValueError("empty job name")
    argv = ["sbatch", "--parsable", f"--job-name={submission.job_name}"]
    if submission.output is not None:
        argv.append(f"--output={submission.output}")
    if submission.workdir is not None:
        argv.append(f"--chdir={submission.workdir}")
    if submission.nodes is not None:
        if submission.nodes < 1:
            raise ValueError(f"nodes must be at least 1, got {submission.nodes}")
        argv.append(f"--nodes={submission.nodes}")
    if submission.partition:
        argv.append(f"--partition={submission.partition}")
    if submission.account:
        argv.append(f"--account={submission.account}")
    if submission.time_limit:
        argv.append(f"--time={submission.time_limit}")
    if submission.hold:
        argv.append("--hold")
    if submission.comment:
        argv.append(f"--comment={valid_marker(submission.comment)}")
    # The job gets sbatch's environment, which the transport extends with submission.env
    # (``env K=V sbatch ...``): values may then contain commas, unlike in --export=K=V.
    argv.append("--export=ALL")
    argv.extend(extra_args)
    argv.append(submission.script)
    return argv


# The user's jobs with their comments: queued ones from squeue, recent ones from accounting.
MARKED_SQUEUE = ["squeue", "--me", "--noheader", "--states=all", "--format=%i|%k"]
MARKED_SACCT = ["sacct", "-X", "-P", "--noheader", "--starttime=now-7days", "-o", "JobIDRaw,Comment"]


def parse_marked(stdout: str, markers: Iterable[str]) -> dict[str, str]:
    """marker -> job id from ``id|comment`` lines; a marker is a word of the comment (a recipe
    may have a comment of its own). The first job seen for a marker wins."""
    wanted = set(markers)
    found: dict[str, str] = {}
    for line in stdout.splitlines():
        job_id, _, comment = line.strip().partition("|")
        if not JOB_ID.match(job_id.strip()):
            continue
        for word in comment.split():
            if word in wanted and word not in found:
                found[word] = job_id.strip()
    return found


def squeue_argv(job_ids: Sequence[str]) -> list[str]:
    ids = _job_ids(job_ids)
    if not ids:
        raise ValueError("no job ids")
    return ["squeue", "--noheader", "--states=all", f"--jobs={','.join(ids)}", f"--format={SQUEUE_FORMAT}"]


def sacct_argv(job_ids: Sequence[str]) -> list[str]:
    ids = _job_ids(job_ids)
    if not ids:
        raise ValueError("no job ids")
    return ["sacct", "-X", "-P", "--noheader", "-j", ",".join(ids), "-o", ",".join(SACCT_FIELDS)]


def scontrol_argv(job_id: str) -> list[str]:
    return ["scontrol", "show", "job", "-o", valid_job_id(job_id)]


def release_argv(job_id: str) -> list[str]:
    return ["scontrol", "release", valid_job_id(job_id)]


def scancel_argv(job_ids: Sequence[str]) -> list[str]:
    ids = _job_ids(job_ids)
    if not ids:
        raise ValueError("no job ids")
    return ["scancel", *ids]


# -- parsers ----------------------------------------------------------------------------------


def parse_sbatch(stdout: str) -> str:
    """The job id from ``sbatch --parsable``: ``id`` or ``id;cluster``."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise SchedulerError("sbatch printed no job id")
    job_id = lines[-1].split(";", 1)[0].strip()
    try:
        return valid_job_id(job_id)
    except ValueError:
        raise SchedulerError(f"sbatch printed no job id: {stdout.strip()[:500]!r}") from None


def parse_squeue(stdout: str) -> dict[str, JobStatus]:
    """Rows of ``squeue --format=SQUEUE_FORMAT``; lines that are not rows are skipped."""
    jobs: dict[str, JobStatus] = {}
    for line in stdout.splitlines():
        parts = line.strip().split("|", 7)
        times: tuple[str | None, str | None, str | None] = (None, None, None)
        if len(parts) == 8 and (parts[4].strip().isdigit() or _ISO_TIME.match(parts[4].strip())):
            job_id, state, elapsed, nodelist, submit, start, end, reason = parts
            times = (submit, start, end)
        else:  # the format without times (older consoles' records, tests' captures)
            parts = line.strip().split("|", 4)
            if len(parts) != 5:
                continue
            job_id, state, elapsed, nodelist, reason = parts
        if not _is_job_id(job_id):
            continue
        jobs[job_id] = _status(
            job_id, state, reason=reason, elapsed=elapsed, nodelist=nodelist, source="squeue", times=times
        )
    return jobs


def parse_sacct(stdout: str) -> dict[str, JobStatus]:
    """Rows of ``sacct -X -P -o SACCT_FIELDS``; step rows (``id.batch``) are skipped."""
    jobs: dict[str, JobStatus] = {}
    width = len(SACCT_FIELDS)
    for line in stdout.splitlines():
        parts = line.strip().split("|", width - 1)  # Reason (last) is free text
        times: tuple[str | None, str | None, str | None] = (None, None, None)
        if len(parts) == width:
            job_id, state, exit_code, derived, elapsed, nodelist, submit, start, end, reason = parts
            times = (submit, start, end)
        else:  # the fields without times
            parts = line.strip().split("|", 6)
            if len(parts) != 7:
                continue
            job_id, state, exit_code, derived, elapsed, nodelist, reason = parts
        if not _is_job_id(job_id):
            continue
        jobs[job_id] = _status(
            job_id,
            state,
            reason=reason,
            exit_code=exit_code,
            derived_exit_code=derived,
            elapsed=elapsed,
            nodelist=nodelist,
            source="sacct",
            times=times,
        )
    return jobs


def parse_scontrol_fields(line: str) -> dict[str, str]:
    """``Key=value`` pairs of one ``scontrol -o`` record; values may contain spaces."""
    matches = list(_SCONTROL_KEY.finditer(line))
    fields: dict[str, str] = {}
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        fields.setdefault(match.group(1), line[match.end() : end].strip())
    return fields


def parse_scontrol(stdout: str, job_id: str) -> JobStatus | None:
    """The job from ``scontrol show job -o ID`` (the first record; array elements by their own id)."""
    for line in stdout.splitlines():
        fields = parse_scontrol_fields(line.strip())
        if "JobState" not in fields:
            continue
        return _status(
            job_id,
            fields["JobState"],
            reason=fields.get("Reason"),
            exit_code=fields.get("ExitCode"),
            derived_exit_code=fields.get("DerivedExitCode"),
            elapsed=fields.get("RunTime"),
            nodelist=fields.get("NodeList"),
            source="scontrol",
            times=(fields.get("SubmitTime"), fields.get("StartTime"), fields.get("EndTime")),
        )
    return None


def parse_job_info(stdout: str, job_id: str) -> JobInfo | None:
    """Name, state, output file and work dir from ``scontrol show job -o ID``."""
    for line in stdout.splitlines():
        fields = parse_scontrol_fields(line.strip())
        if "JobState" not in fields:
            continue
        nodes = fields.get("NumNodes", "").split("-")[0]
        return JobInfo(
            job_id=job_id,
            name=fields.get("JobName", ""),
            state=normalize_state(fields["JobState"])[0],
            stdout=fields.get("StdOut") or None,
            workdir=fields.get("WorkDir") or None,
            nodes=int(nodes) if nodes.isdigit() else None,
        )
    return None


def _is_job_id(text: str) -> bool:
    try:
        valid_job_id(text)
    except ValueError:
        return False
    return True


def merge(queued: JobStatus | None, accounted: JobStatus | None) -> JobStatus | None:
    """One status from squeue's view and accounting's (sacct/scontrol) view of the same job.

    Accounting has the exit codes, so it wins once it also says the job ended. Until it does
    (slurmdbd can lag squeue), squeue's state stands. squeue's node list is complete at once,
    while sacct's may still name only the batch host right after the end.
    """
    if accounted is None:
        return queued
    if queued is None:
        return accounted
    if not accounted.state.finished and queued.state.finished:
        return queued
    return JobStatus(
        job_id=accounted.job_id,
        state=accounted.state,
        reason=accounted.reason or queued.reason,
        exit_code=accounted.exit_code,
        derived_exit_code=accounted.derived_exit_code,
        elapsed=accounted.elapsed or queued.elapsed,
        nodelist=queued.nodelist or accounted.nodelist,
        raw_state=accounted.raw_state,
        source=accounted.source,
        submit_time=accounted.submit_time or queued.submit_time,
        start_time=accounted.start_time or queued.start_time,
        end_time=accounted.end_time or queued.end_time,
    )


def _error_text(result: CommandResult) -> str:
    return (result.stderr.strip() or result.stdout.strip())[-2000:]


# -- the scheduler ----------------------------------------------------------------------------


class SlurmScheduler:
    """The Scheduler protocol on Slurm, through any Transport (SSH to a login node, or local)."""

    def __init__(self, transport: Transport, *, name: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.transport = transport
        self.name = name or transport.name
        self.timeout = timeout
        # Scheduler commands run, by command name: the console reports e.g. squeue calls per minute.
        self.calls: collections.Counter[str] = collections.Counter()
        self.accounting: bool | None = None  # None until sacct has answered once

    async def _run(
        self, argv: list[str], *, cwd: str | None = None, env: Mapping[str, str] | None = None
    ) -> CommandResult:
        self.calls[argv[0]] += 1
        return await self.transport.run(argv, timeout=self.timeout, cwd=cwd, env=env)

    async def submit(self, submission: Submission, *, extra_args: Sequence[str] = ()) -> str:
        """Submit the batch script; ``extra_args`` are further sbatch options (``--begin=...``)."""
        argv = sbatch_argv(submission, extra_args)
        result = await self._run(argv, cwd=submission.workdir, env=submission.env or None)
        if result.returncode != 0:
            raise SchedulerError(f"sbatch failed (exit {result.returncode}): {_error_text(result)}")
        return parse_sbatch(result.stdout)

    async def cancel(self, job_ids: list[str]) -> None:
        ids = _job_ids(job_ids)
        if not ids:
            return
        result = await self._run(scancel_argv(ids))
        if result.returncode == 0:
            return
        # Jobs that already ended (or were forgotten) need no cancel; anything else is an error.
        errors = [line for line in result.stderr.splitlines() if line.strip()]
        harmless = ("already completing or completed", INVALID_JOB_ID)
        if errors and all(any(h in line for h in harmless) for line in errors):
            return
        raise SchedulerError(f"scancel failed (exit {result.returncode}): {_error_text(result)}")

    async def release(self, job_id: str) -> None:
        """Let a job submitted with ``hold`` run (``scontrol release``)."""
        result = await self._run(release_argv(job_id))
        if result.returncode != 0:
            raise SchedulerError(f"scontrol release {job_id} failed (exit {result.returncode}): {_error_text(result)}")

    async def describe(self, job_id: str) -> JobInfo | None:
        result = await self._run(scontrol_argv(valid_job_id(job_id)))
        if result.returncode != 0:
            if INVALID_JOB_ID in result.stderr:
                return None
            raise SchedulerError(f"scontrol failed (exit {result.returncode}): {_error_text(result)}")
        return parse_job_info(result.stdout, job_id)

    async def find_marked(self, markers: list[str]) -> dict[str, str]:
        wanted = [valid_marker(m) for m in markers]
        if not wanted:
            return {}
        result = await self._run(list(MARKED_SQUEUE))
        if result.returncode != 0:
            raise SchedulerError(f"squeue failed (exit {result.returncode}): {_error_text(result)}")
        found = parse_marked(result.stdout, wanted)
        missing = [m for m in wanted if m not in found]
        if missing and self.accounting is not False:
            # A job that already left the queue is in accounting (when the site keeps comments).
            accounted = await self._run(list(MARKED_SACCT))
            if accounted.returncode == 0:
                found.update(parse_marked(accounted.stdout, missing))
        return found

    async def poll(self, job_ids: list[str]) -> dict[str, JobStatus]:
        ids = _job_ids(job_ids)
        if not ids:
            return {}
        queued = await self._squeue(ids)
        leaving = [job_id for job_id in ids if job_id not in queued or queued[job_id].state.finished]
        accounted = await self._accounting(leaving, queued) if leaving else {}
        statuses: dict[str, JobStatus] = {}
        for job_id in ids:
            status = merge(queued.get(job_id), accounted.get(job_id))
            statuses[job_id] = status or JobStatus(job_id, JobState.UNKNOWN, source="squeue")
        return statuses

    async def _squeue(self, ids: list[str]) -> dict[str, JobStatus]:
        result = await self._run(squeue_argv(ids), env=TIME_ENV)
        if result.returncode == 0:
            return parse_squeue(result.stdout)
        if INVALID_JOB_ID not in result.stderr:
            raise SchedulerError(f"squeue failed (exit {result.returncode}): {_error_text(result)}")
        # Slurm 22.05 rejects a single unknown id but skips unknown ones in a list. Versions that
        # reject the whole list are asked id by id, so one forgotten job cannot hide the others.
        if len(ids) == 1:
            return {}
        jobs: dict[str, JobStatus] = {}
        for job_id in ids:
            jobs.update(await self._squeue([job_id]))
        return jobs

    async def _accounting(self, ids: list[str], queued: dict[str, JobStatus]) -> dict[str, JobStatus]:
        jobs: dict[str, JobStatus] = {}
        if self.accounting is not False:
            result = await self._run(sacct_argv(ids), env=TIME_ENV)
            if result.returncode == 0:
                self.accounting = True
                jobs = parse_sacct(result.stdout)
            elif ACCOUNTING_DISABLED in result.stderr + result.stdout:
                self.accounting = False
            else:
                log.warning("%s: sacct failed (%s); asking scontrol", self.name, _error_text(result))
        # A job missing from squeue is known to accounting or to nobody. One squeue saw end is
        # still in slurmctld, which has its exit code: scontrol is asked when accounting is off,
        # failed, or lags (slurmdbd records the end some seconds after squeue shows it).
        for job_id in ids:
            if job_id not in queued or (job_id in jobs and jobs[job_id].state.finished):
                continue
            result = await self._run(scontrol_argv(job_id), env=TIME_ENV)
            if result.returncode != 0:
                if INVALID_JOB_ID in result.stderr:
                    continue
                raise SchedulerError(f"scontrol failed (exit {result.returncode}): {_error_text(result)}")
            status = parse_scontrol(result.stdout, job_id)
            if status is not None:
                jobs[job_id] = status
        return jobs
