"""A batch scheduler for a machine without Slurm: Slurm-like ids, states and exit codes.

Each job is a small JSON file in a state directory (``<id>.json``, written atomically), so a
restarted console sees the jobs an earlier one started. A job runs under a runner process
(``python -m console.demo.localrun``) started in its own session: it outlives the console,
runs the batch script as a process group of its own, enforces the time limit and cancel
requests (SIGTERM to the group, SIGKILL after a grace period), and records the final state.

After submission the runner is the only writer of ``<id>.json``; a cancel request is a
separate ``<id>.cancel`` file the runner acts on. The script is copied at submission, as
sbatch does, and runs with the submitter's environment, ``SLURM_JOB_ID``,
``SLURM_JOB_NUM_NODES``, ``SLURM_JOB_NAME`` and friends, but no ``SLURMD_NODENAME`` (there
is no ``srun`` here).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from console.scheduler import JobInfo, JobState, JobStatus, SchedulerError, Submission, valid_job_id

__all__ = [
    "DEFAULT_GRACE_SECONDS",
    "LocalScheduler",
    "exit_code_text",
    "format_elapsed",
    "parse_time_limit",
]

DEFAULT_GRACE_SECONDS = 5.0
"""Between SIGTERM and SIGKILL on cancel or time limit (Slurm's KillWait)."""

_RUNNER_START_TIMEOUT = 15.0
_STATE_VERSION = 1
_ORIGINAL_PYTHONPATH = "SRT_LOCALRUN_PYTHONPATH"
_LIVE = {JobState.PENDING.value, JobState.RUNNING.value, JobState.COMPLETING.value}


# --------------------------------------------------------------------------- formats


def parse_time_limit(value: str | int | None) -> float | None:
    """Seconds for a Slurm ``--time`` value, ``None`` for no limit.

    Accepts ``minutes``, ``minutes:seconds``, ``hours:minutes:seconds``, ``days-hours``,
    ``days-hours:minutes`` and ``days-hours:minutes:seconds``; ``UNLIMITED``/``infinite``.
    Unlike Slurm, seconds are honoured exactly (Slurm checks limits about every 30 s).
    """
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value * 60) if value > 0 else None
    text = str(value).strip()
    if text.lower() in ("", "unlimited", "infinite", "-1"):
        return None
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text)
    if m is None:
        raise ValueError(f"not a Slurm time limit: {text!r}")
    days_s, a_s, b_s, c_s = m.groups()
    a, b, c = int(a_s), int(b_s or 0), int(c_s or 0)
    if days_s is not None:
        seconds = int(days_s) * 86400 + a * 3600 + b * 60 + c
    elif c_s is not None:
        seconds = a * 3600 + b * 60 + c
    elif b_s is not None:
        seconds = a * 60 + b
    else:
        seconds = a * 60
    return float(seconds) if seconds > 0 else None


