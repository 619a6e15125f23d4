"""From located findings to a diagnosis: root cause, consequences, verdict and advice.

An :class:`Observation` is one signature matched at one file and line, with the worker,
node and rank it came from and the time it was written where the line (or the lines
before it) says. :func:`diagnose` turns a collection of them into a :class:`Diagnosis`:

- findings are grouped by (signature, node, worker, rank) with counts;
- the root cause is the earliest specific (non-wrapper) fatal finding: startup before
  infra before runtime before scheduler, then the earliest time, then the narrower
  (higher-priority) signature, then file order; a worker's own line beats srtctl's quote
  of it in the sweep log. Without one, the earliest specific non-wrapper error, then the
  earliest in time of an unrecognised error (a ``generic`` signature: an uncaught exception,
  a FATAL, srtctl's ERROR line) and a fatal wrapper (the cause is then in a log that was not
  read; an unrecognised error or a health-check timeout a second after a process died is that
  death's consequence), else the earliest wrapper;
- other signatures on the root's own lines (the OOM of a traceback whose next exception says
  graph capture failed) are the same failure, not its consequences; every other error or
  fatal group is a consequence (wrappers and cascades);
- "deterministic" when the root signature hits every worker of a role that has logs
  (a role of two or more workers, or all workers when there are two or more), or when the
  same root cause ended an earlier attempt of the arm;
- the verdict: ``healthy`` (nothing fatal, no error), ``degraded`` (errors, nothing fatal),
  ``stalled`` (no worker wrote a line for a long time while srtctl waits for health),
  ``doomed`` (a fatal startup finding - or any fatal finding while the servers are still
  starting - while the scheduler still runs the job), ``failed`` (fatal, and the job ended
  or is ending; or the scheduler or srtctl says the job failed, whatever was found),
  ``cancelled`` (the operator cancelled it: not a failure, whatever the logs say after that).

When the orchestrator says the benchmark completed successfully, its word is the verdict's
ceiling (``degraded`` at worst), and what is logged after its ``Cleanup`` line (workers losing
etcd as it stops, steps cancelled, srun's "Killed") is the teardown, shown apart and never a
cause.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from console.signatures import Finding, Matcher, default_matcher
from console.templates import line_template

__all__ = [
    "CATEGORY_RANK",
    "FAILED_STATES",
    "LIVE_STATES",
    "VERDICTS",
    "Diagnosis",
    "FindingGroup",
    "Observation",
    "Stall",
    "after_stop",
    "diagnose",
    "diagnose_groups",
    "group_findings",
    "leaves_broken",
    "outlived",
    "root_key",
    "same_failure",
]

VERDICTS: Final[tuple[str, ...]] = ("healthy", "degraded", "stalled", "failed", "doomed", "cancelled")
LIVE_STATES: Final = frozenset({"PENDING", "RUNNING", "CONFIGURING", "REQUEUED", "SUSPENDED"})
FAILED_STATES: Final = frozenset({"FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "TIMEOUT"})
"""Scheduler states that say the job failed, whatever its logs hold."""
CATEGORY_RANK: Final = {"startup": 0, "infra": 1, "runtime": 2, "scheduler": 3}
_SEVERITY_RANK: Final = {"fatal": 0, "error": 1, "warning": 2}
# GPU faults that leave the process's GPU context broken, and the ids of the GPU's own errors.
_STICKY_FAULTS: Final = frozenset({"gpu-illegal-memory-access", "gpu-device-side-assert", "rocm-gpu-memory-fault"})
_GPU_IDS: Final = ("gpu-", "cuda-", "rocm-")
# Findings of one file this close to a root line (in lines and in seconds) are the same failure.
SAME_FAILURE_LINES: Final[int] = 60
SAME_FAILURE_S: Final[float] = 5.0
# How far below a report that introduces a traceback its exception may be (frames of a deep stack).
_TRACEBACK_LINES: Final[int] = 400


@dataclass(frozen=True)
class Observation:
    """One finding at a file and 1-based line.

    ``time`` is seconds (a UTC-naive epoch when ``time_has_date``, else seconds of the day);
    ``order`` is the arrival order across all files, the last tie-breaker.
    """

    finding: Finding
    file: str
    line_no: int
    text: str
    order: int = 0
    node: str | None = None
    worker: str | None = None  # logical worker, e.g. "prefill_w0"
    mode: str | None = None  # prefill | decode | agg
    rank: str | None = None  # "3" (global rank), "DP1", "TP2"
    time: float | None = None
    time_has_date: bool = False
    quoted: bool = False  # a worker's line as srtctl quotes it in the sweep log's FAILURE DETAILS

    @property
    def id(self) -> str:
        return self.finding.signature_id

    @property
    def category(self) -> str:
        return self.finding.category

    @property
    def severity(self) -> str:
        return self.finding.severity

    @property
    def wrapper(self) -> bool:
        return self.finding.wrapper

    @property
    def generic(self) -> bool:
        """An error no specific signature knows (shown as unrecognised)."""
        return self.finding.generic

    @property
    def stop(self) -> bool:
        """A stop asked of the process (a SIGTERM it received): what its file reports after it is teardown."""
        return self.finding.stop

    @property
    def family(self) -> str | None:
        """The family word that named this failure when no regex of its signature matched."""
        return self.finding.captures.get("family") if self.finding.family else None

    @property
    def basis(self) -> str | None:
        """How this failure was named when no regex of its signature matched (a family word, or
        its resemblance to the signature's known lines), or None."""
        return self.finding.basis

    @property
    def key(self) -> tuple[str, str | None, str | None, str | None]:
        """What deduplication groups by."""
        return (self.id, self.node, self.worker, self.rank)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "id": self.id,
            "category": self.category,
            "severity": self.severity,
            "file": self.file,
            "line_no": self.line_no,
            "text": self.text,
            "captures": dict(self.finding.captures),
        }
        if self.node is not None:
            doc["node"] = self.node
        if self.worker is not None:
            doc["worker"] = self.worker
        if self.rank is not None:
            doc["rank"] = self.rank
        return doc


