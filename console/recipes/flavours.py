"""Which srtctl will run a recipe, and how that decides what is an error.

Two flavours of srtctl accept different recipes: upstream (NVIDIA/srt-slurm) and the fork the
AMD lane runs (SemiAnalysisAI/srt-slurm: `schema: 2`, ATOM, AToMesh). A recipe is checked
against both; what is reported depends on what is known of the cluster's srtctl:

- known flavour: that flavour's verdict. Upstream's schema is exact for the version the console
  carries, so a key it lacks is an error there; for any other version, and for the fork (whose
  copy lags it), such a key is a warning naming the schema it was checked against.
- unknown flavour: a key no flavour knows is a warning, never an error; any other problem is an
  error only where every flavour refuses it (same field), else a warning naming who refuses it.

The cluster's own `srtctl dry-run` stays the final word before a submission.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from console.recipes.spec import Finding

FlavourName = Literal["upstream", "fork"]
FLAVOUR_NAMES: tuple[FlavourName, ...] = ("upstream", "fork")


def _schema(name: FlavourName) -> ModuleType:
    """A flavour's schema module, imported when first asked for: a profile that names its
    flavour (every command reads the profiles) does not build both schemas."""
    from console.recipes import fork, upstream

    return upstream if name == "upstream" else fork


def _label(name: FlavourName) -> str:
    return str(_schema(name).LABEL)


def _name(name: FlavourName) -> str:
    return str(_schema(name).NAME)


def _upstream_version() -> str:
    return str(_schema("upstream").VERSION)


# Files only the fork's checkout has (its ATOM backend, AToMesh frontend, schema 2 roles).
FORK_MARKERS = frozenset(
    {
        "src/srtctl/backends/atom.py",
        "src/srtctl/frontends/atomesh.py",
        "src/srtctl/core/roles.py",
        "src/srtctl/core/migrate.py",
    }
)
SRTCTL_MARKER = "src/srtctl/cli/submit.py"


@dataclass(frozen=True)
class Flavour:
    """The srtctl a cluster runs: its flavour and, when known, its version (pyproject)."""

    name: FlavourName
    version: str | None = None

    @property
    def label(self) -> str:
        if self.version and not (self.name == "upstream" and self.version == _upstream_version()):
            return f"{_label(self.name)}; the cluster runs {self.version}"
        return _label(self.name)

    @property
    def exact(self) -> bool:
        """The console's copy of this flavour's schema is the one the cluster runs."""
        return self.name == "upstream" and self.version in (None, _upstream_version())


UPSTREAM = Flavour("upstream")
FORK = Flavour("fork")


def detect_flavour(files: Iterable[str], pyproject: str | None = None) -> Flavour | None:
    """The flavour of an srt-slurm checkout, from its file paths relative to the checkout
    root (and its pyproject.toml text, for the version). None: not an srtctl checkout."""
    names = {f.lstrip("./") for f in files}
    if SRTCTL_MARKER not in names:
        return None
    name: FlavourName = "fork" if names & FORK_MARKERS else "upstream"
    return Flavour(name, checkout_version(pyproject) if pyproject else None)


_VERSION = re.compile(r'^\s*version\s*=\s*["\']([^"\']+)["\']', re.MULTILINE)


def checkout_version(pyproject: str) -> str | None:
    """`version = "..."` of the [project] table of a pyproject.toml text."""
    section = pyproject.split("[project]", 1)
    if len(section) < 2:
        return None
    body = section[1].split("\n[", 1)[0]
    found = _VERSION.search(body)
    return found.group(1) if found else None


def parse_flavour(text: str | None) -> Flavour | None:
    if text is None:
        return None
    if text not in FLAVOUR_NAMES:
        raise ValueError(f"unknown srtctl flavour {text!r}: use {' or '.join(FLAVOUR_NAMES)}")
    return Flavour(text)


# --- weighing the findings of every flavour ----------------------------------------------------

Verdict = list[tuple[tuple[object, ...], str, str, str]]  # (path, message, severity, kind)


def judge(found: dict[FlavourName, list[Finding]], flavour: Flavour | None) -> Verdict:
    """The problems to report for one job, from each flavour's findings."""
    if flavour is not None:
        return _known(found, flavour)
    return _unknown(found)


def _unknown_paths(found: list[Finding]) -> set[tuple[object, ...]]:
    return {f.path for f in found if f.kind == "unknown"}


def _known(found: dict[FlavourName, list[Finding]], flavour: Flavour) -> Verdict:
    other: FlavourName = "fork" if flavour.name == "upstream" else "upstream"
    unknown_there = _unknown_paths(found[other])
    out: Verdict = []
    for f in found[flavour.name]:
        if f.kind != "unknown":
            out.append((f.path, f.message, f.severity, f.kind))
            continue
        elsewhere = f" ({_name(other)} has it)" if f.path not in unknown_there else ""
        if flavour.exact:
            out.append((f.path, f"{f.message}: {flavour.label} refuses it{elsewhere}", "error", f.kind))
        else:
            out.append((f.path, f"{f.message}: not in {flavour.label} as the console knows it{elsewhere}; "
                        "the cluster's srtctl dry-run decides", "warning", f.kind))  # fmt: skip
    return out


def _unknown(found: dict[FlavourName, list[Finding]]) -> Verdict:
    out: Verdict = []
    seen: set[tuple[tuple[object, ...], str]] = set()

    def add(path: tuple[object, ...], message: str, severity: str, kind: str = "") -> None:
        if (path, message) not in seen:
            seen.add((path, message))
            out.append((path, message, severity, kind))

    unknown = {name: _unknown_paths(found[name]) for name in FLAVOUR_NAMES}
    refused = {name: {f.path for f in found[name] if f.severity == "error" and f.kind != "unknown"}
               for name in FLAVOUR_NAMES}  # fmt: skip
    for name in FLAVOUR_NAMES:
        for f in found[name]:
            if f.kind == "unknown":
                if all(f.path in unknown[n] for n in FLAVOUR_NAMES):
                    add(f.path, f"{f.message}: in no srtctl schema the console knows ({_all_labels()}); "
                        "the cluster's srtctl dry-run decides", "warning", f.kind)  # fmt: skip
                else:
                    knows = [_name(n) for n in FLAVOUR_NAMES if f.path not in unknown[n]]
                    add(f.path, f"{f.message} of {_name(name)} ({' and '.join(knows)} has it)", "warning", f.kind)
            elif f.severity == "error":
                others = [n for n in FLAVOUR_NAMES if n != name]
                if all(f.path in refused[n] for n in others):
                    if not any(p == f.path and s == "error" for p, _, s, _ in out):
                        add(f.path, f.message, "error", f.kind)
                else:
                    add(f.path, f"{f.message} [refused by {_name(name)} only]", "warning", f.kind)
            else:
                add(f.path, f.message, f.severity, f.kind)
    return out


def _all_labels() -> str:
    return "; ".join(_label(n) for n in FLAVOUR_NAMES)


def describe(flavour: Flavour | None) -> str:
    """What a recipe was checked against, for one line of output."""
    if flavour is None:
        return f"checked against every srtctl flavour the console knows ({_all_labels()})"
    return f"checked against {flavour.label}"


__all__ = [
    "FLAVOUR_NAMES",
    "FORK",
    "UPSTREAM",
    "Flavour",
    "FlavourName",
    "checkout_version",
    "describe",
    "detect_flavour",
    "judge",
    "parse_flavour",
]
