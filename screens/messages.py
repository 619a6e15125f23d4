"""Messages the UI posts between its widgets and workers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual.message import Message

from console.model import Recipe
from console.store import AttemptRow


@dataclass
class RecipesLoaded(Message):
    """A fresh load of the recipe library (at start, on `r`, or after files changed)."""

    recipes: list[Recipe]
    roots: list[Path]


@dataclass
class RecipeSelected(Message):
    """The operator moved to a recipe file in the tree."""

    recipe: Recipe


@dataclass
class AttemptUpdated(Message):
    """The engine recorded a new state for an attempt (or a new attempt)."""

    attempt: AttemptRow


@dataclass
class ClusterStatusChanged(Message):
    """A cluster's connection changed ("connected", "disconnected, retrying ...")."""

    cluster: str
    status: str
