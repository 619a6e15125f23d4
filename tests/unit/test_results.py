"""Result-file discovery, head/tail scalar reading, derived point metrics, arms and attempts."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.results import (
    DEFAULT_HEAD_BYTES,
    DEFAULT_TAIL_BYTES,
    LatencyStats,
    PointResult,
    ResultName,
    ResultScalars,
    arm_points,
    discover_results,
    merge_attempts,
    parse_job_metadata,
    parse_result_name,
    parse_rollup,
    point_from_bytes,
    read_head_tail,
    read_job_metadata,
    read_point,
    read_points,
    read_rollup,
    running_concurrency,
    scan_result,
    total_gpus,
)

# Text that looks like result keys, as it can appear inside generated_texts and errors.
TRICKY = 'says {"completed": 1, "mean_ttft_ms": 0.5, "request_goodput": 7} and \\ "quotes", done'

# --------------------------------------------------------------------------- file builders


def _latency_block(metric: str, base: float, percentiles: tuple[str, ...]) -> dict[str, Any]:
    block: dict[str, Any] = {
        f"mean_{metric}_ms": base,
        f"median_{metric}_ms": base * 0.97,
        f"std_{metric}_ms": base * 0.11,
    }
    for i, p in enumerate(percentiles):
        block[f"p{p}_{metric}_ms"] = base * (1.4 + 0.3 * i)
    return block


def _per_request(num_prompts: int, completed: int, isl: int, osl: int) -> dict[str, Any]:
    rng = random.Random(num_prompts * 7 + completed)
    ok = [i < completed for i in range(num_prompts)]
    return {
        "input_lens": [isl if good else 0 for good in ok],
        "output_lens": [osl if good else 0 for good in ok],
        "ttfts": [round(rng.uniform(0.1, 0.4), 6) if good else 0.0 for good in ok],
        "itls": [[round(rng.uniform(0.007, 0.009), 6) for _ in range(osl - 1)] if good else [] for good in ok],
        "generated_texts": [f"token text {i} {TRICKY}" if good else "" for i, good in enumerate(ok)],
        "errors": ["" if good else f"Traceback: {TRICKY}" for good in ok],
    }


def sa_bench_result(
    conc: int = 8,
    *,
    num_prompts: int | None = None,
    completed: int | None = None,
    isl: int = 64,
    osl: int = 16,
    metadata: dict[str, str] | None = None,
    overrides: dict[str, Any] | None = None,
    drop: tuple[str, ...] = (),
) -> dict[str, Any]:
    """A result in the sa-bench benchmark_serving key order (srtctl.md 5.1)."""
    n = num_prompts if num_prompts is not None else conc * 10
    done = completed if completed is not None else n
    duration = 12.5 + conc / 10
    out_tokens = done * osl
    in_tokens = done * isl
    d: dict[str, Any] = {
        "date": "20260821-103000",
        "backend": "dynamo",
        "model_id": "deepseek-ai/DeepSeek-V4",
        "tokenizer_id": "deepseek-ai/DeepSeek-V4",
        "best_of": 1,
        "num_prompts": n,
    }
    d.update(metadata or {})
    d.update(
        {
            "request_rate": "inf",
            "burstiness": 1.0,
            "max_concurrency": conc,
            "duration": duration,
            "completed": done,
            "total_input_tokens": in_tokens,
            "total_output_tokens": out_tokens,
            "request_throughput": done / duration,
            "request_goodput": None,
            "output_throughput": out_tokens / duration,
            "peak_output_tokens_per_s": out_tokens / duration * 1.8,
            "total_token_throughput": (in_tokens + out_tokens) / duration,
        }
    )
    d.update(_per_request(n, done, isl, osl))
    for i, metric in enumerate(("ttft", "tpot", "itl", "e2el")):
        d.update(_latency_block(metric, [210.5, 8.125, 8.0, 8500.25][i], ("99",)))
    d["reuse_http_connections"] = True
    d.update(overrides or {})
    for key in drop:
        d.pop(key, None)
    return d


def inferencex_result(
    conc: int = 4,
    *,
    num_prompts: int | None = None,
    completed: int | None = None,
    isl: int = 64,
    osl: int = 16,
    goodput: float | None = 3.5,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A result in InferenceX's benchmark_serving order (srtctl.md 5.2): ``"request_goodput:"``,
    start/end unix times, p90/p99/p99.9 keys, no peak, per-request detail dropped but lens kept."""
    n = num_prompts if num_prompts is not None else conc * 2
    done = completed if completed is not None else n
    duration = 30.25
    out_tokens = done * osl
    in_tokens = done * isl
    d: dict[str, Any] = {
        "date": "20260821-110000",
        "backend": "openai-chat",
        "model_id": "Qwen/Qwen3.5-397B-A17B",
        "tokenizer_id": "Qwen/Qwen3.5-397B-A17B",
        "num_prompts": n,
        "request_rate": float("inf"),
        "burstiness": 1.0,
        "max_concurrency": conc,
        "duration": duration,
        "benchmark_start_time_unix": 1787310000.125,
        "benchmark_end_time_unix": 1787310030.375,
        "completed": done,
        "total_input_tokens": in_tokens,
        "total_output_tokens": out_tokens,
        "request_throughput": done / duration,
        "request_goodput:": goodput,
        "output_throughput": out_tokens / duration,
        "total_token_throughput": (in_tokens + out_tokens) / duration,
        "input_lens": [isl] * n,
        "output_lens": [osl] * n,
    }
    for i, metric in enumerate(("ttft", "tpot", "itl", "e2el")):
        d.update(_latency_block(metric, [95.0, 12.5, 12.25, 480.5][i], ("90", "99", "99.9")))
    d.update(overrides or {})
    return d


def dump(d: dict[str, Any]) -> bytes:
    """``json.dump`` output: one line, default separators, no trailing newline."""
    return json.dumps(d).encode()


