"""One set of result-file rules: the agent, its tail-mode fallback, the local and the remote
readers all count exactly the same files, so a point that arrives live is the point read later."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from console.follow import Follower, ResultEvent
from console.results import LocalFiles, RemoteFiles, discover_results, parse_result_name
from console.transport.local import LocalTransport

DEADLINE_S = 20.0

# (dirs below the job dir, name, counted?)
JOB_FILES = [
    ([], "bench_concurrency_16_req_rate_inf.json", True),  # legacy at the job dir's root
    ([], "results_concurrency_4_gpus_16.json", False),  # sa-bench only lives under logs/
    (["logs"], "results_concurrency_8_gpus_16.json", True),
    (["logs"], "bench_concurrency_32_req_rate_inf_gpus_8.json", True),
    (["logs"], "benchmark-rollup.json", True),
    (["logs"], "notes.json", False),
    (["logs", "sa-bench_isl_1024_osl_512"], "results_concurrency_64_gpus_16_ctx_1024_gen_512.json", True),
    (["logs", "sa-bench_isl_1024_osl_512"], "results_concurrency_64_gpus_16.pytorch.json", False),
    (["logs", "sub"], "bench_concurrency_128_req_rate_2.5.json", True),
    (["logs", "sub"], "benchmark-rollup.json", False),
    (["logs", "sub"], "bench-c256.json", False),  # a fixed-seq name outside fixed-seq/
    (["logs", "fixed-seq"], "bench-c512.json", True),
    (["logs", "sub", "deeper"], "results_concurrency_2_gpus_8.json", False),
]
RESULTS_FILES = [
    (["fixed-seq"], "dsr1_isl1k_osl1k_conc64_gpus_24.json", True),  # renamed by a collector
    (["fixed-seq"], "dsr1-c32.json", True),
    ([], "benchmark-rollup.json", True),
    ([], "dsr1-c16.json", False),
]


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path, set[Path]]:
    job = tmp_path / "outputs" / "12345"
    results = tmp_path / "results" / "12345"
    counted: set[Path] = set()
    for root, files in ((job, JOB_FILES), (results, RESULTS_FILES)):
        for parts, name, expected in files:
            path = root.joinpath(*parts, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text('{"completed": 1}\n')
            if expected:
                counted.add(path)
    return job, results, counted


async def _followed(job: Path, results: Path, mode: str, want: set[Path]) -> set[Path]:
    """What a follower reports: everything up to ``want``, then up to a file added afterwards
    (so a file it should not report cannot slip by unseen)."""
    seen: set[Path] = set()
    sentinel = job / "logs" / "results_concurrency_4096_gpus_16.json"
    async with Follower(LocalTransport(), mode=mode, tail_poll_s=0.2) as follower:
        await follower.watch(str(job), results=str(results))

        async def collect(until: set[Path]) -> None:
            async for event in follower.events():
                if isinstance(event, ResultEvent):
                    seen.add(Path(os.path.normpath(job / event.file)))
                    if until <= seen:
                        return

        await asyncio.wait_for(collect(want), DEADLINE_S)
        sentinel.write_text('{"completed": 1}\n')
        await asyncio.wait_for(collect({sentinel}), DEADLINE_S)
    sentinel.unlink()
    return seen - {sentinel}


def test_every_route_counts_the_same_files(tree: tuple[Path, Path, set[Path]]) -> None:
    job, results, counted = tree
    discovered = {rf.path for rf in discover_results(job, results_dir=results)}
    assert discovered == counted
    per_point = {p for p in counted if parse_result_name(p.name).kind != "rollup"}  # type: ignore[union-attr]

    local = asyncio.run(LocalFiles().listing(str(job), str(results)))
    remote = asyncio.run(RemoteFiles(LocalTransport()).listing(str(job), str(results)))
    assert {Path(p) for p, _ in local} == per_point
    assert {Path(p) for p, _ in remote} == per_point
    assert all(size == Path(p).stat().st_size for p, size in remote)

    assert asyncio.run(_followed(job, results, "agent", counted)) == counted
    assert asyncio.run(_followed(job, results, "tail", counted)) == counted


def test_discovery_by_results_root_and_job_id(tree: tuple[Path, Path, set[Path]]) -> None:
    job, results, counted = tree
    by_root = {rf.path for rf in discover_results(job, results_root=results.parent, job_id="12345")}
    assert by_root == counted
    unsafe = {rf.path for rf in discover_results(job, results_root=results.parent, job_id="../12345")}
    assert unsafe == {p for p in counted if job in p.parents}
