"""Points: one concurrency's result as tables and plots show it, and the merge of an arm's attempts."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from console.results.names import discover_results, parse_result_name
from console.results.scan import (
    DEFAULT_HEAD_BYTES,
    DEFAULT_TAIL_BYTES,
    LatencyStats,
    ScanResult,
    read_head_tail,
    scan_result,
)

PointStatus = Literal["done", "running", "missing", "incomplete", "invalid"]


# --------------------------------------------------------------------------- points


@dataclass(frozen=True)
class PointResult:
    """One concurrency point of an arm, as shown in tables and plots.

    ``invalid_reason`` says why a point is not ``done`` (invalid, incomplete, missing file).
    ``attempt`` is the attempt (job id) the result came from, set by ``merge_attempts``.
    """

    concurrency: int
    status: PointStatus
    output_tok_s: float | None = None
    total_tok_s: float | None = None
    tok_s_per_gpu: float | None = None
    tok_s_per_user: float | None = None
    ttft: LatencyStats = field(default_factory=LatencyStats)
    tpot: LatencyStats = field(default_factory=LatencyStats)
    itl: LatencyStats = field(default_factory=LatencyStats)
    e2el: LatencyStats = field(default_factory=LatencyStats)
    completed: int | None = None
    num_prompts: int | None = None
    failed: int | None = None
    file: str | None = None
    bytes_read: int = 0
    invalid_reason: str | None = None
    gpus: int | None = None
    attempt: str | None = None
    simulated: bool = False  # from an attempt of the demo launcher: not measured on hardware

    def to_json(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "status": self.status,
            "output_tok_s": self.output_tok_s,
            "total_tok_s": self.total_tok_s,
            "tok_s_per_gpu": self.tok_s_per_gpu,
            "tok_s_per_user": self.tok_s_per_user,
            "ttft_ms": self.ttft.to_json(),
            "tpot_ms": self.tpot.to_json(),
            "itl_ms": self.itl.to_json(),
            "e2el_ms": self.e2el.to_json(),
            "completed": self.completed,
            "file": self.file,
            "num_prompts": self.num_prompts,
            "failed": self.failed,
            "gpus": self.gpus,
            "bytes_read": self.bytes_read,
            "invalid_reason": self.invalid_reason,
            "attempt": self.attempt,
            "simulated": self.simulated,
        }


def point_from_scan(
    scan: ScanResult,
    *,
    concurrency: int | None = None,
    gpus: int | None = None,
    file: str | None = None,
    bytes_read: int = 0,
) -> PointResult:
    """Derive a point from scanned scalars.

    tok/s/GPU is total token throughput over all GPUs of the arm (prefill + decode, or the
    aggregated workers); tok/s/user is 1000 / median TPOT, InferenceX's "interactivity".
    """
    s = scan.scalars
    reason = scan.reason
    status: PointStatus = scan.status
    conc = concurrency if concurrency is not None else s.max_concurrency
    if conc is None:
        conc = 0
        if status == "done":
            status, reason = "invalid", "concurrency unknown: not in the file name nor in max_concurrency"
    per_gpu = (
        s.total_token_throughput / gpus
        if s.total_token_throughput is not None and gpus is not None and gpus > 0
        else None
    )
    tpot_median = s.tpot.median
    per_user = 1000.0 / tpot_median if tpot_median is not None and tpot_median > 0 else None
    return PointResult(
        concurrency=conc,
        status=status,
        output_tok_s=s.output_throughput,
        total_tok_s=s.total_token_throughput,
        tok_s_per_gpu=per_gpu,
        tok_s_per_user=per_user,
        ttft=s.ttft,
        tpot=s.tpot,
        itl=s.itl,
        e2el=s.e2el,
        completed=s.completed,
        num_prompts=s.num_prompts,
        failed=s.failed,
        file=file,
        bytes_read=bytes_read,
        invalid_reason=reason,
        gpus=gpus,
    )


def point_from_bytes(
    file: str,
    head: bytes,
    tail: bytes,
    size: int,
    *,
    head_is_whole: bool,
    gpus: int | None = None,
    concurrency: int | None = None,
) -> PointResult:
    """A point from head/tail bytes of ``file`` (a local or remote path; only its name is parsed).

    GPU count: ``gpus`` when given (from the job's metadata), else the name's ``_gpus_<T>``.
    """
    parsed = parse_result_name(file)
    if concurrency is None and parsed is not None:
        concurrency = parsed.concurrency
    if gpus is None and parsed is not None:
        gpus = parsed.gpus
    scan = scan_result(head, tail, size, head_is_whole=head_is_whole)
    return point_from_scan(scan, concurrency=concurrency, gpus=gpus, file=file, bytes_read=len(head) + len(tail))


def read_point(
    path: Path | str,
    *,
    gpus: int | None = None,
    concurrency: int | None = None,
    head_bytes: int = DEFAULT_HEAD_BYTES,
    tail_bytes: int = DEFAULT_TAIL_BYTES,
) -> PointResult:
    """Read one local result file's head and tail and derive its point. Never raises."""
    parsed = parse_result_name(str(path))
    conc = concurrency if concurrency is not None else (parsed.concurrency if parsed else None)
    try:
        ht = read_head_tail(path, head_bytes=head_bytes, tail_bytes=tail_bytes)
    except FileNotFoundError:
        return PointResult(conc or 0, "missing", file=str(path), gpus=gpus, invalid_reason="file vanished")
    except OSError as exc:
        return PointResult(
            conc or 0,
            "invalid",
            file=str(path),
            gpus=gpus,
            invalid_reason=f"cannot read file: {exc.strerror or exc}",
        )
    point = point_from_bytes(
        str(path), ht.head, ht.tail, ht.size, head_is_whole=ht.head_is_whole, gpus=gpus, concurrency=conc
    )
    return replace(point, bytes_read=ht.bytes_read)


def read_points(
    job_dir: Path | None,
    *,
    results_root: Path | None = None,
    job_id: str | None = None,
    gpus: int | None = None,
) -> list[PointResult]:
    """Discover and read every per-concurrency result file of one job (the rollup excluded)."""
    return [
        read_point(rf.path, gpus=gpus)
        for rf in discover_results(job_dir, results_root=results_root, job_id=job_id)
        if rf.kind != "rollup"
    ]


# --------------------------------------------------------------------------- arms and attempts

_RANK: dict[str, int] = {"done": 4, "running": 3, "invalid": 2, "incomplete": 2, "missing": 1}


def _prefer(current: PointResult | None, candidate: PointResult) -> PointResult:
    # A delivered point beats a rerun in progress, which beats a broken file, which beats
    # nothing; among equals the later one (the newer attempt or file) wins.
    if current is None or _RANK[candidate.status] >= _RANK[current.status]:
        return candidate
    return current


def arm_points(
    expected: Sequence[int],
    results: Iterable[PointResult],
    running: int | None = None,
) -> list[PointResult]:
    """The points of one arm in concurrency order.

    Expected concurrencies without a result are ``missing`` (``running`` for the one being
    measured); unexpected concurrencies that have results are included too. A running point
    whose file is still being written shows as ``running``.
    """
    best: dict[int, PointResult] = {}
    for point in results:
        best[point.concurrency] = _prefer(best.get(point.concurrency), point)
    for conc in expected:
        if conc not in best:
            best[conc] = PointResult(conc, "missing")
    if running is not None:
        current = best.get(running)
        if current is None or current.status in {"missing", "incomplete"}:
            base = current if current is not None else PointResult(running, "missing")
            best[running] = replace(base, status="running", invalid_reason=None)
    return [best[c] for c in sorted(best)]


def merge_attempts(attempts: Sequence[tuple[str, Sequence[PointResult]]]) -> list[PointResult]:
    """Merge the points of several attempts of one arm, given oldest first.

    Per concurrency the latest ``done`` result wins; without one, the latest of the best
    remaining status (running, then invalid/incomplete, then missing). Each point keeps the
    attempt it came from in ``attempt``.
    """
    best: dict[int, PointResult] = {}
    for attempt_id, points in attempts:
        for point in points:
            best[point.concurrency] = _prefer(best.get(point.concurrency), replace(point, attempt=attempt_id))
    return [best[c] for c in sorted(best)]


def arm_view(
    expected: Sequence[int],
    attempts: Iterable[tuple[str, Sequence[int], Iterable[PointResult], int | None]],
    *,
    states: Mapping[str, str] | None = None,
    simulated: Collection[str] = (),
) -> list[PointResult]:
    """One arm's merged points: the one merge across attempts, live or read later.

    ``attempts`` are oldest first: (attempt ref like ``a3.2``, the points it ran, its results,
    the point it is measuring or None). Each attempt's own points come first (missing, running),
    then the attempts are merged, then the arm's ``expected`` points are filled in. ``states``
    (attempt ref → its Slurm state) lets a missing point say why; points of the attempts in
    ``simulated`` are marked so.
    """
    attempts = list(attempts)
    per_attempt = [(ref, arm_points(concs, results, running)) for ref, concs, results, running in attempts]
    merged = arm_points(expected, merge_attempts(per_attempt))
    runs = [
        (ref, list(concs), {p.concurrency for p in pts if p.status != "missing"}) for ref, concs, pts, _ in attempts
    ]
    return [_explained(p, runs, states or {}, simulated) for p in merged]


def _explained(
    point: PointResult,
    runs: Sequence[tuple[str, list[int], set[int]]],
    states: Mapping[str, str],
    simulated: Collection[str],
) -> PointResult:
    if point.attempt is not None and point.attempt in simulated and not point.simulated:
        point = replace(point, simulated=True)
    if point.status != "missing" or point.invalid_reason:
        return point
    return replace(point, invalid_reason=missing_reason(point.concurrency, runs, states))


def missing_reason(concurrency: int, runs: Sequence[tuple[str, list[int], set[int]]], states: Mapping[str, str]) -> str:
    """Why a point has no result, from the last attempt that was to run it: not run yet, never
    ran (the job ended before it), crashed at this concurrency, or no result file."""
    for ref, concs, with_results in reversed(runs):
        if concurrency not in concs:
            continue
        state = states.get(ref)
        if state is None or state in _LIVE_WORDS:
            return f"not run yet ({ref} is {state or 'live'})"
        if state == "COMPLETED":
            return f"no result file ({ref} completed without one)"
        before = concs[: concs.index(concurrency)]
        if before and all(c in with_results for c in before):
            return f"crashed at this concurrency ({ref} ended {state} while measuring it)"
        if not before and not with_results:
            return f"never ran ({ref} ended {state} before the benchmark reached it)"
        return f"never ran ({ref} ended {state} before it)"
    return "never ran (no attempt ran this point)"


_LIVE_WORDS = frozenset({"SUBMITTING", "PENDING", "RUNNING", "COMPLETING", "SUSPENDED"})
