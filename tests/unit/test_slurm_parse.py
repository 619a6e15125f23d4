"""Slurm argv builders, parsers and state normalisation, on outputs captured from Slurm 22.05."""

from __future__ import annotations

import shlex
import time
from collections.abc import Mapping, Sequence

import pytest

from console.scheduler import JobState, JobStatus, SchedulerError, Submission
from console.slurm import (
    SACCT_FIELDS,
    SQUEUE_FORMAT,
    TIME_ENV,
    SlurmScheduler,
    elapsed_seconds,
    merge,
    normalize_state,
    parse_sacct,
    parse_sbatch,
    parse_scontrol,
    parse_scontrol_fields,
    parse_squeue,
    release_argv,
    sacct_argv,
    sbatch_argv,
    scancel_argv,
    scontrol_argv,
    slurm_time,
    squeue_argv,
)
from console.transport.base import CommandResult, ConnectionState, ConnectionStatus, TransportError, command_line

# Captured from the local test cluster (squeue --noheader --states=all --format='%i|%T|%M|%N|%r').
SQUEUE_OUT = """\
19990252|CANCELLED|0:00||BeginTime
19990253|CANCELLED|0:04|node1|None
19990250|COMPLETED|0:00|node1|None
19990251|FAILED|0:00|node1|NonZeroExitCode
19990261|FAILED|0:00|node[1-2]|NonZeroExitCode
19990262|PENDING|0:00||BeginTime
19990263|RUNNING|1:02:03|node[3-4]|None
"""

# sacct -X -P --noheader -o JobID,State,ExitCode,DerivedExitCode,Elapsed,NodeList,Reason
SACCT_OUT = """\
19990250|COMPLETED|0:0|0:0|00:00:00|node1|None
19990251|FAILED|3:0|0:0|00:00:00|node1|None
19990252|CANCELLED by 1001|0:0|0:0|00:00:00|None assigned|BeginTime
19990253|CANCELLED by 1001|0:0|0:0|00:00:04|node1|None
19990261|FAILED|3:0|0:0|00:00:00|node1|None
19990264|TIMEOUT|0:0|0:0|00:01:30|node3|None
19990265|COMPLETED|0:0|5:0|00:00:01|node[1-2]|None
19990253.batch|CANCELLED|0:15||00:00:04|node1|
"""

SCONTROL_CANCELLED = (
    "JobId=19990253 JobName=wrap UserId=hpcuser(1001) GroupId=hpcuser(1001) MCS_label=N/A Priority=4294901756 "
    "Nice=0 Account=(null) QOS=normal JobState=CANCELLED Reason=None Dependency=(null) Requeue=1 Restarts=0 "
    "BatchFlag=1 Reboot=0 ExitCode=0:15 RunTime=00:00:04 TimeLimit=UNLIMITED TimeMin=N/A "
    "SubmitTime=2026-11-30T00:35:29 EligibleTime=2026-11-30T00:35:29 StartTime=2026-11-30T00:35:30 "
    "EndTime=2026-11-30T00:35:34 Partition=debug AllocNode:Sid=localhost:1334 ReqNodeList=(null) "
    "NodeList=node1 BatchHost=node1 NumNodes=1 NumCPUs=1 TRES=cpu=1,node=1,billing=1 "
    "WorkDir=/var/lib/srt-console-cluster/home/hpcuser "
    "StdOut=/var/lib/srt-console-cluster/home/hpcuser/slurm-19990253.out Power= \n"
)
SCONTROL_FAILED_SPACES = (
    "JobId=19990261 JobName=smoke x UserId=hpcuser(1001) GroupId=hpcuser(1001) JobState=FAILED "
    "Reason=NonZeroExitCode Dependency=(null) ExitCode=3:0 RunTime=00:00:00 NodeList=node[1-2] BatchHost=node1 "
    "Command=/home/u/dir with space/j.sh WorkDir=/home/u/dir with space Power= \n"
)
SCONTROL_PENDING = (
    "JobId=19990252 JobName=wrap JobState=PENDING Reason=BeginTime Dependency=(null) ExitCode=0:0 "
    "RunTime=00:00:00 NodeList=(null) NumNodes=1 Power= \n"
)

