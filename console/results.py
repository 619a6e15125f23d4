"""Benchmark result files: discovery, head/tail scalar reading, derived point metrics.

Result files written by benchmark_serving reach hundreds of MB because of their per-request
arrays (``input_lens``, ``itls``, ``generated_texts`` ...). Every scalar we need sits either
before ``"input_lens"`` or after ``"errors"``, so a file is never loaded whole: only a head and
a tail window are read, and the same bytes can come from a local seek or from a remote agent.

Nothing here raises on bad input: truncated, empty, binary or non-JSON data becomes a status
(``incomplete`` or ``invalid``) with a reason that names what is wrong.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "DEFAULT_HEAD_BYTES",
    "DEFAULT_TAIL_BYTES",
    "FAILED_REQUESTS_LIMIT",
    "METRICS",
    "HeadTail",
    "JobMetadata",
    "LatencyStats",
    "PointResult",
    "PointStatus",
    "ResultFile",
    "ResultKind",
    "ResultName",
    "ResultScalars",
    "Rollup",
    "RollupRun",
    "ScanResult",
    "arm_points",
    "discover_results",
    "merge_attempts",
    "parse_job_metadata",
    "parse_result_name",
    "parse_rollup",
    "point_from_bytes",
    "point_from_scan",
    "read_head_tail",
    "read_job_metadata",
    "read_point",
    "read_points",
    "read_rollup",
    "running_concurrency",
    "scan_result",
    "total_gpus",
]

PointStatus = Literal["done", "running", "missing", "incomplete", "invalid"]
ScanStatus = Literal["done", "incomplete", "invalid"]
ResultKind = Literal["sa-bench", "legacy", "fixed-seq", "collected", "rollup"]

DEFAULT_HEAD_BYTES = 16 * 1024
DEFAULT_TAIL_BYTES = 16 * 1024
# The same threshold InferenceX's benchmark_serving uses to exit non-zero.
FAILED_REQUESTS_LIMIT = 0.05
METRICS = ("ttft", "tpot", "itl", "e2el")

_HEAD_MARKER = b'"input_lens"'
_READ_CHUNK = 4096
# Rollup and metadata files are small; anything far larger is not one of them.
_SMALL_JSON_LIMIT = 8 * 1024 * 1024
_MAX_STR = 512


# --------------------------------------------------------------------------- file names


@dataclass(frozen=True)
class ResultName:
    """What a result file's name says: its layout and the numbers encoded in it."""

    kind: ResultKind
    concurrency: int | None = None
    gpus: int | None = None
    ctx: int | None = None
    gen: int | None = None


_GPUS_CTX_GEN = r"(?:_gpus_(?P<gpus>\d+))?(?:_ctx_(?P<ctx>\d+)_gen_(?P<gen>\d+))?"
_SA_BENCH_NAME = re.compile(rf"^results_concurrency_(?P<c>\d+){_GPUS_CTX_GEN}\.json$")
_LEGACY_NAME = re.compile(rf"concurrency_(?P<c>\d+)_req_rate_(?P<rate>[^_/]+?){_GPUS_CTX_GEN}\.json$")
# Files renamed by InferenceX's collectors: ``..._conc<N>_gpus_<T>[_ctx_<P>_gen_<D>].json``.
_COLLECTED_NAME = re.compile(rf"_conc(?P<c>\d+){_GPUS_CTX_GEN}\.json$")
_FIXED_SEQ_NAME = re.compile(r"-c(?P<c>\d+)\.json$")
_ROLLUP_NAME = "benchmark-rollup.json"
# Most specific first: a fixed-seq ``-c<N>.json`` suffix is the loosest pattern.
_NAME_PATTERNS: tuple[tuple[ResultKind, re.Pattern[str]], ...] = (
    ("sa-bench", _SA_BENCH_NAME),
    ("legacy", _LEGACY_NAME),
    ("collected", _COLLECTED_NAME),
    ("fixed-seq", _FIXED_SEQ_NAME),
)


def _opt_int(text: str | None) -> int | None:
    return int(text) if text is not None else None


def parse_result_name(name: str) -> ResultName | None:
    """Classify a result file by its base name; ``None`` when it is not a result file.

    Pure, so that a remote directory listing is classified exactly like a local one.
    ``*.pytorch.json`` companions match the same globs but are not results.
    """
    name = name.rsplit("/", 1)[-1]
    if not name.endswith(".json") or name.endswith(".pytorch.json"):
        return None
    if name == _ROLLUP_NAME:
        return ResultName("rollup")
    for kind, pattern in _NAME_PATTERNS:
        m = pattern.search(name)
        if m is None:
            continue
        groups = m.groupdict()
        return ResultName(
            kind,
            int(m.group("c")),
            _opt_int(groups.get("gpus")),
            _opt_int(groups.get("ctx")),
            _opt_int(groups.get("gen")),
        )
    return None