@dataclass(frozen=True)
class FindingGroup:
    """Observations of one signature at one (node, worker, rank): the first, and how many."""

    first: Observation
    count: int
    last_line_no: int

    @property
    def id(self) -> str:
        return self.first.id

    def to_json(self) -> dict[str, Any]:
        doc = self.first.to_json()
        doc["count"] = self.count
        doc["title"] = self.first.finding.title
        doc["wrapper"] = self.first.wrapper
        doc["unrecognised"] = self.first.generic
        if self.first.family is not None:
            doc["by_family"] = self.first.family
        elif self.first.basis is not None:
            doc["by_resemblance"] = self.first.finding.captures.get("resembles", "")
        return doc


@dataclass(frozen=True)
class Stall:
    """No worker output for ``idle_s`` while srtctl waits for health; srtctl's health check
    (``max_attempts`` x ``interval_s``) gives up in ``left_s`` (None when the wait's start is
    not known)."""

    idle_s: float
    left_s: float | None
    max_attempts: int
    interval_s: float

    @property
    def timeout_s(self) -> float:
        return self.max_attempts * self.interval_s

    def describe(self) -> str:
        text = f"no worker output for {_duration(self.idle_s)} while srtctl waits for health"
        check = f"{self.max_attempts} x {self.interval_s:g} s"
        if self.left_s is None:
            return f"{text} (its health check gives up after {check})"
        if self.left_s <= 0:
            return f"{text}; its health check ({check}) is due to give up now"
        return f"{text}; its health check gives up in {_duration(self.left_s)} ({check})"

    def to_json(self) -> dict[str, Any]:
        return {
            "idle_s": round(self.idle_s, 1),
            "left_s": round(self.left_s, 1) if self.left_s is not None else None,
            "max_attempts": self.max_attempts,
            "interval_s": self.interval_s,
            "timeout_s": self.timeout_s,
        }


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


