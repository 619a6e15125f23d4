"""The launch dialog: which cluster, and for each arm exactly what will be submitted.

Per arm it shows the topology, node demand and points, the scheduling values the job will get
and where each comes from (recipe, profile, srtslurm.yaml), the cluster's own `srtctl dry-run`
verdict (refused / header differs / agrees), and any problems of the arm. The plan comes from
``console.launch_plan`` in a worker, so the dialog never waits on the cluster; picking another
cluster checks the recipes again for the srtctl flavour of its profile and plans again. `p`
runs `srtctl preflight` of every arm. The dialog dismisses with (cluster, recipes as checked).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Select, Static

from console.describe import arm_facts, grid_label, shown, topology_label
from console.launch_plan import ArmPlan, settings_label
from console.model import Arm, Recipe
from console.recipes import load_recipe
from console.recipes.flavours import describe
from console.sanitize import clean_line
from console.session import Session
from screens.messages import ReportsWorkerErrors

Launch = tuple[str, list[Recipe]]
"""What the dialog dismisses with: the cluster, and the recipes as checked for it."""


@dataclass
class ArmCheck:
    """What the dialog knows of one arm: the plan (None while it is being made), preflight's word."""

    arm: Arm
    plan: ArmPlan | None = None
    preflight: tuple[bool, str] | None = None
    problems: list[str] = field(default_factory=list)


def arm_problems(check: ArmCheck) -> list[str]:
    """Everything wrong with one arm, one line each: srtctl's refusal or a header that differs,
    a failed preflight, and any further checks of the arm (``check.problems``)."""
    lines = list(check.problems)
    plan = check.plan
    if plan is not None and plan.verdict in ("refused", "differs"):
        # Cleaned before it is split: a control sequence is removed whole, never cut in two.
        detail = " ".join(clean_line(line, 2000) for line in plan.detail.splitlines())
        lines += [d.strip() for d in detail.split("; ") if d.strip()] or [plan.verdict]
    if check.preflight is not None and not check.preflight[0]:
        lines.append(f"preflight: {_last_line(check.preflight[1]) or 'failed'}")
    # The cluster's words are untrusted: shown inert, one line each.
    return [clean_line(line, 600) for line in lines]


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return clean_line(lines[-1], 300) if lines else ""


_VERDICTS = {
    "ok": ("srtctl dry-run: agrees with the plan", "green"),
    "differs": ("srtctl dry-run: header differs", "yellow"),
    "refused": ("srtctl dry-run: REFUSED", "bold red"),
    "unchecked": ("srtctl dry-run: could not be run", "yellow"),
}


def arm_text(check: ArmCheck, launcher: str) -> Text:
    arm = check.arm
    text = Text()
    text.append(f"  {shown(arm.name)}\n", style="bold")
    text.append(
        f"    {topology_label(arm.topology)} · {arm.topology.node_demand} node(s) · {arm_facts(arm)}"
        f" · points {grid_label(arm.concurrencies)}\n",
        style="dim",
    )
    plan = check.plan
    if plan is None:
        text.append("    checking...\n", style="italic")
        return text
    if plan.settings:
        text.append(f"    {settings_label(plan.settings)}\n")
    if plan.dry_run is not None or plan.verdict != "ok":
        label, style = _VERDICTS.get(plan.verdict, (plan.verdict, ""))
        text.append(f"    {label}\n", style=style)
    elif launcher == "demo":
        text.append("    demo launcher: simulated (the demo engine, not hardware)\n", style="italic")
    if check.preflight is not None:
        ok, words = check.preflight
        last = _last_line(words)
        text.append(f"    preflight: {'passed' if ok else 'FAILED'}{': ' + last if last else ''}\n",
                    style="green" if ok else "bold red")  # fmt: skip
    for problem in arm_problems(check):
        text.append(f"    ✗ {problem}\n", style="red")
    return text