def format_elapsed(seconds: float) -> str:
    """Slurm's elapsed format: ``HH:MM:SS`` or ``D-HH:MM:SS``."""
    total = max(0, int(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{text}" if days else text


def exit_code_text(returncode: int) -> str:
    """A Popen return code as Slurm's ``code:signal``."""
    return f"0:{-returncode}" if returncode < 0 else f"{returncode}:0"


def _nodelist(nodes: int) -> str:
    return "node1" if nodes <= 1 else f"node[1-{nodes}]"


def _expand_output(pattern: str, job_id: str, job_name: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "%" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt == "%":
                out.append("%")
            elif nxt in "jJA":
                out.append(job_id)
            elif nxt == "x":
                out.append(job_name)
            elif nxt == "u":
                out.append(_user())
            elif nxt in "Nn":
                out.append("node1" if nxt == "N" else "0")
            else:
                out.append(ch + nxt)
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return str(os.getuid())


# --------------------------------------------------------------------------- state files


def job_path(state_dir: Path, job_id: str) -> Path:
    return state_dir / f"{job_id}.json"


def cancel_path(state_dir: Path, job_id: str) -> Path:
    return state_dir / f"{job_id}.cancel"


def script_copy_path(state_dir: Path, job_id: str) -> Path:
    return state_dir / f"{job_id}.script"


def runner_log_path(state_dir: Path, job_id: str) -> Path:
    return state_dir / f"{job_id}.runner.log"


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_job(state_dir: Path, job_id: str) -> dict[str, Any] | None:
    try:
        with open(job_path(state_dir, job_id), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@contextlib.contextmanager
def _locked(state_dir: Path) -> Iterator[None]:
    with open(state_dir / ".lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def process_start_ticks(pid: int) -> int | None:
    """The start time of a process (clock ticks since boot) from /proc, to tell pid reuse."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def process_alive(pid: int | None, start_ticks: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
        if stat.rsplit(")", 1)[-1].split()[0] == "Z":
            return False
    except (OSError, IndexError):
        return True
    if start_ticks is not None:
        ticks = process_start_ticks(pid)
        if ticks is not None and ticks != start_ticks:
            return False
    return True


# --------------------------------------------------------------------------- the scheduler


class LocalScheduler:
    """The :class:`console.scheduler.Scheduler` of the built-in ``local`` profile."""

    name = "local"

    def __init__(
        self,
        state_dir: str | os.PathLike[str],
        *,
        grace_seconds: float = DEFAULT_GRACE_SECONDS,
        python: str | None = None,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.grace_seconds = grace_seconds
        self.python = python or sys.executable
        self._children: dict[str, subprocess.Popen[bytes]] = {}

    # ------------------------------------------------------------- Scheduler protocol

    async def submit(self, submission: Submission) -> str:
        job_id, runner = self._launch(submission)
        deadline = time.monotonic() + _RUNNER_START_TIMEOUT
        while True:
            job = read_job(self.state_dir, job_id) or {}
            if job.get("runner_pid") or job.get("state") not in (None, JobState.PENDING.value):
                return job_id
            if runner.poll() is not None or time.monotonic() > deadline:
                log = runner_log_path(self.state_dir, job_id)
                detail = log.read_text(errors="replace").strip()[-2000:] if log.exists() else ""
                self._finish_lost(job_id, "local runner did not start")
                raise SchedulerError(
                    f"local job {job_id}: the runner did not start" + (f": {detail}" if detail else "")
                )
            await asyncio.sleep(0.02)

    async def poll(self, job_ids: list[str]) -> dict[str, JobStatus]:
        self._reap()
        return {job_id: self.status(job_id) for job_id in job_ids}

    async def cancel(self, job_ids: list[str]) -> None:
        for job_id in job_ids:
            self.request_cancel(job_id)

    async def release(self, job_id: str) -> None:
        # Local jobs are never held: the runner creates the output directory itself.
        valid_job_id(job_id)

    # ------------------------------------------------------------- synchronous helpers

    async def describe(self, job_id: str) -> JobInfo | None:
        job = read_job(self.state_dir, job_id)
        if job is None:
            return None
        return JobInfo(
            job_id=job_id,
            name=str(job.get("job_name") or ""),
            state=self.status(job_id).state,
            stdout=job.get("output"),
            workdir=job.get("workdir"),
            nodes=job.get("nodes"),
        )

    async def find_marked(self, markers: list[str]) -> dict[str, str]:
        wanted = set(markers)
        found: dict[str, str] = {}
        for job_id in self.job_ids():
            comment = (read_job(self.state_dir, job_id) or {}).get("comment")
            if isinstance(comment, str) and comment in wanted and comment not in found:
                found[comment] = job_id
        return found

    def status(self, job_id: str) -> JobStatus:
        """One job's state from its file; a live job whose runner vanished is NODE_FAIL."""
        valid_job_id(job_id)
        job = read_job(self.state_dir, job_id)
        if job is None:
            return JobStatus(job_id, JobState.UNKNOWN, reason="no such local job", source="local")
        state = str(job.get("state") or "UNKNOWN")
        if state in _LIVE and job.get("runner_pid") and not process_alive(job["runner_pid"], job.get("runner_start")):
            job = self._finish_lost(job_id, "local runner lost") or job
            state = str(job.get("state"))
        return self._to_status(job_id, job)

    def request_cancel(self, job_id: str) -> None:
        """Ask the job's runner to cancel it (SIGTERM to the script's group, SIGKILL after the grace)."""
        valid_job_id(job_id)
        job = read_job(self.state_dir, job_id)
        if job is None:
            raise SchedulerError(f"scancel: error: Kill job error on job id {job_id}: Invalid job id specified")
        if str(job.get("state")) not in _LIVE:
            return
        payload = {"time": time.time(), "uid": os.getuid()}
        write_json_atomic(cancel_path(self.state_dir, job_id), payload)

    def job_ids(self) -> list[str]:
        """Every job this state directory knows, oldest first."""
        ids = [p.stem for p in self.state_dir.glob("*.json") if p.stem.isdigit()]
        return sorted(ids, key=int)

    # ------------------------------------------------------------- internals

    def _to_status(self, job_id: str, job: dict[str, Any]) -> JobStatus:
        raw = str(job.get("state") or "UNKNOWN")
        try:
            state = JobState(raw)
        except ValueError:
            state = JobState.UNKNOWN
        start = job.get("start_time")
        elapsed = None
        if isinstance(start, (int, float)):
            end = job.get("end_time")
            elapsed = format_elapsed((end if isinstance(end, (int, float)) else time.time()) - start)
        reason = job.get("reason")
        if reason == "None":
            reason = None
        raw_state = raw
        if state is JobState.CANCELLED and reason:
            raw_state = f"CANCELLED {reason}"
        return JobStatus(
            job_id=job_id,
            state=state,
            reason=str(reason) if reason else None,
            exit_code=job.get("exit_code"),
            derived_exit_code=job.get("exit_code") if state.finished else None,
            elapsed=elapsed,
            nodelist=_nodelist(int(job.get("nodes") or 1)) if start else None,
            raw_state=raw_state,
            source="local",
            submit_time=_epoch(job.get("submit_time")),
            start_time=_epoch(start),
            end_time=_epoch(job.get("end_time")) if state.finished else None,
        )

    def _reap(self) -> None:
        for job_id, proc in list(self._children.items()):
            if proc.poll() is not None:
                del self._children[job_id]

    def _finish_lost(self, job_id: str, reason: str) -> dict[str, Any] | None:
        with _locked(self.state_dir):
            job = read_job(self.state_dir, job_id)
            if job is None or str(job.get("state")) not in _LIVE:
                return job
            if job.get("runner_pid") and process_alive(job["runner_pid"], job.get("runner_start")):
                return job
            # As when a node dies, nothing of the job outlives it: its process group goes too
            # (else it would run on unseen and could not be cancelled).
            script = job.get("script_pid")
            if isinstance(script, int) and script > 0:
                _killpg(script, signal.SIGKILL)
            job.update(state=JobState.NODE_FAIL.value, reason=reason, end_time=time.time(), exit_code="0:0")
            write_json_atomic(job_path(self.state_dir, job_id), job)
            return job

    def _allocate(self, output: str) -> str:
        counter = self.state_dir / "next_id"
        try:
            next_id = int(counter.read_text().strip() or "1")
        except (OSError, ValueError):
            next_id = 1
        existing = [int(i) for i in self.job_ids()]
        next_id = max([next_id, *(i + 1 for i in existing)])
        # Never reuse an id whose output already exists (a state dir wiped, outputs kept).
        while Path(_expand_output(output, str(next_id), "x")).exists() and "%j" in output:
            next_id += 1
        counter.write_text(f"{next_id + 1}\n")
        return str(next_id)

    def _launch(self, sub: Submission) -> tuple[str, subprocess.Popen[bytes]]:
        script = Path(sub.script)
        try:
            text = script.read_bytes()
        except OSError as exc:
            raise SchedulerError(f"sbatch: error: Unable to open file {sub.script}: {exc.strerror or exc}") from exc
        if not text.startswith(b"#!"):
            raise SchedulerError(
                "sbatch: error: This does not look like a batch script.  The first line must start with #! "
                "followed by the path to an interpreter."
            )
        try:
            limit = parse_time_limit(sub.time_limit)
        except ValueError as exc:
            raise SchedulerError(f"sbatch: error: Invalid --time specification: {sub.time_limit}") from exc
        for key in sub.env:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                raise SchedulerError(f"sbatch: error: invalid environment variable name {key!r}")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        workdir = os.path.abspath(sub.workdir or os.getcwd())
        output = sub.output or os.path.join(workdir, "slurm-%j.out")
        if not os.path.isabs(output):
            output = os.path.join(workdir, output)
        with _locked(self.state_dir):
            job_id = self._allocate(output)
            copy = script_copy_path(self.state_dir, job_id)
            copy.write_bytes(text)
            copy.chmod(0o700)
            job = {
                "version": _STATE_VERSION,
                "job_id": job_id,
                "job_name": sub.job_name,
                "script": str(copy),
                "submitted_script": str(script),
                "output": _expand_output(output, job_id, sub.job_name),
                "workdir": workdir,
                "nodes": sub.nodes or 1,
                "partition": sub.partition,
                "account": sub.account,
                "time_limit": sub.time_limit,
                "time_limit_s": limit,
                "grace_s": self.grace_seconds,
                "env": dict(sub.env),
                "comment": sub.comment,
                "state": JobState.PENDING.value,
                "reason": "None",
                "submit_time": time.time(),
                "start_time": None,
                "end_time": None,
                "exit_code": None,
                "runner_pid": None,
                "runner_start": None,
                "script_pid": None,
            }
            write_json_atomic(job_path(self.state_dir, job_id), job)
        with open(runner_log_path(self.state_dir, job_id), "ab") as log:
            try:
                runner = subprocess.Popen(
                    [self.python, "-m", "console.demo.localrun", str(self.state_dir), job_id],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=workdir,
                    start_new_session=True,
                    env=_runner_env(),
                )
            except OSError as exc:
                self._finish_lost(job_id, "local runner did not start")
                raise SchedulerError(f"cannot start the local runner: {exc}") from exc
        self._children[job_id] = runner
        return job_id, runner


def _runner_env() -> dict[str, str]:
    env = dict(os.environ)
    # The runner imports console.demo.localrun: make the package importable from anywhere.
    root = str(Path(__file__).resolve().parents[2])
    original = env.get("PYTHONPATH", "")
    env[_ORIGINAL_PYTHONPATH] = original
    env["PYTHONPATH"] = root + (os.pathsep + original if original else "")
    return env


# --------------------------------------------------------------------------- the runner


def job_env(job: dict[str, Any]) -> dict[str, str]:
    """The batch script's environment: the submitter's, less any Slurm step variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SLURMD_"))}
    # Undo what _runner_env added so the script sees the submitter's own PYTHONPATH.
    original = env.pop(_ORIGINAL_PYTHONPATH, None)
    env.pop("PYTHONPATH", None)
    if original:
        env["PYTHONPATH"] = original
    nodes = int(job.get("nodes") or 1)
    env.update(
        SLURM_JOB_ID=str(job["job_id"]),
        SLURM_JOBID=str(job["job_id"]),
        SLURM_JOB_NAME=str(job.get("job_name") or ""),
        SLURM_JOB_NUM_NODES=str(nodes),
        SLURM_NNODES=str(nodes),
        SLURM_JOB_NODELIST=_nodelist(nodes),
        SLURM_NODELIST=_nodelist(nodes),
        SLURM_SUBMIT_DIR=str(job.get("workdir") or os.getcwd()),
        SLURM_CLUSTER_NAME="local",
    )
    # Every node of this scheduler is this machine, with all its CPUs; one task per node (the demo
    # batch script's --ntasks-per-node=1), as sbatch tells a job its allocation.
    cpus = os.cpu_count() or 1
    env.update(
        SLURM_JOB_CPUS_PER_NODE=f"{cpus}(x{nodes})" if nodes > 1 else str(cpus),
        SLURM_CPUS_ON_NODE=str(cpus),
        SLURM_NTASKS=str(nodes),
    )
    if job.get("partition"):
        env["SLURM_JOB_PARTITION"] = str(job["partition"])
    if job.get("account"):
        env["SLURM_JOB_ACCOUNT"] = str(job["account"])
    extra = job.get("env")
    if isinstance(extra, dict):
        env.update({str(k): str(v) for k, v in extra.items()})
    return env


def script_argv(script: str) -> list[str]:
    with open(script, "rb") as f:
        first = f.readline().decode("utf-8", errors="replace").strip()
    interpreter = shlex.split(first[2:]) if first.startswith("#!") else []
    return [*(interpreter or ["/bin/sh"]), script]


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def run_job(state_dir: Path, job_id: str, *, tick: float = 0.05) -> int:
    """Run one submitted job to its end and record every state change (the runner's body)."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    job = read_job(state_dir, job_id)
    if job is None:
        print(f"localrun: no job {job_id} in {state_dir}", file=sys.stderr)
        return 2
    job.update(runner_pid=os.getpid(), runner_start=process_start_ticks(os.getpid()))
    if cancel_path(state_dir, job_id).exists():
        job.update(state=JobState.CANCELLED.value, reason=_cancel_reason(state_dir, job_id), end_time=time.time())
        job["exit_code"] = "0:0"
        write_json_atomic(job_path(state_dir, job_id), job)
        return 0
    output = Path(str(job["output"]))
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        out = open(output, "ab")  # noqa: SIM115 (handed to the child, closed below)
    except OSError as exc:
        job.update(state=JobState.FAILED.value, reason="JobLaunchFailure", end_time=time.time(), exit_code="0:0")
        write_json_atomic(job_path(state_dir, job_id), job)
        print(f"localrun: cannot open {output}: {exc}", file=sys.stderr)
        return 1
    try:
        proc = subprocess.Popen(
            script_argv(str(job["script"])),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=str(job.get("workdir") or "/"),
            env=job_env(job),
            start_new_session=True,
        )
    except OSError as exc:
        out.close()
        job.update(state=JobState.FAILED.value, reason="JobLaunchFailure", end_time=time.time(), exit_code="1:0")
        write_json_atomic(job_path(state_dir, job_id), job)
        print(f"localrun: cannot start {job['script']}: {exc}", file=sys.stderr)
        return 1
    started = time.time()
    job.update(state=JobState.RUNNING.value, reason="None", start_time=started, script_pid=proc.pid)
    write_json_atomic(job_path(state_dir, job_id), job)
    limit = job.get("time_limit_s")
    grace = float(job.get("grace_s") or DEFAULT_GRACE_SECONDS)
    verdict: str | None = None
    reason: str | None = None
    kill_at: float | None = None
    began = time.monotonic()  # deadlines on the monotonic clock: a clock step must not kill early
    while proc.poll() is None:
        now = time.monotonic()
        if verdict is None:
            if cancel_path(state_dir, job_id).exists():
                verdict, reason = JobState.CANCELLED.value, _cancel_reason(state_dir, job_id)
                tail = ""
            elif isinstance(limit, (int, float)) and now - began >= limit:
                verdict, reason = JobState.TIMEOUT.value, "TimeLimit"
                tail = " DUE TO TIME LIMIT"
            if verdict is not None:
                when = time.strftime("%Y-%m-%dT%H:%M:%S")
                out.write(f"slurmstepd: error: *** JOB {job_id} ON node1 CANCELLED AT {when}{tail} ***\n".encode())
                out.flush()
                _killpg(proc.pid, signal.SIGTERM)
                kill_at = now + grace
        elif kill_at is not None and now >= kill_at:
            _killpg(proc.pid, signal.SIGKILL)
            kill_at = None
        time.sleep(tick)
    rc = proc.returncode
    # As slurmstepd does when the batch script ends: nothing of the job outlives it.
    _killpg(proc.pid, signal.SIGKILL)
    out.close()
    if verdict is None:
        verdict = JobState.COMPLETED.value if rc == 0 else JobState.FAILED.value
        reason = "None" if rc == 0 else "NonZeroExitCode"
    job.update(state=verdict, reason=reason, end_time=time.time(), exit_code=exit_code_text(rc))
    write_json_atomic(job_path(state_dir, job_id), job)
    return 0


def _cancel_reason(state_dir: Path, job_id: str) -> str:
    try:
        with open(cancel_path(state_dir, job_id), encoding="utf-8") as f:
            data = json.load(f)
        return f"by {int(data.get('uid', os.getuid()))}"
    except (OSError, ValueError, TypeError, AttributeError):
        return f"by {os.getuid()}"


def _epoch(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and value > 0 else None