EVERY_STATE = {
    "PENDING": JobState.PENDING,
    "RUNNING": JobState.RUNNING,
    "COMPLETING": JobState.COMPLETING,
    "COMPLETED": JobState.COMPLETED,
    "FAILED": JobState.FAILED,
    "CANCELLED": JobState.CANCELLED,
    "TIMEOUT": JobState.TIMEOUT,
    "NODE_FAIL": JobState.NODE_FAIL,
    "OUT_OF_MEMORY": JobState.OUT_OF_MEMORY,
    "PREEMPTED": JobState.PREEMPTED,
    "BOOT_FAIL": JobState.BOOT_FAIL,
    "DEADLINE": JobState.DEADLINE,
    "SUSPENDED": JobState.SUSPENDED,
    "CONFIGURING": JobState.RUNNING,
    "REQUEUED": JobState.PENDING,
    "REQUEUE_HOLD": JobState.PENDING,
    "REQUEUE_FED": JobState.PENDING,
    "RESV_DEL_HOLD": JobState.PENDING,
    "RESIZING": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING,
    "STAGE_OUT": JobState.COMPLETING,
    "STOPPED": JobState.SUSPENDED,
    "SPECIAL_EXIT": JobState.FAILED,
    "REVOKED": JobState.CANCELLED,
    # squeue's compact forms (%t)
    "PD": JobState.PENDING,
    "R": JobState.RUNNING,
    "CG": JobState.COMPLETING,
    "CD": JobState.COMPLETED,
    "F": JobState.FAILED,
    "CA": JobState.CANCELLED,
    "TO": JobState.TIMEOUT,
    "NF": JobState.NODE_FAIL,
    "OOM": JobState.OUT_OF_MEMORY,
    "PR": JobState.PREEMPTED,
    "BF": JobState.BOOT_FAIL,
    "DL": JobState.DEADLINE,
}

NASTY = '/work/dir with space/it\'s "q"; $(touch CANARY) `id` & | > x'


# -- states -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "expected"), sorted(EVERY_STATE.items()))
def test_every_slurm_state_is_normalised(raw: str, expected: JobState) -> None:
    assert normalize_state(raw) == (expected, None)


def test_cancelled_by_uid_gives_the_reason() -> None:
    assert normalize_state("CANCELLED by 1001") == (JobState.CANCELLED, "by 1001")
    assert normalize_state("CANCELLED by 0") == (JobState.CANCELLED, "by 0")


def test_unknown_words_are_unknown_not_errors() -> None:
    assert normalize_state("WIBBLE") == (JobState.UNKNOWN, None)
    assert normalize_state("") == (JobState.UNKNOWN, None)


def test_live_and_finished_states() -> None:
    live = {JobState.PENDING, JobState.RUNNING, JobState.COMPLETING, JobState.SUSPENDED}
    for state in JobState:
        assert state.finished is (state not in live), state


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0:00", 0),
        ("0:04", 4),
        ("00:00:04", 4),
        ("1:02:03", 3723),
        ("2-01:00:00", 2 * 86400 + 3600),
        ("INVALID", None),
        ("", None),
        (None, None),
    ],
)
def test_elapsed_seconds(text: str | None, seconds: int | None) -> None:
    assert elapsed_seconds(text) == seconds


# -- parsers ------------------------------------------------------------------------------------


def test_parse_sbatch_plain_and_with_cluster() -> None:
    assert parse_sbatch("19990250\n") == "19990250"
    assert parse_sbatch("19990250;local\n") == "19990250"
    assert parse_sbatch("sbatch: warning: something\n42\n") == "42"
    with pytest.raises(SchedulerError):
        parse_sbatch("")
    with pytest.raises(SchedulerError):
        parse_sbatch("Submitted batch job 42\n")


def test_parse_squeue_rows() -> None:
    jobs = parse_squeue(SQUEUE_OUT)
    assert set(jobs) == {"19990250", "19990251", "19990252", "19990253", "19990261", "19990262", "19990263"}
    assert jobs["19990262"] == JobStatus(
        "19990262", JobState.PENDING, reason="BeginTime", elapsed="0:00", raw_state="PENDING", source="squeue"
    )
    running = jobs["19990263"]
    assert (running.state, running.reason, running.nodelist, running.elapsed) == (
        JobState.RUNNING,
        None,
        "node[3-4]",
        "1:02:03",
    )
    assert jobs["19990251"].reason == "NonZeroExitCode"
    assert jobs["19990251"].exit_code is None  # squeue has no exit codes
    assert jobs["19990261"].nodelist == "node[1-2]"
    assert jobs["19990253"].state is JobState.CANCELLED


