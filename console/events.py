"""What the core tells its listeners (the UI, `watch`, `--wait`): one set of event objects.

The engine announces what Slurm said and how each cluster's connection is; the monitor what
the logs and result files of followed attempts say; either announces a poll that failed. The
UI receives these very objects (``screens.messages.CoreEvent``), the CLI prints them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only named in annotations: the engine's users need not import the triage
    from console.diagnosis import Diagnosis, Observation
    from console.follow import AgentStatus
    from console.results import PointResult
    from console.stages import StageSnapshot
    from console.store import AttemptRow


@dataclass(frozen=True)
class AttemptChanged:
    """The engine recorded a new state for an attempt (or a new attempt)."""

    attempt: AttemptRow


@dataclass(frozen=True)
class ClusterChanged:
    """A cluster's connection changed: "connected", "disconnected, retrying in 4s: ...", "error: ..."."""

    cluster: str
    status: str


@dataclass(frozen=True)
class TrackingError:
    """Tracking failed unexpectedly in one place: a cluster's poll, following the logs, a log
    event (``cluster`` None: the whole tick). It is reported, and tracking goes on."""

    cluster: str | None
    message: str


@dataclass(frozen=True)
class LogLines:
    """New lines of one of an attempt's files (their findings come once, in :class:`Triaged`)."""

    attempt_id: int
    file: str
    first_line_no: int
    lines: list[str]
    replayed: bool = False  # already streamed by an earlier run of the console


@dataclass(frozen=True)
class Triaged:
    """The attempt's diagnosis changed, or new findings or stage changes arrived."""

    attempt_id: int
    diagnosis: Diagnosis
    snapshot: StageSnapshot
    new_findings: list[Observation]


@dataclass(frozen=True)
class PointArrived:
    """A concurrency point's result file appeared or grew."""

    attempt_id: int
    point: PointResult


@dataclass(frozen=True)
class PointRunning:
    """benchmark.out says this concurrency (None: none) is being measured."""

    attempt_id: int
    concurrency: int | None


@dataclass(frozen=True)
class AgentChanged:
    """The log agent of a cluster started, was lost, is restarting..."""

    cluster: str
    status: AgentStatus


@dataclass(frozen=True)
class Notice:
    """Worth interrupting the operator for: an attempt doomed or failed, an arm completed, a
    sweep ended (or the notify command failed). Shown as a toast with the bell, and handed to
    the config's ``notify:`` command as :meth:`to_json`."""

    kind: str  # attempt_doomed | attempt_failed | arm_completed | sweep_ended | notify_failed
    severity: str  # information | warning | error
    text: str
    sweep: str | None
    arm: str | None
    attempt: str | None
    state: str | None
    arm_name: str | None = None
    detail: str = ""

    def to_json(self) -> dict[str, str | None]:
        return {
            "event": self.kind,
            "severity": self.severity,
            "text": self.text,
            "sweep": self.sweep,
            "arm": self.arm,
            "arm_name": self.arm_name,
            "attempt": self.attempt,
            "state": self.state,
            "detail": self.detail or None,
        }


@dataclass(frozen=True)
class FileSkipped:
    """A file of an attempt's dirs that is not read, and why (a link out of the dir, a loop...)."""

    attempt_id: int
    file: str
    reason: str


EngineEvent = AttemptChanged | ClusterChanged | TrackingError
MonitorEvent = LogLines | Triaged | PointArrived | PointRunning | AgentChanged | FileSkipped | TrackingError
CoreEvent = (
    AttemptChanged
    | ClusterChanged
    | TrackingError
    | LogLines
    | Triaged
    | PointArrived
    | PointRunning
    | AgentChanged
    | Notice
    | FileSkipped
)

__all__ = [
    "AgentChanged",
    "AttemptChanged",
    "ClusterChanged",
    "CoreEvent",
    "EngineEvent",
    "FileSkipped",
    "LogLines",
    "MonitorEvent",
    "Notice",
    "PointArrived",
    "PointRunning",
    "TrackingError",
    "Triaged",
]
