"""Dialogs: confirm (cancel, rerun), a folder to export to, every failed arm of a sweep, a text to
read; the launch dialog has its own module. Each says exactly what will happen before it happens."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from console.rerun import SweepRerun
from console.sanitize import clean_line
from screens.launch_dialog import LaunchDialog

__all__ = ["ConfirmDialog", "InfoDialog", "LaunchDialog", "PathDialog", "SweepRerunDialog"]


class ConfirmDialog(ModalScreen[bool]):
    """A yes/no question with the consequences spelled out."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,n", "answer(False)", "No"),
        Binding("y", "answer(True)", "Yes"),
    ]

    def __init__(self, title: str, body: str, yes: str = "Yes (y)") -> None:
        super().__init__()
        self.heading = title
        self.body = body
        self.yes = yes

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(Text(self.heading), id="dialog-title")
            yield Static(Text(self.body), id="plan")
            with Horizontal(id="buttons"):
                yield Button(self.yes, variant="error", id="yes")
                yield Button("No (n)", id="no")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


class PathDialog(ModalScreen[str | None]):
    """Ask for a folder, with a default shown and editable; dismisses with it, or None."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", "Cancel")]

    def __init__(self, title: str, body: str, default: str, action: str = "Export") -> None:
        super().__init__()
        self.heading = title
        self.body = body
        self.default = default
        self.action = action

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(Text(self.heading), id="dialog-title")
            yield Static(Text(self.body), id="plan")
            yield Input(self.default, id="path")
            with Horizontal(id="buttons"):
                yield Button(f"{self.action} (enter)", variant="primary", id="ok")
                yield Button("Cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or self.default)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(self.query_one(Input).value.strip() or self.default if event.button.id == "ok" else None)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class SweepRerunDialog(ModalScreen[str | None]):
    """Every failed arm of a sweep: what will and will not be submitted, and why. Dismisses with
    "submit", "toggle" (include or leave out deterministic failures) or None."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,n", "answer(None)", "Cancel"),
        Binding("y", "answer('submit')", "Submit"),
        Binding("d", "answer('toggle')", "Deterministic too"),
    ]

    def __init__(self, plan: SweepRerun) -> None:
        super().__init__()
        self.plan = plan

    def compose(self) -> ComposeResult:
        plan = self.plan
        with Vertical(id="dialog"):
            yield Label(Text(f"Rerun every failed arm of s{plan.sweep_id}?"), id="dialog-title")
            body = "\n".join(clean_line(line, 400) for line in plan.describe().splitlines())
            yield Static(Text(body), id="plan")
            toggle = "leave out" if plan.include_deterministic else "include"
            with Horizontal(id="buttons"):
                if plan.plans:
                    yield Button(f"Submit {len(plan.plans)} (y)", variant="error", id="submit")
                yield Button(f"d: {toggle} deterministic failures", id="toggle")
                yield Button("Cancel (n)", id="cancel")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id if event.button.id in ("submit", "toggle") else None)

    def action_answer(self, answer: str | None) -> None:
        if answer == "submit" and not self.plan.plans:
            self.notify("Nothing to submit", severity="warning")
            return
        self.dismiss(answer)


class InfoDialog(ModalScreen[None]):
    """Text to read (cleaned of terminal controls), scrollable; any of Esc, q, Enter closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,enter", "dismiss_none", "Close")]

    def __init__(self, title: str, body: str) -> None:
        super().__init__()
        self.heading = title
        self.body = body

    def compose(self) -> ComposeResult:
        from textual.containers import VerticalScroll

        from console.sanitize import clean_line

        with Vertical(id="dialog"):
            yield Label(Text(self.heading), id="dialog-title")
            with VerticalScroll(id="info"):
                yield Static(Text("\n".join(clean_line(line, 400) for line in self.body.splitlines())))
            with Horizontal(id="buttons"):
                yield Button("Close (esc)", id="close")

    def on_button_pressed(self) -> None:
        self.dismiss(None)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