# --------------------------------------------------------------------------- discovery


@dataclass(frozen=True)
class ResultFile:
    """A discovered result file with what its name says."""

    path: Path
    name: ResultName

    @property
    def kind(self) -> ResultKind:
        return self.name.kind

    @property
    def concurrency(self) -> int | None:
        return self.name.concurrency


_SAFE_JOB_ID = re.compile(r"^[A-Za-z0-9_.-]+$")


def _files_in(directory: Path) -> list[Path]:
    try:
        with os.scandir(directory) as it:
            return [Path(e.path) for e in it if e.is_file()]
    except OSError:
        return []


def _dirs_in(directory: Path) -> list[Path]:
    try:
        with os.scandir(directory) as it:
            return [Path(e.path) for e in it if e.is_dir()]
    except OSError:
        return []


def discover_results(
    job_dir: Path | None,
    *,
    results_root: Path | None = None,
    job_id: str | None = None,
) -> list[ResultFile]:
    """Find result files of one job in every known layout.

    Looks at ``<job_dir>/logs/sa-bench_*/results_concurrency_*.json``, legacy
    ``*concurrency_<C>_req_rate_*.json`` names in the job dir, ``logs/`` and its subdirectories,
    ``logs/benchmark-rollup.json``, and InferenceX ``<results_root>/<job_id>/fixed-seq/*-c<C>.json``
    (``job_id`` defaults to the job dir's name). Only listings are made; no file is opened.
    Sorted by concurrency, the rollup last.
    """
    found: dict[Path, ResultFile] = {}

    def add(path: Path, allowed: set[str]) -> None:
        parsed = parse_result_name(path.name)
        if parsed is not None and parsed.kind in allowed:
            found[path] = ResultFile(path, parsed)

    if job_dir is not None:
        logs = job_dir / "logs"
        for path in _files_in(job_dir):
            add(path, {"legacy"})
        for path in _files_in(logs):
            add(path, {"legacy", "rollup"})
        for sub in _dirs_in(logs):
            allowed = {"sa-bench", "legacy"}
            if sub.name == "fixed-seq":
                allowed.add("fixed-seq")
            for path in _files_in(sub):
                add(path, allowed)

    if results_root is not None:
        jid = job_id if job_id is not None else (job_dir.name if job_dir is not None else None)
        if jid is not None and _SAFE_JOB_ID.match(jid) and jid not in {".", ".."}:
            for path in _files_in(results_root / jid / "fixed-seq"):
                add(path, {"fixed-seq", "collected"})

    def order(rf: ResultFile) -> tuple[int, int, str]:
        c = rf.name.concurrency
        return (1 if c is None else 0, c or 0, str(rf.path))

    return sorted(found.values(), key=order)


# --------------------------------------------------------------------------- reading bytes


@dataclass(frozen=True)
class HeadTail:
    """The bytes read from one file: its head, its tail, and the size when it was read."""

    head: bytes
    tail: bytes
    size: int
    head_is_whole: bool
    bytes_read: int


def read_head_tail(
    path: Path | str,
    *,
    head_bytes: int = DEFAULT_HEAD_BYTES,
    tail_bytes: int = DEFAULT_TAIL_BYTES,
) -> HeadTail:
    """Read a file's head (up to ``head_bytes``, stopping early once ``"input_lens"`` is seen)
    and its last ``tail_bytes``, with seeks, so a 300 MB file costs about 32 KiB of I/O.

    When the two windows meet, the whole file is returned as ``head`` with an empty ``tail``.
    Raises ``OSError`` when the file cannot be opened.
    """
    with open(path, "rb") as f:
        head = bytearray()
        eof = False
        while len(head) < head_bytes:
            chunk = f.read(min(_READ_CHUNK, head_bytes - len(head)))
            if not chunk:
                eof = True
                break
            start = max(0, len(head) - len(_HEAD_MARKER))
            head += chunk
            if head.find(_HEAD_MARKER, start) >= 0:
                break
        if eof:
            return HeadTail(bytes(head), b"", len(head), True, len(head))
        size = os.fstat(f.fileno()).st_size
        tail_start = max(len(head), size - tail_bytes)
        tail = b""
        if tail_start < size:
            f.seek(tail_start)
            tail = f.read(size - tail_start)
        bytes_read = len(head) + len(tail)
        if tail_start == len(head):
            # The windows meet: this is the whole file as of ``size``.
            whole = bytes(head) + tail
            return HeadTail(whole, b"", max(size, len(whole)), True, bytes_read)
        return HeadTail(bytes(head), tail, size, False, bytes_read)