@dataclass(frozen=True)
class Diagnosis:
    """The verdict on one attempt. ``to_json()`` is the documented JSON shape."""

    root_cause: FindingGroup | None
    consequences: tuple[FindingGroup, ...]
    verdict: str
    advice: str
    deterministic: bool = False
    deterministic_roles: tuple[str, ...] = ()
    hint: str | None = None
    root_count: int = 0  # lines of the root signature, all workers and ranks together
    root_workers: tuple[str, ...] = ()  # workers whose logs hold the root signature
    groups: tuple[FindingGroup, ...] = ()  # every group, in time order
    counts: Mapping[str, int] = field(default_factory=dict)  # lines per signature
    job_id: str | None = None
    nodes: int | None = None
    state: str | None = None
    teardown: tuple[FindingGroup, ...] = ()  # logged after a successful run's cleanup began, or after a stop
    stops: tuple[FindingGroup, ...] = ()  # the stops asked of processes that the teardown came after
    same_failure: tuple[FindingGroup, ...] = ()  # the root's own lines named by other signatures
    recurrences: tuple[str, ...] = ()  # earlier attempts of the arm that the same root cause ended
    stall: Stall | None = None

    @property
    def root_key(self) -> str | None:
        """What recurs when the same failure ends another attempt (see :func:`root_key`)."""
        return root_key(self.root_cause) if self.root_cause is not None else None

    def to_json(self) -> dict[str, Any]:
        root: dict[str, Any] | None = None
        if self.root_cause is not None:
            root = self.root_cause.to_json()
            root["hint"] = self.hint
            root["occurrences"] = self.root_count
            root["workers"] = list(self.root_workers)
        return {
            "root_cause": root,
            "same_failure": [g.to_json() for g in self.same_failure],
            "consequences": [g.to_json() for g in self.consequences],
            "verdict": self.verdict,
            "advice": self.advice,
            "deterministic": self.deterministic,
            "deterministic_roles": list(self.deterministic_roles),
            "recurrences": list(self.recurrences),
            "stall": self.stall.to_json() if self.stall is not None else None,
            "counts": dict(self.counts),
            "job_id": self.job_id,
            "nodes": self.nodes,
            "state": self.state,
            "teardown": [g.to_json() for g in self.teardown],
            "stops": [g.to_json() for g in self.stops],
        }


def root_key(group: FindingGroup) -> str:
    """A root cause as it is compared across attempts: its signature, and for an unrecognised
    error also the template of its line (two unknown exceptions are not the same failure)."""
    if group.first.generic:
        return f"{group.id}:{line_template(group.first.text)}"
    return group.id


# --------------------------------------------------------------------------- diagnose


def diagnose(
    observations: Iterable[Observation],
    *,
    state: str | None = None,
    job_id: str | None = None,
    nodes: int | None = None,
    workers: Mapping[str, Iterable[str]] | None = None,
    ending: bool = False,
    starting: bool = False,
    matcher: Matcher | None = None,
    succeeded: bool = False,
    teardown: Callable[[Observation], bool] | None = None,
    cancelled: bool = False,
    failing: bool = False,
    earlier: Sequence[tuple[str, str]] = (),
    stall: Stall | None = None,
    ready: Mapping[str, int] | None = None,
) -> Diagnosis:
    """Diagnose one attempt from its located findings.

    ``state`` is the scheduler's state (RUNNING, FAILED, ...; None when unknown, as in an
    offline scan); ``workers`` maps each role to the logical workers that have logs (for
    "deterministic"; by default the workers named by the findings); ``ending`` says the
    orchestrator already ended the attempt (its log reached cleanup or the end), which
    rules out "doomed"; ``starting`` says the servers never became healthy (the orchestrator
    is still waiting for them), so every fatal finding so far is a startup failure;
    ``succeeded`` says the orchestrator reported success, and ``teardown`` tells which findings
    came after its cleanup began; ``cancelled`` says the operator cancelled the attempt;
    ``failing`` says the orchestrator logged that the job failed; ``earlier`` holds the
    earlier attempts of the arm as ``(attempt ref, root key)``; ``stall`` says no worker wrote
    for long while srtctl waits for health; ``ready`` maps a log to its first line that says its
    server is ready (a startup failure written above it did not stop the start).
    """
    groups = group_findings(observations)
    return diagnose_groups(
        groups,
        state=state,
        job_id=job_id,
        nodes=nodes,
        workers=workers,
        ending=ending,
        starting=starting,
        matcher=matcher,
        succeeded=succeeded,
        teardown=teardown,
        cancelled=cancelled,
        failing=failing,
        earlier=earlier,
        stall=stall,
        ready=ready,
    )