def write(path: Path, d: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(dump(d))
    return path


def write_large(path: Path, target_bytes: int, conc: int = 256, osl: int = 1024) -> dict[str, Any]:
    """Stream a sa-bench result with big per-request arrays without building it in memory.

    Returns the scalar fields written, for comparison."""
    n = conc * 10
    fields = sa_bench_result(conc, num_prompts=n, isl=8192, osl=osl)
    head = {k: v for k, v in fields.items() if k not in _ARRAYS and not _is_tail(k)}
    tail = {k: v for k, v in fields.items() if _is_tail(k)}
    itl_row = "[" + ", ".join(f"{0.0071 + (i % 97) * 1e-5:.10f}" for i in range(osl - 1)) + "]"
    text = json.dumps(f"lorem ipsum {TRICKY} " * 40)
    # Size the arrays so the file reaches about target_bytes.
    row_cost = len(itl_row) + len(text) + 4
    rows = max(n, target_bytes // row_cost)
    with path.open("wb") as f:
        f.write(json.dumps(head)[:-1].encode())
        f.write(b', "input_lens": ' + json.dumps([8192] * rows).encode())
        f.write(b', "output_lens": ' + json.dumps([osl] * rows).encode())
        f.write(b', "ttfts": ' + json.dumps([0.25] * rows).encode())
        f.write(b', "itls": [')
        for i in range(rows):
            f.write((", " if i else "").encode() + itl_row.encode())
        f.write(b'], "generated_texts": [')
        for i in range(rows):
            f.write((", " if i else "").encode() + text.encode())
        f.write(b'], "errors": ' + json.dumps([""] * rows).encode())
        f.write(b", " + json.dumps(tail)[1:].encode())
    return {**head, **tail}


_ARRAYS = {"input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors"}


def _is_tail(key: str) -> bool:
    return key.endswith("_ms") or key == "reuse_http_connections"


def _num(value: Any) -> float | None:
    """What the reader reports for a JSON number: non-finite values and null become None."""
    if value is None or isinstance(value, bool):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def expected_scalars(d: dict[str, Any]) -> dict[str, Any]:
    """The scalar fields as a full json.loads of the file gives them."""
    goodput = d.get("request_goodput", d.get("request_goodput:"))
    out: dict[str, Any] = {
        "date": d.get("date"),
        "backend": d.get("backend"),
        "model_id": d.get("model_id"),
        "num_prompts": d.get("num_prompts"),
        "max_concurrency": d.get("max_concurrency"),
        "duration": _num(d.get("duration")),
        "completed": d.get("completed"),
        "total_input_tokens": d.get("total_input_tokens"),
        "total_output_tokens": d.get("total_output_tokens"),
        "request_throughput": _num(d.get("request_throughput")),
        "request_goodput": _num(goodput),
        "output_throughput": _num(d.get("output_throughput")),
        "total_token_throughput": _num(d.get("total_token_throughput")),
        "peak_output_tokens_per_s": _num(d.get("peak_output_tokens_per_s")),
    }
    for metric in ("ttft", "tpot", "itl", "e2el"):
        out[metric] = LatencyStats(
            mean=_num(d.get(f"mean_{metric}_ms")),
            median=_num(d.get(f"median_{metric}_ms")),
            std=_num(d.get(f"std_{metric}_ms")),
            p90=_num(d.get(f"p90_{metric}_ms")),
            p99=_num(d.get(f"p99_{metric}_ms")),
            p99_9=_num(d.get(f"p99.9_{metric}_ms")),
        )
    return out


def windows(data: bytes) -> tuple[bytes, bytes]:
    """Disjoint head and tail windows as the reader takes them: the head through
    ``"input_lens"``, the tail from just before ``"errors"`` (or the latency block)."""
    head_end = data.index(b'"input_lens"') + len(b'"input_lens"')
    marker = b'"errors"' if b'"errors"' in data else b'"mean_ttft_ms"'
    tail_start = data.index(marker) - 2
    assert head_end < tail_start
    return data[:head_end], data[tail_start:]


def actual_scalars(s: ResultScalars) -> dict[str, Any]:
    return {key: getattr(s, key) for key in expected_scalars({})}


# --------------------------------------------------------------------------- file names


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("results_concurrency_64_gpus_24_ctx_8_gen_16.json", ResultName("sa-bench", 64, 24, 8, 16)),
        ("results_concurrency_4_gpus_8.json", ResultName("sa-bench", 4, 8)),
        ("results_concurrency_128.json", ResultName("sa-bench", 128)),
        ("isl_1024_osl_1024_concurrency_128_req_rate_inf.json", ResultName("legacy", 128)),
        ("concurrency_32_req_rate_2.5.json", ResultName("legacy", 32)),
        (
            "isl_8192_osl_1024_concurrency_256_req_rate_inf_gpus_24_ctx_8_gen_16.json",
            ResultName("legacy", 256, 24, 8, 16),
        ),
        ("qwen3.5-fp8-isl1024-osl1024-c512.json", ResultName("fixed-seq", 512)),
        ("dsv4_srt-4242_conc64_gpus_16_ctx_8_gen_8.json", ResultName("collected", 64, 16, 8, 8)),
        ("benchmark-rollup.json", ResultName("rollup")),
        ("logs/sa-bench_isl_1_osl_1/results_concurrency_8_gpus_8.json", ResultName("sa-bench", 8, 8)),
    ],
)
def test_parse_result_name_recognises_every_layout(name: str, expected: ResultName) -> None:
    assert parse_result_name(name) == expected


@pytest.mark.parametrize(
    "name",
    [
        "results_concurrency_64_gpus_24_ctx_8_gen_16.pytorch.json",
        "isl_1024_osl_1024_concurrency_128_req_rate_inf.pytorch.json",
        "model-c4.pytorch.json",
        "benchmark-rollup.csv",
        "results_concurrency_64_gpus_24.json.tmp",
        "12345.json",
        "config.json",
        "node1_config.json",
        "fingerprint_decode_w0.json",
        "resource_snapshot.json",
    ],
)
def test_parse_result_name_rejects_non_results(name: str) -> None:
    assert parse_result_name(name) is None


# --------------------------------------------------------------------------- discovery


