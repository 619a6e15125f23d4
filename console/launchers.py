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
from console.scheduler import Scheduler, SchedulerError, Submission, valid_job_id, valid_marker
from console.srtctl_site import SrtctlSite, probe_site
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

    async def submit(self, arm: Arm, attempt: int, marker: str | None = None) -> Submitted:
        """Submit one arm (its resolved config) as attempt number `attempt`; the job carries
        `marker` in its comment, so that it is found again if the console dies meanwhile."""

    async def recovered(self, job_id: str) -> Submitted:
        """What `submit` would have returned for the job `job_id` (found again by its marker):
        its dirs, and a held job released."""

    async def preview(self, arm: Arm) -> str:
        """What submitting the arm would run, without submitting anything."""

    async def scheduling(self, arm: Arm) -> list[Setting]:
        """Partition, account and time limit the arm's job will get, each with its source."""


SCHEDULING_KEYS = ("partition", "account", "time_limit")
# What srtctl's sbatch template falls back to when neither the recipe nor srtslurm.yaml says.
_SRTCTL_DEFAULTS = {"partition": "default", "account": "default", "time_limit": "01:00:00"}


@dataclass(frozen=True)
class Setting:
    """One scheduling value the job will get, and where it comes from."""

    key: str  # partition | account | time_limit
    value: str | None  # None: Slurm's own default
    source: str  # "profile", "recipe", "srtslurm.yaml", "srtctl default", "Slurm default"

    def as_dict(self) -> dict[str, str | None]:
        return {"key": self.key, "value": self.value, "source": self.source}


def scheduling(config: dict[str, Any], profile: Profile, site: SrtctlSite | None = None) -> list[Setting]:
    """Partition, account and time limit as the job will run: the profile's values win (they are
    the cluster's facts), then the recipe's `slurm:` section, then srtslurm.yaml's defaults (srtctl
    launcher), then srtctl's own or Slurm's default."""
    raw_slurm = config.get("slurm")
    recipe_slurm: dict[str, Any] = raw_slurm if isinstance(raw_slurm, dict) else {}
    out: list[Setting] = []
    for key in SCHEDULING_KEYS:
        chosen = getattr(profile, key)
        if chosen:
            out.append(Setting(key, str(chosen), "profile"))
        elif recipe_slurm.get(key):
            out.append(Setting(key, str(recipe_slurm[key]), "recipe"))
        elif site is not None and site.setting(f"default_{key}"):
            out.append(Setting(key, str(site.setting(f"default_{key}")), "srtslurm.yaml"))
        elif site is not None:
            out.append(Setting(key, _SRTCTL_DEFAULTS[key], "srtctl default"))
        else:
            out.append(Setting(key, None, "Slurm default"))
    return out


def srtctl_recipe(config: dict[str, Any], profile: Profile | None = None, marker: str | None = None) -> dict[str, Any]:
    """The config srtctl may see: srt-console's own `demo:` section removed (srtctl rejects unknown
    keys), the profile's scheduling values written into `slurm:`, where srtctl reads them, and the
    attempt's marker added to the job's comment (srtctl's `sbatch_directives`)."""
    out = {k: v for k, v in config.items() if k != "demo"}
    if marker:
        directives = dict(out["sbatch_directives"]) if isinstance(out.get("sbatch_directives"), dict) else {}
        own = str(directives.get("comment") or "").strip()
        directives["comment"] = f"{own} {valid_marker(marker)}".strip()
        out["sbatch_directives"] = directives
    chosen = {key: getattr(profile, key) for key in SCHEDULING_KEYS if profile and getattr(profile, key)}
    if chosen:
        slurm = dict(out["slurm"]) if isinstance(out.get("slurm"), dict) else {}
        slurm.update(chosen)
        out["slurm"] = slurm
    return out


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


@dataclass(frozen=True)
class DryRun:
    """`srtctl dry-run` of one arm: srtctl's own text, the #SBATCH header it generated, and where
    that header disagrees with what the console planned."""

    text: str
    sbatch: dict[str, str]
    differences: list[str]

    def report(self) -> str:
        lines = [self.text.rstrip(), ""]
        if self.sbatch:
            lines.append("Generated #SBATCH header: " + " ".join(f"--{k}={v}" for k, v in self.sbatch.items()))
        lines += [f"DIFFERENCE: {d}" for d in self.differences] or ["The header agrees with the console's plan."]
        return "\n".join(lines)


_SBATCH_LINE = re.compile(r"#SBATCH\s+--([A-Za-z-]+)(?:=(\S+))?")


def sbatch_header(text: str) -> dict[str, str]:
    """The `#SBATCH --key=value` lines of a generated script, wherever they stand on a line (srtctl
    prints the script in a numbered panel)."""
    header: dict[str, str] = {}
    for line in text.splitlines():
        m = _SBATCH_LINE.search(line)
        if m:
            header.setdefault(m.group(1), m.group(2) or "")
    return header


