"""srtctl recipes: load, validate, expand into arms, and derive each arm's topology."""

from console.recipes.expand import deep_merge, parse_concurrencies
from console.recipes.loader import load_recipe, load_targets, recipe_files, split_target
from console.recipes.topology import DEFAULT_GPUS_PER_NODE

__all__ = [
    "DEFAULT_GPUS_PER_NODE",
    "deep_merge",
    "load_recipe",
    "load_targets",
    "parse_concurrencies",
    "recipe_files",
    "split_target",
]
