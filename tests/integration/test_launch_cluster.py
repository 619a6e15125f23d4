"""Launching and tracking on the real test cluster over real SSH: demo and srtctl launchers."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.engine import LaunchRefused
from console.results import read_points
from console.store import Store
from tests.conftest import RECIPES, ROOT
from tests.integration.conftest import engine_for
from tests.unit.test_launch_local import zmq_workers

pytestmark = pytest.mark.cluster

DEMO = RECIPES / "demo"


def test_seed_twins_as_one_sweep(site: Path) -> None:
    async def scenario() -> None:
        engine = engine_for(site)
        sweep = await engine.launch([str(DEMO / "mi355x-1p1d-tp8.yaml"), str(DEMO / "mi355x-2p1d-dpa-tp8.yaml")],
                                    "testcluster")  # fmt: skip
        attempts = [a for arm in engine.store.arms(sweep) for a in engine.store.attempts(arm.id)]
        final = await engine.wait([a.id for a in attempts], 0.5)
        by_name = {engine.store.arm(a.arm_id).name: a for a in final}  # type: ignore[union-attr]
        one = by_name["demo-dsv4-fp4-mi355x-atom-1p1d-tp8"]
        two = by_name["demo-dsv4-fp4-mi355x-atom-2p1d-dpa-tp8"]
        assert (one.state, two.state) == ("COMPLETED", "FAILED"), (one, two)
        assert one.results_dir and one.output_dir and one.job_id
        points = read_points(Path(one.output_dir), results_root=Path(one.results_dir).parent, job_id=one.job_id)
        assert [p.concurrency for p in points if p.status == "done"] == [4, 8, 16, 32, 64, 128]
        # Seen live through squeue, then settled with its exit code by accounting (sacct), or by
        # slurmctld (scontrol) while accounting still lags squeue.
        sources = [h[3] for h in engine.store.history(two.id)]
        assert "squeue" in sources and sources[-1] in ("sacct", "scontrol"), sources
        assert two.exit_code and two.exit_code != "0:0", two
        nodes = {p.name.split("_")[0] for p in (Path(two.output_dir or "") / "logs").glob("*_w*.out")}
        assert len(nodes) == 3, nodes
        assert zmq_workers(Path(two.output_dir or "")) == {"prefill_w0", "prefill_w1", "decode_w0"}
        await engine.close()

    asyncio.run(scenario())


def test_cancel_gives_cancelled(site: Path) -> None:
    async def scenario() -> None:
        engine = engine_for(site)
        await engine.launch([str(DEMO / "health-hang.yaml")], "testcluster")
        (attempt,) = engine.store.attempts()
        await engine.watch(0.3, until=lambda: engine.store.attempt(attempt.id).state == "RUNNING")
        await engine.cancel([engine.store.attempt(attempt.id)])
        (final,) = await engine.wait([attempt.id], 0.3)
        assert final.state == "CANCELLED" and (final.reason or "").startswith("by ")
        await engine.close()

    asyncio.run(scenario())


def test_hostile_recipe_path_runs_nothing_else(site: Path) -> None:
    canary = "srt-canary-c1u5"
    folder = site / f"sp ace 'q\" ;$(touch {canary}) `touch {canary}`"
    folder.mkdir()
    recipe = folder / f"x;$(touch {canary}).yaml"
    shutil.copy(DEMO / "quick.yaml", recipe)

    async def scenario() -> str:
        engine = engine_for(site)
        await engine.launch([str(recipe)], "testcluster")
        (attempt,) = engine.store.attempts()
        (final,) = await engine.wait([attempt.id], 0.3)
        await engine.close()
        return final.state

    assert asyncio.run(scenario()) == "COMPLETED"
    home = Path(engine_for(site).profiles["testcluster"].workdir).parent.parent
    assert not list(home.rglob(canary)) and not list(site.rglob(canary))


def test_unknown_host_key_is_refused_and_nothing_submitted(site: Path) -> None:
    engine = engine_for(site)
    with pytest.raises(LaunchRefused) as refused:
        asyncio.run(engine.launch([str(DEMO / "quick.yaml")], "badkey"))
    message = str(refused.value)
    assert "127.0.0.1" in message and "2222" in message and "known_hosts" in message
    assert engine.store.sweeps() == [] and engine.store.attempts() == []


def test_srtctl_launcher_with_the_stand_in_for_the_forks_recipes(site: Path) -> None:
    """The stand-in stays for what only the fork's srtctl runs (atom/atomesh); the real srtctl
    covers the rest (test_real_srtctl.py), and a test there proves both speak one contract."""
    twin = DEMO / "mi355x-1p1d-tp8.yaml"  # backend atom, frontend atomesh

    async def scenario() -> None:
        engine = engine_for(site)
        arm = engine.plan([str(twin)])[1][0]
        preview = await engine.runtime("testsrtctl").launcher.preview(arm)
        assert "DRY-RUN" in preview and engine.store.attempts() == []
        await engine.launch([str(twin)], "testsrtctl")
        (attempt,) = engine.store.attempts()
        assert attempt.job_id and attempt.output_dir and attempt.output_dir.endswith(f"/outputs/{attempt.job_id}")
        (final,) = await engine.wait([attempt.id], 0.3)
        assert final.state == "COMPLETED", final
        job_dir = Path(final.output_dir or "")
        assert (job_dir / f"{final.job_id}.json").is_file() and (job_dir / "config.yaml").is_file()
        assert "demo:" not in (job_dir / "config.yaml").read_text()  # srtctl never sees the console's section
        assert {p.status for p in read_points(job_dir, results_root=Path(final.results_dir or "").parent,
                                              job_id=final.job_id)} == {"done"}  # fmt: skip
        await engine.close()

    asyncio.run(scenario())


def test_console_killed_mid_run_reattaches(site: Path) -> None:
    env = {**os.environ}
    cmd = [sys.executable, "-m", "console", "launch", str(DEMO / "quick.yaml"), "--cluster", "testcluster", "--yes",
           "--wait"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    store = Store(site / "data" / "console.sqlite3")
    deadline = time.monotonic() + 60
    while not any(a.state == "RUNNING" for a in store.attempts()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "never saw RUNNING"
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    async def restart() -> None:
        engine = engine_for(site)
        (live,) = engine.store.attempts(live=True)
        (final,) = await engine.wait([live.id], 0.3)
        assert final.state == "COMPLETED"
        await engine.close()

    asyncio.run(restart())


def test_clusters_command(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from console.cli import main

    assert main(["clusters", "--json"]) == 1  # badkey is bad
    reports = {r["name"]: r for r in json.loads(capsys.readouterr().out)["clusters"]}
    assert reports["testcluster"]["ok"] and reports["local"]["ok"]
    assert not reports["badkey"]["ok"]
    assert "ssh-keyscan" in json.dumps(reports["badkey"]["checks"])
