"""The engine ties recipes, clusters, launchers, schedulers and the store together.

It launches sweeps, polls every cluster once per tick for all of its live attempts, records
what the scheduler says, and tells listeners (the CLI's `--wait`, the UI) what changed. It keeps
no state of its own beyond caches: the store is the truth, so a restarted console reattaches by
simply polling the live attempts it finds there.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from console.clusters import Profile
from console.events import AttemptChanged, ClusterChanged, EngineEvent, TrackingError
from console.launchers import DemoLauncher, Launcher, LaunchError, SrtctlLauncher
from console.model import Arm, Recipe
from console.provenance import collect_provenance
from console.recipes import load_recipe, load_targets
from console.recipes.yamlio import dump
from console.scheduler import Scheduler, SchedulerError
from console.store import AttemptRow, Store
from console.transport.base import CommandFailed, ConnectionStatus, Transport, TransportError

log = logging.getLogger(__name__)


Event = EngineEvent
Listener = Callable[[Event], None]


class LaunchRefused(Exception):
    """Nothing was submitted: the recipes have errors, or the cluster is unknown."""

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems = list(problems)


@dataclass
class ClusterRuntime:
    """The live objects of one cluster profile: one transport, its scheduler and launcher."""

    profile: Profile
    transport: Transport
    scheduler: Scheduler
    launcher: Launcher
    status: str = "not connected"


def build_runtime(profile: Profile, data_dir: Path) -> ClusterRuntime:
    """Transport, scheduler and launcher for a profile (imports kept local: SSH costs start-up time)."""
    transport: Transport
    if profile.ssh is None:
        from console.transport.local import LocalTransport

        transport = LocalTransport(profile.name)
    else:
        from console.transport.ssh import SshTransport

        target = profile.ssh
        spec: str | dict[str, object]
        if target.alias:
            spec = target.alias
        else:
            fields = {
                "host": target.host,
                "port": target.port,
                "user": target.user,
                "identity_file": target.identity_file,
                "known_hosts": target.known_hosts,
                "ssh_config": target.config_file,
            }
            spec = {k: v for k, v in fields.items() if v is not None}
        transport = SshTransport(spec, name=profile.name, max_channels=profile.max_channels)
    scheduler: Scheduler
    if profile.scheduler == "local":
        from console.demo.localsched import LocalScheduler

        scheduler = LocalScheduler(data_dir / "local-jobs")
    else:
        from console.slurm import SlurmScheduler

        scheduler = SlurmScheduler(transport)
    launcher: Launcher
    if profile.launcher == "srtctl":
        launcher = SrtctlLauncher(profile, transport, profile.srtctl)
    else:
        launcher = DemoLauncher(profile, transport, scheduler)
    return ClusterRuntime(profile, transport, scheduler, launcher)


class Engine:
    def __init__(
        self,
        store: Store,
        profiles: dict[str, Profile],
        data_dir: Path,
        runtime_factory: Callable[[Profile, Path], ClusterRuntime] = build_runtime,
    ) -> None:
        self.store = store
        self.profiles = profiles
        self.data_dir = data_dir
        self._factory = runtime_factory
        self._runtimes: dict[str, ClusterRuntime] = {}
        self._listeners: list[Listener] = []

    # --- plumbing ----------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def _emit(self, event: Event) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # a broken listener must not stop tracking
                log.exception("engine event listener failed")

    def runtime(self, cluster: str) -> ClusterRuntime:
        if cluster not in self.profiles:
            known = ", ".join(sorted(self.profiles))
            raise LaunchRefused(f"unknown cluster {cluster!r}; configured: {known}")
        if cluster not in self._runtimes:
            rt = self._factory(self.profiles[cluster], self.data_dir)

            def on_status(status: ConnectionStatus, name: str = cluster) -> None:
                self._set_status(name, str(status))

            rt.transport.add_status_listener(on_status)
            self._runtimes[cluster] = rt
        return self._runtimes[cluster]

    def _set_status(self, cluster: str, status: str) -> None:
        rt = self._runtimes.get(cluster)
        if rt is not None and rt.status != status:
            rt.status = status
            self._emit(ClusterChanged(cluster, status))

    def cluster_statuses(self) -> dict[str, str]:
        return {name: rt.status for name, rt in self._runtimes.items()}

    async def close(self) -> None:
        for rt in self._runtimes.values():
            await rt.transport.close()

    # --- launching ---------------------------------------------------------------------

    def plan(self, targets: Sequence[str]) -> tuple[list[Recipe], list[Arm]]:
        """The recipes and arms a launch of `targets` would submit (nothing is submitted)."""
        recipes = load_targets(targets)
        return recipes, [arm for recipe in recipes for arm in recipe.arms]

    async def launch(
        self,
        targets: Sequence[str],
        cluster: str,
        name: str | None = None,
        planned: tuple[list[Recipe], list[Arm]] | None = None,
    ) -> int:
        """Submit every arm of `targets` as one sweep; returns the sweep id.

        `planned` is what `plan(targets)` gave when the operator confirmed it: exactly that is
        submitted, even if a file changed since. Refused as a whole (nothing submitted) when any
        recipe has an error. A submission that fails leaves its attempt in SUBMIT_FAILED with the
        launcher's message; the others go on.
        """
        recipes, arms = planned or self.plan(targets)
        problems = [str(p) for r in recipes for p in r.errors]
        if problems:
            raise LaunchRefused("the recipes have errors; nothing was submitted", problems)
        if not arms:
            raise LaunchRefused("no arms to launch in " + ", ".join(targets))
        rt = self.runtime(cluster)
        try:
            # Reach the cluster first: a refused host key or a dead login node records nothing.
            await rt.transport.run(["true"], timeout=30, check=True)
        except (TransportError, CommandFailed) as exc:
            raise LaunchRefused(f"cannot reach {cluster} ({rt.profile.where}): {exc}") from None
        sweep_id = self.store.add_sweep(name or _sweep_name(targets), cluster, list(targets))
        for arm in arms:
            arm_id = self.store.add_arm(
                sweep_id, arm.name, arm.recipe_path, arm.selector, arm.variant, dump(arm.config), arm.summary()
            )
            await self._submit(rt, arm_id, arm)
        return sweep_id

    async def _submit(self, rt: ClusterRuntime, arm_id: int, arm: Arm) -> AttemptRow:
        attempt = self.store.add_attempt(arm_id, rt.profile.name, rt.launcher.name, dump(arm.config), arm.concurrencies)
        # Read right before the submission: the checkout as it is when the job is handed over.
        self.store.set_provenance(attempt.id, (await collect_provenance(rt, arm)).to_json())
        try:
            submitted = await rt.launcher.submit(arm, attempt.number)
        except (LaunchError, SchedulerError, TransportError, OSError) as exc:
            self.store.mark_submit_failed(
                attempt.id, f"{type(exc).__name__}: {exc}" if isinstance(exc, OSError) else str(exc)
            )
        else:
            self.store.mark_submitted(attempt.id, submitted.job_id, submitted.output_dir, submitted.results_dir)
        row = self.store.attempt(attempt.id)
        self._emit(AttemptChanged(row))
        return row

    async def resubmit(self, arm_id: int, config_yaml: str, cluster: str) -> AttemptRow:
        """A new attempt of a stored arm with exactly the given resolved config."""
        stored = self.store.arm(arm_id)
        if stored is None:
            raise LaunchRefused(f"no arm {arm_id}")
        recipe = load_recipe(stored.recipe_path, text=config_yaml)
        if recipe.errors or len(recipe.arms) != 1:
            raise LaunchRefused("the stored config no longer loads", [str(p) for p in recipe.errors])
        return await self._submit(self.runtime(cluster), arm_id, recipe.arms[0])

    # --- tracking ----------------------------------------------------------------------

    async def poll_once(self) -> list[AttemptRow]:
        """One scheduler poll per cluster for all its live attempts; returns the attempts that changed."""
        live = [a for a in self.store.attempts(live=True) if a.job_id]
        by_cluster: dict[str, list[AttemptRow]] = {}
        for attempt in live:
            by_cluster.setdefault(attempt.cluster, []).append(attempt)
        changed: list[AttemptRow] = []
        # One cluster's unexpected error is reported and its attempts keep their state; the
        # others are tracked as usual.
        results = await asyncio.gather(
            *(self._poll_cluster(cluster, attempts) for cluster, attempts in by_cluster.items()),
            return_exceptions=True,
        )
        for cluster, rows in zip(by_cluster, results, strict=True):
            if isinstance(rows, BaseException):
                if isinstance(rows, asyncio.CancelledError):
                    raise rows
                log.error("polling %s failed", cluster, exc_info=rows)
                message = f"{type(rows).__name__}: {rows}"
                self._set_status(cluster, f"poll error: {message}")
                self._emit(TrackingError(cluster, message))
            else:
                changed.extend(rows)
        return changed

    async def _poll_cluster(self, cluster: str, attempts: list[AttemptRow]) -> list[AttemptRow]:
        if cluster not in self.profiles:
            self._set_status(cluster, "not configured any more: its attempts are not tracked")
            return []
        rt = self.runtime(cluster)
        try:
            statuses = await rt.scheduler.poll([a.job_id for a in attempts if a.job_id])
        except TransportError as exc:
            # A lost connection says nothing about the jobs: keep their last known state.
            self._set_status(cluster, f"disconnected: {exc}")
            return []
        except SchedulerError as exc:
            self._set_status(cluster, f"scheduler error: {exc}")
            return []
        self._set_status(cluster, "connected")
        changed: list[AttemptRow] = []
        for attempt in attempts:
            status = statuses.get(attempt.job_id or "")
            if status is not None and self.store.record_status(attempt.id, status):
                row = self.store.attempt(attempt.id)
                changed.append(row)
                self._emit(AttemptChanged(row))
        return changed

    async def watch(
        self,
        interval: float = 2.0,
        until: Callable[[], bool] | None = None,
        *,
        after_poll: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """The poll loop: every `interval` seconds one poll (then `after_poll`, e.g. following
        the attempts' logs) until `until()` is true, or forever.

        An iteration that fails is reported (:class:`TrackingError`) and the loop goes on.
        """
        while True:
            started = time.monotonic()
            try:
                await self.poll_once()
                if after_poll is not None:
                    await after_poll()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("poll iteration failed")
                self._emit(TrackingError(None, f"{type(exc).__name__}: {exc}"))
            if until is not None and until():
                return
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))

    async def wait(self, attempt_ids: Sequence[int], interval: float = 1.0) -> list[AttemptRow]:
        """Poll until every given attempt has ended; returns their final rows."""
        ids = set(attempt_ids)

        def done() -> bool:
            return all(not self.store.attempt(i).live for i in ids)

        if not done():
            await self.watch(interval, until=done)
        return [self.store.attempt(i) for i in sorted(ids)]

    async def cancel(self, attempts: Sequence[AttemptRow]) -> None:
        """Cancel the live ones; recorded first as the operator's request, so the end is "by you"."""
        by_cluster: dict[str, list[str]] = {}
        live = [a for a in attempts if a.live and a.job_id]
        self.store.mark_cancel_requested([a.id for a in live])
        for attempt in live:
            by_cluster.setdefault(attempt.cluster, []).append(attempt.job_id or "")
        for cluster, job_ids in by_cluster.items():
            await self.runtime(cluster).scheduler.cancel(job_ids)

    async def adopt(self, cluster: str, job_id: str) -> AttemptRow:
        """Track (and follow the logs of) a job the console did not launch, as a sweep of its own.

        Its output dir is the batch output's job dir (srtctl's `<outputs>/<id>/logs/sweep_<id>.log`),
        its config the job dir's config.yaml when it loads as a recipe.
        """
        rt = self.runtime(cluster)
        try:
            info = await rt.scheduler.describe(job_id)
        except (SchedulerError, TransportError) as exc:
            raise LaunchRefused(f"cannot ask {cluster} about job {job_id}: {exc}") from None
        if info is None:
            raise LaunchRefused(f"job {job_id} is not known to the scheduler of {cluster}")
        for known in self.store.attempts():
            if known.cluster == cluster and known.job_id == job_id:
                return known
        output_dir = _job_dir(info.stdout, job_id) or info.workdir or ""
        config_yaml = ""
        if output_dir:
            try:
                config_yaml = (await rt.transport.read_file(f"{output_dir}/config.yaml", length=1 << 20)).decode(
                    "utf-8", "replace"
                )
            except (TransportError, CommandFailed, OSError):
                config_yaml = ""
        name = info.name or f"job-{job_id}"
        arm: Arm | None = None
        if config_yaml:
            recipe = load_recipe(f"{output_dir}/config.yaml", text=config_yaml)
            arm = recipe.arms[0] if len(recipe.arms) == 1 else None
        sweep_id = self.store.add_sweep(f"adopted job {job_id}", cluster, [f"job:{job_id}"])
        arm_id = self.store.add_arm(sweep_id, name, f"job:{job_id}", None, None, config_yaml,
                                    arm.summary() if arm else {})  # fmt: skip
        attempt = self.store.add_attempt(arm_id, cluster, "adopted", config_yaml, arm.concurrencies if arm else [])
        self.store.mark_submitted(attempt.id, job_id, output_dir, None)
        row = self.store.attempt(attempt.id)
        self._emit(AttemptChanged(row))
        return row


def _job_dir(stdout: str | None, job_id: str) -> str | None:
    """The job dir of a batch output path: `<dir>/logs/sweep_<id>.log` (srtctl, the demo engine)."""
    if not stdout:
        return None
    path = stdout.replace("%j", job_id)
    parent = path.rsplit("/", 1)[0] if "/" in path else ""
    if parent.endswith("/logs"):
        return parent[: -len("/logs")]
    return parent or None


def _sweep_name(targets: Sequence[str]) -> str:
    names = [Path(t.rpartition(":")[0] if ":" in t and not Path(t).exists() else t).stem for t in targets]
    return ", ".join(names)[:120] or "sweep"