def test_parse_squeue_skips_noise_and_keeps_delimiters_in_the_reason() -> None:
    out = "slurm_load_jobs error: whatever\n7|PENDING|0:00||launch failed|requeued held\n\n"
    jobs = parse_squeue(out)
    assert list(jobs) == ["7"]
    assert jobs["7"].reason == "launch failed|requeued held"


def test_parse_sacct_rows() -> None:
    jobs = parse_sacct(SACCT_OUT)
    assert "19990253.batch" not in jobs
    assert jobs["19990250"].state is JobState.COMPLETED
    assert (jobs["19990250"].exit_code, jobs["19990250"].source) == ("0:0", "sacct")
    failed = jobs["19990251"]
    assert (failed.state, failed.exit_code, failed.derived_exit_code) == (JobState.FAILED, "3:0", "0:0")
    cancelled = jobs["19990253"]
    assert (cancelled.state, cancelled.reason, cancelled.raw_state) == (
        JobState.CANCELLED,
        "by 1001",
        "CANCELLED by 1001",
    )
    pending_cancelled = jobs["19990252"]
    assert (pending_cancelled.reason, pending_cancelled.nodelist) == ("by 1001", None)
    assert jobs["19990264"].state is JobState.TIMEOUT
    assert jobs["19990264"].elapsed == "00:01:30"
    assert jobs["19990265"].derived_exit_code == "5:0"


def test_parse_scontrol_fields_with_spaces_in_values() -> None:
    fields = parse_scontrol_fields(SCONTROL_FAILED_SPACES.strip())
    assert fields["JobName"] == "smoke x"
    assert fields["Command"] == "/home/u/dir with space/j.sh"
    assert fields["WorkDir"] == "/home/u/dir with space"
    assert fields["Power"] == ""


def test_parse_scontrol_records() -> None:
    cancelled = parse_scontrol(SCONTROL_CANCELLED, "19990253")
    assert cancelled == JobStatus(
        "19990253",
        JobState.CANCELLED,
        reason=None,
        exit_code="0:15",
        elapsed="00:00:04",
        nodelist="node1",
        raw_state="CANCELLED",
        source="scontrol",
        submit_time=slurm_time("2026-11-30T00:35:29"),
        start_time=slurm_time("2026-11-30T00:35:30"),
        end_time=slurm_time("2026-11-30T00:35:34"),
    )
    failed = parse_scontrol(SCONTROL_FAILED_SPACES, "19990261")
    assert failed is not None
    assert (failed.state, failed.reason, failed.exit_code, failed.nodelist) == (
        JobState.FAILED,
        "NonZeroExitCode",
        "3:0",
        "node[1-2]",
    )
    pending = parse_scontrol(SCONTROL_PENDING, "19990252")
    assert pending is not None
    assert (pending.state, pending.reason, pending.nodelist) == (JobState.PENDING, "BeginTime", None)
    assert parse_scontrol("", "1") is None


def test_merge_prefers_accounting_once_it_agrees_the_job_ended() -> None:
    queued = parse_squeue(SQUEUE_OUT)["19990261"]
    accounted = parse_sacct(SACCT_OUT)["19990261"]
    merged = merge(queued, accounted)
    assert merged is not None
    assert (merged.state, merged.exit_code, merged.source) == (JobState.FAILED, "3:0", "sacct")
    # sacct briefly lists only the batch host; squeue's node list is complete.
    assert merged.nodelist == "node[1-2]"
    assert merged.reason == "NonZeroExitCode"

    lagging = JobStatus("5", JobState.RUNNING, source="sacct", raw_state="RUNNING")
    done = JobStatus("5", JobState.COMPLETED, source="squeue", raw_state="COMPLETED")
    assert merge(done, lagging) is done
    assert merge(None, lagging) is lagging
    assert merge(done, None) is done
    assert merge(None, None) is None


# -- argv ---------------------------------------------------------------------------------------


def test_bad_job_ids_are_rejected_everywhere() -> None:
    for bad in ["", "12;rm -rf /", "$(id)", "1 2", "-1", "abc", "1_", "12.batch", "1" * 13]:
        for build in (squeue_argv, sacct_argv, scancel_argv):
            with pytest.raises(ValueError):
                build([bad])
        with pytest.raises(ValueError):
            scontrol_argv(bad)
    assert scancel_argv(["12", "12_3", "12"]) == ["scancel", "12", "12_3"]


