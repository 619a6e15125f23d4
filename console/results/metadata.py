"""``<JOBID>.json``: the job metadata srtctl writes, with the arm's GPU counts resolved."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.results.fields import ScanStatus, as_int, as_str, load_small_json, read_small


@dataclass(frozen=True)
class JobMetadata:
    """The fields of ``<JOBID>.json`` the console needs, GPU counts resolved."""

    status: ScanStatus
    reason: str | None = None
    job_id: str | None = None
    job_name: str | None = None
    gpu_type: str | None = None
    backend_type: str | None = None
    frontend_type: str | None = None
    benchmark_type: str | None = None
    isl: int | None = None
    osl: int | None = None
    prefill_gpus: int | None = None
    decode_gpus: int | None = None
    agg_gpus: int | None = None
    total_gpus: int | None = None


def _product(a: Any, b: Any) -> int | None:
    x, y = as_int(a), as_int(b)
    return x * y if x is not None and y is not None else None


def _role_gpus(resources: Mapping[str, Any]) -> tuple[int | None, int | None, int | None]:
    per_node = resources.get("gpus_per_node")
    prefill = _product(resources.get("prefill_workers"), resources.get("gpus_per_prefill"))
    if prefill is None:
        prefill = _product(resources.get("prefill_nodes"), per_node)
    decode = _product(resources.get("decode_workers"), resources.get("gpus_per_decode"))
    if decode is None:
        decode = _product(resources.get("decode_nodes"), per_node)
    agg = _product(resources.get("agg_workers"), resources.get("gpus_per_agg"))
    if not agg:
        agg = _product(resources.get("agg_nodes"), per_node)
    return prefill, decode, agg


def total_gpus(resources: Mapping[str, Any]) -> int | None:
    """All GPUs of an arm from a ``resources`` mapping; ``None`` when it cannot be told.

    prefill_workers*gpus_per_prefill + decode_workers*gpus_per_decode when disaggregated,
    else agg_workers*gpus_per_agg (falling back to agg_nodes*gpus_per_node). Nulls tolerated.
    """
    prefill, decode, agg = _role_gpus(resources)
    disagg = (prefill or 0) + (decode or 0)
    if disagg > 0:
        return disagg
    return agg if agg else None


def parse_job_metadata(data: bytes | str) -> JobMetadata:
    """Parse ``<JOBID>.json`` text. Missing or null fields become ``None``; never raises."""
    loaded, status, reason = load_small_json(data)
    if status != "done":
        return JobMetadata(status, reason)
    if not isinstance(loaded, dict):
        return JobMetadata("invalid", "job metadata top level is not an object")
    resources = loaded.get("resources")
    resources = resources if isinstance(resources, dict) else {}
    benchmark = loaded.get("benchmark")
    benchmark = benchmark if isinstance(benchmark, dict) else {}
    prefill, decode, agg = _role_gpus(resources)
    job_id = loaded.get("job_id")
    return JobMetadata(
        "done",
        None,
        job_id=str(job_id) if isinstance(job_id, (str, int)) and not isinstance(job_id, bool) else None,
        job_name=as_str(loaded.get("job_name")),
        gpu_type=as_str(resources.get("gpu_type")),
        backend_type=as_str(loaded.get("backend_type")),
        frontend_type=as_str(loaded.get("frontend_type")),
        benchmark_type=as_str(benchmark.get("type")),
        isl=as_int(benchmark.get("isl")),
        osl=as_int(benchmark.get("osl")),
        prefill_gpus=prefill,
        decode_gpus=decode,
        agg_gpus=agg,
        total_gpus=total_gpus(resources),
    )


def read_job_metadata(path: Path | str) -> JobMetadata:
    """Read and parse a local ``<JOBID>.json``. Never raises."""
    data, error = read_small(path)
    if data is None:
        return JobMetadata("invalid", error)
    return parse_job_metadata(data)
