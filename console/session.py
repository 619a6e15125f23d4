"""One console run: config, cluster profiles, the store, the engine and the monitor, built once.

The UI and every CLI command start from a :class:`Session`. It owns the single poll loop
(:meth:`Session.track`: a scheduler poll per cluster, then following the attempts' logs; an
iteration or a cluster that fails is reported as :class:`~console.events.TrackingError` and
tracking goes on), merges the engine's and the monitor's events into one stream, and answers
what the screens ask (attempts, arms, results) so that they never reach into the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console import user_signatures
from console.clusters import LOCAL, Profile, load_profiles
from console.config import load_config
from console.engine import ClusterRuntime, Engine, build_runtime
from console.monitor import SETTLE_S, AttemptView, Monitor
from console.store import ArmRow, AttemptRow, Store, SweepRow, default_data_dir

if TYPE_CHECKING:
    from console.events import CoreEvent
    from console.follow import AgentStatus
    from console.launch_plan import ArmPlan
    from console.model import Arm, Recipe
    from console.rerun import RerunPlan
    from console.results import AttemptPoints

# What only some questions need (launch checks, reruns, results, a local scan) is imported by
# the method that asks: a command that only tracks states starts without them.

Listener = Callable[["CoreEvent"], None]


@dataclass
class Session:
    """What one run of the console holds. Build it with :meth:`open` (from the config) or
    :meth:`of` (around an engine made elsewhere, e.g. by a test)."""

    engine: Engine
    monitor: Monitor
    default_cluster: str = LOCAL
    notes: list[str] = field(default_factory=list)

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
        store = Store(data_dir / "console.sqlite3", on_wait=note)
        for problem in store.notes:
            note(problem)
        default = config.raw.get("default_cluster")
        default_cluster = default if isinstance(default, str) and default in profiles else LOCAL
        session = cls.of(Engine(store, profiles, data_dir), default_cluster)
        session.notes = notes
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
        """Every core event, the engine's and the monitor's, in one stream."""
        off_engine = self.engine.subscribe(listener)
        off_monitor = self.monitor.subscribe(listener)

        def unsubscribe() -> None:
            off_engine()
            off_monitor()

        return unsubscribe

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

    def cluster_statuses(self) -> dict[str, str]:
        return self.engine.cluster_statuses()

    def agent_statuses(self) -> dict[str, AgentStatus]:
        return self.monitor.agent_statuses()

    @property
    def views(self) -> dict[int, AttemptView]:
        """The monitor's per-attempt views (findings, diagnosis, points) of followed attempts."""
        return self.monitor.views

    async def launch(self, recipe: Recipe, cluster: str) -> int:
        """Submit the recipe's arms exactly as loaded (what the launch dialog showed)."""
        return await self.engine.launch([recipe.path], cluster, planned=([recipe], list(recipe.arms)))

    async def plan_launch(self, arms: Sequence[Arm], cluster: str) -> list[ArmPlan]:
        """The checks before a launch (settings, pin checks; no dry-run): what the dialog shows."""
        from console.launch_plan import plan_arms

        return await plan_arms(self.engine.runtime(cluster), list(arms), dry_run=False)

    async def cancel(self, attempts: Sequence[AttemptRow]) -> None:
        await self.engine.cancel(attempts)

    async def arm_points(self, arm_id: int) -> dict[int, AttemptPoints]:
        """Per attempt of the arm: its points, from the monitor when it has them, else read now."""
        from console.rerun import fetch_arm_points

        return await fetch_arm_points(self.engine, arm_id, self.monitor.views)

    async def plan_rerun(self, arm_id: int, missing_only: bool) -> RerunPlan:
        """What a rerun of the arm would submit (:class:`RerunRefused` with the reason when none)."""
        from console.rerun import RerunRefused, ResultsUnavailable, plan_rerun
        from console.triage import diagnose_output_dir

        views = self.monitor.views
        try:
            fetched = await self.arm_points(arm_id) if missing_only else None
        except ResultsUnavailable as exc:
            raise RerunRefused(str(exc)) from None
        attempts = self.store.attempts(arm_id)
        last = attempts[-1] if attempts else None
        view = views.get(last.id) if last is not None else None
        diagnosis = view.diagnosis if view is not None else None
        if diagnosis is None and last is not None and last.output_dir and not last.live:
            # A scan of the logs on this machine, off the event loop (it touches no SQLite).
            earlier = self.store.earlier_root_causes(last)
            diagnosis = await asyncio.to_thread(diagnose_output_dir, last.output_dir, last.state, earlier=earlier)
        return plan_rerun(self.store, arm_id, missing_only, diagnosis, monitor_views=views, attempt_points=fetched)

    async def rerun(self, plan: RerunPlan) -> AttemptRow:
        from console.rerun import rerun

        return await rerun(self.engine, plan)

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
