"""Cluster profiles: how to reach a cluster, how to launch on it, where its outputs live.

Profiles come from the `clusters:` section of the config file. A built-in `local` profile
always exists: this machine, the demo launcher and the local scheduler.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from console.config import Config
from console.recipes.flavours import FLAVOUR_NAMES, Flavour, FlavourName
from console.recipes.spec import Bool, Checker, Fields, Int, MapOf, Num, Str, dotted

LOCAL = "local"
Launcher = Literal["srtctl", "demo"]
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class SshSettings:
    """Either a Host alias from ~/.ssh/config, or explicit coordinates."""

    alias: str | None = None
    host: str | None = None
    port: int | None = None
    user: str | None = None
    identity_file: str | None = None
    known_hosts: str | None = None
    config_file: str | None = None  # an ssh config other than ~/.ssh/config

    @property
    def label(self) -> str:
        if self.alias:
            return self.alias
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"{user}{self.host}{port}"


@dataclass(frozen=True)
class Profile:
    name: str
    launcher: Launcher
    ssh: SshSettings | None  # None: commands run on this machine
    scheduler: Literal["slurm", "local"]
    workdir: str  # uploads (resolved recipes, engine, scripts); may start with ~ (the remote home)
    # Job output dirs are <outputs>/<job id>. srtctl launcher: None unless configured, and srtctl
    # then decides (srtslurm.yaml's output_dir); the dir of each job comes from srtctl's answer.
    outputs: str | None
    results: str | None  # InferenceX fixed-seq root: <results>/<job id>/fixed-seq/
    srt_slurm: str | None = None
    partition: str | None = None
    account: str | None = None
    time_limit: str | None = None
    python: str = "python3"  # interpreter on the cluster for the demo engine and the log agent
    max_channels: int = 8  # under OpenSSH's MaxSessions (10)
    srtctl: str = "srtctl"  # how to run srtctl in the checkout, e.g. "uv run srtctl"
    demo_speed: float | None = None  # the demo engine's durations divided by this
    preflight: bool = True  # srtctl launcher: false passes --no-preflight (model paths only on compute nodes)
    srt_slurm_commit: str | None = None  # the srt-slurm commit this cluster's checkout must be at
    srtctl_flavour: FlavourName | None = None  # which srtctl the checkout is, when set in the profile

    @property
    def where(self) -> str:
        return self.ssh.label if self.ssh else "this machine"

    def flavour(self, detected: Flavour | None = None) -> Flavour | None:
        """The srtctl recipes are checked for on this cluster: the profile's `srtctl_flavour`,
        else what was detected from its checkout (flavours.detect_flavour), else unknown.
        A detected version is kept when the profile names the same flavour."""
        if self.launcher != "srtctl":
            return None  # the demo engine reads its recipes itself
        if self.srtctl_flavour is None:
            return detected
        if detected is not None and detected.name == self.srtctl_flavour:
            return detected
        return Flavour(self.srtctl_flavour)


PROFILE_SPEC = Fields(
    {
        "ssh": MapOf(),  # checked below: a string alias or a mapping
        "launcher": Str("srtctl", "demo"),
        "scheduler": Str("slurm", "local"),
        "srt_slurm": Str(),
        "workdir": Str(),
        "outputs": Str(),
        "results": Str(),
        "partition": Str(),
        "account": Str(),
        "time_limit": Str(),
        "python": Str(),
        "max_channels": Int(1),
        "srtctl": Str(),
        "srtctl_flavour": Str(*FLAVOUR_NAMES),
        "demo_speed": Num(0.01),
        "preflight": Bool(),
        "srt_slurm_commit": Str(),
    }
)
SSH_SPEC = Fields(
    {
        "host": Str(),
        "port": Int(1),
        "user": Str(),
        "identity_file": Str(),
        "known_hosts": Str(),
        "config_file": Str(),
    },
    required=("host",),
)


def local_profile(data_dir: Path) -> Profile:
    workdir = data_dir / "local"
    return Profile(
        name=LOCAL,
        launcher="demo",
        ssh=None,
        scheduler="local",
        workdir=str(workdir),
        outputs=str(workdir / "outputs"),
        results=str(workdir / "results"),
        # The console's own interpreter has pyzmq (a dependency), so the ZMQ fault is real.
        python=sys.executable,
    )


def load_profiles(config: Config, data_dir: Path) -> tuple[dict[str, Profile], list[str]]:
    """Every profile of the config plus `local`, and problems as `path:line: field: message`."""
    profiles: dict[str, Profile] = {LOCAL: local_profile(data_dir)}
    problems: list[str] = []
    section = config.raw.get("clusters")
    if section is None:
        return profiles, problems
    if not isinstance(section, dict):
        return profiles, [f"{config.path}: clusters: expected a mapping of name: profile"]
    for name, raw in section.items():
        out = Checker()
        path = ("clusters", name)
        if not isinstance(name, str) or not _NAME.match(name):
            out.error(path, "a cluster name is letters, digits, '.', '_' and '-'")
        raw = raw if raw is not None else {}
        if isinstance(raw, dict) and isinstance(raw.get("ssh"), str):
            PROFILE_SPEC.check({k: v for k, v in raw.items() if k != "ssh"}, path, out)
        else:
            PROFILE_SPEC.check(raw, path, out)
            if isinstance(raw, dict) and isinstance(raw.get("ssh"), dict):
                SSH_SPEC.check(raw["ssh"], (*path, "ssh"), out)
        if not out.found:
            profile, more = _profile(str(name), raw, data_dir)
            for field_name, message in more:
                out.error((*path, field_name), message)
            if profile is not None and not more:
                profiles[str(name)] = profile
        for key, message, *_ in out.found:
            line = config.marks.line(key) if config.marks else None
            where = f"{config.path}:{line}" if line else str(config.path)
            problems.append(f"{where}: {dotted(key)}: {message}")
    return profiles, problems


def _profile(name: str, raw: dict[str, Any], data_dir: Path) -> tuple[Profile | None, list[tuple[str, str]]]:
    problems: list[tuple[str, str]] = []
    ssh_raw = raw.get("ssh")
    ssh: SshSettings | None
    if isinstance(ssh_raw, str):
        ssh = SshSettings(alias=ssh_raw)
    elif isinstance(ssh_raw, dict):
        ssh = SshSettings(**{k: ssh_raw.get(k) for k in SSH_SPEC.fields})
    else:
        ssh = None
    launcher: Launcher = raw.get("launcher") or ("srtctl" if raw.get("srt_slurm") else "demo")
    scheduler = raw.get("scheduler") or ("slurm" if ssh or name != LOCAL else "local")
    if launcher == "srtctl" and not raw.get("srt_slurm"):
        problems.append(("srt_slurm", "the srtctl launcher needs srt_slurm (the srt-slurm checkout on the cluster)"))
    if launcher == "srtctl" and scheduler == "local":
        problems.append(("scheduler", "srtctl submits with sbatch: use scheduler: slurm"))
    commit = raw.get("srt_slurm_commit")
    if isinstance(commit, str) and not re.fullmatch(r"[0-9a-fA-F]{7,40}", commit):
        problems.append(("srt_slurm_commit", "a commit id: 7 to 40 hex digits"))
    default_workdir = "~/srt-console" if ssh else str(data_dir / name)
    workdir = str(raw.get("workdir") or default_workdir)
    outputs: str | None
    if launcher == "srtctl":
        outputs = str(raw["outputs"]) if raw.get("outputs") else None
    else:
        outputs = str(raw.get("outputs") or f"{workdir.rstrip('/')}/outputs")
    results = raw.get("results") or (None if launcher == "srtctl" else f"{workdir.rstrip('/')}/results")
    if problems:
        return None, problems
    return (
        Profile(
            name=name,
            launcher=launcher,
            ssh=ssh,
            scheduler="local" if scheduler == "local" else "slurm",
            workdir=workdir,
            outputs=outputs,
            results=results,
            srt_slurm=raw.get("srt_slurm"),
            partition=raw.get("partition"),
            account=raw.get("account"),
            time_limit=raw.get("time_limit"),
            python=raw.get("python") or "python3",
            max_channels=int(raw.get("max_channels") or 8),
            srtctl=raw.get("srtctl") or "srtctl",
            demo_speed=float(raw["demo_speed"]) if raw.get("demo_speed") else None,
            preflight=raw.get("preflight") is not False,
            srt_slurm_commit=str(raw["srt_slurm_commit"]).lower() if raw.get("srt_slurm_commit") else None,
            srtctl_flavour=raw.get("srtctl_flavour"),
        ),
        [],
    )
