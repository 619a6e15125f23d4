"""Is a cluster profile usable? One check per thing that can be wrong, each saying what to do.

Run by `srt-console clusters` (and available to the UI): the connection and host key, the
scheduler's commands, and for the srtctl launcher the checkout as srtctl needs it: the configured
srtctl runs there, the checkout exists (with `~` resolved on the cluster), its srtslurm.yaml is
found and parses, and the binaries `make setup` installs are present.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field
from typing import Any

from console.clusters import Profile
from console.launchers import SrtctlLauncher
from console.srtctl_site import srtctl_runs
from console.transport.base import HostKeyError, TransportError


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""  # what to do when it fails (or what a warning means)
    warning: bool = False  # ok, but worth knowing

    def as_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"check": self.name, "ok": self.ok, "detail": self.detail}
        if self.fix:
            doc["fix"] = self.fix
        if self.warning:
            doc["warning"] = True
        return doc


@dataclass
class Report:
    profile: Profile
    checks: list[Check] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)  # e.g. the srtctl checkout's version, commit

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def add(self, name: str, ok: bool, detail: str, fix: str = "", *, warning: bool = False) -> None:
        self.checks.append(Check(name, ok, detail, fix, warning))

    def as_dict(self) -> dict[str, Any]:
        p = self.profile
        return {
            "name": p.name,
            "where": p.where,
            "launcher": p.launcher,
            "scheduler": p.scheduler,
            "ok": self.ok,
            "checks": [c.as_dict() for c in self.checks],
            **({"facts": self.facts} if self.facts else {}),
        }


async def check_profile(runtime: Any) -> Report:
    """Every check of one profile, through its runtime (transport, launcher); never raises."""
    profile: Profile = runtime.profile
    report = Report(profile)
    try:
        started = time.monotonic()
        await runtime.transport.run(["true"], timeout=20, check=True)
        report.add("reachable", True, f"{profile.where} answered in {time.monotonic() - started:.2f}s")
        if profile.ssh:
            report.add("host key", True, "known and verified")
        if profile.scheduler == "slurm":
            found = await runtime.transport.run(
                ["sh", "-c", "for c in sbatch squeue sacct scancel; do command -v $c >/dev/null || echo $c; done"],
                timeout=20,
            )
            missing = found.stdout.split()
            report.add(
                "slurm", not missing, "sbatch, squeue, sacct, scancel found" if not missing else f"missing: {missing}",
                "" if not missing else "log in to the cluster's login node (where Slurm's commands are) or fix PATH",
            )  # fmt: skip
        else:
            report.add("scheduler", True, "local scheduler (no Slurm needed)")
        if isinstance(runtime.launcher, SrtctlLauncher):
            await _check_srtctl(runtime.launcher, report)
        else:
            probe = await runtime.transport.run(
                [profile.python, "-c", "import zmq, sys; print(sys.version.split()[0])"]
            )
            report.add(
                "demo engine",
                probe.ok,
                f"{profile.python} {probe.stdout.strip()} with pyzmq"
                if probe.ok
                else f"{profile.python} cannot import zmq: the ZMQ fault cannot be reproduced",
                "" if probe.ok else "install pyzmq for that interpreter, or set `python:` in the profile",
            )
    except HostKeyError as exc:
        report.add("host key", False, str(exc))
    except (TransportError, OSError) as exc:
        report.add("reachable", False, str(exc), "check the host, port and network; the console retries by itself")
    return report


async def _check_srtctl(launcher: SrtctlLauncher, report: Report) -> None:
    profile = launcher.profile
    site = await launcher.site(refresh=True)
    if not site.exists:
        checkout = await launcher.checkout()
        report.add("checkout", False, f"no srt-slurm checkout at {checkout}",
                   f"clone srt-slurm there, or set `srt_slurm:` in profile {profile.name} to its path")  # fmt: skip
        return
    version = f"srtctl {site.version}" if site.version else "srtctl (no version in pyproject.toml)"
    commit = f", commit {site.commit[:12]}{' with local changes' if site.dirty else ''}" if site.commit else ""
    report.add("checkout", True, f"{site.path}: {version} ({site.flavour} flavour){commit}")
    report.facts.update(
        {"checkout": site.path, "version": site.version, "flavour": site.flavour, "commit": site.commit,
         "dirty": site.dirty, "srtslurm_yaml": site.settings_path, "output_dir": site.output_dir}
    )  # fmt: skip
    problem = await srtctl_runs(launcher.transport, launcher.srtctl, site.path or "")
    command = shlex.join(launcher.srtctl)
    report.add(
        "srtctl runs", problem is None, f"`{command} --help` runs in the checkout" if problem is None else problem,
        "" if problem is None else "set `srtctl:` in the profile to how srtctl runs there, e.g. "
        "`.venv/bin/srtctl` or `uv run srtctl`",
    )  # fmt: skip
    if site.settings_error:
        report.add("srtslurm.yaml", False, f"{site.settings_path}: {site.settings_error}",
                   "fix the file: srtctl cannot read it either")  # fmt: skip
    elif site.settings_path:
        shown = ("cluster", "default_partition", "default_account", "default_time_limit")
        keys = ", ".join(f"{k}={site.settings[k]}" for k in shown if site.settings.get(k))
        report.add("srtslurm.yaml", True, f"{site.settings_path}" + (f" ({keys})" if keys else ""))
    else:
        report.add("srtslurm.yaml", True, "none in the checkout, its parent or grandparent: srtctl's defaults apply",
                   "without it, container and model aliases are unknown to srtctl", warning=True)  # fmt: skip
    if site.missing_binaries:
        fix = f"run `make setup ARCH=<compute arch>` in {site.path}: srtctl apply refuses without them"
        report.add("make setup", False, f"missing in the checkout: {', '.join(site.missing_binaries)}", fix)
    else:
        report.add("make setup", True, "nats-server, etcd, uv and tachometer-scraper are in place")
