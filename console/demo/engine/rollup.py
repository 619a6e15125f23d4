"""sa-bench's rollup: ``benchmark-rollup.json`` and ``benchmark-rollup.csv`` from the result files.

The same reading as srtctl's ``benchmarks/scripts/sa-bench/rollup.py``: result files in name
order for the JSON (so ``_16`` comes before ``_4``), rows by concurrency for the CSV, GPU counts
from ``<JOBID>.json``, numbers with at most three decimals, Excel's CRLF line ends.
"""

import csv
import datetime
import io
import json
import math
import os
import re

from .util import write_atomic

FIELDS = ["Config", "Total GPU Count", "Decode GPU Count", "Total Working GPU Count", "Decode Working GPU Count",
          "Prefill Working GPU Count", "Concurrency", "Total Token Throughput", "Output Token Throughput",
          "Median TTFT", "Median TPOT", "Median ITL", "P90 Decode Running Requests",
          "Output Token Throughput per User", "Total Token Throughput per GPU"]  # fmt: skip
_RUNNING = re.compile(r"#running-req:\s*(\d+)")


def _int(value: "object") -> int:
    try:
        return int(value)  # type: ignore[call-overload,no-any-return]
    except (TypeError, ValueError):
        return 0


def _ratio(num: "object", den: "object") -> "float | None":
    if not isinstance(num, (int, float)) or not isinstance(den, (int, float)) or den == 0:
        return None
    return float(num) / float(den)


def _csv_value(value: "object") -> str:
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, float):
        return str(value)
    return f"{value:.3f}".rstrip("0").rstrip(".")


def gpu_counts(res: "dict[str, object]") -> "tuple[int | None, int | None]":
    per_node = _int(res.get("gpus_per_node"))
    prefill, decode, agg = _int(res.get("prefill_nodes")), _int(res.get("decode_nodes")), _int(res.get("agg_nodes"))
    if per_node <= 0:
        return None, None
    if prefill or decode:
        total = (prefill + decode) * per_node
    elif agg:
        total = agg * per_node
    else:
        total = per_node
    if decode:
        return total, decode * per_node
    for workers, gpus in (("decode_workers", "gpus_per_decode"), ("agg_workers", "gpus_per_agg")):
        if _int(res.get(workers)) > 0 and _int(res.get(gpus)) > 0:
            return total, _int(res.get(workers)) * _int(res.get(gpus))
    return total, (total if agg else None)


def working_counts(res: "dict[str, object]") -> "tuple[int | None, int | None, int | None]":
    def product(workers: str, gpus: str) -> "int | None":
        w, g = _int(res.get(workers)), _int(res.get(gpus))
        return w * g if w > 0 and g > 0 else None

    prefill = product("prefill_workers", "gpus_per_prefill")
    decode = product("decode_workers", "gpus_per_decode")
    parts = [p for p in (prefill, decode) if p is not None]
    return prefill, decode, (sum(parts) if parts else None)


def p90_running(logs: str, meta: "dict[str, object]") -> "int | None":
    """The nearest-rank P90 of the decode logs' ``#running-req`` (SGLang disaggregated only)."""
    res = meta.get("resources")
    if meta.get("backend_type") != "sglang" or not isinstance(res, dict):
        return None
    if not (_int(res.get("prefill_nodes")) > 0 and _int(res.get("decode_nodes")) > 0) or _int(res.get("agg_workers")):
        return None
    counts = {}  # type: dict[int, int]
    total = 0
    for name in sorted(os.listdir(logs)):
        if "decode" not in name or not name.endswith(".out"):
            continue
        try:
            with open(os.path.join(logs, name), encoding="utf-8", errors="replace") as f:
                for raw in f:
                    m = _RUNNING.search(raw)
                    if m:
                        counts[int(m.group(1))] = counts.get(int(m.group(1)), 0) + 1
                        total += 1
        except OSError:
            continue
    if not total:
        return None
    rank, seen = math.ceil(total * 0.9), 0
    for value in sorted(counts):
        seen += counts[value]
        if seen >= rank:
            return value
    return None


