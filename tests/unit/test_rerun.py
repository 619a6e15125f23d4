"""Reruns on the built-in `local` profile: real engine, demo jobs, local scheduler."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from console.clusters import local_profile
from console.engine import Engine
from console.recipes import load_recipe
from console.rerun import (
    RerunRefused,
    arm_points_view,
    derive_missing,
    deterministic_warning,
    failed_arms,
    fetch_arm_points,
    grid_of,
    missing_points,
    plan_rerun,
    plan_sweep_reruns,
    rerun,
)
from console.results import PointResult, points_csv, points_rows
from console.session import Session
from console.store import Store
from console.triage import diagnose_output_dir
from tests.conftest import RECIPES, SEED_DIR

DEMO = RECIPES / "demo"


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Engine:
    monkeypatch.setenv("SRT_DEMO_SPEED", "4")
    data = tmp_path / "data"
    return Engine(Store(data / "console.sqlite3"), {"local": local_profile(data)}, data)


def _config(path: Path) -> dict[str, object]:
    recipe = load_recipe(path)
    (arm,) = recipe.arms
    return arm.config


# --- derive_missing -----------------------------------------------------------------------


def test_derive_missing_sa_bench_keeps_everything_else() -> None:
    config = _config(DEMO / "crash-at-concurrency.yaml")
    derived = derive_missing(config, [64, 128, 256])
    assert derived["benchmark"]["concurrencies"] == "64x128x256"  # type: ignore[index]
    assert grid_of(derived) == [64, 128, 256]
    for key in config:
        if key != "benchmark":
            assert derived[key] == config[key]
    assert {k: v for k, v in derived["benchmark"].items() if k != "concurrencies"} == {  # type: ignore[attr-defined]
        k: v
        for k, v in config["benchmark"].items()  # type: ignore[attr-defined]
        if k != "concurrencies"
    }
    assert config["benchmark"]["concurrencies"] == "8x16x32x64x128x256"  # type: ignore[index]  # not mutated


def test_derive_missing_custom_benchmark_uses_env() -> None:
    config = _config(DEMO / "mi355x-1p1d-tp8.yaml")
    derived = derive_missing(config, [64, 128])
    bench = derived["benchmark"]
    assert bench["env"]["CONCURRENCIES"] == "64x128"
    assert "concurrencies" not in bench
    assert bench["command"] == config["benchmark"]["command"]  # type: ignore[index]
    assert load_recipe("x.yaml", text=yaml.safe_dump(derived)).arms[0].concurrencies == (64, 128)


def test_derive_missing_list_stays_a_list_and_bad_input_is_refused() -> None:
    config = {"benchmark": {"type": "sa-bench", "concurrencies": [4, 8, 16]}}
    assert derive_missing(config, [8])["benchmark"]["concurrencies"] == [8]
    with pytest.raises(ValueError):
        derive_missing(config, [])
    with pytest.raises(ValueError):
        derive_missing(config, [8, 8])


def test_seed_recipe_grid() -> None:
    config = _config(SEED_DIR / "1p1d-tp8.yaml")
    assert grid_of(config) == [4, 8, 16, 32, 64, 128]


def test_missing_points_and_export() -> None:
    points = [PointResult(4, "done", output_tok_s=1.0), PointResult(8, "invalid"), PointResult(16, "missing")]
    assert missing_points(points) == [8, 16]
    assert missing_points(points, [4, 16]) == [16]
    text = points_csv(points_rows("arm-x", points))
    lines = text.splitlines()
    assert lines[0].startswith("arm,attempt,concurrency,status")
    assert lines[1].startswith("arm-x,,4,done,1.0")
    assert len(lines) == 4


# --- with the engine ------------------------------------------------------------------------


async def _launch_and_wait(engine: Engine, recipe: Path) -> tuple[int, int]:
    sweep = await engine.launch([str(recipe)], "local")
    (arm,) = engine.store.arms(sweep)
    (attempt,) = engine.store.attempts(arm.id)
    await engine.wait([attempt.id], 0.2)
    return sweep, arm.id


def test_flake_rerun_completes_and_keeps_both_attempts(engine: Engine) -> None:
    async def scenario() -> None:
        sweep, arm_id = await _launch_and_wait(engine, DEMO / "flake-first-attempt.yaml")
        (first,) = engine.store.attempts(arm_id)
        assert first.state == "FAILED"
        assert [a.id for a in failed_arms(engine.store, sweep)] == [arm_id]
        plan = plan_rerun(engine.store, arm_id, missing_only=False)
        assert plan.config_yaml == first.config_yaml and plan.concurrencies == [8, 16, 32]
        second = await rerun(engine, plan)
        assert second.number == 2 and second.config_yaml == first.config_yaml
        with pytest.raises(RerunRefused, match="still"):
            plan_rerun(engine.store, arm_id, missing_only=False)  # live attempt: refused
        (final,) = await engine.wait([second.id], 0.2)
        assert final.state == "COMPLETED"
        view = arm_points_view(engine.store, arm_id)
        assert [(p.concurrency, p.status, p.attempt) for p in view] == [
            (8, "done", f"a{arm_id}.2"),
            (16, "done", f"a{arm_id}.2"),
            (32, "done", f"a{arm_id}.2"),
        ]
        assert [a.number for a in engine.store.attempts(arm_id)] == [1, 2]
        assert failed_arms(engine.store, sweep) == []
        with pytest.raises(RerunRefused, match="nothing is missing"):
            plan_rerun(engine.store, arm_id, missing_only=True)
        await engine.close()

    asyncio.run(scenario())


def test_an_ended_attempt_whose_view_lags_its_files_is_read_from_the_files(engine: Engine) -> None:
    """The monitor reads result files a poll behind the job: the attempt can end with its last
    point not yet in the view. The view then cannot stand for the files, on the screen or in a plan."""

    class LaggingView:
        def __init__(self, points: dict[int, PointResult]) -> None:
            self.points = points

    async def scenario() -> None:
        _sweep, arm_id = await _launch_and_wait(engine, DEMO / "quick.yaml")
        (attempt,) = engine.store.attempts(arm_id)
        assert attempt.state == "COMPLETED" and len(attempt.concurrencies) >= 2
        whole = arm_points_view(engine.store, arm_id)
        assert all(p.status == "done" for p in whole)
        first = next(p for p in whole if p.concurrency == attempt.concurrencies[0])
        lagging = {attempt.id: LaggingView({first.concurrency: first})}
        for view in (
            arm_points_view(engine.store, arm_id, lagging),
            arm_points_view(engine.store, arm_id, attempt_points=await fetch_arm_points(engine, arm_id, lagging)),
        ):
            assert [(p.concurrency, p.status) for p in view] == [(c, "done") for c in attempt.concurrencies]
        # A view holding every point stands for the files: nothing is read.
        caught_up = {attempt.id: LaggingView({p.concurrency: p for p in whole})}
        fetched = await fetch_arm_points(engine, arm_id, caught_up)
        assert fetched[attempt.id].bytes_read == 0
        await engine.close()

    asyncio.run(scenario())


def test_crash_rerun_of_missing_points_submits_exactly_them(engine: Engine) -> None:
    async def scenario() -> None:
        _sweep, arm_id = await _launch_and_wait(engine, DEMO / "crash-at-concurrency.yaml")
        (first,) = engine.store.attempts(arm_id)
        assert first.state == "FAILED"
        view = arm_points_view(engine.store, arm_id)
        assert {p.concurrency: p.status for p in view} == {
            8: "done", 16: "done", 32: "done", 64: "missing", 128: "missing", 256: "missing",
        }  # fmt: skip
        plan = plan_rerun(engine.store, arm_id, missing_only=True)
        assert plan.concurrencies == [64, 128, 256]
        expected_config = derive_missing(yaml.safe_load(first.config_yaml), [64, 128, 256])
        assert yaml.safe_load(plan.config_yaml) == expected_config

        # The crash is transient (the first attempt only): the missing points complete.
        second = await rerun(engine, plan)
        assert second.concurrencies == [64, 128, 256]
        assert yaml.safe_load(second.config_yaml) == expected_config
        (final,) = await engine.wait([second.id], 0.2)
        assert final.state == "COMPLETED"
        bench = (Path(final.output_dir or "") / "logs" / "benchmark.out").read_text()
        assert "concurrencies=64x128x256" in bench
        view = arm_points_view(engine.store, arm_id)
        assert [(p.concurrency, p.status, p.attempt) for p in view] == [
            (8, "done", f"a{arm_id}.1"),
            (16, "done", f"a{arm_id}.1"),
            (32, "done", f"a{arm_id}.1"),
            (64, "done", f"a{arm_id}.2"),
            (128, "done", f"a{arm_id}.2"),
            (256, "done", f"a{arm_id}.2"),
        ]
        await engine.close()

    asyncio.run(scenario())


def test_two_concurrent_reruns_give_one_submission(engine: Engine) -> None:
    async def scenario() -> None:
        _sweep, arm_id = await _launch_and_wait(engine, DEMO / "flake-first-attempt.yaml")
        plan = plan_rerun(engine.store, arm_id, missing_only=False)
        results = await asyncio.gather(rerun(engine, plan), rerun(engine, plan), return_exceptions=True)
        assert sum(1 for r in results if isinstance(r, RerunRefused)) == 1
        assert len(engine.store.attempts(arm_id)) == 2
        await engine.cancel(engine.store.attempts(arm_id, live=True))
        await engine.wait([a.id for a in engine.store.attempts(arm_id)], 0.2)
        await engine.close()

    asyncio.run(scenario())


def test_seed_zmq_failure_is_deterministic_and_warned(engine: Engine) -> None:
    async def scenario() -> None:
        sweep, arm_id = await _launch_and_wait(engine, DEMO / "mi355x-2p1d-dpa-tp8.yaml")
        (first,) = engine.store.attempts(arm_id)
        assert first.state in {"FAILED", "TIMEOUT"}
        diagnosis = diagnose_output_dir(first.output_dir or "", first.state)
        assert diagnosis is not None and diagnosis.deterministic
        warning = deterministic_warning(diagnosis)
        assert warning is not None and warning.startswith("a plain rerun will fail the same way: ")
        assert "zmq" in warning.lower()
        plans, refused = plan_sweep_reruns(engine.store, sweep, False, {arm_id: diagnosis})
        assert refused == [] and [p.warning for p in plans] == [warning]
        await engine.close()

    asyncio.run(scenario())


def test_a_failure_that_recurs_across_attempts_is_deterministic(engine: Engine) -> None:
    """The monitor records what ended each attempt; the same root cause ending the arm's next
    attempt makes it deterministic, in the diagnosis, its advice and the rerun dialog's warning."""
    session = Session.of(engine, settle_s=5.0)

    def ended_and_diagnosed(attempt_id: int) -> bool:
        attempt = engine.store.attempt(attempt_id)
        view = session.views.get(attempt_id)
        return not attempt.live and view is not None and view.diagnosis is not None and attempt.root_cause is not None

    async def scenario() -> None:
        sweep = await engine.launch([str(DEMO / "oom-graph-capture.yaml")], "local")
        (arm,) = engine.store.arms(sweep)
        (first,) = engine.store.attempts(arm.id)
        await session.track(0.2, until=lambda: ended_and_diagnosed(first.id))
        once = session.views[first.id].diagnosis
        assert once is not None and once.root_cause is not None and not once.recurrences
        assert engine.store.attempt(first.id).root_cause == once.root_key

        second = await session.rerun(await session.plan_rerun(arm.id, missing_only=False))
        await session.track(0.2, until=lambda: ended_and_diagnosed(second.id))
        again = session.views[second.id].diagnosis
        assert again is not None and again.root_cause is not None
        assert again.root_key == once.root_key
        assert again.recurrences == (f"a{arm.id}.1",) and again.deterministic
        assert f"also ended attempt a{arm.id}.1" in again.advice and "one-off" not in again.advice
        plan = await session.plan_rerun(arm.id, missing_only=False)
        assert plan.warning is not None and f"also ended a{arm.id}.1" in plan.warning
        await session.close()

    asyncio.run(scenario())


