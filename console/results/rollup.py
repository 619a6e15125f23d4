"""``logs/benchmark-rollup.json``: the per-run summary srtctl writes in post-processing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from console.results.fields import ScanStatus, as_float, as_int, as_str, load_small_json, read_small


@dataclass(frozen=True)
class RollupRun:
    """One row of ``benchmark-rollup.json``'s ``runs`` (``throughput_toks`` is output tok/s)."""

    concurrency: int | None
    output_tok_s: float | None = None
    request_throughput: float | None = None
    ttft_mean_ms: float | None = None
    ttft_p99_ms: float | None = None
    tpot_mean_ms: float | None = None
    tpot_p99_ms: float | None = None
    itl_mean_ms: float | None = None
    itl_p99_ms: float | None = None
    e2el_mean_ms: float | None = None
    completed: int | None = None
    total_input_tokens: int | None = None
    total_output_tokens: int | None = None


@dataclass(frozen=True)
class Rollup:
    """``logs/benchmark-rollup.json``, written in post-processing even for failed jobs."""

    status: ScanStatus
    reason: str | None = None
    benchmark_type: str | None = None
    timestamp: str | None = None
    model: str | None = None
    isl: int | None = None
    osl: int | None = None
    runs: tuple[RollupRun, ...] = ()


def parse_rollup(data: bytes | str) -> Rollup:
    """Parse rollup JSON text. Truncated or malformed input gives a status, never an exception."""
    loaded, status, reason = load_small_json(data)
    if status != "done":
        return Rollup(status, reason)
    if not isinstance(loaded, dict):
        return Rollup("invalid", "rollup top level is not an object")
    config = loaded.get("config")
    config = config if isinstance(config, dict) else {}
    rows = loaded.get("runs")
    if rows is None:
        rows = loaded.get("data")  # the mooncake-router rollup's name for the same list
    runs: list[RollupRun] = []
    if isinstance(rows, list):
        for row in rows:
            if not isinstance(row, dict):
                continue
            runs.append(
                RollupRun(
                    concurrency=as_int(row.get("concurrency")),
                    output_tok_s=as_float(row.get("throughput_toks")),
                    request_throughput=as_float(row.get("request_throughput")),
                    ttft_mean_ms=as_float(row.get("ttft_mean_ms")),
                    ttft_p99_ms=as_float(row.get("ttft_p99_ms")),
                    tpot_mean_ms=as_float(row.get("tpot_mean_ms")),
                    tpot_p99_ms=as_float(row.get("tpot_p99_ms")),
                    itl_mean_ms=as_float(row.get("itl_mean_ms")),
                    itl_p99_ms=as_float(row.get("itl_p99_ms")),
                    e2el_mean_ms=as_float(row.get("e2el_mean_ms")),
                    completed=as_int(row.get("completed_requests")),
                    total_input_tokens=as_int(row.get("total_input_tokens")),
                    total_output_tokens=as_int(row.get("total_output_tokens")),
                )
            )
    elif rows is not None:
        return Rollup("invalid", "rollup 'runs' is not a list")
    return Rollup(
        "done",
        None,
        benchmark_type=as_str(loaded.get("benchmark_type")),
        timestamp=as_str(loaded.get("timestamp")),
        model=as_str(config.get("model")),
        isl=as_int(config.get("isl")),
        osl=as_int(config.get("osl")),
        runs=tuple(runs),
    )


def read_rollup(path: Path | str) -> Rollup:
    """Read and parse a local ``benchmark-rollup.json``. Never raises."""
    data, error = read_small(path)
    if data is None:
        return Rollup("invalid", error)
    return parse_rollup(data)
