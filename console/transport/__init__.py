"""Where commands run: this machine (LocalTransport) or a cluster over SSH (SshTransport)."""

from .base import (
    CommandFailed,
    CommandResult,
    ConnectionState,
    ConnectionStatus,
    HostKeyError,
    StreamingProcess,
    Transport,
    TransportError,
    command_line,
)
from .local import LocalTransport
from .ssh import SshTarget, SshTransport

__all__ = [
    "CommandFailed",
    "CommandResult",
    "ConnectionState",
    "ConnectionStatus",
    "HostKeyError",
    "LocalTransport",
    "SshTarget",
    "SshTransport",
    "StreamingProcess",
    "Transport",
    "TransportError",
    "command_line",
]