# --------------------------------------------------------------------------- scalar scan


@dataclass(frozen=True)
class LatencyStats:
    """One latency metric in milliseconds; ``None`` where the file lacks the value."""

    mean: float | None = None
    median: float | None = None
    std: float | None = None
    p90: float | None = None
    p99: float | None = None
    p99_9: float | None = None

    def to_json(self) -> dict[str, float | None]:
        return {"mean": self.mean, "median": self.median, "p99": self.p99}


@dataclass(frozen=True)
class ResultScalars:
    """The scalar fields of a benchmark_serving result (sa-bench or InferenceX schema)."""

    date: str | None = None
    backend: str | None = None
    model_id: str | None = None
    num_prompts: int | None = None
    max_concurrency: int | None = None
    duration: float | None = None
    completed: int | None = None
    total_input_tokens: int | None = None
    total_output_tokens: int | None = None
    request_throughput: float | None = None
    request_goodput: float | None = None
    output_throughput: float | None = None
    total_token_throughput: float | None = None
    peak_output_tokens_per_s: float | None = None
    ttft: LatencyStats = field(default_factory=LatencyStats)
    tpot: LatencyStats = field(default_factory=LatencyStats)
    itl: LatencyStats = field(default_factory=LatencyStats)
    e2el: LatencyStats = field(default_factory=LatencyStats)
    # Non-empty entries of ``errors``, only when the whole array was within the bytes read.
    errors_failed: int | None = None

    @property
    def failed(self) -> int | None:
        """Failed requests: sent minus completed when both are known, else from ``errors``."""
        if self.num_prompts is not None and self.completed is not None:
            return max(0, self.num_prompts - self.completed)
        return self.errors_failed

    def latency(self, metric: str) -> LatencyStats:
        stats: LatencyStats = getattr(self, metric)
        return stats


@dataclass(frozen=True)
class ScanResult:
    """Outcome of scanning one result file's bytes."""

    status: ScanStatus
    scalars: ResultScalars
    reason: str | None = None


_NUMBER = r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
# A key directly after ``{`` or ``,`` is structural: inside a JSON string a quote is always
# escaped, so text from generated_texts or errors can never fake one. The lookahead rejects
# a value cut off at the edge of a window.
_PAIR = re.compile(
    r'[{,]\s*"(?P<k>[^"\\]{1,80})"\s*:\s*'
    rf'(?P<v>{_NUMBER}|null|true|false|NaN|-?Infinity|"(?:[^"\\]|\\.){{0,{_MAX_STR * 4}}}")'
    r"(?=\s*[,}\]])"
)
_PERCENTILES_LIST = re.compile(
    r'[{,]\s*"percentiles_(?P<m>ttft|tpot|itl|e2el)_ms"\s*:\s*'
    r"(?P<v>\[\s*(?:\[[^\[\]]{0,200}\]\s*(?:,\s*)?){0,64}\])"
)
_ERRORS_KEY = re.compile(r'[{,]\s*"errors"\s*:\s*(?=\[)')
_LATENCY_KEY = re.compile(r"^(?P<stat>mean|median|std|p\d+(?:\.\d+)?)_(?P<m>ttft|tpot|itl|e2el)_ms$")
# A file is finished when its last ``"key": scalar`` pair is followed by the closing brace. A
# bare ``}`` is not enough: generated_texts may contain one where a growing file ends.
_CLOSED_END = re.compile(
    r'[{,]\s*"[^"\\]{1,80}"\s*:\s*'
    rf'(?:{_NUMBER}|null|true|false|NaN|-?Infinity|"(?:[^"\\]|\\.){{0,{_MAX_STR * 4}}}")'
    r"\s*\}\s*$"
)
_HEAD_REQUIRED = ("completed", "total_output_tokens", "output_throughput", "total_token_throughput")


def _cut_short(text: str) -> bool:
    """Whether a JSON text stops inside a string or an open object/array (a truncated file)."""
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
    return in_string or depth > 0