def test_query_argv() -> None:
    assert squeue_argv(["3", "1", "3"]) == [
        "squeue",
        "--noheader",
        "--states=all",
        "--jobs=3,1",
        "--format=%i|%T|%M|%N|%V|%S|%e|%r",
    ]
    assert sacct_argv(["1", "2"]) == ["sacct", "-X", "-P", "--noheader", "-j", "1,2", "-o", ",".join(SACCT_FIELDS)]
    assert scontrol_argv("7") == ["scontrol", "show", "job", "-o", "7"]


def test_sbatch_argv_keeps_every_value_one_argument() -> None:
    submission = Submission(
        script=f"{NASTY}/job.sh",
        job_name="name; $(touch CANARY)",
        output=f"{NASTY}/slurm-%j.out",
        workdir=NASTY,
        nodes=2,
        partition="debug",
        account="bench",
        time_limit="0:10:00",
        env={"A": "1,2"},
    )
    argv = sbatch_argv(submission, ["--begin=now+1hour"])
    assert argv == [
        "sbatch",
        "--parsable",
        "--job-name=name; $(touch CANARY)",
        f"--output={NASTY}/slurm-%j.out",
        f"--chdir={NASTY}",
        "--nodes=2",
        "--partition=debug",
        "--account=bench",
        "--time=0:10:00",
        "--export=ALL",
        "--begin=now+1hour",
        f"{NASTY}/job.sh",
    ]
    line = command_line(argv, cwd=NASTY, env=submission.env)
    # A POSIX shell splits the line back into exactly these words.
    words = shlex.split(line)
    assert words[:4] == ["cd", "--", NASTY, "&&"]
    assert words[4:6] == ["env", "A=1,2"]
    assert words[6:] == argv


def test_sbatch_argv_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        sbatch_argv(Submission(script="-x.sh", job_name="a"))
    with pytest.raises(ValueError):
        sbatch_argv(Submission(script="a.sh", job_name=" "))
    with pytest.raises(ValueError):
        sbatch_argv(Submission(script="a.sh", job_name="a", nodes=0))
    assert sbatch_argv(Submission(script="a.sh", job_name="a")) == [
        "sbatch",
        "--parsable",
        "--job-name=a",
        "--export=ALL",
        "a.sh",
    ]


def test_held_submission_and_release_argv() -> None:
    argv = sbatch_argv(Submission(script="a.sh", job_name="a", hold=True))
    assert argv == ["sbatch", "--parsable", "--job-name=a", "--hold", "--export=ALL", "a.sh"]
    assert release_argv("42") == ["scontrol", "release", "42"]
    with pytest.raises(ValueError):
        release_argv("42 43")


def test_command_line_rejects_bad_env_names_and_strings() -> None:
    with pytest.raises(ValueError):
        command_line(["true"], env={"A B": "1"})
    with pytest.raises(ValueError):
        command_line(["true"], env={"X;id": "1"})
    with pytest.raises(TypeError):
        command_line("echo hi")  # a shell string is never accepted
    with pytest.raises(ValueError):
        command_line([])


# -- the scheduler on a scripted transport ------------------------------------------------------


class ScriptedTransport:
    """Answers commands from a table (keyed by argv[0]) and records them."""

    name = "scripted"
    status = ConnectionStatus(ConnectionState.CONNECTED)

    def __init__(self, answers: dict[str, list[tuple[int, str, str]] | Exception]) -> None:
        self.answers = answers
        self.ran: list[tuple[tuple[str, ...], str | None, dict[str, str] | None]] = []

    async def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 30.0,
        input: bytes | None = None,  # noqa: A002
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = False,
    ) -> CommandResult:
        self.ran.append((tuple(argv), cwd, dict(env) if env else None))
        answer = self.answers[argv[0]]
        if isinstance(answer, Exception):
            raise answer
        code, out, err = answer.pop(0) if len(answer) > 1 else answer[0]
        return CommandResult(tuple(argv), code, out, err)


def scheduler(answers: dict[str, list[tuple[int, str, str]] | Exception]) -> tuple[SlurmScheduler, ScriptedTransport]:
    transport = ScriptedTransport(answers)
    return SlurmScheduler(transport), transport  # type: ignore[arg-type]


