"""How often each cluster's scheduler is asked about its live attempts.

At a steady pace while nothing is expected to change (a long job's state changes rarely, and
every ``squeue`` is a call to slurmctld shared by everyone on the cluster), quickly while
something is: an attempt submitted or cancelled moments ago, or a job completing. The engine
also asks at once after its own submissions and cancels, so those are seen within a quick
interval; a cancel or submission by another console is seen by the store's times.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from console.scheduler import JobState
from console.store import SUBMITTING, AttemptRow

STEADY_S = 6.0
"""Nothing expected: at most 10 ``squeue`` calls a minute per cluster (srtctl's monitor: 12)."""
QUICK_S = 1.0
"""Something expected: a change is seen within about a second of happening."""
EXPECT_S = 60.0
"""How long after a submission or a cancel request a change is expected."""


@dataclass(frozen=True)
class Cadence:
    steady_s: float = STEADY_S
    quick_s: float = QUICK_S
    expect_s: float = EXPECT_S

    @classmethod
    def fixed(cls, interval: float) -> Cadence:
        """One pace whatever is expected (a test, a benchmark, a caller that asks for it)."""
        return cls(steady_s=interval, quick_s=interval, expect_s=0.0)

    def expecting(self, attempt: AttemptRow, now: float) -> str | None:
        """Why a change of this live attempt is expected soon; None when none is."""
        if attempt.state == JobState.COMPLETING.value:
            return "completing"
        if attempt.cancel_requested_at is not None and now - attempt.cancel_requested_at < self.expect_s:
            return "cancel requested"
        if now - attempt.submitted_at < self.expect_s:
            return "being submitted" if attempt.state == SUBMITTING else "submitted"
        return None

    def interval(self, attempts: Iterable[AttemptRow], now: float, *, nudged: bool = False) -> float:
        """The pace for one cluster's live attempts at wall-clock time ``now``; ``nudged`` when
        the engine itself just submitted or cancelled there."""
        if nudged or any(a.live and self.expecting(a, now) for a in attempts):
            return self.quick_s
        return self.steady_s
