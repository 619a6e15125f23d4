"""What a launch will do, checked before anything is submitted: for each arm, the scheduling
values it will get and where each comes from, and the cluster's own verdict on it.

With the srtctl launcher the cluster's `srtctl dry-run` is the final word: it loads and checks
the recipe with the srtctl that will run it and generates the batch script, whose #SBATCH
header is compared with the console's plan. `preflight` (model and container availability, as
srtctl checks them) is separate because it can be slow on some clusters. The CLI's
`launch --dry-run` and the launch dialog both show this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from console.launchers import DryRun, LaunchError, Setting, SrtctlLauncher
from console.model import Arm
from console.transport.base import TransportError


@dataclass
class ArmPlan:
    """One arm as it will be submitted."""

    arm: Arm
    settings: list[Setting] = field(default_factory=list)
    dry_run: DryRun | None = None  # srtctl launcher: srtctl's own account of the job
    verdict: str = "ok"  # ok | differs | refused | unchecked
    detail: str = ""  # why refused, what differs, or why it could not be checked

    @property
    def blocking(self) -> bool:
        """srtctl refused the arm: submitting it would fail the same way."""
        return self.verdict == "refused"

    def as_dict(self) -> dict[str, Any]:
        return {
            "arm": self.arm.name,
            "settings": [s.as_dict() for s in self.settings],
            "verdict": self.verdict,
            "detail": self.detail,
            "sbatch": dict(self.dry_run.sbatch) if self.dry_run else None,
            "differences": list(self.dry_run.differences) if self.dry_run else [],
        }


async def plan_arms(runtime: Any, arms: list[Arm], *, dry_run: bool = True) -> list[ArmPlan]:
    """Each arm's settings and, where the launcher can tell, the cluster's verdict on it."""
    launcher = runtime.launcher
    plans: list[ArmPlan] = []
    for arm in arms:
        plan = ArmPlan(arm)
        try:
            plan.settings = await launcher.scheduling(arm)
        except (TransportError, OSError) as exc:
            plan.verdict, plan.detail = "unchecked", f"cannot reach {runtime.profile.name}: {exc}"
            plans.append(plan)
            continue
        if dry_run and isinstance(launcher, SrtctlLauncher):
            try:
                plan.dry_run = await launcher.dry_run(arm)
            except LaunchError as exc:
                plan.verdict, plan.detail = "refused", str(exc)
            except (TransportError, OSError) as exc:
                plan.verdict, plan.detail = "unchecked", f"srtctl dry-run could not run: {exc}"
            else:
                if plan.dry_run.differences:
                    plan.verdict, plan.detail = "differs", "; ".join(plan.dry_run.differences)
        plans.append(plan)
    return plans


async def preflight_arm(runtime: Any, arm: Arm) -> tuple[bool, str]:
    """`srtctl preflight` of one arm: (passed, srtctl's words). Other launchers have none."""
    launcher = runtime.launcher
    if not isinstance(launcher, SrtctlLauncher):
        return True, f"the {launcher.name} launcher has no preflight"
    try:
        return True, await launcher.preflight(arm)
    except LaunchError as exc:
        return False, str(exc)
    except (TransportError, OSError) as exc:
        return False, f"srtctl preflight could not run: {exc}"


def settings_label(settings: list[Setting]) -> str:
    """`partition debug (profile) · account default (srtctl default) · time 00:20:00 (recipe)`."""
    names = {"partition": "partition", "account": "account", "time_limit": "time"}
    # A value nobody set is Slurm's own default: said once, not "Slurm default (Slurm default)".
    return " · ".join(
        f"{names[s.key]} {s.value} ({s.source})" if s.value else f"{names[s.key]} {s.source}" for s in settings
    )