def _touch(path: Path, data: bytes = b"{}") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_discover_results_across_layouts(tmp_path: Path) -> None:
    job = tmp_path / "outputs" / "4242"
    logs = job / "logs"
    sa = logs / "sa-bench_isl_8192_osl_1024"
    _touch(sa / "results_concurrency_4_gpus_24_ctx_8_gen_16.json")
    _touch(sa / "results_concurrency_16_gpus_24_ctx_8_gen_16.json")
    _touch(sa / "results_concurrency_16_gpus_24_ctx_8_gen_16.pytorch.json")
    _touch(logs / "sa-bench_custom_prompts" / "results_concurrency_8_gpus_8.json")
    _touch(logs / "4242_1P_2D_20260821_103000" / "isl_1024_osl_1024_concurrency_32_req_rate_inf.json")
    _touch(logs / "isl_1024_osl_1024_concurrency_64_req_rate_inf_gpus_8_ctx_4_gen_4.json")
    _touch(logs / "benchmark-rollup.json")
    _touch(logs / "benchmark-rollup.csv", b"")
    # Files that are not results, or a fixed-seq-looking name outside fixed-seq/.
    _touch(job / "4242.json")
    _touch(logs / "node1_config.json")
    _touch(logs / "profiles" / "decode" / "trace-c4.json")
    _touch(logs / "eval_results" / "summary-c8.json")
    _touch(logs / "sweep_4242.log", b"")
    results_root = tmp_path / "results"
    fixed = results_root / "4242" / "fixed-seq"
    _touch(fixed / "qwen-fp8-isl1024-osl1024-c128.json")
    _touch(fixed / "qwen-fp8-isl1024-osl1024-c256.json")
    _touch(fixed / "qwen-fp8-isl1024-osl1024-c256.pytorch.json")
    _touch(results_root / "4242" / "eval" / "meta_env.json")
    _touch(results_root / "9999" / "fixed-seq" / "other-job-c1.json")

    found = discover_results(job, results_root=results_root)

    assert [(rf.kind, rf.concurrency) for rf in found] == [
        ("sa-bench", 4),
        ("sa-bench", 8),
        ("sa-bench", 16),
        ("legacy", 32),
        ("legacy", 64),
        ("fixed-seq", 128),
        ("fixed-seq", 256),
        ("rollup", None),
    ]
    by_conc = {rf.concurrency: rf for rf in found}
    assert by_conc[16].path == sa / "results_concurrency_16_gpus_24_ctx_8_gen_16.json"
    assert by_conc[16].name.gpus == 24
    assert by_conc[64].name == ResultName("legacy", 64, 8, 4, 4)
    assert not any(rf.path.name.endswith(".pytorch.json") for rf in found)


def test_discover_results_with_explicit_job_id_and_missing_dirs(tmp_path: Path) -> None:
    results_root = tmp_path / "results"
    _touch(results_root / "77" / "fixed-seq" / "m-isl1-osl1-c2.json")
    assert [rf.concurrency for rf in discover_results(None, results_root=results_root, job_id="77")] == [2]
    # A job id that would escape the results root is not followed.
    _touch(tmp_path / "fixed-seq" / "escape-c3.json")
    assert discover_results(None, results_root=results_root, job_id="..") == []
    assert discover_results(None, results_root=results_root, job_id="../x") == []
    assert discover_results(tmp_path / "absent") == []
    assert discover_results(tmp_path / "absent", results_root=tmp_path / "nowhere") == []


# --------------------------------------------------------------------------- reading windows


def test_read_head_tail_of_small_file_is_whole(tmp_path: Path) -> None:
    data = dump(sa_bench_result(4, num_prompts=4, osl=8))
    path = tmp_path / "results_concurrency_4_gpus_8.json"
    path.write_bytes(data)
    ht = read_head_tail(path)
    assert ht.head_is_whole
    assert ht.head == data
    assert ht.tail == b""
    assert ht.size == ht.bytes_read == len(data)


def test_read_head_tail_stops_head_at_input_lens(tmp_path: Path) -> None:
    d = sa_bench_result(64, osl=64)
    data = dump(d)
    assert len(data) > DEFAULT_HEAD_BYTES + DEFAULT_TAIL_BYTES
    path = tmp_path / "results_concurrency_64_gpus_8.json"
    path.write_bytes(data)
    ht = read_head_tail(path)
    assert not ht.head_is_whole
    assert b'"input_lens"' in ht.head
    assert len(ht.head) <= 4096
    assert ht.tail == data[-DEFAULT_TAIL_BYTES:]
    assert ht.size == len(data)
    assert ht.bytes_read == len(ht.head) + len(ht.tail)


