"""Tracking never stops silently: a cluster whose poll fails unexpectedly is reported while the
others are tracked, and a poll-loop iteration that fails is reported and the loop goes on."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from console.clusters import Profile, local_profile
from console.engine import ClusterRuntime, Engine, build_runtime
from console.events import CoreEvent, TrackingError
from console.scheduler import JobStatus
from console.session import Session
from console.store import Store
from tests.conftest import RECIPES


class ExplodingScheduler:
    """Stand-in for a scheduler with a bug: its poll raises what no caller expects."""

    name = "exploding"

    async def poll(self, job_ids: list[str]) -> dict[str, JobStatus]:
        raise RuntimeError("a bug in the poll")


def _engine(data: Path) -> Engine:
    profiles = {"local": local_profile(data), "broken": replace(local_profile(data), name="broken")}

    def factory(profile: Profile, data_dir: Path) -> ClusterRuntime:
        runtime = build_runtime(profile, data_dir)
        if profile.name == "broken":
            runtime.scheduler = ExplodingScheduler()  # type: ignore[assignment]
        return runtime

    return Engine(Store(data / "console.sqlite3"), profiles, data, factory)


async def test_one_clusters_failure_is_reported_and_the_others_tracked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SRT_DEMO_SPEED", "8")
    engine = _engine(tmp_path / "data")
    events: list[CoreEvent] = []
    engine.subscribe(events.append)
    store = engine.store
    sweep = await engine.launch([str(RECIPES / "demo" / "quick.yaml")], "local")
    (good,) = [a for arm in store.arms(sweep) for a in store.attempts(arm.id)]
    arm = store.arms(sweep)[0]
    bad = store.add_attempt(arm.id, "broken", "demo", "{}", [1])
    store.mark_submitted(bad.id, "424242", str(tmp_path / "nowhere"), None)
    try:
        await engine.watch(0.2, until=lambda: not store.attempt(good.id).live)
    finally:
        await engine.close()
    assert store.attempt(good.id).state == "COMPLETED"
    assert store.attempt(bad.id).live  # its last known state is kept
    failures = [e for e in events if isinstance(e, TrackingError)]
    assert failures and all(e.cluster == "broken" and "a bug in the poll" in e.message for e in failures)
    assert engine.cluster_statuses()["broken"].startswith("poll error: RuntimeError")
    assert engine.cluster_statuses()["local"] == "connected"


async def test_a_failing_iteration_is_reported_and_the_loop_goes_on(tmp_path: Path) -> None:
    session = Session.of(_engine(tmp_path / "data"))
    events: list[CoreEvent] = []
    session.subscribe(events.append)
    calls = 0

    async def follow_step() -> None:
        nonlocal calls
        calls += 1
        raise OSError("the follow step broke")

    try:
        await session.engine.watch(0.01, until=lambda: calls >= 3, after_poll=follow_step)
    finally:
        await session.close()
    failures = [e for e in events if isinstance(e, TrackingError)]
    assert calls == 3
    assert [(e.cluster, e.message) for e in failures] == [(None, "OSError: the follow step broke")] * 3
