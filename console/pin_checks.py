"""Before anything is submitted: will the cluster's srt-slurm checkout run what the recipe and the
profile say it should?

A recipe states the srt-slurm commit it needs with a comment (`# srt-slurm: <sha>`), a profile
with `srt_slurm_commit`. Both are compared with the checkout's HEAD; where they differ, every
commit is shown side by side with how the checkout relates to the stated one (it contains it,
it lacks it, it has never seen it). The checkout's srtctl must also implement the recipe's
backend and frontend (one module per type in its sources) and, for `schema: 2`, be the fork.
A checkout with local changes runs something no commit names: a warning.

Nothing here decides a job's fate: srtctl's own dry-run stays the final word. These checks
catch what it cannot say (a pin that is not the one that will run) and say early, in plain
words, what it would refuse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from console.clusters import Profile
from console.model import Arm
from console.recipes.pins import SRT_SLURM_PIN
from console.srtctl_site import CommitRelation, SrtctlSite

ProblemKind = Literal["checkout", "commit", "dirty", "backend", "frontend", "schema"]

# What each flavour implements, for a checkout whose sources could not be listed.
_KNOWN_TYPES: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "upstream": (
        frozenset({"sglang", "trtllm", "vllm", "mocker"}),
        frozenset({"dynamo", "sglang", "trtllm_serve", "vllm"}),
    ),
}


@dataclass(frozen=True)
class StatedCommit:
    """An srt-slurm commit someone wrote down: where, and which."""

    source: str  # "recipe (comment line 3)", "profile mi355x (srt_slurm_commit)"
    commit: str


@dataclass(frozen=True)
class PinProblem:
    """One thing about the checkout that does not match the launch; ``blocking`` ones stop it."""

    kind: ProblemKind
    message: str
    blocking: bool = True
    commits: tuple[tuple[str, str], ...] = ()  # (where, commit) side by side, the checkout's last

    def lines(self) -> list[str]:
        """The message, then the commits in aligned columns."""
        width = max((len(where) for where, _ in self.commits), default=0)
        return [self.message, *(f"  {where:<{width}}  {commit}" for where, commit in self.commits)]

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "message": self.message,
            "blocking": self.blocking,
            "commits": [{"where": where, "commit": commit} for where, commit in self.commits],
        }


def stated_commits(arm: Arm, profile: Profile) -> list[StatedCommit]:
    """The srt-slurm commits the recipe (its `# srt-slurm:` comments) and the profile name."""
    found = [StatedCommit(f"recipe ({p.source})", p.value.lower()) for p in arm.pins if p.name == SRT_SLURM_PIN]
    if profile.srt_slurm_commit:
        found.append(StatedCommit(f"profile {profile.name} (srt_slurm_commit)", profile.srt_slurm_commit.lower()))
    return found


def same_commit(a: str, b: str) -> bool:
    """Whether two ids name one commit: equal, or one a prefix (at least 7 digits) of the other."""
    a, b = a.lower(), b.lower()
    short, full = sorted((a, b), key=len)
    return len(short) >= 7 and full.startswith(short)


def check_site(
    arm: Arm,
    profile: Profile,
    site: SrtctlSite,
    relations: dict[str, CommitRelation] | None = None,
) -> list[PinProblem]:
    """Every problem of launching ``arm`` on ``site``; ``relations`` (from
    :func:`console.srtctl_site.commit_relations`) say how each stated commit relates to HEAD."""
    if not site.exists:
        return [PinProblem("checkout", f"no srt-slurm checkout at {site.checkout}: srtctl cannot run there")]
    problems: list[PinProblem] = []
    problems += _commit_problems(stated_commits(arm, profile), site, relations or {})
    if site.dirty:
        head = _short(site.commit) if site.commit else "its HEAD"
        problems.append(
            PinProblem(
                "dirty",
                f"the checkout {site.path or site.checkout} has local changes: what runs is {head} plus "
                "uncommitted edits, which no commit records",
                blocking=False,
            )
        )
    problems += _support_problems(arm, site)
    return problems


def _short(commit: str) -> str:
    return commit[:12]


def _commit_problems(
    stated: list[StatedCommit], site: SrtctlSite, relations: dict[str, CommitRelation]
) -> list[PinProblem]:
    if not stated:
        return []
    head = site.commit
    where = f"cluster checkout {site.path or site.checkout}"
    if head is None:
        rows = (*((s.source, s.commit) for s in stated), (where, "no git commit (not a git checkout?)"))
        return [PinProblem("commit", "srt-slurm commit cannot be checked: the checkout has no git commit", True, rows)]
    differing = [s for s in stated if not same_commit(s.commit, head)]
    if not differing:
        return []
    rows = (*((s.source, s.commit) for s in stated), (where, head + (" (local changes)" if site.dirty else "")))
    problems: list[PinProblem] = []
    for s in differing:
        relation = relations.get(s.commit)
        kind = relation.relation if relation is not None else None
        if kind == "contained":
            text = (
                f"srt-slurm commit differs: {s.source} states {_short(s.commit)}; the checkout runs "
                f"{_short(head)}, which is newer and contains it (the numbers will not be from {_short(s.commit)})"
            )
            problems.append(PinProblem("commit", text, False, rows))
        elif kind == "known":
            text = (
                f"srt-slurm commit mismatch: {s.source} states {_short(s.commit)}; the checkout runs "
                f"{_short(head)}, which does not contain it (an older checkout, or another branch)"
            )
            problems.append(PinProblem("commit", text, True, rows))
        elif kind == "unknown":
            text = (
                f"srt-slurm commit mismatch: {s.source} states {_short(s.commit)}, which the checkout's "
                f"repository does not have (not fetched there, or a mistyped id); it runs {_short(head)}"
            )
            problems.append(PinProblem("commit", text, True, rows))
        else:
            text = f"srt-slurm commit mismatch: {s.source} states {_short(s.commit)}; the checkout runs {_short(head)}"
            problems.append(PinProblem("commit", text, True, rows))
    return problems


def _support_problems(arm: Arm, site: SrtctlSite) -> list[PinProblem]:
    problems: list[PinProblem] = []
    flavour = site.flavour or "unknown"
    version = f" {site.version}" if site.version else ""
    who = f"the cluster's srtctl{version} ({flavour} flavour, {_short(site.commit) if site.commit else 'no commit'})"
    if arm.schema == 2 and site.flavour == "upstream":
        problems.append(PinProblem("schema", f"schema: 2 recipes run only on the fork's srtctl; {who} is upstream"))
    known = _KNOWN_TYPES.get(flavour)
    backends = set(site.backends) or (set(known[0]) if known else set())
    frontends = set(site.frontends) or (set(known[1]) if known else set())
    if backends and arm.backend not in backends:
        problems.append(
            PinProblem(
                "backend",
                f"backend {arm.backend!r} is not supported by {who}: it has {', '.join(sorted(backends))}; "
                "srtctl apply would refuse the recipe",
            )
        )
    if frontends and arm.frontend not in frontends:
        problems.append(
            PinProblem(
                "frontend",
                f"frontend {arm.frontend!r} is not supported by {who}: it has {', '.join(sorted(frontends))}; "
                "srtctl apply would refuse the recipe",
            )
        )
    return problems
