"""Confirm dialogs: launch, cancel. Each says exactly what will happen before it happens."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Select, Static

from console.clusters import Profile
from console.describe import arm_facts, grid_label, shown, topology_label
from console.launch_plan import ArmPlan
from console.model import Arm
from console.transport.base import TransportError

PlanChecker = Callable[[str], Awaitable[list[ArmPlan]]]
"""The checks of a launch on a cluster (pin checks against its checkout), by cluster name."""


class LaunchDialog(ModalScreen[str | None]):
    """Pick a cluster and confirm; dismisses with the cluster name, or None."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,n", "dismiss_none", "Cancel"),
        Binding("y", "confirm", "Launch"),
    ]

    def __init__(
        self,
        title: str,
        arms: list[Arm],
        profiles: dict[str, Profile],
        default: str,
        checker: PlanChecker | None = None,
    ) -> None:
        super().__init__()
        self.heading = title
        self.arms = arms
        self.profiles = profiles
        self.default = default
        self.checker = checker
        self.blocking = False

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(Text(self.heading), id="dialog-title")
            yield Select(
                [(f"{p.name}  ({p.where}, {p.launcher})", p.name) for p in self.profiles.values()],
                value=self.default,
                allow_blank=False,
                id="cluster",
            )
            yield Static(self._plan(), id="plan")
            yield Static(Text("checking the cluster's checkout…" if self.checker else ""), id="pins")
            with Horizontal(id="buttons"):
                yield Button("Launch (y)", variant="primary", id="launch")
                yield Button("Cancel (n)", id="cancel")

    def _plan(self) -> Text:
        nodes = sum(a.topology.node_demand for a in self.arms)
        text = Text(f"{len(self.arms)} arm(s), {nodes} node(s) in all:\n", style="bold")
        for arm in self.arms:
            text.append(f"  {shown(arm.name)}\n")
            text.append(
                f"    {topology_label(arm.topology)} · {arm.topology.node_demand} node(s) · "
                f"{arm_facts(arm)} · points {grid_label(arm.concurrencies)}\n",
                style="dim",
            )
        text.rstrip()
        return text

    def on_mount(self) -> None:
        self._check(self.default)

    def on_select_changed(self, event: Select.Changed) -> None:
        if isinstance(event.value, str):
            self._check(event.value)

    def _check(self, cluster: str) -> None:
        if self.checker is not None:
            self.run_worker(self._run_checks(cluster), exclusive=True, group="pins", exit_on_error=False)

    async def _run_checks(self, cluster: str) -> None:
        assert self.checker is not None
        try:
            plans = await self.checker(cluster)
        except (TransportError, OSError) as exc:
            self._show_pins(Text(f"pins not checked: cannot reach {cluster}: {exc}"), blocking=False)
            return
        text = Text()
        for plan in plans:
            for problem in plan.pin_problems:
                mark = "✗ " if problem.blocking else "! "
                text.append(mark + plan.arm.name + ": " + "\n    ".join(problem.lines()) + "\n",
                            style="bold" if problem.blocking else "")  # fmt: skip
            if plan.verdict == "unchecked":
                text.append(f"! {plan.arm.name}: pins not checked: {plan.detail}\n")
        if not text.plain:
            text.append("✓ pins: the checkout runs what the recipe and profile state" if plans and self._srtctl(cluster)
                        else "")  # fmt: skip
        text.rstrip()
        self._show_pins(text, blocking=any(p.blocking for p in plans))

    def _srtctl(self, cluster: str) -> bool:
        profile = self.profiles.get(cluster)
        return profile is not None and profile.launcher == "srtctl"

    def _show_pins(self, text: Text, *, blocking: bool) -> None:
        self.blocking = blocking
        self.query_one("#pins", Static).update(text)
        button = self.query_one("#launch", Button)
        button.label = "Launch anyway (y)" if blocking else "Launch (y)"
        button.variant = "error" if blocking else "primary"

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "launch":
            self.action_confirm()
        else:
            self.dismiss(None)

    def action_confirm(self) -> None:
        value = self.query_one(Select).value
        self.dismiss(str(value) if isinstance(value, str) else self.default)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


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
