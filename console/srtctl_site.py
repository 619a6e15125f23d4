"""What a cluster's srt-slurm checkout holds, read in one round trip: the facts the srtctl launcher,
the `clusters` check and the launch plan need.

srtctl reads its cluster settings from `srtslurm.yaml` ($SRTSLURM_CONFIG, else the working
directory, its parent or its grandparent; the launcher runs srtctl in the checkout), refuses to
submit without the binaries `make setup` installs, and writes job dirs under the settings'
`output_dir` unless `-o` is given. This module asks the cluster for all of that at once and
parses it; it never decides anything about a job.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

import yaml

from console.sanitize import clean_line
from console.transport.base import Transport

# What `make setup` installs and `srtctl apply` checks for (srtctl.cli.submit.validate_setup).
SETUP_BINARIES = ("configs/nats-server", "configs/etcd", "bin/uv", "bin/tachometer-scraper")
# Present only in the fork that runs schema-2 recipes with the ATOM backend and AToMesh router.
FORK_MARKERS = ("src/srtctl/backends/atom.py", "src/srtctl/frontends/atomesh.py")
_MAX_SETTINGS = 256 * 1024

_PROBE = r"""
checkout=$1; shift
if ! cd -- "$checkout" 2>/dev/null; then echo "@nocheckout"; exit 0; fi
echo "@checkout $(pwd -P)"
for f in "$@"; do if [ -e "$f" ]; then echo "@have $f"; else echo "@missing $f"; fi; done
v=$(sed -n 's/^version *= *"\([^"]*\)".*/\1/p' pyproject.toml 2>/dev/null | head -n 1)
[ -n "$v" ] && echo "@version $v"
if c=$(git rev-parse HEAD 2>/dev/null); then
  echo "@commit $c"
  [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null | head -c 1)" ] && echo "@dirty"
fi
for d in src/srtctl/backends src/srtctl/frontends; do
  [ -d "$d" ] && echo "@modules ${d##*/} $(cd "$d" && ls 2>/dev/null | tr '\n' ' ')"
done
settings=""
if [ -n "${SRTSLURM_CONFIG:-}" ] && [ -f "$SRTSLURM_CONFIG" ]; then settings=$SRTSLURM_CONFIG
else for d in . .. ../..; do if [ -f "$d/srtslurm.yaml" ]; then settings=$d/srtslurm.yaml; break; fi; done; fi
if [ -n "$settings" ]; then
  echo "@settings $(cd "$(dirname "$settings")" && pwd -P)/$(basename "$settings")"
  echo "@begin"; head -c MAXBYTES "$settings"; echo; echo "@end"
fi
"""


@dataclass(frozen=True)
class SrtctlSite:
    """One srt-slurm checkout on a cluster, as its files say."""

    checkout: str  # as configured (may start with ~)
    exists: bool
    path: str | None = None  # the resolved path
    version: str | None = None  # pyproject.toml's version
    commit: str | None = None
    dirty: bool = False
    flavour: str | None = None  # "upstream" or "fork", from the checkout's own sources
    missing_binaries: tuple[str, ...] = ()
    settings_path: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    settings_error: str | None = None
    # The backend and frontend types the checkout's srtctl implements (one module per type).
    backends: tuple[str, ...] = ()
    frontends: tuple[str, ...] = ()

    def setting(self, key: str) -> Any:
        return self.settings.get(key)

    @property
    def output_dir(self) -> str | None:
        """Where srtctl writes job dirs without `-o`: the settings' output_dir, else <checkout>/outputs."""
        value = self.settings.get("output_dir")
        if isinstance(value, str) and value:
            return value
        return f"{self.path}/outputs" if self.path else None


async def probe_site(transport: Transport, checkout: str, *, timeout: float = 30.0) -> SrtctlSite:
    """Read the checkout's facts with one command; a missing checkout is a fact, not an error."""
    markers = (*SETUP_BINARIES, *FORK_MARKERS)
    script = _PROBE.replace("MAXBYTES", str(_MAX_SETTINGS))
    result = await transport.run(["sh", "-c", script, "sh", checkout, *markers], timeout=timeout)
    return parse_probe(checkout, result.stdout)