def _scan_pairs(text: str, into: dict[str, Any]) -> None:
    for m in _PAIR.finditer(text):
        key = m.group("k")
        if key in into:
            continue
        try:
            into[key] = json.loads(m.group("v"))
        except ValueError:
            continue
    for m in _PERCENTILES_LIST.finditer(text):
        key = f"percentiles_{m.group('m')}_ms"
        if key not in into:
            try:
                into[key] = json.loads(m.group("v"))
            except ValueError:
                continue


def _scan_errors(text: str) -> list[Any] | None:
    m = _ERRORS_KEY.search(text)
    if m is None:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text, m.end())
    except ValueError:
        return None  # the array runs past the window
    return value if isinstance(value, list) else None


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    result = float(value)
    return result if math.isfinite(result) else None


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def _as_str(value: Any) -> str | None:
    return value[:_MAX_STR] if isinstance(value, str) else None


def _latency_from(fields: Mapping[str, Any], metric: str) -> LatencyStats:
    values: dict[str, float | None] = {}
    for key, raw in fields.items():
        m = _LATENCY_KEY.match(key)
        if m is None or m.group("m") != metric:
            continue
        stat = m.group("stat").replace(".", "_")
        if stat in {"mean", "median", "std", "p90", "p99", "p99_9"}:
            values[stat] = _as_float(raw)
    # Old benchmark_serving versions wrote ``percentiles_<m>_ms: [[99, value], ...]``.
    legacy = fields.get(f"percentiles_{metric}_ms")
    if isinstance(legacy, list):
        for pair in legacy:
            if isinstance(pair, list) and len(pair) == 2:
                p = _as_float(pair[0])
                name = {90.0: "p90", 99.0: "p99", 99.9: "p99_9"}.get(p if p is not None else -1.0)
                if name is not None and values.get(name) is None:
                    values[name] = _as_float(pair[1])
    return LatencyStats(**values)


def _scalars_from(fields: Mapping[str, Any]) -> ResultScalars:
    goodput = fields.get("request_goodput")
    if goodput is None:
        goodput = fields.get("request_goodput:")  # InferenceX's misspelt key
    errors = fields.get("errors")
    errors_failed = sum(1 for e in errors if e not in (None, "")) if isinstance(errors, list) else None
    return ResultScalars(
        date=_as_str(fields.get("date")),
        backend=_as_str(fields.get("backend")),
        model_id=_as_str(fields.get("model_id")),
        num_prompts=_as_int(fields.get("num_prompts")),
        max_concurrency=_as_int(fields.get("max_concurrency")),
        duration=_as_float(fields.get("duration")),
        completed=_as_int(fields.get("completed")),
        total_input_tokens=_as_int(fields.get("total_input_tokens")),
        total_output_tokens=_as_int(fields.get("total_output_tokens")),
        request_throughput=_as_float(fields.get("request_throughput")),
        request_goodput=_as_float(goodput),
        output_throughput=_as_float(fields.get("output_throughput")),
        total_token_throughput=_as_float(fields.get("total_token_throughput")),
        peak_output_tokens_per_s=_as_float(fields.get("peak_output_tokens_per_s")),
        ttft=_latency_from(fields, "ttft"),
        tpot=_latency_from(fields, "tpot"),
        itl=_latency_from(fields, "itl"),
        e2el=_latency_from(fields, "e2el"),
        errors_failed=errors_failed,
    )


def _validity_reason(s: ResultScalars) -> str | None:
    """Why a fully written result must not count as a delivered point, or ``None``."""
    if s.total_output_tokens == 0 or s.output_throughput == 0:
        return "zero generated tokens"
    if s.completed == 0:
        return "no request completed"
    failed = s.failed
    sent = s.num_prompts
    if sent is None and failed is not None and s.completed is not None:
        sent = s.completed + failed
    if failed and sent:
        share = failed / sent
        if share > FAILED_REQUESTS_LIMIT:
            return f"{failed} of {sent} requests failed ({share:.1%}, over the {FAILED_REQUESTS_LIMIT:.0%} limit)"
    if s.num_prompts is not None and s.completed is not None and s.completed < s.num_prompts:
        return f"only {s.completed} of {s.num_prompts} requests completed"
    return None


def _missing_fields(s: ResultScalars) -> list[str]:
    missing = [k for k in _HEAD_REQUIRED if getattr(s, k) is None]
    if all(getattr(s.latency(m), stat) is None for m in METRICS for stat in ("mean", "median", "p99")):
        missing.append("latency statistics (mean/median/p99 *_ms)")
    return missing


