"""An arm's concurrency grid in its resolved config: which points it runs, and a copy that runs only some."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from console.recipes import parse_concurrencies


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _grid_location(config: Mapping[str, Any]) -> tuple[str, Any]:
    """Where the grid lives: ``("env", raw)`` for a custom benchmark's CONCURRENCIES, else ``("bench", raw)``."""
    bench = _map(config.get("benchmark"))
    env = _map(bench.get("env"))
    if bench.get("concurrencies") is None and bench.get("type") == "custom" and "CONCURRENCIES" in env:
        return "env", env["CONCURRENCIES"]
    return "bench", bench.get("concurrencies")


def grid_of(config: Mapping[str, Any]) -> list[int]:
    """The concurrency points a resolved config runs (empty when it has none)."""
    _, raw = _grid_location(config)
    try:
        return parse_concurrencies(raw) if raw is not None else []
    except ValueError:
        return []


def derive_missing(config: Mapping[str, Any], missing: Sequence[int]) -> dict[str, Any]:
    """A copy of ``config`` whose points are exactly ``missing``; everything else identical.

    sa-bench (and any benchmark with ``benchmark.concurrencies``) gets its list there, in the
    form it had (a list stays a list, a string becomes ``"AxB"``); a custom (InferenceX)
    benchmark keeps its grid in ``benchmark.env.CONCURRENCIES`` as ``"AxB"``.
    """
    points = [int(c) for c in missing]
    if not points:
        raise ValueError("no points to derive a config for")
    if any(c < 1 for c in points) or len(set(points)) != len(points):
        raise ValueError(f"not a list of distinct concurrencies: {points}")
    derived = copy.deepcopy(dict(config))
    bench = derived.get("benchmark")
    if not isinstance(bench, dict):
        raise ValueError("the config has no benchmark section to hold the points")
    where, raw = _grid_location(derived)
    text = "x".join(str(c) for c in points)
    if where == "env":
        bench["env"]["CONCURRENCIES"] = text
    else:
        bench["concurrencies"] = points if isinstance(raw, list) else text
    return derived


def config_grid(config_yaml: str) -> list[int]:
    """The grid of a stored config's YAML text (empty when it does not load)."""
    try:
        data = yaml.safe_load(config_yaml)
    except yaml.YAMLError:
        return []
    return grid_of(data) if isinstance(data, dict) else []
