"""What a recipe pins: container image, commits and versions, from fields, env and comments."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from console.model import Pin

_PIN_KEY = re.compile(r"(COMMIT|SHA|REVISION|_REV|_REF|VERSION|IMAGE|_TAG)$", re.IGNORECASE)
_FULL_SHA = re.compile(r"\b[0-9a-f]{40}\b")
# The srt-slurm commit a recipe needs: `# srt-slurm: <sha>` (a short id is enough).
_SRT_SLURM = re.compile(r"^\s*srt-slurm(?:\s+commit)?\s*[:=@]\s*([0-9a-f]{7,40})\b", re.IGNORECASE)
SRT_SLURM_PIN = "srt-slurm"
_SHORT_SHA = re.compile(r"\b(?:commit|sha|rev|revision|pin(?:ned)?|@)\s*[:=]?\s*([0-9a-f]{7,39})\b", re.IGNORECASE)


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _env_blocks(config: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    yield "environment", _map(config.get("environment"))
    backend = _map(config.get("backend"))
    for key in ("prefill_environment", "decode_environment", "aggregated_environment"):
        yield f"backend.{key}", _map(backend.get(key))
    yield "benchmark.env", _map(_map(config.get("benchmark")).get("env"))
    yield "frontend.env", _map(_map(config.get("frontend")).get("env"))
    for name, role in _map(config.get("roles")).items():
        yield f"roles.{name}.env", _map(_map(role).get("env"))


def config_pins(config: dict[str, Any]) -> list[Pin]:
    pins: list[Pin] = []
    model = _map(config.get("model"))
    if isinstance(model.get("container"), str):
        pins.append(Pin("container", model["container"], "model.container"))
    dynamo = _map(config.get("dynamo"))
    for key in ("hash", "version", "wheel"):
        if dynamo.get(key) is not None:
            pins.append(Pin(f"dynamo {key}", str(dynamo[key]), f"dynamo.{key}"))
    bench = _map(config.get("benchmark"))
    if isinstance(bench.get("container_image"), str):
        pins.append(Pin("benchmark container", bench["container_image"], "benchmark.container_image"))
    identity = _map(config.get("identity"))
    for section, values in identity.items():
        for key, value in _map(values).items():
            if isinstance(value, str | int | float):
                pins.append(Pin(f"identity {section}.{key}", str(value), f"identity.{section}.{key}"))
    seen: set[tuple[str, str]] = set()
    for where, env in _env_blocks(config):
        for key, value in env.items():
            if _PIN_KEY.search(str(key)) and value not in (None, "") and (key, str(value)) not in seen:
                seen.add((str(key), str(value)))
                pins.append(Pin(str(key), str(value), f"{where}.{key}"))
    return pins


def comment_pins(text: str) -> list[Pin]:
    """Commits written in comments (`# ATOM commit 4e08...`), which srtctl never sees."""
    pins: list[Pin] = []
    for number, line in enumerate(text.splitlines(), start=1):
        hash_at = line.find("#")
        if hash_at < 0:
            continue
        comment = line[hash_at + 1 :]
        required = _SRT_SLURM.match(comment)
        if required:
            pins.append(Pin(SRT_SLURM_PIN, required.group(1).lower(), f"comment line {number}"))
            continue
        found = _FULL_SHA.search(comment)
        value = found.group(0) if found else None
        if value is None:
            short = _SHORT_SHA.search(comment)
            value = short.group(1) if short else None
        if value is None:
            continue
        label = comment[: comment.find(value)].strip(" :=@-").strip() or "commit"
        pins.append(Pin(label[:60], value, f"comment line {number}"))
    return pins
