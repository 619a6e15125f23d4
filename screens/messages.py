"""Messages the UI posts between its widgets, workers and screens."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual.message import Message
from textual.message_pump import MessagePump
from textual.worker import Worker, WorkerState

from console.events import CoreEvent
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


@dataclass
class LaunchRequested(Message):
    """The operator confirmed a launch of ``recipes`` (one sweep) on ``cluster`` (the app submits it)."""

    recipes: list[Recipe]
    cluster: str
    name: str | None = None


class CoreUpdate(Message):
    """One of the core's own events (``console.events``), as the engine or the monitor emitted it.

    The app posts one to every screen on the stack; each screen picks the events it shows.
    """

    def __init__(self, event: CoreEvent) -> None:
        super().__init__()
        self.event = event


class WorkerFailed(Message):
    """A background task (a Textual worker) of a screen or widget ended in error."""

    def __init__(self, worker: Worker[Any]) -> None:
        super().__init__()
        self.worker = worker


class ReportsWorkerErrors:
    """Mixed into every screen and widget that runs workers: one that ends in error is sent up
    to the app, which shows it (a worker's own state messages do not bubble)."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR and isinstance(self, MessagePump):
            self.post_message(WorkerFailed(event.worker))
