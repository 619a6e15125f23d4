"""Tolerant readers of JSON values, shared by the result, rollup and metadata parsers: a wrong
type or a non-finite number becomes ``None``, a document cut short is told from a malformed one."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Literal

ScanStatus = Literal["done", "incomplete", "invalid"]

# Rollup and metadata files are small; anything far larger is not one of them.
SMALL_JSON_LIMIT = 8 * 1024 * 1024
MAX_STR = 512


def cut_short(text: str) -> bool:
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


def as_float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        result = float(value)
    except OverflowError:  # an integer beyond any float
        return None
    return result if math.isfinite(result) else None


def out_of_range(value: Any) -> bool:
    """An integer too large for a float (a number no benchmark writes: a broken or hostile file)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    try:
        float(value)
    except OverflowError:
        return True
    return False


def as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def as_str(value: Any) -> str | None:
    return value[:MAX_STR] if isinstance(value, str) else None


def load_small_json(data: bytes | str) -> tuple[Any, ScanStatus, str | None]:
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
        if stripped[0] in "{[" and cut_short(stripped):
            return None, "incomplete", f"truncated JSON ({msg}{where})"
        return None, "invalid", f"malformed JSON: {msg}{where}"


def read_small(path: Path | str) -> tuple[bytes | None, str | None]:
    try:
        with open(path, "rb") as f:
            data = f.read(SMALL_JSON_LIMIT + 1)
    except OSError as exc:
        return None, f"cannot read {path}: {exc.strerror or exc}"
    if len(data) > SMALL_JSON_LIMIT:
        return None, f"{path} is larger than {SMALL_JSON_LIMIT} bytes"
    return data, None