def compare_header(header: dict[str, str], arm: Arm, settings: list[Setting]) -> list[str]:
    """What the generated header says that differs from the console's plan for the arm."""
    found: list[str] = []
    nodes = header.get("nodes")
    if nodes is not None and nodes != str(arm.topology.node_demand):
        found.append(f"srtctl asks for --nodes={nodes}; the console planned {arm.topology.node_demand} node(s)")
    names = {"partition": "partition", "account": "account", "time_limit": "time"}
    for setting in settings:
        value = header.get(names[setting.key])
        if value is not None and setting.value is not None and value != setting.value:
            planned = f"{setting.value} ({setting.source})"
            found.append(f"srtctl asks for --{names[setting.key]}={value}; the console planned {planned}")
    return found


class SrtctlLauncher:
    """`srtctl apply --json -f <uploaded recipe>` in the cluster's srt-slurm checkout."""

    name = "srtctl"

    def __init__(self, profile: Profile, transport: Transport, srtctl: str = "srtctl") -> None:
        self.profile = profile
        self.transport = transport
        self.srtctl = shlex.split(srtctl)
        self._paths = _Paths(profile, transport)
        self._site: SrtctlSite | None = None

    async def checkout(self) -> str:
        return await self._paths.resolve(self.profile.srt_slurm or "")

    async def site(self, *, refresh: bool = False) -> SrtctlSite:
        """The checkout's facts (read once per console run unless asked again)."""
        if self._site is None or refresh:
            self._site = await probe_site(self.transport, await self.checkout())
        return self._site

    async def scheduling(self, arm: Arm) -> list[Setting]:
        return scheduling(arm.config, self.profile, await self.site())

    async def _upload(self, arm: Arm, run_dir: str, marker: str | None = None) -> tuple[str, str]:
        """The resolved recipe, as srtctl may see it, in `run_dir`; returns (checkout, path)."""
        recipe_path = f"{run_dir}/{_SAFE_NAME.sub('_', arm.name)[:80]}.yaml"
        await self.transport.run(["mkdir", "-p", "--", run_dir], check=True)
        text = dump(srtctl_recipe(arm.config, self.profile, marker))
        await self.transport.write_file(recipe_path, text.encode())
        return await self.checkout(), recipe_path

    async def _run_dir(self, kind: str, arm: Arm, attempt: int) -> str:
        workdir = await self._paths.resolve(self.profile.workdir)
        return f"{workdir}/{kind}/{run_dir_name(arm, attempt)}"

    async def dry_run(self, arm: Arm) -> DryRun:
        """`srtctl dry-run` of the arm (nothing submitted; the upload is removed afterwards)."""
        run_dir = await self._run_dir("previews", arm, 0)
        try:
            checkout, recipe_path = await self._upload(arm, run_dir)
            # Rich wraps at 80 columns when stdout is not a terminal; the script would be cut.
            result = await self.transport.run([*self.srtctl, "dry-run", "-f", recipe_path], cwd=checkout or None,
                                              env={"COLUMNS": "400"}, timeout=120)  # fmt: skip
        finally:
            await self.transport.run(["rm", "-rf", "--", run_dir], timeout=30)
        text = (result.stdout + result.stderr).strip()
        if not result.ok:
            raise LaunchError(f"srtctl dry-run failed (exit {result.returncode}): {text[-2000:]}")
        header = sbatch_header(result.stdout)
        return DryRun(text, header, compare_header(header, arm, await self.scheduling(arm)))

    async def preview(self, arm: Arm) -> str:
        return (await self.dry_run(arm)).report()

    async def preflight(self, arm: Arm) -> str:
        """`srtctl preflight -f` of the arm: model and container availability as srtctl checks them."""
        run_dir = await self._run_dir("previews", arm, 0)
        try:
            checkout, recipe_path = await self._upload(arm, run_dir)
            result = await self.transport.run([*self.srtctl, "preflight", "-f", recipe_path], cwd=checkout or None,
                                              env={"COLUMNS": "400"}, timeout=120)  # fmt: skip
        finally:
            await self.transport.run(["rm", "-rf", "--", run_dir], timeout=30)
        text = (result.stdout + result.stderr).strip()
        if not result.ok:
            raise LaunchError(f"srtctl preflight failed (exit {result.returncode}): {text[-2000:]}")
        return text

    async def submit(self, arm: Arm, attempt: int, marker: str | None = None) -> Submitted:
        checkout, recipe_path = await self._upload(arm, await self._run_dir("runs", arm, attempt), marker)
        argv = [*self.srtctl, "apply", "--json", "-f", recipe_path]
        if self.profile.outputs:
            argv += ["-o", await self._paths.resolve(self.profile.outputs)]
        if not self.profile.preflight:
            argv.append("--no-preflight")
        result = await self.transport.run(argv, cwd=checkout or None, timeout=300)
        jobs = parse_apply_output(result.stdout, result.stderr)
        if not jobs:
            detail = (result.stderr.strip() or result.stdout.strip())[-2000:]
            raise LaunchError(f"srtctl apply submitted nothing (exit {result.returncode}): {detail}")
        if len(jobs) != 1:
            raise LaunchError(f"srtctl apply submitted {len(jobs)} jobs for one arm: {[j[0] for j in jobs]}")
        job_id, output_dir = jobs[0]
        if not output_dir:
            # An old srtctl without --json: the dir follows srtctl's own rule.
            return await self.recovered(job_id)
        results = await self._results_dir(job_id)
        return Submitted(job_id, output_dir, results)

    async def recovered(self, job_id: str) -> Submitted:
        outputs = self.profile.outputs
        base = await self._paths.resolve(outputs) if outputs else (await self.site()).output_dir
        return Submitted(job_id, f"{base}/{job_id}" if base else "", await self._results_dir(job_id))

    async def _results_dir(self, job_id: str) -> str | None:
        if not self.profile.results:
            return None
        return f"{(await self._paths.resolve(self.profile.results)).rstrip('/')}/{job_id}"


