"""Live triage and results for attempts: follows their job dirs and turns lines into findings.

One follower (one agent process) per cluster watches the output dir of every attempt that is
live or ended moments ago. Lines feed the attempt's :class:`Triage` (stages, findings,
diagnosis); result files arrive as head and tail bytes and become points. Everything is
announced to listeners as events, for the `watch` command and the UI.

A restarted console re-reads each followed log from its start so its diagnosis is complete;
lines before the offsets stored by the previous run are marked `replayed`, so a stream shows
nothing twice.

Each attempt is triaged against its arm's history in the store: the root causes of its earlier
attempts (the same one again makes the failure deterministic), the error-level line templates
of a healthy attempt of the arm or engine (a line outside them is novel), and the recipe's
health check (how long srtctl waits, for a stall). What ended an attempt, and a healthy
attempt's templates, are written back.
"""

from __future__ import annotations

import asyncio
import logging
import posixpath
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from console.events import (
    AgentChanged,
    AttemptChanged,
    EngineEvent,
    FileSkipped,
    LogLines,
    MonitorEvent,
    PointArrived,
    PointRunning,
    TrackingError,
    Triaged,
)
from console.store import AttemptRow
from console.tasks import cancel_and_wait

if TYPE_CHECKING:
    from console.diagnosis import Diagnosis, Observation
    from console.engine import Engine
    from console.follow import AgentStatus, Follower, FollowEvent
    from console.results import PointResult
    from console.store import Store
    from console.triage import Triage

# The follower, the triage and the result readers are imported once an attempt is followed:
# a session that only tracks states (`status`, `cancel`) never loads the failure catalog.

log = logging.getLogger(__name__)

# Keep following an attempt this long after it ended, for the last lines and results.
SETTLE_S = 20.0
# benchmark.out's last characters kept to tell the point being measured.
BENCH_TAIL_CHARS = 16 * 1024
# The longest the log events of a burst are handled without letting the loop run others.
SLICE_S = 0.01

__all__ = [
    "SETTLE_S",
    "AgentChanged",
    "AttemptView",
    "LogLines",
    "Monitor",
    "MonitorEvent",
    "PointArrived",
    "PointRunning",
    "Triaged",
]


def _new_triage() -> Triage:
    from console.triage import Triage

    return Triage()


@dataclass
class AttemptView:
    """What the console knows of one attempt's logs and results, in memory."""

    attempt: AttemptRow
    triage: Triage = field(default_factory=_new_triage)
    points: dict[int, PointResult] = field(default_factory=dict)
    diagnosis: Diagnosis | None = None
    gpus: int | None = None
    replay_until: dict[str, int] = field(default_factory=dict)  # file -> offset streamed before
    ended_at: float | None = None
    running: int | None = None  # the concurrency benchmark.out says is being measured
    bench_tail: str = ""
    templates_saved: int = -1  # how many of a healthy attempt's templates the store holds
    skipped: dict[str, str] = field(default_factory=dict)  # file -> why it is not read


