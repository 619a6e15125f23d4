"""What a launch will do, checked before anything is submitted: for each arm, the scheduling
values it will get and where each comes from, and the cluster's own verdict on it.

With the srtctl launcher the cluster's `srtctl dry-run` is the final word: it loads and checks
the recipe with the srtctl that will run it and generates the batch script, whose #SBATCH
header is compared with the console's plan. Before it, the pin checks
(:mod:`console.pin_checks`) compare the srt-slurm commits the recipe and the profile state with
the cluster's checkout, and the recipe's backend and frontend with what its srtctl implements.
`preflight` (model and container availability, as
srtctl checks them) is separate because it can be slow on some clusters. The CLI's
`launch --dry-run` and the launch dialog both show this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from console.launchers import DryRun, LaunchError, Setting, SrtctlLauncher
from console.model import Arm
from console.pin_checks import PinProblem, check_site, stated_commits
from console.srtctl_site import commit_relations
from console.transport.base import TransportError


@dataclass
class ArmPlan:
    """One arm as it will be submitted."""

    arm: Arm
    settings: list[Setting] = field(default_factory=list)
    dry_run: DryRun | None = None  # srtctl launcher: srtctl's own account of the job
    verdict: str = "ok"  # ok | differs | refused | unchecked
    detail: str = ""  # why refused, what differs, or why it could not be checked
    pin_problems: list[PinProblem] = field(default_factory=list)

    @property
    def blocking(self) -> bool:
        """srtctl refused the arm, or the checkout cannot run it as stated: submitting it would
        fail, or run something other than what the recipe and profile name."""
        return self.verdict == "refused" or any(p.blocking for p in self.pin_problems)

    def as_dict(self) -> dict[str, Any]:
        return {
            "arm": self.arm.name,
            "settings": [s.as_dict() for s in self.settings],
            "verdict": self.verdict,
            "detail": self.detail,
            "sbatch": dict(self.dry_run.sbatch) if self.dry_run else None,
            "differences": list(self.dry_run.differences) if self.dry_run else [],
            "pin_problems": [p.as_dict() for p in self.pin_problems],
            "blocking": self.blocking,
        }


async def plan_arms(runtime: Any, arms: list[Arm], *, dry_run: bool = True) -> list[ArmPlan]:
    """Each arm's settings and, where the launcher can tell, the cluster's verdict on it."""
    launcher = runtime.launcher
    plans: list[ArmPlan] = []
    fresh = False
    for arm in arms:
        plan = ArmPlan(arm)
        try:
            if isinstance(launcher, SrtctlLauncher) and not fresh:
                await launcher.site(refresh=True)  # the checkout as it is now, not as first read
                fresh = True
            plan.settings = await launcher.scheduling(arm)
            plan.pin_problems = await pin_problems(runtime, arm)
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


async def pin_problems(runtime: Any, arm: Arm) -> list[PinProblem]:
    """The pin checks of one arm against the cluster's checkout (the srtctl launcher's only: the
    demo engine runs any recipe)."""
    launcher = runtime.launcher
    if not isinstance(launcher, SrtctlLauncher):
        return []
    site = await launcher.site()
    stated = [s.commit for s in stated_commits(arm, runtime.profile)]
    relations = await commit_relations(runtime.transport, site.path, stated) if stated and site.path else {}
    return check_site(arm, runtime.profile, site, relations)


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