_GENERIC_SUBPROCESS = re.compile(r"returned non-zero exit status \d+")


def _tool_reason(stderr: str) -> str:
    """The underlying tool's own words from srtctl's stderr (`sbatch: error: ...`), if any."""
    lines = [ln.strip() for ln in stderr.splitlines() if re.search(r"\b(?:sbatch|srun|salloc): error:", ln)]
    return "; ".join(dict.fromkeys(lines))[-1000:]


def parse_apply_output(stdout: str, stderr: str = "") -> list[tuple[str, str]]:
    """(job id, output dir) per submitted job from `srtctl apply --json` (one JSON line per job).

    Raises LaunchError with srtctl's own message for `{"status": "error"}`; when that message is
    only srtctl's generic account of a failed subprocess, the tool's own reason from stderr (for
    example sbatch's) is added. Old srtctl without `--json` prints `✅ Job <id> submitted!`; that
    is accepted with an unknown output dir.
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
            message = str(doc.get("error") or "error")
            reason = _tool_reason(stderr)
            if reason and (_GENERIC_SUBPROCESS.search(message) or reason not in message):
                message = f"{message} ({reason})"
            raise LaunchError(f"srtctl: {message}")
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

    async def scheduling(self, arm: Arm) -> list[Setting]:
        return scheduling(arm.config, self.profile)

    def _values(self, arm: Arm) -> dict[str, str | None]:
        return {s.key: s.value for s in scheduling(arm.config, self.profile)}

    async def _outputs(self) -> str:
        # A demo profile always has one (clusters.py gives it a default).
        return await self._paths.resolve(self.profile.outputs or f"{self.profile.workdir}/outputs")

    async def preview(self, arm: Arm) -> str:
        """The batch script the demo launcher would submit (nothing is uploaded or submitted)."""
        workdir = await self._paths.resolve(self.profile.workdir)
        outputs = await self._outputs()
        results = await self._paths.resolve(self.profile.results) if self.profile.results else None
        values = self._values(arm)
        return render_batch_script(
            arm,
            job_dir_template=f"{outputs}/%j",
            engine_path=f"{workdir}/engine/srt-demo-engine-<version>.pyz",
            config_path=f"{workdir}/runs/<run>/plan.json",
            python=self.profile.python,
            results_root=results,
            speed=self.profile.demo_speed,
            partition=values["partition"],
            account=values["account"],
            time_limit=values["time_limit"],
        )

    async def submit(self, arm: Arm, attempt: int, marker: str | None = None) -> Submitted:
        workdir = await self._paths.resolve(self.profile.workdir)
        outputs = await self._outputs()
        results = await self._paths.resolve(self.profile.results) if self.profile.results else None
        engine_path = await self._engine(workdir)
        values = self._values(arm)
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
            speed=self.profile.demo_speed,
            partition=values["partition"],
            account=values["account"],
            time_limit=values["time_limit"],
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
            comment=marker,
        )
        try:
            job_id = await self.scheduler.submit(submission)
        except SchedulerError as exc:
            raise LaunchError(str(exc)) from None
        return await self._release(job_id, submission.hold)

    async def _release(self, job_id: str, hold: bool) -> Submitted:
        outputs = await self._outputs()
        results = await self._paths.resolve(self.profile.results) if self.profile.results else None
        output_dir = f"{outputs}/{job_id}"
        if hold:
            await self.transport.run(["mkdir", "-p", "--", f"{output_dir}/logs"], check=True)
            await self.scheduler.release(job_id)
        return Submitted(job_id, output_dir, f"{results}/{job_id}" if results else None)

    async def recovered(self, job_id: str) -> Submitted:
        # A job found after a crash may still be held: create its dir and release it, as submit does.
        try:
            return await self._release(job_id, self.profile.scheduler == "slurm")
        except SchedulerError:
            return await self._release(job_id, False)  # released before the crash
