"""One console run: config, cluster profiles, the store, the engine and the monitor, built once.

The UI and every CLI command start from a :class:`Session`. It owns the single poll loop
(:meth:`Session.track`: a scheduler poll per cluster, then following the attempts' logs; an
iteration or a cluster that fails is reported as :class:`~console.events.TrackingError` and
tracking goes on), merges the engine's and the monitor's events into one stream, and answers
what the screens ask (attempts, arms, results) so that they never reach into the store.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console import user_signatures
from console.clusters import LOCAL, Profile, load_profiles
from console.config import load_config
from console.engine import ClusterRuntime, Engine, LaunchRefused, build_runtime
from console.monitor import SETTLE_S, AttemptView, Monitor
from console.notify import Notifier, notify_command
from console.store import ArmRow, AttemptRow, Store, SweepRow, default_data_dir
from console.sweeptree import Tree

if TYPE_CHECKING:
    from console.diagnosis import Diagnosis
    from console.events import CoreEvent
    from console.follow import AgentStatus
    from console.launch_plan import ArmPlan
    from console.model import Arm, Recipe
    from console.rerun import RerunPlan, SweepRerun
    from console.results import AttemptPoints

# What only some questions need (launch checks, reruns, results, a local scan) is imported by
# the method that asks: a command that only tracks states starts without them.


class ConfigError(Exception):
    """The config asks for something that cannot be: the console does not guess (an unknown
    ``default_cluster`` is not quietly replaced by ``local``)."""


Listener = Callable[["CoreEvent"], None]


@dataclass
class Session:
    """What one run of the console holds. Build it with :meth:`open` (from the config) or
    :meth:`of` (around an engine made elsewhere, e.g. by a test)."""

    engine: Engine
    monitor: Monitor
    default_cluster: str = LOCAL
    notes: list[str] = field(default_factory=list)
    notify: list[str] | None = None  # the config's notify: command
    notifier: Notifier | None = None
    _listeners: list[Listener] = field(default_factory=list)

    @classmethod
    def open(cls, config_path: str | None = None, on_note: Callable[[str], None] | None = None) -> Session:
        """Config → the operator's signatures → profiles → store → engine → monitor. Problems
        with the config, a signature or a profile become :attr:`notes` (each also handed to
        ``on_note`` as soon as it is found) and the rest carries on; ``StoreError`` when the
        store cannot open."""
        notes: list[str] = []

        def note(problem: str) -> None:
            notes.append(problem)
            if on_note is not None:
                on_note(problem)

        config = load_config(config_path)
        for problem in config.problems:
            note(problem)
        if user_signatures.configured(config):
            for problem in user_signatures.install_user_signatures(config):
                note(problem)
        data_dir = default_data_dir()
        profiles, problems = load_profiles(config, data_dir)
        for problem in problems:
            note(problem)
        default_cluster = default_cluster_of(config.raw, profiles, config.path, config.marks)
        store = Store(data_dir / "console.sqlite3", on_wait=note)
        for problem in store.notes:
            note(problem)
        command, notify_problem = notify_command(config.raw.get("notify"), str(config.path))
        if notify_problem:
            note(notify_problem)
        session = cls.of(Engine(store, profiles, data_dir), default_cluster)
        session.notes = notes
        session.notify = command
        return session

    @classmethod
    def of(
        cls,
        engine: Engine,
        default_cluster: str = LOCAL,
        *,
        settle_s: float = SETTLE_S,
    ) -> Session:
        return cls(engine, Monitor(engine, settle_s=settle_s), default_cluster)

    @classmethod
    def build(
        cls,
        store: Store,
        profiles: dict[str, Profile],
        data_dir: Path,
        runtime_factory: Callable[[Profile, Path], ClusterRuntime] = build_runtime,
    ) -> Session:
        return cls.of(Engine(store, profiles, data_dir, runtime_factory))

    # --- what it holds -------------------------------------------------------------------

    @property
    def store(self) -> Store:
        return self.engine.store

    @property
    def profiles(self) -> dict[str, Profile]:
        return self.engine.profiles

    @property
    def data_dir(self) -> Path:
        return self.engine.data_dir

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Every core event, the engine's and the monitor's (and notices, once
        :meth:`start_notices` was called), in one stream."""
        off_engine = self.engine.subscribe(listener)
        off_monitor = self.monitor.subscribe(listener)
        self._listeners.append(listener)

        def unsubscribe() -> None:
            off_engine()
            off_monitor()
            self._listeners.remove(listener)

        return unsubscribe

    def start_notices(self) -> Notifier:
        """Turn events into notices for the subscribers (and the notify command), from now on."""
        if self.notifier is None:
            notifier = Notifier(self.store, self.notify)

            def feed(event: CoreEvent) -> None:
                notifier.feed(event)

            def announce(notice: CoreEvent) -> None:
                for listener in list(self._listeners):
                    listener(notice)

            self.engine.subscribe(feed)
            self.monitor.subscribe(feed)
            notifier.subscribe(announce)
            self.notifier = notifier
        return self.notifier

    # --- the poll loop -------------------------------------------------------------------

    async def track(
        self,
        interval: float | None = None,
        until: Callable[[], bool] | None = None,
        *,
        follow: bool = True,
    ) -> None:
        """The single poll loop: each cluster's scheduler at the engine's cadence (steady, quick
        while a change is expected; ``interval`` fixes one pace), then (``follow``) the logs of
        every attempt worth following. Failures are reported, never fatal."""
        await self.engine.watch(interval, until, after_poll=self.monitor.sync if follow else None)

    async def wait(self, attempt_ids: Sequence[int], interval: float | None = None) -> list[AttemptRow]:
        """Poll until every given attempt has ended; returns their final rows."""
        return await self.engine.wait(attempt_ids, interval)

    async def close(self) -> None:
        if self.notifier is not None:
            await self.notifier.close()
        await self.monitor.close()
        await self.engine.close()

    # --- what the screens ask ------------------------------------------------------------

    def attempts(self, arm_id: int | None = None, *, live: bool = False) -> list[AttemptRow]:
        return self.store.attempts(arm_id, live=live)

    def attempt(self, attempt_id: int) -> AttemptRow:
        return self.store.attempt(attempt_id)

    def arm(self, arm_id: int) -> ArmRow | None:
        return self.store.arm(arm_id)

    def arms(self, sweep_id: int) -> list[ArmRow]:
        return self.store.arms(sweep_id)

    def sweep(self, sweep_id: int) -> SweepRow | None:
        return self.store.sweep(sweep_id)

    def sweeps(self) -> list[SweepRow]:
        return self.store.sweeps()

    def all_arms(self) -> list[ArmRow]:
        return self.store.arms()

    def tree(
        self,
        *,
        sweeps: Sequence[SweepRow] | None = None,
        arms: Sequence[ArmRow] | None = None,
        attempts: Sequence[AttemptRow] | None = None,
    ) -> Tree:
        """Every sweep → arm → attempt, with the monitor's verdicts (doomed while still running).
        Rows a screen already holds (kept current by the events) are used instead of reading them."""
        verdicts = {i: v.diagnosis.verdict for i, v in self.monitor.views.items() if v.diagnosis is not None}
        return Tree.of(
            self.store.sweeps() if sweeps is None else sweeps,
            self.store.arms() if arms is None else arms,
            self.store.attempts() if attempts is None else attempts,
            verdicts,
        )

    def cluster_statuses(self) -> dict[str, str]:
        return self.engine.cluster_statuses()

    def agent_statuses(self) -> dict[str, AgentStatus]:
        return self.monitor.agent_statuses()

    @property
    def views(self) -> dict[int, AttemptView]:
        """The monitor's per-attempt views (findings, diagnosis, points) of followed attempts."""
        return self.monitor.views

    async def launch(self, recipes: Recipe | Sequence[Recipe], cluster: str, name: str | None = None) -> int:
        """Submit the recipes' arms, as one sweep, exactly as loaded (what the launch dialog showed)."""
        from console.model import Recipe

        chosen = [recipes] if isinstance(recipes, Recipe) else list(recipes)
        arms = [arm for recipe in chosen for arm in recipe.arms]
        return await self.engine.launch([r.path for r in chosen], cluster, name=name, planned=(chosen, arms))

    async def plan_launch(self, cluster: str, arms: Sequence[Arm]) -> list[ArmPlan]:
        """What a launch of the arms on the cluster will do: settings and their sources, and the
        cluster's own verdict (`srtctl dry-run`); a cluster that cannot be reached says so per arm."""
        from console.launch_plan import ArmPlan, plan_arms

        try:
            runtime = self.engine.runtime(cluster)
        except LaunchRefused as exc:
            return [ArmPlan(arm, verdict="unchecked", detail=str(exc)) for arm in arms]
        return await plan_arms(runtime, list(arms))

    async def preflight(self, cluster: str, arm: Arm) -> tuple[bool, str]:
        """`srtctl preflight` of one arm on the cluster: (passed, srtctl's words)."""
        from console.launch_plan import preflight_arm

        try:
            runtime = self.engine.runtime(cluster)
        except LaunchRefused as exc:
            return False, str(exc)
        return await preflight_arm(runtime, arm)

    async def cancel(self, attempts: Sequence[AttemptRow]) -> None:
        await self.engine.cancel(attempts)

    async def arm_points(self, arm_id: int) -> dict[int, AttemptPoints]:
        """Per attempt of the arm: its points, from the monitor when it has them, else read now."""
        from console.rerun import fetch_arm_points

        return await fetch_arm_points(self.engine, arm_id, self.monitor.views)

    async def _last_diagnosis(self, arm_id: int) -> Diagnosis | None:
        """The arm's last attempt's diagnosis: the monitor's, else a scan of its logs on this
        machine off the event loop (the scan touches no SQLite)."""
        attempts = self.store.attempts(arm_id)
        last = attempts[-1] if attempts else None
        if last is None:
            return None
        view = self.monitor.views.get(last.id)
        if view is not None and view.diagnosis is not None:
            return view.diagnosis
        if last.output_dir and not last.live:
            from console.triage import diagnose_output_dir

            earlier = self.store.earlier_root_causes(last)
            return await asyncio.to_thread(diagnose_output_dir, last.output_dir, last.state, earlier=earlier)
        return None

    async def plan_rerun(self, arm_id: int, missing_only: bool) -> RerunPlan:
        """What a rerun of the arm would submit (:class:`RerunRefused` with the reason when none)."""
        from console.rerun import RerunRefused, ResultsUnavailable, plan_rerun

        views = self.monitor.views
        try:
            fetched = await self.arm_points(arm_id) if missing_only else None
        except ResultsUnavailable as exc:
            raise RerunRefused(str(exc)) from None
        diagnosis = await self._last_diagnosis(arm_id)
        return plan_rerun(self.store, arm_id, missing_only, diagnosis, monitor_views=views, attempt_points=fetched)

    async def rerun(self, plan: RerunPlan) -> AttemptRow:
        from console.rerun import rerun

        return await rerun(self.engine, plan)

    async def plan_failed_reruns(
        self, sweep_id: int, *, include_deterministic: bool = False, missing_only: bool = False
    ) -> SweepRerun:
        """Every failed arm of the sweep (deterministic failures skipped unless included), and why
        the others are not rerun."""
        from console.rerun import ResultsUnavailable, failed_arms, plan_failed_reruns

        views = self.monitor.views
        diagnoses: dict[int, Diagnosis | None] = {}
        points: dict[int, AttemptPoints] = {}
        for arm in failed_arms(self.store, sweep_id):
            if missing_only:
                # Without them plan_rerun reads what it can and says why not.
                with contextlib.suppress(ResultsUnavailable):
                    points.update(await self.arm_points(arm.id))
            diagnoses[arm.id] = await self._last_diagnosis(arm.id)
        return plan_failed_reruns(
            self.store, sweep_id, missing_only, diagnoses, include_deterministic=include_deterministic,
            monitor_views=views, attempt_points=points or None,
        )  # fmt: skip

    async def sweep_rows(self, sweep_id: int) -> list[dict[str, Any]]:
        """Every arm's merged points of a sweep as JSON documents (the export)."""
        from console.rerun import arm_points_view
        from console.results import points_rows

        rows: list[dict[str, Any]] = []
        for arm in self.store.arms(sweep_id):
            fetched = await self.arm_points(arm.id)
            view = arm_points_view(self.store, arm.id, self.monitor.views, attempt_points=fetched)
            rows += points_rows(arm.name, view)
        return rows


def default_cluster_of(raw: dict[str, Any], profiles: dict[str, Profile], path: Path, marks: Any = None) -> str:
    """The config's ``default_cluster`` (``local`` when it is not set); :class:`ConfigError` when
    it names no configured profile."""
    default = raw.get("default_cluster")
    if default is None:
        return LOCAL
    if isinstance(default, str) and default in profiles:
        return default
    line = marks.line(("default_cluster",)) if marks is not None else None
    where = f"{path}:{line}" if line else str(path)
    raise ConfigError(
        f"{where}: default_cluster: {default!r} is not a configured cluster "
        f"(configured: {', '.join(sorted(profiles))}); fix the name or add its profile under clusters:"
    )