def test_read_head_tail_caps_head_without_marker(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(b"{" + b" " * 100_000 + b"}")
    ht = read_head_tail(path, head_bytes=1000, tail_bytes=500)
    assert (len(ht.head), len(ht.tail), ht.bytes_read) == (1000, 500, 1500)
    assert not ht.head_is_whole


# --------------------------------------------------------------------------- scanner == json.loads


SCHEMAS = {
    "sa-bench": lambda: sa_bench_result(32, osl=48, metadata={"recipe": "dsv4-1p1d", "tp": "8"}),
    "sa-bench-nan": lambda: sa_bench_result(
        8,
        overrides={"p99_tpot_ms": float("nan"), "p99_e2el_ms": float("inf"), "request_goodput": 2.5},
        drop=("peak_output_tokens_per_s", "p99_itl_ms"),
    ),
    "inferencex": lambda: inferencex_result(64),
    "inferencex-null-goodput": lambda: inferencex_result(8, goodput=None),
}


@pytest.mark.parametrize("schema", sorted(SCHEMAS))
def test_whole_file_scan_matches_json_loads(schema: str) -> None:
    d = SCHEMAS[schema]()
    data = dump(d)
    scan = scan_result(data, b"", len(data), head_is_whole=True)
    assert scan.status == "done", scan.reason
    assert actual_scalars(scan.scalars) == expected_scalars(json.loads(data))


@pytest.mark.parametrize("schema", sorted(SCHEMAS))
def test_head_tail_scan_matches_json_loads(schema: str, tmp_path: Path) -> None:
    d = SCHEMAS[schema]()
    data = dump(d)
    expected = expected_scalars(json.loads(data))
    head_end = data.index(b'"input_lens"') + len(b'"input_lens"')
    tail_start = data.index(b'"mean_ttft_ms"') - 2
    # Every way of cutting the windows: head from just past input_lens to deep into the arrays,
    # tail starting anywhere in the last 600 bytes before the latency block (mid-string included).
    for head_len in (head_end, head_end + 1, head_end + 37, min(len(data), head_end + 1500)):
        for start in range(max(head_len, tail_start - 600), tail_start + 1):
            scan = scan_result(data[:head_len], data[start:], len(data), head_is_whole=False)
            assert scan.status == "done", (head_len, start, scan.reason)
            assert actual_scalars(scan.scalars) == expected, (head_len, start)
    # The same through the local reader with windows too small to meet.
    path = tmp_path / "results_concurrency_8_gpus_8.json"
    path.write_bytes(data)
    ht = read_head_tail(path, head_bytes=head_end + 8, tail_bytes=len(data) - tail_start + 1)
    assert ht.head_is_whole == (head_end + 8 >= tail_start - 1)
    scan = scan_result(ht.head, ht.tail, ht.size, head_is_whole=False)
    assert actual_scalars(scan.scalars) == expected


def test_inferencex_goodput_key_with_trailing_colon() -> None:
    data = dump(inferencex_result(4, goodput=3.75))
    assert b'"request_goodput:": 3.75' in data
    for whole in (True, False):
        head, tail = (data, b"") if whole else windows(data)
        scan = scan_result(head, tail, len(data), head_is_whole=whole)
        assert scan.scalars.request_goodput == 3.75
        assert scan.scalars.peak_output_tokens_per_s is None
        assert scan.scalars.ttft.p90 == pytest.approx(95.0 * 1.4)
        assert scan.scalars.ttft.p99_9 == pytest.approx(95.0 * 2.0)


def test_null_nan_infinity_and_missing_percentiles_become_none() -> None:
    d = sa_bench_result(
        8,
        overrides={"p99_ttft_ms": None, "mean_itl_ms": float("nan"), "p99_e2el_ms": float("-inf")},
        drop=("p99_tpot_ms",),
    )
    data = dump(d)
    assert b"NaN" in data and b"-Infinity" in data
    for head, tail, whole in ((data, b"", True), (*windows(data), False)):
        s = scan_result(head, tail, len(data), head_is_whole=whole).scalars
        assert s.request_goodput is None
        assert s.ttft.p99 is None
        assert s.ttft.mean == 210.5
        assert s.itl.mean is None
        assert s.e2el.p99 is None
        assert s.tpot.p99 is None
        assert s.tpot.p90 is None
        assert s.tpot.median == pytest.approx(8.125 * 0.97)


def test_legacy_percentiles_list_fills_p99() -> None:
    d = sa_bench_result(4, drop=("p99_ttft_ms",))
    d["percentiles_ttft_ms"] = [[99, 410.0], [90, 300.0]]
    data = dump(d)
    for head, tail, whole in ((data, b"", True), (*windows(data), False)):
        s = scan_result(head, tail, len(data), head_is_whole=whole).scalars
        assert (s.ttft.p99, s.ttft.p90) == (410.0, 300.0)


def test_long_metadata_pushes_input_lens_far_into_the_file() -> None:
    d = sa_bench_result(4, metadata={f"note{i}": "x" * 200 for i in range(30)})
    data = dump(d)
    assert data.index(b'"input_lens"') > 6000
    scan = scan_result(data[:DEFAULT_HEAD_BYTES], data[-3000:], len(data), head_is_whole=False)
    assert scan.status == "done"
    assert actual_scalars(scan.scalars) == expected_scalars(d)


# --------------------------------------------------------------------------- incomplete and malformed


@pytest.mark.parametrize("make", [lambda: sa_bench_result(4, num_prompts=6, osl=6), lambda: inferencex_result(2)])
def test_every_truncation_of_a_small_file_is_incomplete(make: Any) -> None:
    data = dump(make())
    for n in range(len(data)):
        scan = scan_result(data[:n], b"", n, head_is_whole=True)
        assert scan.status == "incomplete", (n, scan.reason)
        assert scan.reason
    assert scan_result(data, b"", len(data), head_is_whole=True).status == "done"


def test_truncations_of_a_big_file_are_incomplete_and_keep_head_scalars(tmp_path: Path) -> None:
    d = sa_bench_result(64, osl=64)
    data = dump(d)
    path = tmp_path / "results_concurrency_64_gpus_8.json"
    rng = random.Random(5)
    cuts = [len(data) - 1, len(data) - 2, data.index(b'"mean_ttft_ms"') + 5, data.index(b'"errors"')]
    cuts += [data.index(b'"input_lens"') + 3, 40]
    cuts += rng.sample(range(100, len(data) - 1), 40)
    # Cut right after a "}" inside generated_texts / errors: the file then ends with a brace
    # that does not close it.
    inner = [i + 1 for i in range(len(data) - 1) if data[i : i + 1] == b"}"]
    assert len(inner) > 10
    cuts += inner[:3] + inner[-4:-1]
    for cut in cuts:
        path.write_bytes(data[:cut])
        point = read_point(path)
        assert point.status == "incomplete", (cut, point.invalid_reason)
        assert "closing brace" in (point.invalid_reason or "")
        if cut > data.index(b'"input_lens"'):
            assert point.completed == d["completed"]
            assert point.output_tok_s == pytest.approx(d["output_throughput"])


def test_trailing_newline_and_whitespace_are_tolerated() -> None:
    data = dump(sa_bench_result(4)) + b"\n"
    assert scan_result(data, b"", len(data), head_is_whole=True).status == "done"
    assert scan_result(*windows(data), len(data), head_is_whole=False).status == "done"


@pytest.mark.parametrize(
    ("data", "status", "reason_part"),
    [
        (b"", "incomplete", "empty"),
        (b"   \n", "incomplete", "whitespace"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "invalid", "not a JSON object"),
        (b"Traceback (most recent call last):\n  File ...", "invalid", "not a JSON object"),
        (b"[1, 2, 3]", "invalid", "not a JSON object"),
        (b'{"completed": 4, \x00\x00\x00\x00}', "invalid", "NUL"),
        (b'{"completed": }', "invalid", "malformed JSON"),
        (b'{"a": 1}', "invalid", "missing field"),
        (b'{"completed": 4, "total_output_tokens": 40}', "invalid", "output_throughput"),
    ],
)
def test_malformed_input_gets_a_status_and_reason(data: bytes, status: str, reason_part: str) -> None:
    scan = scan_result(data, b"", len(data), head_is_whole=True)
    assert scan.status == status
    assert reason_part in (scan.reason or "")


def test_file_ending_in_a_nested_object_after_the_latency_block_is_closed() -> None:
    d = sa_bench_result(4, overrides={"server_info": {"version": "0.5", "flags": ["a}"]}})
    data = dump(d)
    assert data.endswith(b"]}}")
    scan = scan_result(*windows(data), len(data), head_is_whole=False)
    assert scan.status == "done", scan.reason
    assert scan.scalars.e2el.mean == 8500.25


def test_missing_latency_block_in_a_closed_file_is_invalid() -> None:
    d = sa_bench_result(4)
    d = {k: v for k, v in d.items() if not k.endswith("_ms")}
    data = dump(d)
    for head, tail, whole in ((data, b"", True), (*windows(data), False)):
        scan = scan_result(head, tail, len(data), head_is_whole=whole)
        assert scan.status == "invalid"
        assert "latency" in (scan.reason or "")


def test_random_garbage_never_raises() -> None:
    rng = random.Random(1234)
    sample = dump(sa_bench_result(4, num_prompts=4, osl=4))
    for i in range(400):
        if i % 2:
            blob = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300)))
        else:
            # Mutate a real file: flip bytes and cut somewhere.
            mutable = bytearray(sample)
            for _ in range(rng.randrange(1, 6)):
                mutable[rng.randrange(len(mutable))] = rng.randrange(256)
            blob = bytes(mutable[: rng.randrange(1, len(mutable) + 1)])
        for whole in (True, False):
            head, tail = (blob, b"") if whole else (blob[:100], blob[-100:])
            scan = scan_result(head, tail, len(blob), head_is_whole=whole)
            assert scan.status in {"done", "incomplete", "invalid"}
            if scan.status != "done":
                assert scan.reason


