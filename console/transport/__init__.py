"""Where commands run: this machine (LocalTransport) or a cluster over SSH (SshTransport).

The two transports are imported when first named: asyncssh (a tenth of a second) is paid
only by what connects to a cluster.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from .local import LocalTransport
    from .ssh import SshTarget, SshTransport

_LAZY = {"LocalTransport": ".local", "SshTarget": ".ssh", "SshTransport": ".ssh"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
