"""The facts of a validation report: per arm its attempts (Slurm job, state, nodes, times), what
each ran, how far it got, its diagnosis, and the arm's points merged across attempts.

Logs are read where they are: the monitor's view when the console already follows the attempt
(the UI), the job dir when it is on this machine, else through the cluster's log agent, read to
the sizes the job dir lists (bounded in time; a report never hangs on a dead connection).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.diagnosis import Diagnosis
from console.ids import Ref, arm_ref, attempt_ref, parse_ref, sweep_ref
from console.monitor import history_triage
from console.provenance import Provenance
from console.report.words import furthest_stage
from console.results import AttemptPoints, PointResult, arm_points
from console.results.arms import ResultsUnavailable, arm_points_view, fetch_points_of
from console.session import Session
from console.stages import StageSnapshot
from console.store import ArmRow, AttemptRow
from console.transport.base import TransportError
from console.triage import Triage, triage_output_dir

REMOTE_LOGS_TIMEOUT_S = 120.0
_LOG_SUFFIXES = (".out", ".log", ".err")


class ReportError(Exception):
    """Nothing to report on: an unknown id, or no attempts; the message says which."""


@dataclass
class AttemptFacts:
    ref: str  # a3.1
    attempt: AttemptRow
    provenance: Provenance | None
    diagnosis: Diagnosis | None
    snapshot: StageSnapshot | None
    points: list[PointResult]
    logs: str  # where the logs were read: "followed", "local", "cluster", or why they were not

    @property
    def reached(self) -> str:
        return furthest_stage(self.snapshot)


@dataclass
class ArmFacts:
    ref: str  # a3
    arm: ArmRow
    attempts: list[AttemptFacts]
    points: list[PointResult]  # merged across the reported attempts


@dataclass
class Report:
    target: str
    title: str
    generated_at: float
    arms: list[ArmFacts] = field(default_factory=list)

    @property
    def still_running(self) -> list[tuple[ArmFacts, AttemptFacts]]:
        return [(arm, a) for arm in self.arms for a in arm.attempts if a.attempt.live]

    @property
    def simulated(self) -> bool:
        return any(a.provenance is not None and a.provenance.simulated for arm in self.arms for a in arm.attempts)

    @property
    def clusters(self) -> list[str]:
        return sorted({a.attempt.cluster for arm in self.arms for a in arm.attempts})


def _selection(session: Session, text: str) -> tuple[str, list[tuple[ArmRow, list[AttemptRow]]]]:
    try:
        ref: Ref = parse_ref(text)
    except ValueError as exc:
        raise ReportError(str(exc)) from None
    store = session.store
    if ref.kind == "sweep":
        sweep = store.sweep(int(ref.id))
        if sweep is None:
            raise ReportError(f"no sweep {text}")
        arms = store.arms(sweep.id)
        return f"{sweep_ref(sweep.id)} ({sweep.name})", [(a, store.attempts(a.id)) for a in arms]
    if ref.kind == "arm":
        arm = store.arm(int(ref.id))
        if arm is None:
            raise ReportError(f"no arm {text}")
        return f"{arm_ref(arm.id)} {arm.name}", [(arm, store.attempts(arm.id))]
    if ref.kind == "attempt":
        found = [a for a in store.attempts(int(ref.id)) if a.number == ref.number]
    else:
        found = [a for a in store.attempts() if a.job_id == ref.id]
    if not found:
        raise ReportError(f"no {ref.kind} {text}")
    attempt = found[-1]
    arm = store.arm(attempt.arm_id)
    if arm is None:
        raise ReportError(f"no arm {arm_ref(attempt.arm_id)}")
    return f"{attempt_ref(arm.id, attempt.number)} {arm.name}", [(arm, [attempt])]


async def gather_report(session: Session, target: str, *, logs_timeout: float = REMOTE_LOGS_TIMEOUT_S) -> Report:
    """The facts of a sweep (s2), an arm (a3), an attempt (a3.1) or a Slurm job (job:123)."""
    title, selection = _selection(session, target)
    report = Report(target, title, time.time())
    for arm, attempts in selection:
        facts: list[AttemptFacts] = []
        fetched: dict[int, AttemptPoints] = {}
        for attempt in attempts:
            got = await _points(session, attempt)
            fetched[attempt.id] = got
            triage, where = await attempt_triage(session, attempt, timeout=logs_timeout)
            state = attempt.state
            diagnosis = triage.diagnose(state, cancelled=attempt.cancelled_by_operator) if triage else None
            snapshot = triage.snapshot(state) if triage else None
            own = arm_points(attempt.concurrencies, got.points, got.running if attempt.live else None)
            provenance = Provenance.from_json(attempt.provenance) if attempt.provenance else None
            ref = attempt_ref(arm.id, attempt.number)
            facts.append(AttemptFacts(ref, attempt, provenance, diagnosis, snapshot, own, where))
        if len(attempts) == len(session.store.attempts(arm.id)):
            try:
                merged = arm_points_view(session.store, arm.id, session.monitor.views, attempt_points=fetched)
            except ResultsUnavailable as exc:
                raise ReportError(str(exc)) from None
        else:  # one attempt: its own points only
            merged = facts[0].points if facts else []
        report.arms.append(ArmFacts(arm_ref(arm.id), arm, facts, merged))
    return report


async def _points(session: Session, attempt: AttemptRow) -> AttemptPoints:
    try:
        return await fetch_points_of(session.engine, attempt, session.monitor.views.get(attempt.id))
    except ResultsUnavailable as exc:
        raise ReportError(str(exc)) from None


async def attempt_triage(
    session: Session, attempt: AttemptRow, *, timeout: float = REMOTE_LOGS_TIMEOUT_S, local: bool = True
) -> tuple[Triage | None, str]:
    """The attempt's logs read into a triage, and where they were read (``local=False``: through
    the log agent even when the job dir is on this machine)."""
    view = session.monitor.views.get(attempt.id)
    if view is not None and view.triage.files():
        return view.triage, "followed"
    if not attempt.output_dir:
        return None, "no job dir (never submitted)"
    profile = session.profiles.get(attempt.cluster)
    if local and (profile is None or profile.ssh is None):
        if Path(attempt.output_dir).is_dir():
            triage = await asyncio.to_thread(
                triage_output_dir, attempt.output_dir, history_triage(session.store, attempt)
            )
            return triage, "local" if triage is not None else "no logs in the job dir"
        if profile is None:
            return None, f"cluster {attempt.cluster} is not configured any more"
    return await _follow_to_end(session, attempt, timeout)


async def _follow_to_end(session: Session, attempt: AttemptRow, timeout: float) -> tuple[Triage | None, str]:
    """Follow the job dir through the log agent until every log listed now has been read."""
    output_dir = attempt.output_dir or ""
    try:
        transport = session.engine.runtime(attempt.cluster).transport
        listing = await transport.run(
            ["find", f"{output_dir}/logs", "-maxdepth", "1", "-type", "f", "-printf", "%s %f\\n"], timeout=30
        )
    except (TransportError, OSError) as exc:
        return None, f"logs not read: {exc}"
    sizes: dict[str, int] = {}
    for line in listing.stdout.splitlines():
        size, _, name = line.partition(" ")
        if size.isdigit() and name.endswith(_LOG_SUFFIXES):
            sizes[name] = int(size)
    if not sizes:
        return None, "no logs in the job dir"
    monitor = session.monitor
    monitor.pin(attempt.id)
    try:
        view = await monitor.follow(attempt)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            read = _read_sizes(monitor, attempt.id, view.triage, sizes)
            if all(read.get(name, 0) >= size for name, size in sizes.items()):
                return view.triage, "cluster"
            if loop.time() > deadline:
                behind = sorted(n for n, s in sizes.items() if read.get(n, 0) < s)
                return view.triage, f"cluster (partly: {', '.join(behind)} not read to the end in {timeout:.0f}s)"
            await asyncio.sleep(0.2)  # the follower delivers on its own; this only checks progress
    except (TransportError, OSError) as exc:
        return None, f"logs not read: {exc}"
    finally:
        monitor.unpin(attempt.id)


def _read_sizes(monitor: Any, attempt_id: int, triage: Triage, sizes: dict[str, int]) -> dict[str, int]:
    read: dict[str, int] = {}
    for file in triage.files():
        name = file.rsplit("/", 1)[-1]
        if name in sizes:
            position = monitor.position(attempt_id, file)
            read[name] = position[0] if position else 0
    return read
