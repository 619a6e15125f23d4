"""srtctl recipes: load, validate, expand into arms, and derive each arm's topology.

The loader and the schemas are imported when first named: a profile's `srtctl_flavour` or
the recipe spec types do not bring the whole loader with them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from console.recipes.expand import deep_merge, parse_concurrencies
    from console.recipes.loader import load_recipe, load_targets, recipe_files, split_target
    from console.recipes.topology import DEFAULT_GPUS_PER_NODE

_LAZY = {
    "DEFAULT_GPUS_PER_NODE": "console.recipes.topology",
    "deep_merge": "console.recipes.expand",
    "load_recipe": "console.recipes.loader",
    "load_targets": "console.recipes.loader",
    "parse_concurrencies": "console.recipes.expand",
    "recipe_files": "console.recipes.loader",
    "split_target": "console.recipes.loader",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_GPUS_PER_NODE",
    "deep_merge",
    "load_recipe",
    "load_targets",
    "parse_concurrencies",
    "recipe_files",
    "split_target",
]