def test_read_point_on_unreadable_paths(tmp_path: Path) -> None:
    gone = read_point(tmp_path / "results_concurrency_8_gpus_8.json")
    assert (gone.status, gone.concurrency, gone.invalid_reason) == ("missing", 8, "file vanished")
    directory = tmp_path / "results_concurrency_16_gpus_8.json"
    directory.mkdir()
    point = read_point(directory)
    assert point.status == "invalid"
    assert point.concurrency == 16
    assert "cannot read" in (point.invalid_reason or "")


# --------------------------------------------------------------------------- validity gates


def test_complete_valid_file_is_done() -> None:
    data = dump(sa_bench_result(16))
    point = point_from_bytes("results_concurrency_16_gpus_8.json", data, b"", len(data), head_is_whole=True)
    assert point.status == "done"
    assert point.invalid_reason is None
    assert (point.completed, point.num_prompts, point.failed) == (160, 160, 0)


def test_zero_generated_tokens_is_invalid() -> None:
    d = sa_bench_result(8, overrides={"total_output_tokens": 0, "output_throughput": 0.0})
    data = dump(d)
    scan = scan_result(data, b"", len(data), head_is_whole=True)
    assert (scan.status, scan.reason) == ("invalid", "zero generated tokens")


def test_failed_requests_over_five_percent_is_invalid() -> None:
    data = dump(sa_bench_result(8, num_prompts=80, completed=70))
    point = point_from_bytes("results_concurrency_8_gpus_8.json", data, b"", len(data), head_is_whole=True)
    assert point.status == "invalid"
    assert point.failed == 10
    assert "10 of 80 requests failed" in (point.invalid_reason or "")
    assert "5%" in (point.invalid_reason or "")


def test_fewer_completed_than_sent_is_invalid_even_under_five_percent() -> None:
    data = dump(sa_bench_result(10, num_prompts=100, completed=99))
    scan = scan_result(*windows(data), len(data), head_is_whole=False)
    assert scan.status == "invalid"
    assert scan.reason == "only 99 of 100 requests completed"
    assert scan.scalars.failed == 1


def test_failed_count_from_errors_when_num_prompts_is_absent() -> None:
    d = sa_bench_result(2, num_prompts=20, completed=12, drop=("num_prompts",))
    data = dump(d)
    for head, tail, whole in ((data, b"", True), (*windows(data), False)):
        scan = scan_result(head, tail, len(data), head_is_whole=whole)
        assert scan.scalars.errors_failed == 8
        assert scan.scalars.failed == 8
        assert scan.status == "invalid"
        assert "8 of 20 requests failed" in (scan.reason or "")


# --------------------------------------------------------------------------- derived metrics


def test_tok_s_per_gpu_from_given_count_else_from_file_name() -> None:
    d = sa_bench_result(64)
    data = dump(d)
    total = d["total_token_throughput"]
    name = "results_concurrency_64_gpus_24_ctx_8_gen_16.json"
    from_name = point_from_bytes(name, data, b"", len(data), head_is_whole=True)
    assert from_name.gpus == 24
    assert from_name.tok_s_per_gpu == pytest.approx(total / 24)
    given = point_from_bytes(name, data, b"", len(data), head_is_whole=True, gpus=12)
    assert given.tok_s_per_gpu == pytest.approx(total / 12)
    unknown = point_from_bytes("fixed-seq/m-c64.json", data, b"", len(data), head_is_whole=True)
    assert unknown.concurrency == 64
    assert unknown.tok_s_per_gpu is None
    assert unknown.total_tok_s == pytest.approx(total)
    assert unknown.output_tok_s == pytest.approx(d["output_throughput"])


def test_tok_s_per_user_is_1000_over_median_tpot() -> None:
    d = sa_bench_result(8, overrides={"median_tpot_ms": 12.5})
    data = dump(d)
    point = point_from_bytes("results_concurrency_8_gpus_8.json", data, b"", len(data), head_is_whole=True)
    assert point.tok_s_per_user == pytest.approx(80.0)
    d = sa_bench_result(8, overrides={"median_tpot_ms": 0.0})
    data = dump(d)
    point = point_from_bytes("results_concurrency_8_gpus_8.json", data, b"", len(data), head_is_whole=True)
    assert point.tok_s_per_user is None