async def test_submit_passes_env_and_cwd_and_returns_the_id() -> None:
    sched, transport = scheduler({"sbatch": [(0, "42;local\n", "")]})
    job_id = await sched.submit(Submission(script="j.sh", job_name="j", workdir="/w d", env={"K": "a,b"}))
    assert job_id == "42"
    argv, cwd, env = transport.ran[0]
    assert (cwd, env) == ("/w d", {"K": "a,b"})
    assert argv[-1] == "j.sh"
    assert sched.calls["sbatch"] == 1


async def test_submit_error_carries_sbatch_words() -> None:
    err = "sbatch: error: Batch job submission failed: Invalid partition name specified\n"
    sched, _ = scheduler({"sbatch": [(1, "", err)]})
    with pytest.raises(SchedulerError, match="Invalid partition name specified"):
        await sched.submit(Submission(script="j.sh", job_name="j", partition="nosuch"))


async def test_poll_uses_one_squeue_then_one_sacct() -> None:
    sched, transport = scheduler({"squeue": [(0, SQUEUE_OUT, "")], "sacct": [(0, SACCT_OUT, "")]})
    ids = ["19990250", "19990251", "19990253", "19990262", "19990263", "19990264", "1"]
    statuses = await sched.poll(ids)
    assert list(statuses) == ids
    assert sched.calls == {"squeue": 1, "sacct": 1}
    sacct_ids = transport.ran[1][0][5]
    # Live jobs are not asked of sacct; finished and missing ones are.
    assert sacct_ids.split(",") == ["19990250", "19990251", "19990253", "19990264", "1"]
    assert statuses["19990262"].state is JobState.PENDING
    assert statuses["19990262"].reason == "BeginTime"
    assert statuses["19990263"].state is JobState.RUNNING
    assert statuses["19990251"].exit_code == "3:0"
    assert statuses["19990253"].reason == "by 1001"
    assert statuses["19990264"].state is JobState.TIMEOUT  # gone from squeue, known to sacct
    assert statuses["1"].state is JobState.UNKNOWN


async def test_poll_single_unknown_id() -> None:
    err = "slurm_load_jobs error: Invalid job id specified\n"
    sched, _ = scheduler({"squeue": [(1, "", err)], "sacct": [(0, "", "")]})
    assert (await sched.poll(["999"]))["999"].state is JobState.UNKNOWN


async def test_poll_falls_back_to_one_squeue_per_id_when_a_list_is_rejected() -> None:
    err = "slurm_load_jobs error: Invalid job id specified\n"
    answers: dict[str, list[tuple[int, str, str]] | Exception] = {
        "squeue": [(1, "", err), (0, "5|RUNNING|0:01|node1|None\n", ""), (1, "", err)],
        "sacct": [(0, "", "")],
    }
    sched, _ = scheduler(answers)
    statuses = await sched.poll(["5", "6"])
    assert statuses["5"].state is JobState.RUNNING
    assert statuses["6"].state is JobState.UNKNOWN
    assert sched.calls["squeue"] == 3


async def test_poll_without_accounting_asks_scontrol_per_finished_job_once_disabled() -> None:
    squeue_out = "19990253|CANCELLED|0:04|node1|None\n19990263|RUNNING|0:01|node1|None\n"
    sched, transport = scheduler(
        {
            "squeue": [(0, squeue_out, "")],
            "sacct": [(1, "", "Slurm accounting storage is disabled\n")],
            "scontrol": [(0, SCONTROL_CANCELLED, "")],
        }
    )
    statuses = await sched.poll(["19990253", "19990263", "404"])
    assert statuses["19990253"].source == "scontrol"
    assert statuses["19990253"].exit_code == "0:15"
    assert statuses["19990263"].state is JobState.RUNNING
    assert statuses["404"].state is JobState.UNKNOWN
    assert sched.accounting is False
    # Only the finished job squeue still knows is worth a scontrol call.
    assert [argv[-1] for argv, _, _ in transport.ran if argv[0] == "scontrol"] == ["19990253"]
    await sched.poll(["19990253"])
    assert sched.calls["sacct"] == 1  # not asked again once it said accounting is off