def _describe_start(data: bytes) -> str:
    return repr(data[:16])


def scan_result(head: bytes, tail: bytes, size: int, *, head_is_whole: bool) -> ScanResult:
    """Extract the scalar fields of a result file from its head and tail bytes.

    ``head`` is the start of the file and ``tail`` its end (``b""`` when ``head_is_whole``).
    A whole small file is parsed exactly with ``json``; otherwise a tolerant scanner reads
    ``"key": scalar`` pairs from both windows. Status ``done`` also means the validity gate
    passed; ``incomplete`` means still being written (or truncated); ``invalid`` means it will
    not become a usable point. Never raises.
    """
    if size == 0 and not head and not tail:
        return ScanResult("incomplete", ResultScalars(), "empty file (still being written?)")
    stripped = head.lstrip(b" \t\r\n\xef\xbb\xbf")
    if not stripped:
        if size > 0 and not head_is_whole:
            return ScanResult("invalid", ResultScalars(), "no head bytes were provided")
        return ScanResult("incomplete", ResultScalars(), "only whitespace so far (still being written?)")
    if not stripped.startswith(b"{"):
        return ScanResult("invalid", ResultScalars(), f"not a JSON object: starts with {_describe_start(stripped)}")
    if b"\x00" in head or b"\x00" in tail:
        return ScanResult("invalid", ResultScalars(), "contains NUL bytes: binary or corrupted data")

    head_text = head.decode("utf-8", errors="replace")
    tail_text = tail.decode("utf-8", errors="replace")

    # A whole small file is parsed exactly when it is balanced; everything else is scanned.
    fields: dict[str, Any] = {}
    closed = head_is_whole and not _cut_short(head_text)
    if closed:
        try:
            loaded = json.loads(head_text)
        except ValueError as exc:
            msg = getattr(exc, "msg", str(exc))
            pos = getattr(exc, "pos", None)
            where = f" at byte {pos}" if pos is not None else ""
            return ScanResult("invalid", ResultScalars(), f"malformed JSON: {msg}{where}")
        if not isinstance(loaded, dict):
            return ScanResult("invalid", ResultScalars(), "JSON top level is not an object")
        fields = loaded
    else:
        _scan_pairs(head_text, fields)
        _scan_pairs(tail_text, fields)
        errors = _scan_errors(head_text if head_is_whole else tail_text)
        if errors is not None:
            fields["errors"] = errors
    if not head_is_whole:
        # Once the latency block (written after every string) is in the tail, a final "}" can
        # only be the real end, whatever value precedes it.
        closed = _CLOSED_END.search(tail_text[-(_MAX_STR * 4 + 256) :]) is not None or (
            tail_text.rstrip().endswith("}") and any(_LATENCY_KEY.match(k) for k in fields)
        )

    scalars = _scalars_from(fields)
    if not closed:
        return ScanResult(
            "incomplete", scalars, f"no closing brace after {size} bytes: still being written or truncated"
        )
    missing = _missing_fields(scalars)
    if missing:
        reason = "missing field(s): " + ", ".join(missing)
        if not head_is_whole and _HEAD_MARKER not in head:
            reason += f' (the first {len(head)} bytes end before "input_lens")'
        return ScanResult("invalid", scalars, reason)
    gate = _validity_reason(scalars)
    if gate is not None:
        return ScanResult("invalid", scalars, gate)
    return ScanResult("done", scalars)


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


# --------------------------------------------------------------------------- benchmark.out

_SA_RUNNING = re.compile(r"Running benchmark with concurrency:\s*(\d+)")
_SA_COMPLETED = re.compile(r"Completed benchmark with concurrency:\s*(\d+)")
_MAX_CONCURRENCY = re.compile(r"Maximum request concurrency:\s*(\d+)")
_RESULT_BLOCK_END = re.compile(r"^={20,}\s*$", re.MULTILINE)


def running_concurrency(benchmark_out: str) -> int | None:
    """The concurrency being measured according to benchmark.out text (or its tail).

    sa-bench brackets each measured run with ``Running benchmark with concurrency: C`` and
    ``Completed benchmark with concurrency: C``. Without those markers (InferenceX custom
    benchmark), the last ``Maximum request concurrency: C`` not yet followed by the closing
    ``=====`` line of a result block is running.
    """
    runs = list(_SA_RUNNING.finditer(benchmark_out))
    if runs:
        last = runs[-1]
        conc = int(last.group(1))
        for done in _SA_COMPLETED.finditer(benchmark_out, last.end()):
            if int(done.group(1)) == conc:
                return None
        return conc
    maxes = list(_MAX_CONCURRENCY.finditer(benchmark_out))
    if not maxes:
        return None
    last = maxes[-1]
    if _RESULT_BLOCK_END.search(benchmark_out, last.end()):
        return None
    return int(last.group(1))