def group_findings(observations: Iterable[Observation]) -> list[FindingGroup]:
    """Deduplicate by (signature, node, worker, rank): the first of each, with counts."""
    firsts: dict[tuple[str, str | None, str | None, str | None], Observation] = {}
    tally: dict[tuple[str, str | None, str | None, str | None], int] = {}
    last: dict[tuple[str, str | None, str | None, str | None], int] = {}
    for o in observations:
        key = o.key
        seen = firsts.get(key)
        if seen is None or (seen.quoted and not o.quoted):
            firsts[key] = o
        tally[key] = tally.get(key, 0) + 1
        last[key] = max(last.get(key, 0), o.line_no)
    return [FindingGroup(first=firsts[k], count=tally[k], last_line_no=last[k]) for k in firsts]


def diagnose_groups(
    groups: Iterable[FindingGroup],
    *,
    state: str | None = None,
    job_id: str | None = None,
    nodes: int | None = None,
    workers: Mapping[str, Iterable[str]] | None = None,
    ending: bool = False,
    starting: bool = False,
    matcher: Matcher | None = None,
    succeeded: bool = False,
    teardown: Callable[[Observation], bool] | None = None,
    cancelled: bool = False,
    failing: bool = False,
    earlier: Sequence[tuple[str, str]] = (),
    stall: Stall | None = None,
    ready: Mapping[str, int] | None = None,
) -> Diagnosis:
    """:func:`diagnose` for findings already grouped (a live follower keeps groups, not lines)."""
    ordered = list(groups)
    clock = _clock([g.first for g in ordered])
    ordered.sort(key=lambda g: (clock(g.first), g.first.order, g.first.file, g.first.line_no))
    torn: tuple[FindingGroup, ...] = ()
    if succeeded and teardown is not None:
        torn = tuple(g for g in ordered if teardown(g.first))
        ordered = [g for g in ordered if g not in torn]
    stops, stopped = _stopped(ordered)
    if stopped:
        torn += stopped
        ordered = [g for g in ordered if g not in stopped]
    state_name = _state_name(state)
    counts: dict[str, int] = {}
    for g in ordered:
        counts[g.id] = counts.get(g.id, 0) + g.count

    survived = _survived(ready or {}, ordered)
    root = _root(ordered, survived)
    # A startup failure the server outlived ended nothing: it degrades a run, it does not fail it.
    has_fatal = any(g.first.severity == "fatal" and not survived(g) for g in ordered)
    has_error = any(g.first.severity == "error" or survived(g) for g in ordered)

    roles = _roles(workers, ordered)
    det_roles: tuple[str, ...] = ()
    deterministic = False
    root_workers: tuple[str, ...] = ()
    root_count = 0
    hint: str | None = None
    consequences: tuple[FindingGroup, ...] = ()
    same: tuple[FindingGroup, ...] = ()
    recurrences: tuple[str, ...] = ()
    if root is not None:
        root_id = root.id
        root_groups = [g for g in ordered if g.id == root_id]
        root_count = sum(g.count for g in root_groups)
        root_workers = tuple(sorted({g.first.worker for g in root_groups if g.first.worker is not None}))
        det_roles, deterministic = _determinism(set(root_workers), roles)
        same = tuple(g for g in ordered if g.id != root_id and any(same_failure(r.first, g.first) for r in root_groups))
        consequences = tuple(
            g for g in ordered if g.id != root_id and g not in same and g.first.severity in ("fatal", "error")
        )
        try:
            signature = (matcher or default_matcher()).signature(root_id)
        except KeyError:
            hint = None
        else:
            hint = signature.hint
            # The cluster's setup or the recipe itself: every rerun fails the same way.
            deterministic = deterministic or signature.deterministic
        if not root.first.wrapper:
            # The same failure ended an earlier attempt of the arm: it will end the next one.
            key = root_key(root)
            recurrences = tuple(ref for ref, earlier_key in earlier if earlier_key == key)
            deterministic = deterministic or bool(recurrences)

    live = state_name in LIVE_STATES
    ended_badly = failing or (not live and state_name in FAILED_STATES)
    if cancelled:
        verdict = "cancelled"
    elif succeeded:
        verdict = "degraded" if has_fatal or has_error else "healthy"
    elif has_fatal and live and not ending and any(_startup_fatal(g, starting) and not survived(g) for g in ordered):
        verdict = "doomed"
    elif has_fatal or ended_badly:
        verdict = "failed"
    elif stall is not None and live:
        verdict = "stalled"
    else:
        verdict = "degraded" if has_error else "healthy"

    advice = _advice(verdict, root, hint, deterministic, root_workers, job_id, nodes, recurrences, stall, state_name)
    return Diagnosis(
        root_cause=root,
        consequences=consequences,
        verdict=verdict,
        advice=advice,
        deterministic=deterministic,
        deterministic_roles=det_roles,
        hint=hint,
        root_count=root_count,
        root_workers=root_workers,
        groups=tuple(ordered),
        counts=counts,
        job_id=job_id,
        nodes=nodes,
        state=state_name,
        teardown=torn,
        stops=stops,
        same_failure=same,
        recurrences=recurrences,
        stall=stall if verdict == "stalled" else None,
    )