def test_concurrency_falls_back_to_max_concurrency() -> None:
    data = dump(inferencex_result(32))
    point = point_from_bytes("odd-name.json", data, b"", len(data), head_is_whole=True)
    assert point.concurrency == 32
    no_conc = dump(inferencex_result(32, overrides={"max_concurrency": None}))
    point = point_from_bytes("odd-name.json", no_conc, b"", len(no_conc), head_is_whole=True)
    assert point.status == "invalid"
    assert "concurrency unknown" in (point.invalid_reason or "")


def test_point_to_json_shape() -> None:
    d = sa_bench_result(8, overrides={"p99_ttft_ms": float("nan")})
    data = dump(d)
    point = point_from_bytes(
        "logs/sa-bench_x/results_concurrency_8_gpus_8.json", data, b"", len(data), head_is_whole=True
    )
    out = point.to_json()
    required = {
        "concurrency",
        "status",
        "output_tok_s",
        "total_tok_s",
        "tok_s_per_gpu",
        "tok_s_per_user",
        "ttft_ms",
        "tpot_ms",
        "itl_ms",
        "e2el_ms",
        "completed",
        "file",
    }
    assert required <= set(out)
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"):
        assert set(out[key]) == {"mean", "median", "p99"}
    assert out["ttft_ms"] == {"mean": 210.5, "median": pytest.approx(210.5 * 0.97), "p99": None}
    assert out["concurrency"] == 8
    assert out["status"] == "done"
    assert out["file"] == "logs/sa-bench_x/results_concurrency_8_gpus_8.json"
    # Strict JSON: no NaN can leak out.
    json.loads(json.dumps(out, allow_nan=False))


# --------------------------------------------------------------------------- arms and attempts


def _point(conc: int, status: Any = "done", tput: float = 100.0) -> PointResult:
    return PointResult(conc, status, total_tok_s=tput, file=f"c{conc}-{status}-{tput}.json")


def test_arm_points_missing_running_and_extra() -> None:
    points = [_point(4), _point(8, "invalid"), _point(64), _point(32, "incomplete")]
    arm = arm_points([4, 8, 16, 32, 128], points, running=32)
    assert [(p.concurrency, p.status) for p in arm] == [
        (4, "done"),
        (8, "invalid"),
        (16, "missing"),
        (32, "running"),
        (64, "done"),
        (128, "missing"),
    ]
    # The running point keeps the file it is writing.
    assert arm[3].file == "c32-incomplete-100.0.json"
    assert arm[3].invalid_reason is None


def test_arm_points_running_without_file_and_unexpected_running() -> None:
    arm = arm_points([4, 8], [_point(4)], running=8)
    assert [(p.concurrency, p.status) for p in arm] == [(4, "done"), (8, "running")]
    arm = arm_points([4], [], running=16)
    assert [(p.concurrency, p.status) for p in arm] == [(4, "missing"), (16, "running")]
    # A finished point is not overridden by a stale "running" marker.
    assert arm_points([4], [_point(4)], running=4)[0].status == "done"
    assert arm_points([], [], running=None) == []


def test_arm_points_prefers_done_among_duplicates() -> None:
    arm = arm_points([8], [_point(8, "done", 1.0), _point(8, "invalid", 2.0)])
    assert (arm[0].status, arm[0].total_tok_s) == ("done", 1.0)
    arm = arm_points([8], [_point(8, "invalid", 1.0), _point(8, "incomplete", 2.0)])
    assert arm[0].total_tok_s == 2.0


def test_merge_attempts_latest_valid_wins_and_keeps_attempt() -> None:
    merged = merge_attempts(
        [
            (
                "1001",
                [
                    _point(4, "done", 1.0),
                    _point(8, "invalid", 1.0),
                    _point(16, "done", 1.0),
                    _point(32, "missing"),
                ],
            ),
            (
                "1002",
                [
                    _point(4, "invalid", 2.0),
                    _point(8, "done", 2.0),
                    _point(16, "done", 2.0),
                    _point(32, "invalid", 2.0),
                ],
            ),
            ("1003", [_point(4, "missing"), _point(8, "invalid", 3.0), _point(64, "running")]),
        ]
    )
    got = {p.concurrency: (p.status, p.total_tok_s, p.attempt) for p in merged}
    assert got == {
        4: ("done", 1.0, "1001"),  # the only valid one, though older
        8: ("done", 2.0, "1002"),  # a newer invalid does not replace it
        16: ("done", 2.0, "1002"),  # latest valid
        32: ("invalid", 2.0, "1002"),  # a result beats "missing"
        64: ("running", 100.0, "1003"),
    }
    assert [p.concurrency for p in merged] == [4, 8, 16, 32, 64]


def test_merge_attempts_latest_of_same_status_wins() -> None:
    merged = merge_attempts([("a", [_point(4, "invalid", 1.0)]), ("b", [_point(4, "invalid", 2.0)])])
    assert (merged[0].total_tok_s, merged[0].attempt) == (2.0, "b")
    assert merge_attempts([]) == []


def test_read_points_and_arm_view_end_to_end(tmp_path: Path) -> None:
    job = tmp_path / "5150"
    sa = job / "logs" / "sa-bench_isl_64_osl_16"
    write(sa / "results_concurrency_4_gpus_24_ctx_8_gen_16.json", sa_bench_result(4))
    write(
        sa / "results_concurrency_8_gpus_24_ctx_8_gen_16.json",
        sa_bench_result(8, num_prompts=80, completed=60),
    )
    (sa / "results_concurrency_16_gpus_24_ctx_8_gen_16.json").write_bytes(dump(sa_bench_result(16))[:900])
    write(job / "logs" / "benchmark-rollup.json", {"runs": []})
    points = read_points(job)
    assert [(p.concurrency, p.status) for p in points] == [(4, "done"), (8, "invalid"), (16, "incomplete")]
    assert all(p.gpus == 24 for p in points)
    benchmark_out = (
        "Running benchmark with concurrency: 4\nCompleted benchmark with concurrency: 4\n-----\n"
        "Running benchmark with concurrency: 8\nCompleted benchmark with concurrency: 8\n-----\n"
        "Running benchmark with concurrency: 16\nMaximum request concurrency: 16\n"
    )
    arm = arm_points([4, 8, 16, 32], points, running=running_concurrency(benchmark_out))
    assert [(p.concurrency, p.status) for p in arm] == [
        (4, "done"),
        (8, "invalid"),
        (16, "running"),
        (32, "missing"),
    ]


