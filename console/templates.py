"""Line templates: what a log line says once its numbers, addresses, ids and times are masked.

Two lines that differ only in a timestamp, a port, a rank, a request id or a size have the same
template, so the error-level lines of one attempt can be compared with those of a healthy
attempt of the same arm (or engine): a template the healthy run never wrote is novel::

    line_template("[2026-08-21 10:02:11 TP3] Prefill transfer failed for rid=ab12cd34 on 10.0.0.7:5557")
    # -> "Prefill transfer failed for rid=<id> on <addr>"
    is_error_level("ERROR 10-15 08:32:29 [core.py:708] EngineCore failed to start.")  # True

Error-level means a log level of ERROR, FATAL or CRITICAL however the writer spells it (vLLM,
Python logging, glog ``E0603``, TensorRT-LLM ``[E]``, Rust ``tracing``, ``level=error``,
``srun: error:``) or an exception line (``SomethingError: ...``). The log agent forwards the
lines this can find (:data:`ERROR_HINT_LITERALS`). The catalog's ``error_lines`` are the same
idea as data an operator can extend, for family matches (see ``assets/signatures.yaml``).
"""

from __future__ import annotations

import re
from typing import Final

from console.signatures import strip_prefixes

__all__ = ["ERROR_HINT_LINE_STARTS", "ERROR_HINT_LITERALS", "MAX_TEMPLATE_CHARS", "is_error_level", "line_template"]

MAX_TEMPLATE_CHARS: Final[int] = 240
"""A template keeps this much of the masked message (a long line's head says what it is)."""

# One cheap scan before the exact checks: most lines hold none of these.
_ERROR_HINT: Final = re.compile(r"ERROR|FATAL|CRITICAL|\[E\]|rror|xception|^[EF]\d{4} |level=(?:error|fatal)|: error:")
ERROR_HINT_LITERALS: Final[tuple[str, ...]] = ("rror", "fatal", "critical", "[e]", "xception")
"""Literals, in any case, one of which is in every line the hint finds but at its start (a
line without them and without :data:`ERROR_HINT_LINE_STARTS` is never error-level)."""
ERROR_HINT_LINE_STARTS: Final[tuple[bytes, ...]] = (rb"[EF][0-9]{4} ",)
"""The hint's patterns anchored at a line's start (glog's ``E0603 ``)."""
_ERROR_LEVEL: Final = re.compile(
    r"(?<![\w\-./])(?:ERROR|FATAL|CRITICAL)(?![\w\-])"  # a level word (vLLM, logging, tracing, srtctl)
    r"|^[EF]\d{4} \d\d:\d\d:\d\d"  # glog
    r"|\[E\]"  # TensorRT-LLM
    r"|\blevel=(?:error|fatal)\b"
    r"|\b(?:srun|slurmstepd(?:-[\w.\-]{1,60})?|sbatch|salloc): error:"
)
_EXCEPTION_LINE: Final = re.compile(
    r"^(?:[A-Za-z_]\w{0,60}\.){0,8}[A-Z]\w{0,80}(?:Error|Exception)(?:\([\w.]{1,80}\))?: \S"
)

_MASKS: Final = (
    # times and dates first: they hold numbers the later masks would split
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?"), "<time>"),
    (re.compile(r"(?<!\d)\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?!\d)"), "<time>"),
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<id>"),
    (re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d{1,5})?\b|\[[0-9a-fA-F:]{2,45}\](?::\d{1,5})?"), "<addr>"),
    (re.compile(r"\b0x[0-9a-fA-F]{1,16}\b"), "<hex>"),
    # words holding digits: ids, hosts, ranks (node-01, rank7, chatcmpl-9dd4bb6a, TP3)
    (re.compile(r"\b[\w\-]*\d[\w\-]*\b"), "<n>"),
)
_SPACES: Final = re.compile(r"\s+")


def is_error_level(line: str) -> bool:
    """Whether the line is written at an error level or states an exception."""
    if _ERROR_HINT.search(line) is None:
        return False
    if _ERROR_LEVEL.search(line) is not None:
        return True
    body = strip_prefixes(line)[0].lstrip()
    return _EXCEPTION_LINE.match(body) is not None


def line_template(line: str) -> str:
    """The line's message without its prefixes, numbers, addresses, ids and times masked."""
    body = strip_prefixes(line)[0]
    for pattern, mark in _MASKS:
        body = pattern.sub(mark, body)
    return _SPACES.sub(" ", body).strip()[:MAX_TEMPLATE_CHARS]
