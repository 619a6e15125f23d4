"""How often each cluster's scheduler is asked about its live attempts.

At a steady pace while nothing is expected to change (a long job's state changes rarely, and
every ``squeue`` is a call to slurmctld shared by everyone on the cluster), quickly while
something is: an attempt submitted or cancelled in the last minute, or a job completing; and
in a short burst in the first seconds after a submission or a cancel, when Slurm ends or
starts a job (a cancelled job is gone from the queue in about a second). The engine also asks
at once after its own submissions and cancels; a cancel or submission by another console is
seen by the store's times.
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
BURST_S = 0.3
"""Just after a submission or a cancel: the change is due any moment."""
BURST_FOR_S = 5.0
"""How long the burst lasts (about ten calls, once per submission or cancel)."""


@dataclass(frozen=True)
class Cadence:
    steady_s: float = STEADY_S
    quick_s: float = QUICK_S
    expect_s: float = EXPECT_S
    burst_s: float = BURST_S
    burst_for_s: float = BURST_FOR_S

    @classmethod
    def fixed(cls, interval: float) -> Cadence:
        """One pace whatever is expected (a test, a benchmark, a caller that asks for it)."""
        return cls(steady_s=interval, quick_s=interval, expect_s=0.0, burst_s=interval, burst_for_s=0.0)

    def expecting(self, attempt: AttemptRow, now: float) -> str | None:
        """Why a change of this live attempt is expected soon; None when none is."""
        if attempt.state == JobState.COMPLETING.value:
            return "completing"
        if attempt.cancel_requested_at is not None and now - attempt.cancel_requested_at < self.expect_s:
            return "cancel requested"
        if now - attempt.submitted_at < self.expect_s:
            return "being submitted" if attempt.state == SUBMITTING else "submitted"
        return None

    def _just_asked(self, attempt: AttemptRow, now: float) -> bool:
        asked = max(attempt.submitted_at, attempt.cancel_requested_at or -float("inf"))
        return now - asked < self.burst_for_s

    def interval(self, attempts: Iterable[AttemptRow], now: float, *, nudged_ago: float | None = None) -> float:
        """The pace for one cluster's live attempts at wall-clock time ``now``; ``nudged_ago``:
        seconds since the engine itself submitted or cancelled there."""
        live = [a for a in attempts if a.live]
        ago = float("inf") if nudged_ago is None else nudged_ago
        if ago < self.burst_for_s or any(self._just_asked(a, now) for a in live):
            return min(self.burst_s, self.quick_s)
        if ago < self.expect_s or any(self.expecting(a, now) for a in live):
            return self.quick_s
        return self.steady_s