def same_failure(root: Observation, other: Observation) -> bool:
    """Whether ``other`` names the failure of the ``root`` line again: a specific finding of the
    same file a few lines and seconds from it, or the exception that caused it (the OOM that
    a graph capture failed on), not a wrapper that reports it."""
    if other.wrapper or other.file != root.file or other.severity not in ("fatal", "error"):
        return False
    if root.finding.captures.get("caused_by") == other.id or other.finding.captures.get("caused_by") == root.id:
        return True
    if abs(other.line_no - root.line_no) > SAME_FAILURE_LINES:
        return False
    if root.time is not None and other.time is not None and root.time_has_date == other.time_has_date:
        return abs(other.time - root.time) <= SAME_FAILURE_S
    return True


def after_stop(o: Observation, stop_line: int | None) -> bool:
    """Whether ``o`` is a report or an unrecognised error its file wrote after a stop asked of its
    process at ``stop_line``: a worker told to stop reports its engine dead as it goes. A specific
    cause written after a stop is still a failure."""
    return stop_line is not None and not o.stop and (o.wrapper or o.generic) and o.line_no > stop_line


def outlived(o: Observation, ready: Mapping[str, int]) -> bool:
    """Whether ``o`` is a fatal startup finding its log's server outlived: the log said the server
    was ready (``ready``: a log's first such line) below it, as after a NIC Mooncake could not
    open while it went on with the others."""
    line = ready.get(o.file)
    return line is not None and o.severity == "fatal" and o.category == "startup" and o.line_no < line


def _stopped(groups: list[FindingGroup]) -> tuple[tuple[FindingGroup, ...], tuple[FindingGroup, ...]]:
    """The stops asked of processes (a SIGTERM received), and the reports and unrecognised errors
    their files wrote after them: a worker told to stop reports its engine dead as it goes
    (vLLM's `EngineDeadError` after `received signal=SIGTERM`). A specific cause written after
    a stop is still a failure."""
    first: dict[str, FindingGroup] = {}
    for g in groups:
        if g.first.stop and (g.first.file not in first or g.first.line_no < first[g.first.file].first.line_no):
            first[g.first.file] = g
    if not first:
        return (), ()
    line = {file: g.first.line_no for file, g in first.items()}
    stopped = tuple(g for g in groups if after_stop(g.first, line.get(g.first.file)))
    used = tuple(s for s in first.values() if any(g.first.file == s.first.file for g in stopped))
    return used, stopped


def _startup_fatal(group: FindingGroup, starting: bool) -> bool:
    first = group.first
    if first.severity != "fatal":
        return False
    # Before the servers are healthy every failure is a startup failure, whatever its
    # signature's usual category; Slurm's own verdicts end the job anyway.
    return first.category == "startup" or (starting and first.category != "scheduler")