class LaunchDialog(ReportsWorkerErrors, ModalScreen[Launch | None]):
    """Pick a cluster and confirm; dismisses with (cluster, recipes), or None."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,n", "dismiss_none", "Cancel"),
        Binding("y", "confirm", "Launch"),
        Binding("p", "preflight", "Preflight"),
    ]

    def __init__(self, title: str, recipes: list[Recipe], session: Session, default: str) -> None:
        super().__init__()
        self.heading = title
        self.recipes = recipes
        self.session = session
        self.cluster = default if default in session.profiles else next(iter(session.profiles))
        self.checks: list[ArmCheck] = [ArmCheck(a) for r in recipes for a in r.arms]
        self.planned = False  # the plan for the current cluster is complete

    @property
    def arms(self) -> list[Arm]:
        return [c.arm for c in self.checks]

    def compose(self) -> ComposeResult:
        profiles = self.session.profiles
        with Vertical(id="dialog"):
            yield Label(Text(self.heading), id="dialog-title")
            yield Select(
                [(f"{p.name}  ({p.where}, {p.launcher})", p.name) for p in profiles.values()],
                value=self.cluster,
                allow_blank=False,
                id="cluster",
            )
            with VerticalScroll(id="plan-scroll"):
                yield Static(self._plan(), id="plan")
                yield Static(Text(""), id="pins")
            with Horizontal(id="buttons"):
                yield Button("Launch (y)", variant="primary", id="launch")
                yield Button("Preflight (p)", id="preflight")
                yield Button("Cancel (n)", id="cancel")

    def on_mount(self) -> None:
        self.check(self.cluster)

    # --- what will be submitted ---------------------------------------------------------

    def _problems(self) -> list[str]:
        """The recipes' own problems for the chosen cluster's srtctl (errors block the launch)."""
        return [str(p) for r in self.recipes for p in r.problems]

    def _plan(self) -> Text:
        profile = self.session.profiles[self.cluster]
        nodes = sum(a.topology.node_demand for a in self.arms)
        text = Text(f"{len(self.checks)} arm(s), {nodes} node(s) in all, on {profile.name} "
                    f"({profile.launcher} launcher)", style="bold")  # fmt: skip
        text.append(f"\n{describe(profile.flavour())}\n", style="dim")
        errors = {str(p) for r in self.recipes for p in r.errors}
        for problem in self._problems():
            bad = problem in errors
            text.append(f"  {'✗' if bad else '!'} {problem}\n", style="red" if bad else "yellow")
        for check in self.checks:
            text.append_text(arm_text(check, profile.launcher))
        if not self.planned:
            text.append("\nasking the cluster (the dialog can be used meanwhile)...", style="italic")
        text.rstrip()
        return text

    def _pins(self) -> Text:
        """The checkout's pin checks per arm (blocking ones turn the button into Launch anyway)."""
        text = Text()
        plans = [c.plan for c in self.checks if c.plan is not None]
        for plan in plans:
            for problem in plan.pin_problems:
                mark = "✗ " if problem.blocking else "! "
                lines = [clean_line(line, 600) for line in problem.lines()]
                text.append(mark + shown(plan.arm.name) + ": " + "\n    ".join(lines) + "\n",
                            style="bold" if problem.blocking else "")  # fmt: skip
        if not text.plain and self.planned and plans and self.session.profiles[self.cluster].launcher == "srtctl":
            text.append("✓ pins: the checkout runs what the recipe and profile state")
        text.rstrip()
        return text

    def _pins_block(self) -> bool:
        return any(p.blocking for c in self.checks if c.plan is not None for p in c.plan.pin_problems)

    def _redraw(self) -> None:
        self.query_one("#plan", Static).update(self._plan())
        self.query_one("#pins", Static).update(self._pins())
        button = self.query_one("#launch", Button)
        blocking = self._pins_block()
        button.label = "Launch anyway (y)" if blocking else "Launch (y)"
        button.variant = "error" if blocking else "primary"

    @work(exclusive=True, group="launch-plan", exit_on_error=False)
    async def check(self, cluster: str) -> None:
        """Check the recipes for the cluster's srtctl flavour, then plan each arm (the dry-run)."""
        self.planned = False
        profile = self.session.profiles[cluster]
        flavour = profile.flavour()
        reloaded = [await _reload(r, flavour) for r in self.recipes]
        if cluster != self.cluster:
            return
        self.recipes = reloaded
        self.checks = [ArmCheck(a) for r in self.recipes for a in r.arms]
        self._redraw()
        if any(r.errors for r in self.recipes):
            self.planned = True
            self._redraw()
            return
        for check in self.checks:
            plans = await self.session.plan_launch(cluster, [check.arm])
            if cluster != self.cluster:
                return
            check.plan = plans[0]
            self._redraw()
        self.planned = True
        self._redraw()

    @on(Select.Changed, "#cluster")
    def _cluster_changed(self, event: Select.Changed) -> None:
        if isinstance(event.value, str) and event.value != self.cluster:
            self.cluster = event.value
            self.check(event.value)

    @work(exclusive=True, group="launch-preflight", exit_on_error=False)
    async def action_preflight(self) -> None:
        cluster = self.cluster
        for check in self.checks:
            check.preflight = None
        self.notify(f"srtctl preflight on {cluster}...", timeout=3)
        for check in self.checks:
            result = await self.session.preflight(cluster, check.arm)
            if cluster != self.cluster:
                return
            check.preflight = result
            self._redraw()

    # --- answers ------------------------------------------------------------------------

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "launch":
            self.action_confirm()
        elif event.button.id == "preflight":
            self.action_preflight()
        else:
            self.dismiss(None)

    def action_confirm(self) -> None:
        if any(r.errors for r in self.recipes):
            self.notify(f"The recipes have errors for {self.cluster}'s srtctl: nothing submitted", severity="error")
            return
        # srtctl's refusal stops the launch; failed pin checks only warn (Launch anyway).
        refused = [c.arm.name for c in self.checks if c.plan is not None and c.plan.verdict == "refused"]
        if refused:
            self.notify(f"srtctl refused {', '.join(refused)}: nothing submitted", severity="error")
            return
        self.dismiss((self.cluster, self.recipes))

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


async def _reload(recipe: Recipe, flavour: object) -> Recipe:
    """The recipe checked again for ``flavour``, from the text shown (off the event loop)."""
    import asyncio

    from console.recipes.flavours import Flavour

    if not Path(recipe.path).is_file():
        return recipe
    chosen = flavour if isinstance(flavour, Flavour) else None
    return await asyncio.to_thread(load_recipe, recipe.path, None, recipe.text or None, chosen)
