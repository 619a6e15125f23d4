"""What a follower delivers: files found and gone, lines, triaged backlogs, result bytes, resets, the agent's state."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum
from typing import TypeAlias

from console.transport.base import TransportError


@dataclass(frozen=True)
class FileEvent:
    dir: str
    file: str  # relative to dir
    kind: str  # "log" | "result"
    size: int


@dataclass(frozen=True)
class FileGoneEvent:
    dir: str
    file: str


@dataclass(frozen=True)
class SkippedEvent:
    """A file of a followed dir that is not read (a link out of the dir, a loop, a special file)."""

    dir: str
    file: str
    reason: str


@dataclass(frozen=True)
class LinesEvent:
    dir: str
    file: str
    first_line_no: int  # 1-based number of lines[0]
    lines: list[str]
    end_offset: int  # byte offset just after the last line
    partial: str = ""  # the incomplete line after end_offset, for display only

    @property
    def last_line_no(self) -> int:
        return self.first_line_no + len(self.lines) - 1


@dataclass(frozen=True)
class Candidate:
    offset: int
    line_no: int  # 1-based
    text: str


@dataclass(frozen=True)
class CandidatesEvent:
    """A backlog ``[start_offset, end_offset)`` triaged remotely: only its keyword lines came over."""

    dir: str
    file: str
    start_offset: int
    end_offset: int
    line_count: int  # lines before end_offset
    candidates: list[Candidate]


@dataclass(frozen=True)
class ResultEvent:
    dir: str
    file: str
    head: bytes
    tail: bytes
    size: int
    head_is_whole: bool


@dataclass(frozen=True)
class ResetEvent:
    dir: str
    file: str
    reason: str  # "truncated" | "rotated"
    size: int


class AgentState(str, Enum):
    STARTING = "starting"
    RUNNING = "running"
    RESTARTING = "restarting"
    HEARTBEAT_LOST = "heartbeat lost"
    STOPPED = "stopped"


@dataclass(frozen=True)
class AgentStatus:
    state: AgentState
    message: str = ""
    restarts: int = 0
    mode: str = "agent"
    since: float = field(default_factory=time.time)

    @property
    def summary(self) -> str:
        """The log stream's state as an operator reads it: following, or lost and why."""
        if self.state is AgentState.RUNNING:
            return "following" if self.mode == "agent" else "following (tail -F)"
        return f"{self.state.value}: {self.message}" if self.message else self.state.value


FollowEvent: TypeAlias = (
    FileEvent | FileGoneEvent | LinesEvent | CandidatesEvent | ResultEvent | ResetEvent | SkippedEvent | AgentStatus
)


class AgentProtocolError(Exception):
    """The agent's output is not what the protocol says: the agent is restarted."""


class AgentLost(TransportError):
    """The agent went away while a request was pending."""


class HeartbeatLost(TransportError):
    """Nothing came from the agent for too long."""