def _clock(obs: list[Observation]) -> Callable[[Observation], float]:
    """A time key: absolute when every timed observation has a date, else the time of day."""
    dated = all(o.time_has_date for o in obs if o.time is not None)

    def key(o: Observation) -> float:
        if o.time is None:
            return math.inf
        return o.time if dated else o.time % 86400.0

    return key


def leaves_broken(start: Observation, later: Observation) -> bool:
    """Whether ``later`` is what the startup failure ``start`` left broken: a specific failure of
    the same component (the id's first word), later in the same log (Mooncake's `Memory region
    not registered` under requests, after its registration failed). The server outlived the
    start, not the failure: the start is its cause."""
    return (
        later.file == start.file
        and later.line_no > start.line_no
        and later.id != start.id
        and later.id.split("-", 1)[0] == start.id.split("-", 1)[0]
        and not later.wrapper
        and not later.generic
        and later.severity in ("fatal", "error")
    )


def _survived(ready: Mapping[str, int], groups: Sequence[FindingGroup]) -> Callable[[FindingGroup], bool]:
    """Whether a group is a startup failure its log's server :func:`outlived`, and that left
    nothing broken (:func:`leaves_broken`). It is no root cause while a specific failure the
    server did not outlive is found."""
    # (worked out once: the diagnosis asks of each group several times)
    survivors = {
        id(g)
        for g in groups
        if outlived(g.first, ready) and not any(leaves_broken(g.first, later.first) for later in groups)
    }
    return lambda g: id(g) in survivors


def _broken_context(groups: Sequence[FindingGroup]) -> set[int]:
    """The GPU errors a log reports after a GPU fault in it (an illegal address, a device-side
    assert, a memory fault): the fault leaves the process's GPU context broken, and every later
    call fails with whatever error it meets (`device(s) is/are busy or unavailable` from the
    next stream switch). They are its consequences, not causes."""
    fault: dict[str, int] = {}
    for g in groups:
        if g.id in _STICKY_FAULTS and not g.first.quoted:
            fault[g.first.file] = min(g.first.line_no, fault.get(g.first.file, g.first.line_no))
    return {
        id(g)
        for g in groups
        if g.id not in _STICKY_FAULTS
        and g.id.startswith(_GPU_IDS)
        and g.first.line_no > fault.get(g.first.file, math.inf)
    }


def _root(groups: list[FindingGroup], survived: Callable[[FindingGroup], bool]) -> FindingGroup | None:
    broken = _broken_context(groups)
    causes = [g for g in groups if not g.first.wrapper and not g.first.generic and id(g) not in broken]
    known = [g for g in causes if not g.first.finding.family]
    family = [g for g in causes if g.first.finding.family]
    # A cause a regex knows, then one named only by a family word in an error line or by
    # resemblance to known lines; a startup failure the server outlived after all of them.
    specific = (
        [g for g in known if g.first.severity == "fatal"],
        [g for g in known if g.first.severity == "error"],
        [g for g in family if g.first.severity == "fatal"],
        [g for g in family if g.first.severity == "error"],
    )
    outlived = [g for tier in specific for g in tier if survived(g)]
    for tier in (*([g for g in tier if not survived(g)] for tier in specific), outlived):
        if tier:
            clock = _clock([g.first for g in tier])
            return min(
                tier,
                key=lambda g: (
                    CATEGORY_RANK.get(g.first.category, 9),
                    g.first.quoted,
                    clock(g.first),
                    -g.first.finding.priority,
                    g.first.order,
                    g.first.file,
                    g.first.line_no,
                ),
            )
    # Nothing specific: an unrecognised error or a fatal report that something died, whichever
    # was written first (a report written after another one is its consequence: vLLM's
    # `Executor failed` after `Worker proc ... died`), else any report. Of each kind the
    # earliest, then the most severe and narrowest.
    unrecognised = [
        g for g in groups if g.first.generic and not g.first.wrapper and g.first.severity in ("fatal", "error")
    ]
    reports = [g for g in groups if g.first.wrapper and g.first.severity == "error"]
    fatal = [g for g in groups if g.first.wrapper and g.first.severity == "fatal"]
    fatal_reports = [
        _reported_above(g, reports) for g in fatal if not _said_below(g, fatal) and not _reports_below(g, unrecognised)
    ]
    firsts = [_earliest(kind) for kind in (unrecognised, fatal_reports) if kind]
    if firsts:
        clock = _clock([g.first for g in firsts])
        return min(firsts, key=lambda g: (g.first.quoted, clock(g.first), g.first.order))
    return _earliest(reports) if reports else None