# --------------------------------------------------------------------------- benchmark.out


SA_BENCH_OUT = """SA-Bench Config: endpoint=http://localhost:8000; isl=1024; osl=1024; concurrencies=4x8; req_rate=inf
Verifying endpoint...
Traffic request rate: 250
Maximum request concurrency: 4
============ Serving Benchmark Result ============
==================================================
Running benchmark with concurrency: 4
Thu Aug 21 10:30:00 UTC 2026
Maximum request concurrency: 4
============ Serving Benchmark Result ============
Successful requests:                     40
==================================================
Thu Aug 21 10:31:00 UTC 2026
Completed benchmark with concurrency: 4
-----------------------------------------
Maximum request concurrency: 8
============ Serving Benchmark Result ============
==================================================
Running benchmark with concurrency: 8
Thu Aug 21 10:32:00 UTC 2026
+ python3 -u /sa-bench/benchmark_serving.py --max-concurrency 8
Maximum request concurrency: 8
"""


def test_running_concurrency_sa_bench() -> None:
    assert running_concurrency(SA_BENCH_OUT) == 8
    finished = SA_BENCH_OUT + "Completed benchmark with concurrency: 8\n" + "-" * 41 + "\nSA-Bench complete.\n"
    assert running_concurrency(finished) is None
    # During the warmup between two measured runs nothing is being measured.
    between = SA_BENCH_OUT.split("Running benchmark with concurrency: 8")[0]
    assert running_concurrency(between) is None
    assert running_concurrency("") is None
    assert running_concurrency("Verifying endpoint...\n") is None


def test_running_concurrency_inferencex_custom_benchmark() -> None:
    text = (
        "Warming up with 64 requests...\nWarmup completed.\nTraffic request rate: inf\n"
        "Burstiness factor: 1.0 (Poisson process)\nMaximum request concurrency: 64\n"
        " 40%|████      | 51/128 [00:10<00:14,  5.1it/s]"
    )
    assert running_concurrency(text) == 64
    finished = (
        text + "\n============ Serving Benchmark Result ============\nSuccessful requests: 128\n" + "=" * 50 + "\n"
    )
    assert running_concurrency(finished) is None
    assert running_concurrency(finished + "Maximum request concurrency: 128\n") == 128


# --------------------------------------------------------------------------- rollup


ROLLUP = {
    "benchmark_type": "sa-bench",
    "timestamp": "2026-08-21T10:30:00Z",
    "config": {"model": "dsv4", "isl": 8192, "osl": 1024},
    "runs": [
        {
            "concurrency": 4,
            "throughput_toks": 1234.5,
            "request_throughput": 0.9,
            "ttft_mean_ms": 210.1,
            "ttft_p99_ms": 400.2,
            "tpot_mean_ms": 8.1,
            "tpot_p99_ms": 9.9,
            "itl_mean_ms": 8.0,
            "itl_p99_ms": 12.0,
            "e2el_mean_ms": 8500.0,
            "completed_requests": 40,
            "total_input_tokens": 327680,
            "total_output_tokens": 40960,
        },
        {"concurrency": 8, "throughput_toks": None, "ttft_p99_ms": float("nan")},
        "not a row",
    ],
}


def test_parse_rollup(tmp_path: Path) -> None:
    path = write(tmp_path / "benchmark-rollup.json", ROLLUP)
    rollup = read_rollup(path)
    assert rollup.status == "done"
    assert (rollup.benchmark_type, rollup.model, rollup.isl, rollup.osl) == ("sa-bench", "dsv4", 8192, 1024)
    assert [r.concurrency for r in rollup.runs] == [4, 8]
    first = rollup.runs[0]
    assert (first.output_tok_s, first.ttft_p99_ms, first.completed, first.total_output_tokens) == (
        1234.5,
        400.2,
        40,
        40960,
    )
    assert (rollup.runs[1].output_tok_s, rollup.runs[1].ttft_p99_ms) == (None, None)
    mooncake = parse_rollup(json.dumps({"benchmark_type": "mooncake-router", "data": [{"concurrency": 2}]}))
    assert [r.concurrency for r in mooncake.runs] == [2]


def test_rollup_truncated_or_garbage_never_raises(tmp_path: Path) -> None:
    data = json.dumps(ROLLUP, indent=2).encode()
    for n in range(len(data)):
        rollup = parse_rollup(data[:n])
        assert rollup.status == "incomplete", n
        assert rollup.runs == ()
    assert parse_rollup(b"\xff\xfe garbage").status == "invalid"
    assert parse_rollup(b"[1, 2]").status == "invalid"
    assert parse_rollup(b'{"runs": 5}').status == "invalid"
    assert read_rollup(tmp_path / "absent.json").status == "invalid"


# --------------------------------------------------------------------------- <JOBID>.json


JOB_META = {
    "version": "2.0",
    "orchestrator": True,
    "job_id": "12345",
    "job_name": "dsr1-fp8-1p2d",
    "generated_at": "2026-08-21 10:00:00",
    "model": {"path": "deepseek-r1", "container": "c", "precision": "fp8"},
    "resources": {
        "gpu_type": "gb200",
        "gpus_per_node": 4,
        "prefill_nodes": 1,
        "decode_nodes": 2,
        "agg_nodes": None,
        "prefill_workers": 1,
        "decode_workers": 1,
        "agg_workers": 0,
        "gpus_per_prefill": 4,
        "gpus_per_decode": 8,
        "gpus_per_agg": 4,
        "cpu_allocation": {"allocated_total": 256},
        "cpu_check": {"status": "ok"},
    },
    "backend_type": "sglang",
    "frontend_type": "dynamo",
    "benchmark": {"type": "sa-bench", "isl": 8192, "osl": 1024},
}