# --------------------------------------------------------------------------- small JSON files


def _load_small_json(data: bytes | str) -> tuple[Any, ScanStatus, str | None]:
    """Parse a small JSON document; classify failures as truncated (incomplete) or invalid."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    stripped = text.strip()
    if not stripped:
        return None, "incomplete", "empty file (still being written?)"
    if "\x00" in stripped:
        return None, "invalid", "contains NUL bytes: binary or corrupted data"
    try:
        return json.loads(stripped), "done", None
    except ValueError as exc:
        msg = getattr(exc, "msg", str(exc))
        pos = getattr(exc, "pos", None)
        where = f" at byte {pos}" if pos is not None else ""
        # An opened but never closed document is a file cut short, not a different format.
        if stripped[0] in "{[" and _cut_short(stripped):
            return None, "incomplete", f"truncated JSON ({msg}{where})"
        return None, "invalid", f"malformed JSON: {msg}{where}"


def _read_small(path: Path | str) -> tuple[bytes | None, str | None]:
    try:
        with open(path, "rb") as f:
            data = f.read(_SMALL_JSON_LIMIT + 1)
    except OSError as exc:
        return None, f"cannot read {path}: {exc.strerror or exc}"
    if len(data) > _SMALL_JSON_LIMIT:
        return None, f"{path} is larger than {_SMALL_JSON_LIMIT} bytes"
    return data, None


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
    loaded, status, reason = _load_small_json(data)
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
                    concurrency=_as_int(row.get("concurrency")),
                    output_tok_s=_as_float(row.get("throughput_toks")),
                    request_throughput=_as_float(row.get("request_throughput")),
                    ttft_mean_ms=_as_float(row.get("ttft_mean_ms")),
                    ttft_p99_ms=_as_float(row.get("ttft_p99_ms")),
                    tpot_mean_ms=_as_float(row.get("tpot_mean_ms")),
                    tpot_p99_ms=_as_float(row.get("tpot_p99_ms")),
                    itl_mean_ms=_as_float(row.get("itl_mean_ms")),
                    itl_p99_ms=_as_float(row.get("itl_p99_ms")),
                    e2el_mean_ms=_as_float(row.get("e2el_mean_ms")),
                    completed=_as_int(row.get("completed_requests")),
                    total_input_tokens=_as_int(row.get("total_input_tokens")),
                    total_output_tokens=_as_int(row.get("total_output_tokens")),
                )
            )
    elif rows is not None:
        return Rollup("invalid", "rollup 'runs' is not a list")
    return Rollup(
        "done",
        None,
        benchmark_type=_as_str(loaded.get("benchmark_type")),
        timestamp=_as_str(loaded.get("timestamp")),
        model=_as_str(config.get("model")),
        isl=_as_int(config.get("isl")),
        osl=_as_int(config.get("osl")),
        runs=tuple(runs),
    )


def read_rollup(path: Path | str) -> Rollup:
    """Read and parse a local ``benchmark-rollup.json``. Never raises."""
    data, error = _read_small(path)
    if data is None:
        return Rollup("invalid", error)
    return parse_rollup(data)


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
    x, y = _as_int(a), _as_int(b)
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
    loaded, status, reason = _load_small_json(data)
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
        job_name=_as_str(loaded.get("job_name")),
        gpu_type=_as_str(resources.get("gpu_type")),
        backend_type=_as_str(loaded.get("backend_type")),
        frontend_type=_as_str(loaded.get("frontend_type")),
        benchmark_type=_as_str(benchmark.get("type")),
        isl=_as_int(benchmark.get("isl")),
        osl=_as_int(benchmark.get("osl")),
        prefill_gpus=prefill,
        decode_gpus=decode,
        agg_gpus=agg,
        total_gpus=total_gpus(resources),
    )


def read_job_metadata(path: Path | str) -> JobMetadata:
    """Read and parse a local ``<JOBID>.json``. Never raises."""
    data, error = _read_small(path)
    if data is None:
        return JobMetadata("invalid", error)
    return parse_job_metadata(data)
