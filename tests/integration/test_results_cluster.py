"""Results and reruns on the real test cluster over real SSH (demo launcher on Slurm)."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from pathlib import Path

import pytest

from console.cli import main
from console.monitor import Monitor, MonitorEvent, PointArrived
from console.rerun import arm_points_view, fetch_arm_points, plan_rerun, rerun
from tests.conftest import RECIPES
from tests.integration.conftest import engine_for

pytestmark = pytest.mark.cluster

DEMO = RECIPES / "demo"
CLUSTER = "testcluster"


def test_points_of_the_1p1d_twin_arrive_one_by_one_while_it_runs(site: Path) -> None:
    async def scenario() -> None:
        engine = engine_for(site)
        monitor = Monitor(engine)
        arrivals: list[tuple[float, int, str, bool]] = []

        def on_event(event: MonitorEvent) -> None:
            if isinstance(event, PointArrived):
                live = engine.store.attempt(event.attempt_id).live
                arrivals.append((time.monotonic(), event.point.concurrency, event.point.status, live))

        monitor.subscribe(on_event)
        sweep = await engine.launch([str(DEMO / "mi355x-1p1d-tp8.yaml")], CLUSTER)
        (arm,) = engine.store.arms(sweep)
        (attempt,) = engine.store.attempts(arm.id)
        try:
            while engine.store.attempt(attempt.id).live:
                await engine.poll_once()
                await monitor.sync()
                await asyncio.sleep(0.5)
            final = engine.store.attempt(attempt.id)
            assert final.state == "COMPLETED", final
            deadline = time.monotonic() + 30
            while {c for _, c, s, _ in arrivals if s == "done"} != {4, 8, 16, 32, 64, 128}:
                assert time.monotonic() < deadline, arrivals
                await asyncio.sleep(0.2)
        finally:
            await monitor.close()
        first_done: dict[int, tuple[float, bool]] = {}
        for at, conc, status, live in arrivals:
            if status == "done" and conc not in first_done:
                first_done[conc] = (at, live)
        live_points = sorted(c for c, (_, live) in first_done.items() if live)
        assert len(live_points) >= 4, first_done  # they arrived while the job still ran
        times = sorted(at for at, live in first_done.values() if live)
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert all(g > 0.2 for g in gaps), gaps  # one by one, not in one batch at the end
        await engine.close()

    asyncio.run(scenario())


def test_flaky_arm_rerun_over_ssh_completes_and_results_read_through_the_transport(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def scenario() -> int:
        engine = engine_for(site)
        sweep = await engine.launch([str(DEMO / "flake-first-attempt.yaml")], CLUSTER)
        (arm,) = engine.store.arms(sweep)
        (first,) = await engine.wait([a.id for a in engine.store.attempts(arm.id)], 0.5)
        assert first.state == "FAILED"
        plan = plan_rerun(
            engine.store, arm.id, missing_only=True, attempt_points=await fetch_arm_points(engine, arm.id)
        )
        assert plan.concurrencies == [8, 16, 32] and plan.cluster == CLUSTER
        second = await rerun(engine, plan)
        (second,) = await engine.wait([second.id], 0.5)
        assert second.state == "COMPLETED"
        fetched = await fetch_arm_points(engine, arm.id)
        view = arm_points_view(engine.store, arm.id, attempt_points=fetched)
        assert [(p.concurrency, p.status, p.attempt) for p in view] == [
            (8, "done", f"a{arm.id}.2"),
            (16, "done", f"a{arm.id}.2"),
            (32, "done", f"a{arm.id}.2"),
        ]
        assert [a.number for a in engine.store.attempts(arm.id)] == [1, 2]
        got = fetched[second.id]
        assert got.bytes_read == sum(p.bytes_read for p in got.points) and all(
            0 < p.bytes_read <= 32 * 1024 for p in got.points
        )
        await engine.close()
        return arm.id

    arm_id = asyncio.run(scenario())
    assert main(["results", f"a{arm_id}", "--json"]) == 0
    points = json.loads(capsys.readouterr().out)["points"]
    assert [(p["concurrency"], p["status"], p["attempt"]) for p in points] == [
        (8, "done", f"a{arm_id}.2"),
        (16, "done", f"a{arm_id}.2"),
        (32, "done", f"a{arm_id}.2"),
    ]
    assert all(p["tok_s_per_gpu"] > 0 and p["ttft_ms"]["median"] is not None for p in points)


def test_crash_arm_rerun_of_missing_points_over_ssh(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["launch", str(DEMO / "crash-at-concurrency.yaml"), "--yes", "--wait", "--json"]) == 1
    capsys.readouterr()
    assert main(["results", "a1", "--json"]) == 1  # points missing: the answer is bad
    before = {p["concurrency"]: p["status"] for p in json.loads(capsys.readouterr().out)["points"]}
    assert before == {8: "done", 16: "done", 32: "done", 64: "missing", 128: "missing", 256: "missing"}
    assert main(["rerun", "a1", "--missing", "--yes", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (attempt,) = doc["attempts"]
    assert attempt["id"] == "a1.2" and attempt["concurrencies"] == [64, 128, 256]
    assert attempt["cluster"] == CLUSTER and attempt["job_id"]
    assert main(["cancel", "a1", "--yes"]) == 0