async def test_poll_asks_scontrol_for_the_exit_code_while_accounting_lags() -> None:
    # slurmdbd records an end some seconds after squeue shows it: sacct still says RUNNING.
    squeue_out = "19990253|CANCELLED|0:04|node1|None\n"
    lagging = "19990253|RUNNING|0:0|0:0|00:00:04|node1|None\n"
    sched, _ = scheduler(
        {"squeue": [(0, squeue_out, "")], "sacct": [(0, lagging, "")], "scontrol": [(0, SCONTROL_CANCELLED, "")]}
    )
    status = (await sched.poll(["19990253"]))["19990253"]
    assert (status.state, status.exit_code, status.source) == (JobState.CANCELLED, "0:15", "scontrol")
    assert sched.accounting is True  # a lag is no reason to stop asking accounting
    # Once accounting has the end, scontrol is not asked.
    sched, _ = scheduler({"squeue": [(0, squeue_out, "")], "sacct": [(0, SACCT_OUT, "")]})
    assert (await sched.poll(["19990253"]))["19990253"].source == "sacct"
    assert "scontrol" not in sched.calls


async def test_transport_errors_propagate_and_are_never_job_states() -> None:
    sched, _ = scheduler({"squeue": TransportError("connection lost")})
    with pytest.raises(TransportError):
        await sched.poll(["1"])


async def test_squeue_failure_is_a_scheduler_error() -> None:
    err = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"
    sched, _ = scheduler({"squeue": [(1, "", err)]})
    with pytest.raises(SchedulerError, match="Unable to contact"):
        await sched.poll(["1"])


async def test_cancel_ignores_finished_jobs_but_not_other_errors() -> None:
    done = "scancel: error: Kill job error on job id 5: Job/step already completing or completed\n"
    sched, transport = scheduler({"scancel": [(1, "", done)]})
    await sched.cancel(["5", "6"])
    assert transport.ran[0][0] == ("scancel", "5", "6")
    sched, _ = scheduler({"scancel": [(1, "", "scancel: error: Access/permission denied\n")]})
    with pytest.raises(SchedulerError, match="permission denied"):
        await sched.cancel(["5"])
    sched, transport = scheduler({})
    await sched.cancel([])
    assert transport.ran == []
    with pytest.raises(ValueError):
        await sched.cancel(["5; reboot"])


async def test_release_failure_is_a_scheduler_error() -> None:
    sched, transport = scheduler({"scontrol": [(0, "", "")]})
    await sched.release("42")
    assert transport.ran[0][0] == ("scontrol", "release", "42")
    err = "Invalid job id specified for job 1\nslurm_suspend error: Invalid job id specified\n"
    sched, _ = scheduler({"scontrol": [(1, "", err)]})
    with pytest.raises(SchedulerError, match="Invalid job id"):
        await sched.release("1")


# --- the scheduler's own times -------------------------------------------------------


def test_squeue_and_sacct_rows_carry_the_schedulers_times() -> None:
    queued = parse_squeue(
        "7|RUNNING|0:12|node1|1764547200|1764547230|1764550830|None\n"
        "8|PENDING|0:00||1764547201|1764547999|1764551599|Resources\n"
    )
    running, pending = queued["7"], queued["8"]
    assert (running.submit_time, running.start_time) == (1764547200.0, 1764547230.0)
    assert running.end_time is None  # a live job's end is its time limit, not a fact
    assert pending.start_time is None and pending.submit_time == 1764547201.0  # a forecast is not a start
    assert pending.reason == "Resources"
    accounted = parse_sacct("7|COMPLETED|0:0|0:0|00:01:40|node1|1764547200|1764547230|1764547330|None\n")["7"]
    assert (accounted.start_time, accounted.end_time) == (1764547230.0, 1764547330.0)
    merged = merge(running, accounted)
    assert merged is not None and merged.end_time == 1764547330.0 and merged.submit_time == 1764547200.0


def test_slurm_time_reads_epoch_and_iso_and_refuses_the_rest() -> None:
    assert slurm_time("1764547200") == 1764547200.0
    assert slurm_time("2026-11-30T00:35:29") == time.mktime((2026, 11, 30, 0, 35, 29, 0, 0, -1))
    for text in ("Unknown", "N/A", "None", "", "0", "2026-11-30"):
        assert slurm_time(text) is None


def test_squeue_is_asked_for_epoch_times() -> None:
    assert "%V|%S|%e" in SQUEUE_FORMAT and TIME_ENV == {"SLURM_TIME_FORMAT": "%s"}
    assert SACCT_FIELDS[6:9] == ("Submit", "Start", "End")