def test_a_healthy_attempt_becomes_the_baseline_of_the_arms_next_one(engine: Engine) -> None:
    """The monitor keeps a healthy attempt's error-level line templates; the arm's next attempt
    is compared with them (its error lines outside them are novel)."""
    session = Session.of(engine, settle_s=5.0)

    def diagnosed(attempt_id: int) -> bool:
        view = session.views.get(attempt_id)
        return not engine.store.attempt(attempt_id).live and view is not None and view.diagnosis is not None

    async def scenario() -> None:
        sweep = await engine.launch([str(DEMO / "quick.yaml")], "local")
        (arm,) = engine.store.arms(sweep)
        (first,) = engine.store.attempts(arm.id)
        await session.track(0.2, until=lambda: diagnosed(first.id) and session.views[first.id].templates_saved >= 0)
        assert session.views[first.id].diagnosis.verdict == "healthy"  # type: ignore[union-attr]
        second = await session.rerun(await session.plan_rerun(arm.id, missing_only=False))
        assert engine.store.baseline_templates(second.id) == session.views[first.id].triage.templates
        await session.track(0.2, until=lambda: second.id in session.views)
        assert session.views[second.id].triage.baseline == session.views[first.id].triage.templates
        await engine.cancel([engine.store.attempt(second.id)])
        await engine.wait([second.id], 0.2)
        await session.close()

    asyncio.run(scenario())