class Monitor:
    def __init__(self, engine: Engine, *, settle_s: float = SETTLE_S) -> None:
        self.engine = engine
        self.store = engine.store
        self.settle_s = settle_s
        self.views: dict[int, AttemptView] = {}
        self._followers: dict[str, Follower] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._dirs: dict[str, int] = {}  # followed output dir -> attempt id
        self._pinned: set[int] = set()  # attempts someone is looking at: followed even when long ended
        self._listeners: list[Callable[[MonitorEvent], None]] = []
        self._statuses: dict[str, AgentStatus] = {}
        self._unsubscribe = engine.subscribe(self._on_engine)

    def subscribe(self, listener: Callable[[MonitorEvent], None]) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def _emit(self, event: MonitorEvent) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # a broken listener must not stop following
                log.exception("monitor event listener failed")

    # --- which attempts are followed --------------------------------------------------

    async def sync(self) -> None:
        """Follow every attempt worth following; stop following those long finished. An attempt
        waiting for health is diagnosed again as time passes (a stall needs no new line)."""
        now = time.time()
        for view in list(self.views.values()):
            from console.stages import Stage  # loaded already by the view's triage

            if view.attempt.live and view.triage.tracker.stage is Stage.AWAITING_WORKERS:
                self._publish_diagnosis(view, [], force=True)
        for attempt in self.store.attempts():
            if not attempt.output_dir:
                continue
            ended_long_ago = attempt.ended_at is not None and now - attempt.ended_at > self.settle_s
            if ended_long_ago and attempt.id not in self._pinned:
                if attempt.output_dir in self._dirs:
                    self.views[attempt.id].attempt = attempt
                    await self._unwatch(attempt)
            else:
                await self.follow(attempt)

    async def follow(self, attempt: AttemptRow) -> AttemptView:
        """Start following one attempt (also an ended one: its logs are read to the end)."""
        view = self.views.get(attempt.id)
        if view is None:
            arm = self.store.arm(attempt.arm_id)
            total = arm.summary.get("total_gpus") if arm else None
            view = AttemptView(attempt, triage=history_triage(self.store, attempt),
                               gpus=total if isinstance(total, int) else None)  # fmt: skip
            view.replay_until = self.store.get_offsets(attempt.id)
            self.views[attempt.id] = view
            if not attempt.live:
                # Its verdict from its state until its lines say more: a job cancelled before it
                # started writes none, and nothing else would diagnose it. What the store keeps of
                # it (its root cause) waits for the lines.
                self._publish_diagnosis(view, [], remember=False)
        view.attempt = attempt
        # An attempt first seen before it had an output dir is watched once it has one.
        if attempt.output_dir and attempt.output_dir not in self._dirs:
            follower = await self._follower(attempt.cluster)
            self._dirs[attempt.output_dir] = attempt.id
            await follower.watch(attempt.output_dir, results=attempt.results_dir)
        return view

    async def _unwatch(self, attempt: AttemptRow) -> None:
        follower = self._followers.get(attempt.cluster)
        if follower is not None and attempt.output_dir:
            await follower.unwatch(attempt.output_dir)
        self._dirs.pop(attempt.output_dir or "", None)

    async def _follower(self, cluster: str) -> Follower:
        follower = self._followers.get(cluster)
        if follower is None:
            from console.follow import Follower

            rt = self.engine.runtime(cluster)
            follower = Follower(
                rt.transport,
                rt.profile.python,
                keywords=self._keywords(),
                on_offsets=self._store_offsets,
            )
            self._followers[cluster] = follower
            await follower.start()
            self._tasks[cluster] = asyncio.create_task(self._consume(cluster, follower), name=f"monitor:{cluster}")
        return follower

    @staticmethod
    def _keywords() -> list[str]:
        from console.signatures import default_matcher

        return list(default_matcher().keywords)

    def _store_offsets(self, directory: str, offsets: dict[str, int]) -> None:
        attempt_id = self._dirs.get(directory)
        if attempt_id is not None:
            self.store.set_offsets(attempt_id, offsets)

    # --- events -----------------------------------------------------------------------

    def _on_engine(self, event: EngineEvent) -> None:
        if not isinstance(event, AttemptChanged):
            return
        view = self.views.get(event.attempt.id)
        if view is None:
            return
        view.attempt = event.attempt
        self._publish_diagnosis(view, [], force=True)

    async def _consume(self, cluster: str, follower: Follower) -> None:
        yield_at = time.monotonic() + SLICE_S
        async for event in follower.events():
            try:
                self._handle(cluster, event)
            except Exception as exc:
                log.exception("log event of %s failed", cluster)
                self._emit(TrackingError(cluster, f"log event: {type(exc).__name__}: {exc}"))
            # Events already queued are taken without a pause: a burst of busy logs would hold
            # the loop (and the operator's keys and the screen's frames) for its whole length.
            if time.monotonic() >= yield_at:
                await asyncio.sleep(0)
                yield_at = time.monotonic() + SLICE_S

    def _handle(self, cluster: str, event: FollowEvent) -> None:
        from console.follow import AgentStatus, CandidatesEvent, LinesEvent, ResetEvent, ResultEvent, SkippedEvent
        from console.results import parse_result_name, point_from_bytes

        if isinstance(event, AgentStatus):
            self._statuses[cluster] = event
            self._emit(AgentChanged(cluster, event))
            return
        attempt_id = self._dirs.get(getattr(event, "dir", ""))
        view = self.views.get(attempt_id) if attempt_id is not None else None
        if view is None:
            return
        if isinstance(event, LinesEvent):
            update = view.triage.feed(event.file, event.lines, first_line_no=event.first_line_no)
            replayed = event.end_offset <= view.replay_until.get(event.file, 0)
            self._emit(LogLines(view.attempt.id, event.file, event.first_line_no, event.lines, replayed))
            if update.findings or update.changes:
                self._publish_diagnosis(view, update.findings)
            if event.file.endswith("benchmark.out"):
                self._benchmark_lines(view, event.lines)
        elif isinstance(event, CandidatesEvent):
            found: list[Observation] = []
            for candidate in event.candidates:
                found += view.triage.feed(event.file, [candidate.text], first_line_no=candidate.line_no).findings
            if found:
                self._publish_diagnosis(view, found)
        elif isinstance(event, ResultEvent):
            name = posixpath.basename(event.file)
            parsed = parse_result_name(name)
            if parsed is None or parsed.kind == "rollup":
                return
            point = point_from_bytes(event.file, event.head, event.tail, event.size,
                                     head_is_whole=event.head_is_whole, gpus=view.gpus)  # fmt: skip
            if point.concurrency is not None:
                view.points[point.concurrency] = point
                self._emit(PointArrived(view.attempt.id, point))
        elif isinstance(event, ResetEvent):
            view.replay_until.pop(event.file, None)
        elif isinstance(event, SkippedEvent) and event.file not in view.skipped:
            view.skipped[event.file] = event.reason
            self._emit(FileSkipped(view.attempt.id, event.file, event.reason))

    def _benchmark_lines(self, view: AttemptView, lines: list[str]) -> None:
        from console.results import running_concurrency

        view.bench_tail = (view.bench_tail + "\n" + "\n".join(lines))[-BENCH_TAIL_CHARS:]
        running = running_concurrency(view.bench_tail)
        if running != view.running:
            view.running = running
            self._emit(PointRunning(view.attempt.id, running))

    def agent_statuses(self) -> dict[str, AgentStatus]:
        """The log agent's last status per cluster followed."""
        return dict(self._statuses)

    def _publish_diagnosis(
        self, view: AttemptView, new: list[Observation], force: bool = False, remember: bool = True
    ) -> None:
        diagnosis = view.triage.diagnose(view.attempt.state, cancelled=view.attempt.cancelled_by_operator)
        if force and view.diagnosis == diagnosis and not new:
            return
        view.diagnosis = diagnosis
        if remember:
            self._remember(view, diagnosis)
        self._emit(Triaged(view.attempt.id, diagnosis, view.triage.snapshot(view.attempt.state), new))

    def _remember(self, view: AttemptView, diagnosis: Diagnosis) -> None:
        """Write back what the arm's next attempts are compared with."""
        attempt = view.attempt
        key = ended_by(diagnosis)
        if key != attempt.root_cause and (key is not None or not attempt.live):
            self.store.set_root_cause(attempt.id, key)
            view.attempt = attempt = self.store.attempt(attempt.id)
        if attempt.state == "COMPLETED" and diagnosis.verdict == "healthy":
            templates = view.triage.templates
            if len(templates) != view.templates_saved:
                self.store.save_healthy_templates(attempt.id, templates)
                view.templates_saved = len(templates)

    def pin(self, attempt_id: int) -> None:
        """Keep following an attempt however long ago it ended (while a screen shows it)."""
        self._pinned.add(attempt_id)

    def unpin(self, attempt_id: int) -> None:
        self._pinned.discard(attempt_id)

    def position(self, attempt_id: int, file: str) -> tuple[int, int | None] | None:
        """Where the stream of an attempt's file stands: (byte offset, lines before it)."""
        view = self.views.get(attempt_id)
        follower = self._followers.get(view.attempt.cluster) if view else None
        if view is None or follower is None or not view.attempt.output_dir:
            return None
        return follower.positions(view.attempt.output_dir).get(file)

    async def read_range(self, attempt_id: int, file: str, offset: int, length: int) -> bytes:
        """Older bytes of a followed file, for paging a log view back."""
        view = self.views[attempt_id]
        follower = await self._follower(view.attempt.cluster)
        return await follower.read_range(view.attempt.output_dir or "", file, offset, length)

    async def close(self) -> None:
        self._unsubscribe()
        await cancel_and_wait(self._tasks.values())
        for follower in self._followers.values():
            await follower.close()


def ended_by(diagnosis: Diagnosis) -> str | None:
    """The key of what ended an attempt, as the store keeps it: the root cause of a failed or
    doomed attempt, or of one cancelled after its cause was found; None otherwise."""
    root = diagnosis.root_cause
    if root is None or root.first.wrapper:
        return None
    if diagnosis.verdict in ("failed", "doomed", "cancelled"):
        return diagnosis.root_key
    return None


def history_triage(store: Store, attempt: AttemptRow) -> Triage:
    """A triage of the attempt that knows its arm's history: the root causes of its earlier
    attempts, a healthy baseline of error-level lines, its recipe's health check."""
    import yaml

    from console.triage import HealthCheck, Triage

    try:
        config = yaml.safe_load(attempt.config_yaml)
    except yaml.YAMLError:
        config = None
    return Triage(
        earlier=store.earlier_root_causes(attempt),
        baseline=store.baseline_templates(attempt.id),
        health_check=HealthCheck.of_config(config),
    )
