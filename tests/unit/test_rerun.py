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
    grid_of,
    missing_points,
    plan_rerun,
    plan_sweep_reruns,
    rerun,
)
from console.results import PointResult, points_csv, points_rows
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
