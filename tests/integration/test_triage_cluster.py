"""Live triage on the real test cluster over SSH: the seed's ZMQ failure is seen, diagnosed and cancelled."""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from pathlib import Path

import pytest

from console.monitor import Monitor, MonitorEvent, Triaged
from tests.conftest import RECIPES
from tests.integration.conftest import engine_for

DEMO = RECIPES / "demo"

pytestmark = pytest.mark.cluster


class FirstAppearance(threading.Thread):
    """Watches files on this machine (the cluster shares it) for the first line containing `needle`."""

    def __init__(self, folder: Path, pattern: str, needle: bytes) -> None:
        super().__init__(daemon=True)
        self.folder, self.pattern, self.needle = folder, pattern, needle
        self.at: float | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set() and self.at is None:
            for path in self.folder.glob(self.pattern):
                try:
                    if self.needle in path.read_bytes():
                        self.at = time.time()
                        return
                except OSError:
                    pass
            time.sleep(0.005)


def idle_nodes() -> set[str]:
    out = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    return {line.split()[0] for line in out.splitlines() if line.split()[1] == "idle"}


def test_seed_zmq_failure_is_doomed_within_two_seconds_and_cancel_frees_nodes(site: Path) -> None:
    async def scenario() -> None:
        engine = engine_for(site)
        monitor = Monitor(engine)
        diagnosed: list[tuple[float, Triaged]] = []

        def on_event(event: MonitorEvent) -> None:
            if isinstance(event, Triaged) and event.diagnosis.root_cause is not None:
                diagnosed.append((time.time(), event))

        monitor.subscribe(on_event)
        await engine.launch([str(DEMO / "mi355x-2p1d-dpa-tp8.yaml")], "testcluster")
        (attempt,) = engine.store.attempts()
        assert attempt.output_dir
        watcher = FirstAppearance(Path(attempt.output_dir) / "logs", "*_w*.out", b"Address already in use")
        watcher.start()
        deadline = time.monotonic() + 120

        def doomed_everywhere() -> bool:
            return any(
                e.diagnosis.verdict == "doomed" and e.diagnosis.deterministic and e.diagnosis.root_cause is not None
                and e.diagnosis.root_cause.id == "zmq-bind-in-use"
                for _, e in diagnosed
            )  # fmt: skip

        while not doomed_everywhere():
            assert time.monotonic() < deadline, [(e.diagnosis.verdict, e.diagnosis.root_cause) for _, e in diagnosed]
            await engine.poll_once()
            await monitor.sync()
            await asyncio.sleep(0.1)
        watcher.stop.set()
        first_root = next(at for at, e in diagnosed if e.diagnosis.root_cause.id == "zmq-bind-in-use")  # type: ignore[union-attr]
        assert watcher.at is not None
        latency = first_root - watcher.at
        assert latency <= 2.0, f"root cause shown {latency:.2f}s after the line was written"
        print(f"write-to-diagnosis latency over SSH: {latency:.3f}s")
        doomed = next(e for _, e in diagnosed if e.diagnosis.verdict == "doomed" and e.diagnosis.deterministic)
        assert "cancel" in doomed.diagnosis.advice and "3 node" in doomed.diagnosis.advice
        assert {"prefill_w0", "prefill_w1"} <= set(doomed.diagnosis.root_workers)  # every prefill worker

        live = engine.store.attempt(attempt.id)
        assert live.state == "RUNNING"  # doomed, yet still holding its nodes
        nodes_before = idle_nodes()
        await asyncio.wait_for(engine.cancel([live]), 60)
        try:
            (final,) = await asyncio.wait_for(engine.wait([attempt.id], 0.3), 90)
        except asyncio.TimeoutError:
            row = engine.store.attempt(attempt.id)
            pytest.fail(f"cancelled job still {row.state} after 90 s; clusters: {engine.cluster_statuses()}")
        assert final.state == "CANCELLED"
        end = time.monotonic() + 30
        while len(idle_nodes()) < len(nodes_before) + 3 and time.monotonic() < end:
            await asyncio.sleep(0.2)
        assert len(idle_nodes()) >= len(nodes_before) + 3, "cancel did not free the three nodes"
        await asyncio.wait_for(monitor.close(), 30)
        await asyncio.wait_for(engine.close(), 30)

    asyncio.run(scenario())