def test_job_metadata_disaggregated(tmp_path: Path) -> None:
    path = tmp_path / "12345.json"
    path.write_text(json.dumps(JOB_META, indent=2))
    meta = read_job_metadata(path)
    assert meta.status == "done"
    assert (meta.job_id, meta.job_name, meta.gpu_type, meta.backend_type) == (
        "12345",
        "dsr1-fp8-1p2d",
        "gb200",
        "sglang",
    )
    assert (meta.benchmark_type, meta.isl, meta.osl) == ("sa-bench", 8192, 1024)
    assert (meta.prefill_gpus, meta.decode_gpus, meta.total_gpus) == (4, 8, 12)


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({"agg_workers": 2, "gpus_per_agg": 8, "prefill_workers": 0, "decode_workers": 0}, 16),
        ({"agg_workers": None, "gpus_per_agg": None, "agg_nodes": 2, "gpus_per_node": 8}, 16),
        ({"agg_workers": 0, "agg_nodes": 1, "gpus_per_node": 4}, 4),
        ({"prefill_workers": 2, "gpus_per_prefill": 8, "decode_workers": 1, "gpus_per_decode": 16}, 32),
        # Per-worker counts missing: fall back to nodes × GPUs per node.
        ({"prefill_nodes": 1, "decode_nodes": 2, "gpus_per_node": 4, "gpus_per_prefill": None}, 12),
        ({"prefill_workers": True, "gpus_per_prefill": 8}, None),
        ({"prefill_workers": None, "decode_workers": None, "agg_workers": None}, None),
        ({}, None),
    ],
)
def test_total_gpus(resources: dict[str, Any], expected: int | None) -> None:
    assert total_gpus(resources) == expected


def test_job_metadata_tolerates_nulls_and_truncation() -> None:
    meta = parse_job_metadata('{"job_id": 777, "resources": null, "benchmark": null}')
    assert (meta.status, meta.job_id, meta.total_gpus, meta.isl) == ("done", "777", None, None)
    text = json.dumps(JOB_META, indent=2)
    for n in (0, 1, 10, len(text) // 2, len(text) - 1):
        truncated = parse_job_metadata(text[:n])
        assert truncated.status == "incomplete"
        assert truncated.total_gpus is None
    assert parse_job_metadata("not json").status == "invalid"
    assert parse_job_metadata(b"\x00\x01\x02").status == "invalid"


# --------------------------------------------------------------------------- large files


def _proc_rchar() -> int | None:
    try:
        with open("/proc/self/io", "rb") as f:
            for line in f:
                if line.startswith(b"rchar:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def test_large_file_writer_produces_valid_json(tmp_path: Path) -> None:
    path = tmp_path / "results_concurrency_4_gpus_8.json"
    fields = write_large(path, 200_000, conc=4, osl=32)
    loaded = json.loads(path.read_bytes())
    assert len(loaded["itls"]) == len(loaded["generated_texts"]) == len(loaded["input_lens"])
    assert expected_scalars(loaded) == expected_scalars(fields)


@pytest.fixture(scope="module")
def large_result(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:
    path = tmp_path_factory.mktemp("large") / "results_concurrency_256_gpus_24_ctx_8_gen_16.json"
    fields = write_large(path, 50 * 1024 * 1024)
    yield path, fields
    path.unlink()


def test_large_file_reads_only_head_and_tail(large_result: tuple[Path, dict[str, Any]]) -> None:
    path, fields = large_result
    size = path.stat().st_size
    assert size > 50 * 1024 * 1024
    before = _proc_rchar()
    point = read_point(path)
    after = _proc_rchar()
    assert point.status == "done", point.invalid_reason
    assert point.bytes_read < 64 * 1024
    if before is not None and after is not None:
        # The kernel's own count of bytes this process read (includes reading /proc/self/io).
        assert after - before < 64 * 1024
    assert point.concurrency == 256
    assert point.gpus == 24
    assert point.completed == fields["completed"] == 2560
    assert point.total_tok_s == pytest.approx(fields["total_token_throughput"])
    assert point.tok_s_per_gpu == pytest.approx(fields["total_token_throughput"] / 24)
    assert point.tok_s_per_user == pytest.approx(1000 / fields["median_tpot_ms"])
    assert point.e2el.p99 == pytest.approx(fields["p99_e2el_ms"])


def test_large_file_being_written_is_incomplete(large_result: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    path, _ = large_result
    partial = tmp_path / "results_concurrency_256_gpus_24_ctx_8_gen_16.json"
    with path.open("rb") as src, partial.open("wb") as dst:
        dst.write(src.read(20 * 1024 * 1024))
    point = read_point(partial)
    assert point.status == "incomplete"
    assert point.bytes_read < 64 * 1024
    assert point.completed == 2560  # head scalars are already there
    assert point.tpot.median is None


def test_a_missing_point_says_why() -> None:
    from console.results.points import PointResult, arm_view

    done = PointResult(4, "done", output_tok_s=1.0)
    states = {"a1.1": "FAILED", "a1.2": "RUNNING", "a2.1": "COMPLETED", "a3.1": "TIMEOUT"}
    crashed = arm_view([4, 8, 16], [("a1.1", [4, 8, 16], [done], None)], states=states)
    assert [p.invalid_reason for p in crashed] == [
        None,
        "crashed at this concurrency (a1.1 ended FAILED while measuring it)",
        "never ran (a1.1 ended FAILED before it)",
    ]
    never = arm_view([4], [("a3.1", [4], [], None)], states=states)
    assert never[0].invalid_reason == "never ran (a3.1 ended TIMEOUT before the benchmark reached it)"
    live = arm_view([4, 8], [("a1.1", [4, 8], [done], None), ("a1.2", [8], [], None)], states=states)
    assert live[1].invalid_reason == "not run yet (a1.2 is RUNNING)"
    no_file = arm_view([4], [("a2.1", [4], [], None)], states=states, simulated={"a2.1"})
    assert no_file[0].invalid_reason == "no result file (a2.1 completed without one)" and no_file[0].simulated
    assert no_file[0].to_json()["simulated"] is True
