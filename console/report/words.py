"""The furthest stage an attempt reached, in the words an operator would write in a pull request:
"all 64 model shards and CUDA-graph capture completed on both prefills and the decode"."""

from __future__ import annotations

import time
from collections.abc import Iterable

from console.stages import Stage, StageSnapshot, WorkerProgress, WorkerStage

_PLURAL = {"prefill": "prefills", "decode": "decodes", "agg": "aggregated workers"}
_SINGULAR = {"prefill": "prefill", "decode": "decode", "agg": "aggregated worker"}
_ROLE_ORDER = ("prefill", "decode", "agg")


def role_phrase(mode: str, count: int) -> str:
    """`the decode`, `both prefills`, `all 4 decodes`."""
    if count == 1:
        return f"the {_SINGULAR.get(mode, mode)}"
    if count == 2:
        return f"both {_PLURAL.get(mode, mode + 's')}"
    return f"all {count} {_PLURAL.get(mode, mode + 's')}"


def join_words(parts: list[str]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def _reached(worker: WorkerProgress) -> WorkerStage:
    """How far a worker got before it failed (or now)."""
    if worker.stage is WorkerStage.FAILED:
        return worker.before_failure or WorkerStage.STARTING
    return worker.stage


class _Logical:
    """One logical worker (`prefill_w0`): the least advanced of its per-node files."""

    def __init__(self, files: list[WorkerProgress]) -> None:
        self.files = files
        self.mode = files[0].mode
        self.name = files[0].worker
        self.reached = min((_reached(f) for f in files), key=lambda s: s.rank)
        self.failed = any(f.stage is WorkerStage.FAILED for f in files)
        totals = [f.shards_total for f in files if f.shards_total]
        self.shards_total = max(totals) if totals else None
        loaded = [f.shards_loaded or 0 for f in files if f.shards_total]
        self.shards_loaded = min(loaded) if loaded else None
        self.failure = next((f.failure for f in files if f.failure), None)

    @property
    def all_shards(self) -> bool:
        return self.shards_total is not None and self.shards_loaded == self.shards_total


def _logical(workers: Iterable[WorkerProgress]) -> list[_Logical]:
    by_name: dict[str, list[WorkerProgress]] = {}
    for w in workers:
        by_name.setdefault(w.worker, []).append(w)
    order = {m: i for i, m in enumerate(_ROLE_ORDER)}
    found = [_Logical(files) for files in by_name.values()]
    return sorted(found, key=lambda w: (order.get(w.mode, 9), w.name))


def _roles(workers: list[_Logical]) -> str:
    counts: dict[str, int] = {}
    for w in workers:
        counts[w.mode] = counts.get(w.mode, 0) + 1
    return join_words([role_phrase(mode, n) for mode, n in counts.items()])


def _failed(workers: list[_Logical], failed: list[_Logical]) -> str:
    """`both prefills and the decode (prefill_w0, ...)` when whole roles failed, else the names."""
    names = ", ".join(w.name for w in failed)
    whole = all(all(o.failed for o in workers if o.mode == w.mode) for w in failed)
    return f"{_roles(failed)} ({names})" if whole else names


def furthest_stage(snapshot: StageSnapshot | None) -> str:
    """What the attempt got through, in one sentence (no logs read: says so)."""
    if snapshot is None:
        return "no logs were read"
    workers = _logical(snapshot.workers.values())
    clauses: list[str] = []
    if workers:
        clauses.append(_startup_clause(workers))
        failed = [w for w in workers if w.failed]
        if failed:
            clauses.append(f"then {_failed(workers, failed)} failed")
    readiness = snapshot.readiness
    if readiness.ready:
        clauses.append(f"every worker registered with the frontend ({readiness.label})")
    elif readiness.known:
        clauses.append(f"workers registered with the frontend: {readiness.label}")
    elif workers and not any(w.reached.rank >= WorkerStage.READY.rank for w in workers):
        clauses.append("no worker registered with the frontend")
    clauses.append(_stage_clause(snapshot))
    text = "; ".join(c for c in clauses if c)
    return text[:1].upper() + text[1:]


def _startup_clause(workers: list[_Logical]) -> str:
    captured = [w for w in workers if w.reached.rank >= WorkerStage.CAPTURED.rank]
    loaded = [w for w in workers if w.all_shards or w.reached.rank >= WorkerStage.LOADED.rank]
    totals = {w.shards_total for w in workers if w.shards_total}
    shards = f"all {totals.pop()} model shards" if len(totals) == 1 else "all model shards"
    if len(captured) == len(workers):
        return f"{shards} and CUDA-graph capture completed on {_roles(workers)}"
    if len(loaded) == len(workers):
        done = f"; CUDA-graph capture completed on {_roles(captured)} only" if captured else ""
        return f"{shards} loaded on {_roles(workers)}{done}"
    parts = []
    for w in workers:
        progress = f"shards {w.shards_loaded or 0}/{w.shards_total}" if w.shards_total else w.reached.value
        parts.append(f"{w.name} {progress}")
    return "startup incomplete: " + ", ".join(parts)


def _stage_clause(snapshot: StageSnapshot) -> str:
    stage = snapshot.stage
    if stage is Stage.COMPLETED or snapshot.succeeded:
        return "the benchmark completed"
    if stage is Stage.BENCHMARKING:
        return "benchmarking"
    if stage.terminal:
        return f"srtctl's last stage: {stage.value}"
    return f"srtctl's stage: {stage.value}"


def duration(seconds: float | None) -> str:
    """`1h 02m`, `3m 05s`, `42s`; `-` when unknown."""
    if seconds is None:
        return "-"
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s}s"


def timestamp(epoch: float | None) -> str:
    """UTC, to the second: what a pull request reader can compare with Slurm's own records."""
    if epoch is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(epoch)) + "Z"