def parse_probe(checkout: str, text: str) -> SrtctlSite:
    lines = text.splitlines()
    if not lines or lines[0].strip() == "@nocheckout" or not any(x.startswith("@checkout ") for x in lines):
        return SrtctlSite(checkout=checkout, exists=False)
    facts: dict[str, Any] = {"have": set(), "missing": set()}
    modules: dict[str, tuple[str, ...]] = {}
    body: list[str] = []
    inside = False
    for line in lines:
        if inside:
            if line == "@end":
                inside = False
            else:
                body.append(line)
            continue
        word, _, rest = line.partition(" ")
        if word == "@begin":
            inside = True
        elif word in ("@have", "@missing"):
            facts[word[1:]].add(rest)
        elif word == "@modules":
            kind, _, names = rest.partition(" ")
            modules[kind] = _module_types(names.split())
        elif word == "@dirty":
            facts["dirty"] = True
        elif word.startswith("@"):
            facts[word[1:]] = rest.strip()
    settings: dict[str, Any] = {}
    error: str | None = None
    if "settings" in facts:
        try:
            doc = yaml.safe_load("\n".join(body)) if body else None
        except yaml.YAMLError as exc:
            error = clean_line(str(exc).splitlines()[0] if str(exc) else "not YAML")
        else:
            if doc is None:
                doc = {}
            if isinstance(doc, dict):
                settings = doc
            else:
                error = "not a mapping of settings"
    fork = any(m in facts["have"] for m in FORK_MARKERS)
    return SrtctlSite(
        checkout=checkout,
        exists=True,
        path=facts.get("checkout"),
        version=facts.get("version"),
        commit=facts.get("commit"),
        dirty=bool(facts.get("dirty")),
        flavour="fork" if fork else "upstream",
        missing_binaries=tuple(b for b in SETUP_BINARIES if b in facts["missing"]),
        settings_path=facts.get("settings"),
        settings=settings,
        settings_error=error,
        backends=modules.get("backends", ()),
        frontends=modules.get("frontends", ()),
    )


def _module_types(names: list[str]) -> tuple[str, ...]:
    """`sglang.py vllm.py base.py __init__.py` -> ("sglang", "vllm"): one module per type."""
    found = {n[:-3] for n in names if n.endswith(".py") and not n.startswith("_") and n != "base.py"}
    return tuple(sorted(clean_line(n, 64) for n in found))


async def srtctl_runs(transport: Transport, srtctl: list[str], checkout: str, *, timeout: float = 60.0) -> str | None:
    """None when `srtctl --help` runs in the checkout; otherwise what went wrong, in the tool's words."""
    result = await transport.run([*srtctl, "--help"], cwd=checkout or None, timeout=timeout)
    if result.ok and "usage" in result.stdout.lower():
        return None
    detail = (result.stderr.strip() or result.stdout.strip())[-500:]
    return clean_line(f"`{shlex.join([*srtctl, '--help'])}` exited with {result.returncode}: {detail}")


_RELATIONS = r"""
cd -- "$1" 2>/dev/null || exit 0; shift
for c in "$@"; do
  if full=$(git rev-parse --verify --quiet "$c^{commit}" 2>/dev/null); then
    if git merge-base --is-ancestor "$full" HEAD 2>/dev/null; then echo "@contained $c $full"
    else echo "@known $c $full"; fi
  else echo "@unknown $c"; fi
done
"""
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class CommitRelation:
    """How a stated commit relates to the checkout: "contained" (HEAD is it or descends from it),
    "known" (in the repository, not in HEAD's history: newer, or another branch), "unknown"."""

    commit: str
    relation: str
    full: str | None = None


async def commit_relations(
    transport: Transport, checkout: str, commits: list[str], *, timeout: float = 30.0
) -> dict[str, CommitRelation]:
    """Where each commit stands against the checkout's HEAD, in one round trip (hex ids only)."""
    wanted = sorted({c.lower() for c in commits if 4 <= len(c) <= 40 and set(c.lower()) <= _HEX})
    if not wanted:
        return {}
    result = await transport.run(["sh", "-c", _RELATIONS, "sh", checkout, *wanted], timeout=timeout)
    found: dict[str, CommitRelation] = {}
    for line in result.stdout.splitlines():
        word, _, rest = line.partition(" ")
        parts = rest.split()
        if word in ("@contained", "@known") and len(parts) == 2 and parts[0] in wanted:
            found[parts[0]] = CommitRelation(parts[0], word[1:], parts[1])
        elif word == "@unknown" and len(parts) == 1 and parts[0] in wanted:
            found[parts[0]] = CommitRelation(parts[0], "unknown")
    return found
