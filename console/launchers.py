"""Launchers turn an arm into a submitted job: through srtctl on a real cluster, or the demo engine.

Both leave the same output layout (`<outputs>/<job id>/logs/...`), so nothing downstream can
tell them apart. Every path and value reaches the cluster as an argv element or file content,
never through a shell string.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from dataclasses import dataclass
from typing import Any, Protocol

from console.clusters import Profile
from console.demo.bundle import engine_name, engine_zipapp
from console.demo.sbatch import arm_plan, render_batch_script
from console.model import Arm
from console.recipes.yamlio import dump
from console.scheduler import Scheduler, SchedulerError, Submission, valid_job_id
from console.transport.base import Transport, expand_home

_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")
_LEGACY_SUBMITTED = re.compile(r"✅ Job (\d+) submitted!")


class LaunchError(Exception):
    """The launcher could not submit the arm; the message says why, in the tool's own words."""


@dataclass(frozen=True)
class Submitted:
    job_id: str
    output_dir: str
    results_dir: str | None  # InferenceX fixed-seq root for this job, when the profile has one


class Launcher(Protocol):
    name: str

    async def submit(self, arm: Arm, attempt: int) -> Submitted:
        """Submit one arm (its resolved config) as attempt number `attempt`."""

    async def preview(self, arm: Arm) -> str:
        """What submitting the arm would run, without submitting anything."""


def srtctl_recipe(config: dict[str, Any]) -> dict[str, Any]:
    """The config srtctl may see: srt-console's own `demo:` section removed (srtctl rejects unknown keys)."""
    return {k: v for k, v in config.items() if k != "demo"}


def run_dir_name(arm: Arm, attempt: int) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return f"{_SAFE_NAME.sub('_', arm.name)[:80]}-a{attempt}-{stamp}-{time.time_ns() % 1_000_000:06d}"


class _Paths:
    """A profile's directories with `~` resolved against the transport's home, once."""

    def __init__(self, profile: Profile, transport: Transport) -> None:
        self.profile = profile
        self.transport = transport
        self._home: str | None = None

    async def resolve(self, path: str) -> str:
        if path.startswith("~"):
            if self._home is None:
                self._home = await self.transport.home()
            return expand_home(path, self._home)
        return path


class SrtctlLauncher:
    """`srtctl apply --json -f <uploaded recipe>` in the cluster's srt-slurm checkout."""

    name = "srtctl"

    def __init__(self, profile: Profile, transport: Transport, srtctl: str = "srtctl") -> None:
        self.profile = profile
        self.transport = transport
        self.srtctl = shlex.split(srtctl)
        self._paths = _Paths(profile, transport)

    async def _upload(self, arm: Arm, attempt: int) -> tuple[str, str]:
        """The resolved recipe, as srtctl may see it, in a fresh run dir; returns (checkout, path)."""
        workdir = await self._paths.resolve(self.profile.workdir)
        checkout = await self._paths.resolve(self.profile.srt_slurm or "")
        run_dir = f"{workdir}/runs/{run_dir_name(arm, attempt)}"
        recipe_path = f"{run_dir}/{_SAFE_NAME.sub('_', arm.name)[:80]}.yaml"
        await self.transport.run(["mkdir", "-p", "--", run_dir], check=True)
        await self.transport.write_file(recipe_path, dump(srtctl_recipe(arm.config)).encode())
        return checkout, recipe_path

    async def preview(self, arm: Arm) -> str:
        """`srtctl dry-run -f <uploaded recipe>`: srtctl's own account of the job (nothing submitted)."""
        checkout, recipe_path = await self._upload(arm, 0)
        result = await self.transport.run([*self.srtctl, "dry-run", "-f", recipe_path], cwd=checkout or None,
                                          timeout=120)  # fmt: skip
        text = (result.stdout + result.stderr).strip()
        if not result.ok:
            raise LaunchError(f"srtctl dry-run failed (exit {result.returncode}): {text[-2000:]}")
        return text

    async def submit(self, arm: Arm, attempt: int) -> Submitted:
        checkout, recipe_path = await self._upload(arm, attempt)
        argv = [*self.srtctl, "apply", "--json", "-f", recipe_path]
        if self.profile.outputs:
            argv += ["-o", await self._paths.resolve(self.profile.outputs)]
        result = await self.transport.run(argv, cwd=checkout or None, timeout=300)
        jobs = parse_apply_output(result.stdout)
        if not jobs:
            detail = (result.stderr.strip() or result.stdout.strip())[-2000:]
            raise LaunchError(f"srtctl apply submitted nothing (exit {result.returncode}): {detail}")
        if len(jobs) != 1:
            raise LaunchError(f"srtctl apply submitted {len(jobs)} jobs for one arm: {[j[0] for j in jobs]}")
        job_id, output_dir = jobs[0]
        results = await self._results_dir(job_id)
        return Submitted(job_id, output_dir, results)

    async def _results_dir(self, job_id: str) -> str | None:
        if not self.profile.results:
            return None
        return f"{(await self._paths.resolve(self.profile.results)).rstrip('/')}/{job_id}"