def _reported_above(report: FindingGroup, reports: list[FindingGroup]) -> FindingGroup:
    """The report a fatal ``report`` repeats: the first lesser one just above it in its file (Slurm
    cancelling a step `DUE TO TASK FAILURE` below srun's `task 3: Exited with exit code 127`),
    else ``report`` itself."""
    first = report.first
    above = [
        g
        for g in reports
        if g.first.file == first.file
        and g.first.quoted == first.quoted
        and 0 < first.line_no - g.first.line_no <= SAME_FAILURE_LINES
    ]
    return min(above, key=lambda g: g.first.line_no) if above else report


def _said_below(report: FindingGroup, reports: list[FindingGroup]) -> bool:
    """Whether ``report`` is an uncaught C++ exception (`terminate called after throwing an
    instance of 'c10::DistBackendError'`) whose `what():` lines just below hold a report of their
    own (`Watchdog caught collective operation timeout`): the process died of that one."""
    first = report.first
    if first.id != "process-crash-signal" or "exception" not in first.finding.captures:
        return False
    return any(
        g.first.file == first.file and g.first.quoted == first.quoted and 0 < g.first.line_no - first.line_no <= 3
        for g in reports
        if g.id != first.id
    )


def _reports_below(report: FindingGroup, unrecognised: list[FindingGroup]) -> bool:
    """Whether a fatal ``report`` introduces an uncaught exception below it: SGLang's `Scheduler hit
    an exception: Traceback ...` and `Exception in ModelTpServer:`, vLLM's `WorkerProc hit an
    exception.` (its process's next lines), Ray's `RayTaskError(ValueError): ray::...` are followed by
    the traceback of what they report; when it ends in an exception no signature knows, that
    exception is the cause (the report only came first)."""
    first = report.first
    text = first.text.rstrip()
    opens = "Traceback (most recent call last)" in text or text.endswith(":")
    below = [
        g
        for g in unrecognised
        if "exception" in g.first.finding.captures
        and g.first.file == first.file
        and g.first.quoted == first.quoted
        and 0 < g.first.line_no - first.line_no <= _TRACEBACK_LINES
    ]
    if not below:
        return False
    nearest = min(below, key=lambda g: g.first.line_no)
    # (or a report that says only that, and its process goes on with the traceback: vLLM's
    # `WorkerProc hit an exception.`; or its dump of the engine's state before its fatal error,
    # when the exception says more than its name: `RuntimeError: producer rejected selective
    # pull plan ...`, not a bare `TimeoutError` of an engine that hung)
    pid = first.finding.captures.get("pid")
    said = (
        pid is not None
        and nearest.first.finding.captures.get("pid") == pid
        and (text.endswith(".") or _says_more(nearest.first))
    )
    return opens or said or f"({nearest.first.finding.captures['exception']})" in text


def _says_more(exception: Observation) -> bool:
    """Whether an uncaught exception's line says more than the exception's name."""
    name = exception.finding.captures["exception"]
    text = exception.text
    at = text.rfind(name)
    return at >= 0 and bool(text[at + len(name) :].lstrip(":").strip())


def _earliest(tier: list[FindingGroup]) -> FindingGroup:
    clock = _clock([g.first for g in tier])
    return min(
        tier,
        key=lambda g: (
            g.first.quoted,
            clock(g.first),
            _SEVERITY_RANK.get(g.first.severity, 9),
            -g.first.finding.priority,
            g.first.order,
            g.first.file,
            g.first.line_no,
        ),
    )


def _roles(workers: Mapping[str, Iterable[str]] | None, groups: list[FindingGroup]) -> dict[str, set[str]]:
    if workers is not None:
        return {role: set(names) for role, names in workers.items() if names}
    roles: dict[str, set[str]] = {}
    for g in groups:
        if g.first.mode is not None and g.first.worker is not None:
            roles.setdefault(g.first.mode, set()).add(g.first.worker)
    return roles


