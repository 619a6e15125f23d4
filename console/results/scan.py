"""Result files' bytes: the head and tail window of a file, and the scalar fields scanned from them.

Result files written by benchmark_serving reach hundreds of MB because of their per-request
arrays (``input_lens``, ``itls``, ``generated_texts`` ...). Every scalar needed sits either
before ``"input_lens"`` or after ``"errors"``, so a file is never loaded whole: only a head and
a tail window are read, and the same bytes can come from a local seek or from a remote agent.

Nothing here raises on bad input: truncated, empty, binary or non-JSON data becomes a status
(``incomplete`` or ``invalid``) with a reason that names what is wrong.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.agent import open_regular
from console.results.fields import MAX_STR as _MAX_STR
from console.results.fields import ScanStatus, as_float, as_int, as_str, cut_short, out_of_range

DEFAULT_HEAD_BYTES = 16 * 1024
DEFAULT_TAIL_BYTES = 16 * 1024
# The same threshold InferenceX's benchmark_serving uses to exit non-zero.
FAILED_REQUESTS_LIMIT = 0.05
METRICS = ("ttft", "tpot", "itl", "e2el")

HEAD_MARKER = b'"input_lens"'
_READ_CHUNK = 4096


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
    # A regular file only: a FIFO or device never blocks the reader.
    with os.fdopen(open_regular(str(path)), "rb") as f:
        head = bytearray()
        eof = False
        while len(head) < head_bytes:
            chunk = f.read(min(_READ_CHUNK, head_bytes - len(head)))
            if not chunk:
                eof = True
                break
            start = max(0, len(head) - len(HEAD_MARKER))
            head += chunk
            if head.find(HEAD_MARKER, start) >= 0:
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


def _latency_from(fields: Mapping[str, Any], metric: str) -> LatencyStats:
    values: dict[str, float | None] = {}
    for key, raw in fields.items():
        m = _LATENCY_KEY.match(key)
        if m is None or m.group("m") != metric:
            continue
        stat = m.group("stat").replace(".", "_")
        if stat in {"mean", "median", "std", "p90", "p99", "p99_9"}:
            values[stat] = as_float(raw)
    # Old benchmark_serving versions wrote ``percentiles_<m>_ms: [[99, value], ...]``.
    legacy = fields.get(f"percentiles_{metric}_ms")
    if isinstance(legacy, list):
        for pair in legacy:
            if isinstance(pair, list) and len(pair) == 2:
                p = as_float(pair[0])
                name = {90.0: "p90", 99.0: "p99", 99.9: "p99_9"}.get(p if p is not None else -1.0)
                if name is not None and values.get(name) is None:
                    values[name] = as_float(pair[1])
    return LatencyStats(**values)


def _scalars_from(fields: Mapping[str, Any]) -> ResultScalars:
    goodput = fields.get("request_goodput")
    if goodput is None:
        goodput = fields.get("request_goodput:")  # InferenceX's misspelt key
    errors = fields.get("errors")
    errors_failed = sum(1 for e in errors if e not in (None, "")) if isinstance(errors, list) else None
    return ResultScalars(
        date=as_str(fields.get("date")),
        backend=as_str(fields.get("backend")),
        model_id=as_str(fields.get("model_id")),
        num_prompts=as_int(fields.get("num_prompts")),
        max_concurrency=as_int(fields.get("max_concurrency")),
        duration=as_float(fields.get("duration")),
        completed=as_int(fields.get("completed")),
        total_input_tokens=as_int(fields.get("total_input_tokens")),
        total_output_tokens=as_int(fields.get("total_output_tokens")),
        request_throughput=as_float(fields.get("request_throughput")),
        request_goodput=as_float(goodput),
        output_throughput=as_float(fields.get("output_throughput")),
        total_token_throughput=as_float(fields.get("total_token_throughput")),
        peak_output_tokens_per_s=as_float(fields.get("peak_output_tokens_per_s")),
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
    closed = head_is_whole and not cut_short(head_text)
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

    huge = sorted(k for k, v in fields.items() if out_of_range(v))
    if huge:
        return ScanResult("invalid", ResultScalars(), "number out of range in " + ", ".join(huge[:5]))
    scalars = _scalars_from(fields)
    if not closed:
        return ScanResult(
            "incomplete", scalars, f"no closing brace after {size} bytes: still being written or truncated"
        )
    missing = _missing_fields(scalars)
    if missing:
        reason = "missing field(s): " + ", ".join(missing)
        if not head_is_whole and HEAD_MARKER not in head:
            reason += f' (the first {len(head)} bytes end before "input_lens")'
        return ScanResult("invalid", scalars, reason)
    gate = _validity_reason(scalars)
    if gate is not None:
        return ScanResult("invalid", scalars, gate)
    return ScanResult("done", scalars)