def parse_apply_output(stdout: str) -> list[tuple[str, str]]:
    """(job id, output dir) per submitted job from `srtctl apply --json` (one JSON line per job).

    Raises LaunchError with srtctl's own message for `{"status": "error"}`. Old srtctl without
    `--json` prints `✅ Job <id> submitted!`; that is accepted with an unknown output dir.
    """
    jobs: list[tuple[str, str]] = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(doc, dict):
            continue
        status = doc.get("status")
        if status == "error":
            raise LaunchError(f"srtctl: {doc.get('error') or 'error'}")
        if status == "no-submissions":
            raise LaunchError("srtctl: nothing was submitted (no-submissions)")
        if status == "submitted":
            job_id = str(doc.get("slurm_job_id", ""))
            try:
                valid_job_id(job_id)
            except ValueError as exc:
                raise LaunchError(f"srtctl printed {exc}") from None
            jobs.append((job_id, str(doc.get("output_dir") or "")))
    if not jobs:
        jobs = [(m.group(1), "") for m in _LEGACY_SUBMITTED.finditer(stdout)]
    return jobs


class DemoLauncher:
    """Runs the demo engine as a real batch job (sbatch on Slurm, the local scheduler elsewhere)."""

    name = "demo"

    def __init__(self, profile: Profile, transport: Transport, scheduler: Scheduler) -> None:
        self.profile = profile
        self.transport = transport
        self.scheduler = scheduler
        self._paths = _Paths(profile, transport)
        self._engine_path: str | None = None

    async def _engine(self, workdir: str) -> str:
        """Upload the engine once per console run (its content names the file, so versions never mix)."""
        if self._engine_path is None:
            path = f"{workdir}/engine/{engine_name()}"
            await self.transport.run(["mkdir", "-p", "--", f"{workdir}/engine"], check=True)
            await self.transport.write_file(path, engine_zipapp(), mode=0o644)
            self._engine_path = path
        return self._engine_path

    async def preview(self, arm: Arm) -> str:
        """The batch script the demo launcher would submit (nothing is uploaded or submitted)."""
        workdir = await self._paths.resolve(self.profile.workdir)
        outputs = await self._paths.resolve(self.profile.outputs)
        results = await self._paths.resolve(self.profile.results) if self.profile.results else None
        return render_batch_script(
            arm,
            job_dir_template=f"{outputs}/%j",
            engine_path=f"{workdir}/engine/srt-demo-engine-<version>.pyz",
            config_path=f"{workdir}/runs/<run>/plan.json",
            python=self.profile.python,
            results_root=results,
            partition=self.profile.partition,
            account=self.profile.account,
            time_limit=self.profile.time_limit,
            speed=self.profile.demo_speed,
        )

    async def submit(self, arm: Arm, attempt: int) -> Submitted:
        workdir = await self._paths.resolve(self.profile.workdir)
        outputs = await self._paths.resolve(self.profile.outputs)
        results = await self._paths.resolve(self.profile.results) if self.profile.results else None
        engine_path = await self._engine(workdir)
        run_dir = f"{workdir}/runs/{run_dir_name(arm, attempt)}"
        plan_path = f"{run_dir}/plan.json"
        script_path = f"{run_dir}/sbatch_script.sh"
        await self.transport.run(["mkdir", "-p", "--", run_dir, outputs], check=True)
        await self.transport.write_file(plan_path, json.dumps(arm_plan(arm), indent=2).encode())
        await self.transport.write_file(f"{run_dir}/config.yaml", dump(arm.config).encode())
        script = render_batch_script(
            arm,
            job_dir_template=f"{outputs}/%j",
            engine_path=engine_path,
            config_path=plan_path,
            python=self.profile.python,
            results_root=results,
            attempt=attempt,
            partition=self.profile.partition,
            account=self.profile.account,
            time_limit=self.profile.time_limit,
            speed=self.profile.demo_speed,
        )
        await self.transport.write_file(script_path, script.encode(), mode=0o755)
        # The script carries its own #SBATCH lines; the submission repeats only what the
        # scheduler needs to know before reading it.
        submission = Submission(
            script=script_path,
            job_name=arm.name,
            output=f"{outputs}/%j/logs/sweep_%j.log",
            workdir=run_dir,
            nodes=arm.topology.node_demand,
            hold=self.profile.scheduler == "slurm",
        )
        try:
            job_id = await self.scheduler.submit(submission)
        except SchedulerError as exc:
            raise LaunchError(str(exc)) from None
        output_dir = f"{outputs}/{job_id}"
        if submission.hold:
            await self.transport.run(["mkdir", "-p", "--", f"{output_dir}/logs"], check=True)
            await self.scheduler.release(job_id)
        return Submitted(job_id, output_dir, f"{results}/{job_id}" if results else None)