def _determinism(hit: set[str], roles: dict[str, set[str]]) -> tuple[tuple[str, ...], bool]:
    full = tuple(sorted(role for role, names in roles.items() if names and names <= hit))
    everyone = set().union(*roles.values()) if roles else set()
    deterministic = any(len(roles[role]) >= 2 for role in full) or (len(everyone) >= 2 and everyone <= hit)
    return full, deterministic


def _cause(root: FindingGroup) -> str:
    """The root cause as the advice names it; an unrecognised one by its line."""
    if root.first.generic:
        text = root.first.text.strip()
        line = text if len(text) <= 100 else text[:97] + "..."
        return f"{root.id} ({line})"
    if root.first.basis is not None:
        return f"{root.id} ({root.first.finding.title}, by {root.first.basis})"
    return f"{root.id} ({root.first.finding.title})"


def _advice(
    verdict: str,
    root: FindingGroup | None,
    hint: str | None,
    deterministic: bool,
    root_workers: tuple[str, ...],
    job_id: str | None,
    nodes: int | None,
    recurrences: tuple[str, ...] = (),
    stall: Stall | None = None,
    state: str | None = None,
) -> str:
    if verdict == "cancelled":
        if root is None or root.first.wrapper:
            return "cancelled by you: nothing to diagnose"
        if recurrences:
            det = f"; it also ended {', '.join(recurrences)}, so a plain rerun will fail the same way"
        elif deterministic:
            det = "; it hit every worker of its role, so a plain rerun will fail the same way"
        else:
            det = ""
        return f"cancelled by you after {_cause(root)} was found{det}"
    if verdict == "healthy":
        return "no failure found: nothing to do"
    job = f"job {job_id}" if job_id else "the job"
    freed = f"its {nodes} node(s)" if nodes else "its node(s)"
    if verdict == "stalled" and stall is not None:
        text = f"{stall.describe()}: read the last lines of the worker logs; cancel {job} to free {freed} if it hangs"
        if root is not None:
            text += f"; also logged: {_cause(root)}"
        return text
    if root is None:
        if verdict == "failed":
            said = f"the scheduler says {state}" if state in FAILED_STATES else "srtctl says the job failed"
            return f"{said} and no log line read says why: read the batch log and the end of each worker log"
        return "no failure found: nothing to do"
    cause = _cause(root)
    parts: list[str] = []
    if verdict == "degraded":
        parts.append(f"errors were logged but nothing fatal; watch {cause}")
    elif verdict == "doomed":
        parts.append(f"cancel {job} to free {freed}: it cannot recover")
    if verdict in ("doomed", "failed"):
        if recurrences:
            attempts = "attempt" if len(recurrences) == 1 else "attempts"
            parts.append(
                f"a plain rerun will fail the same way: {cause} also ended {attempts} {', '.join(recurrences)}; "
                "fix it first"
            )
        elif deterministic and not root_workers:
            parts.append(f"a plain rerun will fail the same way: {cause} is the cluster's setup or the recipe")
        elif deterministic:
            parts.append(f"a plain rerun will fail the same way; fix {cause} first (pin a fixed build)")
        elif root.first.wrapper:
            parts.append(f"only a consequence was found ({cause}): read the worker logs for the cause, then rerun")
        elif root.first.generic:
            parts.append(
                f"no signature knows this failure: read {root.first.file}:{root.first.line_no} and the lines above it"
                " (if it recurs, add a signature for it)"
            )
        else:
            where = ", ".join(root_workers) if root_workers else root.first.file
            parts.append(f"{cause} hit {where} only, so it may be a one-off: rerun (if it recurs, see the hint)")
    text = "; ".join(parts)
    if hint and verdict in ("doomed", "failed"):
        text += f". Hint: {hint}"
    return text


def _state_name(state: object) -> str | None:
    if state is None:
        return None
    value = getattr(state, "value", state)
    return str(value).strip().upper().split(" ")[0] or None
