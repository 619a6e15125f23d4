"""The agent protocol's console end: how the agent is started, and its records split into (header, payload)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from console.follow.events import AgentProtocolError

log = logging.getLogger("console.follow")

BOOTSTRAP = (
    "import sys;b=sys.stdin.buffer;n=int(b.readline());"
    "exec(compile(b.read(n),'srt-console-agent','exec'),{'__name__':'__main__'})"
)

HEARTBEAT_TIMEOUT_S = 6.0
BACKOFF_INITIAL_S = 0.5
BACKOFF_MAX_S = 30.0
HEALTHY_AFTER_S = 10.0  # an agent that ran this long resets the backoff
OFFSETS_INTERVAL_S = 0.5  # on_offsets is called at most this often per dir
MAX_HEADER_BYTES = 16 << 20
READ_CHUNK = 1 << 16
QUEUE_SIZE = 4096
STDERR_KEEP = 8192
CLOSE_TIMEOUT_S = 3.0
EXIT_NOT_FOUND = 127

_ERRNO_EXC: dict[int, type[OSError]] = {2: FileNotFoundError, 13: PermissionError, 21: IsADirectoryError}


def agent_source() -> bytes:
    """The agent script, as sent to the remote interpreter."""
    return Path(__file__).resolve().parent.parent.joinpath("agent.py").read_bytes()


def agent_argv(python: str = "python3") -> list[str]:
    """How the agent is started: the interpreter with the bootstrap; source and commands follow on stdin."""
    return [python, "-c", BOOTSTRAP]


class RecordReader:
    """Splits the agent's stdout into (header, payload) records."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._header: dict[str, Any] | None = None

    def feed(self, data: bytes) -> list[tuple[dict[str, Any], bytes | None]]:
        buf = self._buf
        buf += data
        records: list[tuple[dict[str, Any], bytes | None]] = []
        while True:
            if self._header is None:
                nl = buf.find(b"\n", self._pos)
                if nl < 0:
                    if len(buf) - self._pos > MAX_HEADER_BYTES:
                        raise AgentProtocolError("record header too long")
                    break
                raw = bytes(buf[self._pos : nl])
                self._pos = nl + 1
                try:
                    header = json.loads(raw)
                except ValueError as exc:
                    raise AgentProtocolError(f"not a record header: {raw[:200]!r}") from exc
                if not isinstance(header, dict):
                    raise AgentProtocolError(f"not a record header: {raw[:200]!r}")
                if "len" not in header:
                    records.append((header, None))
                    continue
                self._header = header
            length = self._header.get("len")
            if not isinstance(length, int) or length < 0:
                raise AgentProtocolError(f"bad payload length in {self._header!r}")
            if len(buf) - self._pos < length + 1:
                break
            end = self._pos + length
            if buf[end] != 0x0A:
                raise AgentProtocolError("payload not followed by a newline (out of step)")
            records.append((self._header, bytes(buf[self._pos : end])))
            self._pos = end + 1
            self._header = None
        if self._pos:
            del buf[: self._pos]
            self._pos = 0
        return records
