"""Messages the UI posts between its widgets and workers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual.message import Message

from console.model import Recipe


@dataclass
class RecipesLoaded(Message):
    """A fresh load of the recipe library (at start, on `r`, or after files changed)."""

    recipes: list[Recipe]
    roots: list[Path]


@dataclass
class RecipeSelected(Message):
    """The operator moved to a recipe file in the tree."""

    recipe: Recipe
