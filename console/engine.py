"""The engine ties recipes, clusters, launchers, schedulers and the store together.

It launches sweeps, polls every cluster once per tick for all of its live attempts, records
what the scheduler says, and tells listeners (the CLI's `--wait`, the UI) what changed. It keeps
no state of its own beyond caches: the store is the truth, so a restarted console reattaches by
simply polling the live attempts it finds there.

A launch is recorded whole before anything is submitted: the sweep, its arms and one
SUBMITTING attempt each, with a marker that the attempt's job carries in its comment. A console
killed mid-launch thus leaves attempts whose submitting process is gone; the next poll
(:meth:`Engine.reconcile`) asks each cluster for the jobs with those markers, and an attempt
becomes PENDING with the job it finds, or SUBMIT_FAILED when there is none. A cancel of the
sweep stops the submissions that have not started, and cancels a job whose submission was
under way as soon as its id is known.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from console.cadence import Cadence
from console.events import AttemptChanged, ClusterChanged, EngineEvent, TrackingError
from console.scheduler import Scheduler, SchedulerError
from console.store import SUBMITTING, AttemptRow, LaunchArm, Store, StoreError, process_gone
from console.transport.base import CommandFailed, ConnectionStatus, Transport, TransportError

if TYPE_CHECKING:
    from console.clusters import Profile
    from console.launchers import Launcher
    from console.model import Arm, Recipe

# Tracking (`status`, `cancel`, the poll loop) needs only the store and the schedulers: the
# launchers, the recipe loader and the provenance are imported by what launches.

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
    from console.launchers import DemoLauncher, SrtctlLauncher

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
        *,
        cadence: Cadence | None = None,
    ) -> None:
        self.store = store
        self.profiles = profiles
        self.data_dir = data_dir
        self.cadence = cadence or Cadence()
        self._factory = runtime_factory
        self._runtimes: dict[str, ClusterRuntime] = {}
        self._listeners: list[Listener] = []
        # Clusters where this engine just submitted or cancelled (monotonic time): polled at
        # once (the poll loop is woken) and then quickly for the cadence's expect_s.
        self._nudged_at: dict[str, float] = {}
        self._wake: asyncio.Event | None = None

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

    def _nudge(self, cluster: str) -> None:
        """A change is expected on this cluster (a submission, a cancel): poll it now and quickly."""
        self._nudged_at[cluster] = time.monotonic()
        if self._wake is not None:
            self._wake.set()

    def cluster_statuses(self) -> dict[str, str]:
        return {name: rt.status for name, rt in self._runtimes.items()}

    async def close(self) -> None:
        for rt in self._runtimes.values():
            await rt.transport.close()

    # --- launching ---------------------------------------------------------------------

    def plan(self, targets: Sequence[str]) -> tuple[list[Recipe], list[Arm]]:
        """The recipes and arms a launch of `targets` would submit (nothing is submitted)."""
        from console.recipes import load_targets

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
        from console.recipes.yamlio import dump

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
        records = [
            LaunchArm(arm.name, arm.recipe_path, arm.selector, arm.variant, dump(arm.config), arm.summary(),
                      arm.concurrencies, new_marker())
            for arm in arms
        ]  # fmt: skip
        sweep_id, attempts = self.store.add_launch(
            name or _sweep_name(targets), cluster, list(targets), rt.launcher.name, records
        )
        for arm, attempt in zip(arms, attempts, strict=True):
            if self.store.sweep_cancel_requested(sweep_id) or self.store.attempt(attempt.id).cancel_requested_at:
                # Cancelled while earlier arms were being submitted: this one never starts.
                self.store.mark_not_submitted(attempt.id, "cancelled before it was submitted")
                self._emit(AttemptChanged(self.store.attempt(attempt.id)))
                continue
            await self._submit_attempt(rt, attempt, arm, sweep_id)
        return sweep_id

    async def _submit(self, rt: ClusterRuntime, arm_id: int, arm: Arm) -> AttemptRow:
        from console.recipes.yamlio import dump

        attempt = self.store.add_attempt(
            arm_id, rt.profile.name, rt.launcher.name, dump(arm.config), arm.concurrencies, marker=new_marker()
        )
        return await self._submit_attempt(rt, attempt, arm)

    async def _submit_attempt(
        self, rt: ClusterRuntime, attempt: AttemptRow, arm: Arm, sweep_id: int | None = None
    ) -> AttemptRow:
        from console.launchers import LaunchError
        from console.provenance import collect_provenance

        # Read right before the submission: the checkout as it is when the job is handed over.
        self.store.set_provenance(attempt.id, (await collect_provenance(rt, arm)).to_json())
        try:
            submitted = await rt.launcher.submit(arm, attempt.number, attempt.marker)
        except asyncio.CancelledError:
            raise
        except (LaunchError, SchedulerError, TransportError) as exc:
            self.store.mark_submit_failed(attempt.id, str(exc))
        except Exception as exc:
            # Whatever went wrong is this arm's failure, never the end of the launch.
            log.exception("submitting attempt %s failed", attempt.id)
            self.store.mark_submit_failed(attempt.id, f"{type(exc).__name__}: {exc}")
        else:
            self.store.mark_submitted(attempt.id, submitted.job_id, submitted.output_dir, submitted.results_dir)
            self._nudge(rt.profile.name)
            await self._cancel_if_requested(rt, attempt.id, sweep_id)
        row = self.store.attempt(attempt.id)
        self._emit(AttemptChanged(row))
        return row

    async def _cancel_if_requested(self, rt: ClusterRuntime, attempt_id: int, sweep_id: int | None) -> None:
        """A cancel that came while the job was being submitted takes effect as soon as its id is known."""
        row = self.store.attempt(attempt_id)
        swept = sweep_id is not None and self.store.sweep_cancel_requested(sweep_id)
        if row.job_id and (row.cancel_requested_at is not None or swept):
            if row.cancel_requested_at is None:
                self.store.mark_cancel_requested([row.id])
            await rt.scheduler.cancel([row.job_id])

    async def reconcile(self) -> list[AttemptRow]:
        """Attempts left SUBMITTING by a console that died: each gets the job its marker finds on
        its cluster (PENDING, cancelled at once when a cancel was asked meanwhile), or
        SUBMIT_FAILED when there is none. A cluster that cannot be asked keeps its attempts for
        the next poll. Returns the attempts that changed."""
        orphans = [a for a in self.store.attempts(live=True) if a.state == SUBMITTING and process_gone(a.submitter)]
        if not orphans:
            return []
        from console.launchers import LaunchError

        by_cluster: dict[str, list[AttemptRow]] = {}
        for attempt in orphans:
            by_cluster.setdefault(attempt.cluster, []).append(attempt)
        changed: list[AttemptRow] = []
        for cluster, attempts in by_cluster.items():
            if cluster not in self.profiles:
                continue
            rt = self.runtime(cluster)
            markers = [a.marker for a in attempts if a.marker]
            try:
                found = await rt.scheduler.find_marked(markers) if markers else {}
            except (SchedulerError, TransportError) as exc:
                log.warning("%s: cannot look for interrupted submissions yet: %s", cluster, exc)
                continue
            for attempt in attempts:
                job_id = found.get(attempt.marker or "")
                if job_id is None:
                    self.store.mark_submit_failed(
                        attempt.id, "not submitted: the console stopped before the job reached the scheduler"
                    )
                else:
                    try:
                        submitted = await rt.launcher.recovered(job_id)
                    except (LaunchError, SchedulerError, TransportError, OSError) as exc:
                        log.warning("%s: job %s found again, but: %s", cluster, job_id, exc)
                        continue
                    self.store.mark_submitted(attempt.id, job_id, submitted.output_dir, submitted.results_dir)
                    arm = self.store.arm(attempt.arm_id)
                    await self._cancel_if_requested(rt, attempt.id, arm.sweep_id if arm else None)
                row = self.store.attempt(attempt.id)
                changed.append(row)
                self._emit(AttemptChanged(row))
            self._nudge(cluster)
        return changed

    async def resubmit(self, arm_id: int, config_yaml: str, cluster: str) -> AttemptRow:
        """A new attempt of a stored arm with exactly the given resolved config."""
        from console.recipes import load_recipe

        stored = self.store.arm(arm_id)
        if stored is None:
            raise LaunchRefused(f"no arm {arm_id}")
        recipe = load_recipe(stored.recipe_path, text=config_yaml)
        if recipe.errors or len(recipe.arms) != 1:
            raise LaunchRefused("the stored config no longer loads", [str(p) for p in recipe.errors])
        return await self._submit(self.runtime(cluster), arm_id, recipe.arms[0])

    # --- tracking ----------------------------------------------------------------------

    async def poll_once(self, clusters: Collection[str] | None = None) -> list[AttemptRow]:
        """One scheduler poll per cluster (of ``clusters``, default every one) for all its live
        attempts; returns the attempts that changed."""
        changed: list[AttemptRow] = []
        try:
            changed += await self.reconcile()
        except StoreError:
            raise
        except Exception as exc:  # reconciling must never stop tracking
            log.exception("reconciling interrupted submissions failed")
            self._emit(TrackingError(None, f"reconcile: {type(exc).__name__}: {exc}"))
        live = [a for a in self.store.attempts(live=True) if a.job_id]
        by_cluster: dict[str, list[AttemptRow]] = {}
        for attempt in live:
            if clusters is None or attempt.cluster in clusters:
                by_cluster.setdefault(attempt.cluster, []).append(attempt)
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
        interval: float | None = None,
        until: Callable[[], bool] | None = None,
        *,
        after_poll: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """The poll loop: each cluster with live attempts is polled at the engine's cadence
        (``interval`` fixes one pace instead), then ``after_poll`` runs (e.g. following the
        attempts' logs), until ``until()`` is true, or forever.

        The store is looked at every quick interval (a local read), so a submission or a cancel
        by another console quickens the pace too. An iteration that fails is reported
        (:class:`TrackingError`) and the loop goes on.
        """
        cadence = self.cadence if interval is None else Cadence.fixed(interval)
        self._wake = wake = asyncio.Event()
        last: dict[str, float] = {}  # cluster -> monotonic start of its last poll
        followed = -float("inf")  # when after_poll last ran
        while True:
            wake.clear()
            started = time.monotonic()
            next_in = cadence.quick_s
            try:
                due, next_in = self._due(cadence, last, started)
                if due or started - followed >= cadence.steady_s:
                    for cluster in due:
                        last[cluster] = started
                    await self.poll_once(due)
                    if after_poll is not None:
                        await after_poll()
                    followed = started
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("poll iteration failed")
                self._emit(TrackingError(None, f"{type(exc).__name__}: {exc}"))
            if until is not None and until():
                return
            # Woken at once by a submission or cancel of this engine; else the store is looked
            # at again within a quick interval.
            delay = max(0.0, min(next_in, cadence.quick_s) - (time.monotonic() - started))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(wake.wait(), delay)

    def _due(self, cadence: Cadence, last: dict[str, float], mono: float) -> tuple[set[str], float]:
        """The clusters due for a poll at monotonic time ``mono``, and the seconds until the next is."""
        now = time.time()
        by_cluster: dict[str, list[AttemptRow]] = {}
        for attempt in self.store.attempts(live=True):
            by_cluster.setdefault(attempt.cluster, []).append(attempt)
        due: set[str] = set()
        next_in = cadence.steady_s
        for cluster, attempts in by_cluster.items():
            previous = last.get(cluster, -float("inf"))
            nudged_at = self._nudged_at.get(cluster, -float("inf"))
            pace = cadence.interval(attempts, now, nudged_ago=mono - nudged_at)
            if mono - previous >= pace or nudged_at > previous:
                due.add(cluster)
                next_in = min(next_in, pace)
            else:
                next_in = min(next_in, pace - (mono - previous))
        return due, next_in

    async def wait(self, attempt_ids: Sequence[int], interval: float | None = None) -> list[AttemptRow]:
        """Poll (at the engine's cadence, or every ``interval`` s) until every given attempt has
        ended; returns their final rows."""
        ids = set(attempt_ids)

        def done() -> bool:
            return all(not self.store.attempt(i).live for i in ids)

        if not done():
            await self.watch(interval, until=done)
        return [self.store.attempt(i) for i in sorted(ids)]

    async def cancel(self, attempts: Sequence[AttemptRow], *, sweep_id: int | None = None) -> None:
        """Cancel the live ones; recorded first as the operator's request, so the end is "by you".

        An attempt still being submitted is flagged: its job is cancelled as soon as its id is
        known. With ``sweep_id`` the sweep's submissions that have not started never start.
        When the request cannot be recorded (a full disk), the jobs are cancelled all the same
        and the StoreError is raised afterwards."""
        by_cluster: dict[str, list[str]] = {}
        live = [a for a in attempts if a.live]
        unrecorded: StoreError | None = None
        try:
            if sweep_id is not None:
                self.store.mark_sweep_cancel_requested(sweep_id)
            self.store.mark_cancel_requested([a.id for a in live])
        except StoreError as exc:
            unrecorded = exc
        for attempt in live:
            if attempt.job_id:
                by_cluster.setdefault(attempt.cluster, []).append(attempt.job_id)
        for cluster, job_ids in by_cluster.items():
            await self.runtime(cluster).scheduler.cancel(job_ids)
            self._nudge(cluster)
        if unrecorded is not None:
            raise unrecorded

    async def adopt(self, cluster: str, job_id: str) -> AttemptRow:
        """Track (and follow the logs of) a job the console did not launch, as a sweep of its own.

        Its output dir is the batch output's job dir (srtctl's `<outputs>/<id>/logs/sweep_<id>.log`),
        its config the job dir's config.yaml when it loads as a recipe.
        """
        from console.recipes import load_recipe

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


def new_marker() -> str:
    """A marker for one attempt's job (its Slurm comment), unique across consoles and stores."""
    return f"srt-console:{secrets.token_hex(8)}"


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
