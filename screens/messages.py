"""Messages the UI posts between its widgets and workers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual.message import Message

from console.diagnosis import Diagnosis, Observation
from console.model import Recipe
from console.results import PointResult
from console.stages import StageSnapshot
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


@dataclass
class LogLinesArrived(Message):
    """New lines of one of an attempt's files (already matched: `findings` are among them)."""

    attempt_id: int
    file: str
    first_line_no: int
    lines: list[str]
    findings: list[Observation]


@dataclass
class TriageUpdated(Message):
    """An attempt's diagnosis, stages or findings changed."""

    attempt_id: int
    diagnosis: Diagnosis
    snapshot: StageSnapshot
    new_findings: list[Observation]


@dataclass
class PointUpdated(Message):
    """A concurrency point's result file appeared or grew."""

    attempt_id: int
    point: PointResult
