"""Launching on the built-in `local` profile: the engine, the demo launcher and the local scheduler, for real."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from console.cli import main
from console.clusters import local_profile
from console.engine import Engine, LaunchRefused
from console.results import read_points
from console.signatures import default_matcher
from console.store import Store
from tests.conftest import RECIPES


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SRT_CONSOLE_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("SRT_DEMO_SPEED", "4")  # demo durations divided by 4
    return tmp_path / "data"


def zmq_workers(job_dir: Path) -> set[str]:
    """Workers whose log shows the real pyzmq `Address already in use` (the seed's failure)."""
    matcher = default_matcher()
    found = set()
    for log in (job_dir / "logs").glob("*_w*.out"):
        for line in log.read_text(errors="replace").splitlines():
            finding = matcher.match_line(line)
            if finding and finding.signature_id == "zmq-bind-in-use":
                found.add(log.stem.split("_", 1)[1])
    return found


def engine_for(data_dir: Path) -> Engine:
    return Engine(Store(data_dir / "console.sqlite3"), {"local": local_profile(data_dir)}, data_dir)


def test_cli_launch_quick_to_completed(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["launch", str(RECIPES / "demo" / "quick.yaml"), "--yes", "--wait", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (attempt,) = doc["attempts"]
    assert doc["sweep"] == "s1"
    assert set(attempt) >= {"id", "arm", "cluster", "job_id", "output_dir", "state"}
    assert (attempt["arm"], attempt["cluster"], attempt["state"]) == ("demo-quick", "local", "COMPLETED")
    points = read_points(Path(attempt["output_dir"]))
    assert [(p.concurrency, p.status) for p in points] == [(1, "done"), (4, "done"), (16, "done")]

    assert main(["status", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["sweeps"][0]["arms"][0]["attempts"][0]["state"] == "COMPLETED"


def test_seed_twins_as_one_sweep_locally(data_dir: Path) -> None:
    async def scenario() -> None:
        engine = engine_for(data_dir)
        targets = [str(RECIPES / "demo" / "mi355x-1p1d-tp8.yaml"), str(RECIPES / "demo" / "mi355x-2p1d-dpa-tp8.yaml")]
        sweep = await engine.launch(targets, "local")
        attempts = [a for arm in engine.store.arms(sweep) for a in engine.store.attempts(arm.id)]
        final = {engine.store.arm(a.arm_id).name: a for a in await engine.wait([a.id for a in attempts], 0.3)}  # type: ignore[union-attr]
        one = final["demo-dsv4-fp4-mi355x-atom-1p1d-tp8"]
        two = final["demo-dsv4-fp4-mi355x-atom-2p1d-dpa-tp8"]
        assert (one.state, two.state) == ("COMPLETED", "FAILED")
        states = [h[1] for h in engine.store.history(two.id)]
        assert states[:2] == ["SUBMITTING", "PENDING"] and "RUNNING" in states and states[-1] == "FAILED"
        assert one.results_dir is not None
        points = read_points(Path(one.output_dir or ""), results_root=Path(one.results_dir).parent, job_id=one.job_id)
        assert [p.concurrency for p in points if p.status == "done"] == [4, 8, 16, 32, 64, 128]
        assert zmq_workers(Path(two.output_dir or "")) == {"prefill_w0", "prefill_w1", "decode_w0"}
        await engine.close()

    asyncio.run(scenario())


def test_restarted_console_tracks_a_running_attempt_to_its_end(data_dir: Path) -> None:
    async def launch() -> int:
        engine = engine_for(data_dir)
        sweep = await engine.launch([str(RECIPES / "demo" / "quick.yaml")], "local")
        (attempt,) = engine.store.attempts()
        await engine.watch(0.1, until=lambda: engine.store.attempt(attempt.id).state == "RUNNING")
        engine.store.close()  # the console goes away mid-run
        return sweep

    asyncio.run(launch())

    async def restart() -> None:
        engine = engine_for(data_dir)  # a new console: nothing in memory but the store
        (live,) = engine.store.attempts(live=True)
        (final,) = await engine.wait([live.id], 0.2)
        assert final.state == "COMPLETED" and final.job_id == live.job_id

    asyncio.run(restart())


def test_cancel_gives_cancelled(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hang = RECIPES / "demo" / "health-hang.yaml"
    assert main(["launch", str(hang), "--yes", "--json"]) == 0
    attempt = json.loads(capsys.readouterr().out)["attempts"][0]
    assert main(["cancel", attempt["arm_id"], "--yes", "--json"]) == 0
    capsys.readouterr()

    async def settle() -> str:
        engine = engine_for(data_dir)
        (row,) = engine.store.attempts()
        (final,) = await engine.wait([row.id], 0.2)
        return final.reason or "" if final.state == "CANCELLED" else final.state

    assert asyncio.run(settle()).startswith("by ")


def test_hostile_recipe_path_launches_and_runs_nothing_else(data_dir: Path, tmp_path: Path) -> None:
    canary = "srt-canary-7f3a"
    folder = tmp_path / f"we ird 'q\" ;$(touch {canary}) `touch {canary}` dir"
    folder.mkdir()
    recipe = folder / f"a b;$(touch {canary}).yaml"
    shutil.copy(RECIPES / "demo" / "quick.yaml", recipe)

    async def scenario() -> str:
        engine = engine_for(data_dir)
        await engine.launch([str(recipe)], "local")
        (row,) = engine.store.attempts()
        (final,) = await engine.wait([row.id], 0.2)
        return final.state

    assert asyncio.run(scenario()) == "COMPLETED"
    # A command injected anywhere would have created the canary in some working directory.
    assert not list(tmp_path.rglob(canary)) and not (Path.cwd() / canary).exists()


def test_broken_recipes_submit_nothing(data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text((RECIPES / "demo" / "quick.yaml").read_text().replace("agg_workers: 1", "agg_workers: x"))
    assert main(["launch", str(bad), str(RECIPES / "demo" / "quick.yaml"), "--yes"]) == 1
    assert f"{bad}:" in capsys.readouterr().err
    engine = engine_for(data_dir)
    assert engine.store.sweeps() == []
    with pytest.raises(LaunchRefused, match="unknown cluster"):
        asyncio.run(engine.launch([str(RECIPES / "demo" / "quick.yaml")], "nowhere"))


def test_dry_run_shows_the_batch_script_and_submits_nothing(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["launch", str(RECIPES / "demo" / "quick.yaml"), "--dry-run", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (item,) = doc["dry_run"]
    assert item["arm"] == "demo-quick" and "#SBATCH --nodes=1" in item["preview"]
    assert engine_for(data_dir).store.sweeps() == []