def write_rollup(logs: str, meta: "dict[str, object]") -> "list[str]":
    """Write both rollup files; the paths written (none when there are no results)."""
    files = []  # type: list[str]
    for folder in sorted(os.listdir(logs)):
        if folder.startswith("sa-bench_") and os.path.isdir(os.path.join(logs, folder)):
            files += [os.path.join(logs, folder, n) for n in os.listdir(os.path.join(logs, folder))
                      if n.startswith("results_") and n.endswith(".json")]  # fmt: skip
    files.sort()
    res = meta.get("resources") if isinstance(meta.get("resources"), dict) else {}
    assert isinstance(res, dict)
    total, decode = gpu_counts(res)
    w_prefill, w_decode, w_total = working_counts(res)
    p90 = p90_running(logs, meta)
    bench = meta.get("benchmark") if isinstance(meta.get("benchmark"), dict) else {}
    assert isinstance(bench, dict)
    name = meta.get("job_name")
    runs = []  # type: list[dict[str, object]]
    rows = []  # type: list[dict[str, str]]
    config = {}  # type: dict[str, object]
    for path in files:
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            continue
        if not config:
            config = {"model": data.get("model_id"), "isl": bench.get("isl"), "osl": bench.get("osl")}
        runs.append(
            {
                "concurrency": data.get("max_concurrency"),
                "throughput_toks": data.get("output_throughput"),
                "request_throughput": data.get("request_throughput"),
                "ttft_mean_ms": data.get("mean_ttft_ms"),
                "ttft_p99_ms": data.get("p99_ttft_ms"),
                "tpot_mean_ms": data.get("mean_tpot_ms"),
                "tpot_p99_ms": data.get("p99_tpot_ms"),
                "itl_mean_ms": data.get("mean_itl_ms"),
                "itl_p99_ms": data.get("p99_itl_ms"),
                "e2el_mean_ms": data.get("mean_e2el_ms"),
                "completed_requests": data.get("completed"),
                "total_input_tokens": data.get("total_input_tokens"),
                "total_output_tokens": data.get("total_output_tokens"),
            }
        )
        working = w_total if w_total is not None else total
        row = {
            "Config": name or str(data.get("model_id") or "unknown"),
            "Total GPU Count": total,
            "Decode GPU Count": decode,
            "Total Working GPU Count": working,
            "Decode Working GPU Count": w_decode if w_decode is not None else decode,
            "Prefill Working GPU Count": w_prefill if w_prefill is not None else (0 if total is not None else None),
            "Concurrency": data.get("max_concurrency"),
            "Total Token Throughput": data.get("total_token_throughput"),
            "Output Token Throughput": data.get("output_throughput"),
            "Median TTFT": data.get("median_ttft_ms"),
            "Median TPOT": data.get("median_tpot_ms"),
            "Median ITL": data.get("median_itl_ms"),
            "P90 Decode Running Requests": p90,
            "Output Token Throughput per User": _ratio(1000.0, data.get("median_tpot_ms")),
            "Total Token Throughput per GPU": _ratio(data.get("total_token_throughput"), working),
        }  # type: dict[str, object]
        rows.append({k: _csv_value(v) for k, v in row.items()})
    if not runs:
        return []
    stamp = datetime.datetime.utcnow().isoformat() + "Z"
    rollup = {"benchmark_type": "sa-bench", "timestamp": stamp, "config": config, "runs": runs}
    json_path = os.path.join(logs, "benchmark-rollup.json")
    write_atomic(json_path, json.dumps(rollup, indent=2).encode("utf-8"))
    rows.sort(key=lambda r: int(r["Concurrency"]) if r["Concurrency"] else -1)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=FIELDS)
    writer.writeheader()
    writer.writerows(rows)
    csv_path = os.path.join(logs, "benchmark-rollup.csv")
    write_atomic(csv_path, buffer.getvalue().encode("utf-8"))
    return [json_path, csv_path]
