"""Small helpers of the demo engine: shared constants, tolerant value readers, timestamps,
atomic writes, a line log."""

import io
import os
import sys
import threading
import time
import zipfile

FRONTEND_PORT = 8000
WORKER_PORT = 30000
ZMQ_PORT_BASE = 20000
ZMQ_PORT_SPAN = 20000
MODES = ("prefill", "decode", "agg")
MODE_KEYS = {"prefill": "prefill", "decode": "decode", "agg": "aggregated"}
FAULT_TYPES = ("zmq-bind", "oom-graph-capture", "health-hang", "crash-at-concurrency", "flake-first-attempt")
TRUE_WORDS = ("1", "true", "yes", "on")


# --------------------------------------------------------------------------- small helpers


def stamp() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")


def clock() -> str:
    return time.strftime("%H:%M:%S")


class StopFlag:
    """A stop request set from a signal handler and polled by the steps.

    Not a ``threading.Event``: its ``set()`` takes a lock that the interrupted main thread may
    be holding inside ``wait()``, and the handler then waits on it for ever (the process hangs
    until SIGKILL, its cleanup unwritten). A plain attribute needs no lock.
    """

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float) -> bool:
        """Whether it is set, waiting up to ``timeout`` seconds for it (in short sleeps: a
        handler that runs mid-sleep does not shorten the sleep)."""
        end = time.monotonic() + timeout
        while not self._set:
            left = end - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(left, 0.01))
        return self._set


def as_int(value: "object", default: int) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return default
    return default


def as_float(value: "object", default: float) -> float:
    if isinstance(value, bool):
        return default
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return default
    return default


def as_map(value: "object") -> "dict[str, object]":
    return value if isinstance(value, dict) else {}


def parse_concurrencies(value: "object") -> "list[int]":
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [int(value)]
    if isinstance(value, str):
        return [int(p) for p in value.replace(",", "x").split("x") if p.strip().isdigit()]
    if isinstance(value, list):
        out = []  # type: list[int]
        for item in value:
            out.extend(parse_concurrencies(item))
        return out
    return []


def write_atomic(path: str, data: bytes) -> None:
    """Write a file under a temporary name and rename it, so it appears whole."""
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, "." + name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def utf8_stdout() -> None:
    # A batch job may run with no locale (ASCII stdout on old Pythons): srtctl's lines hold emoji.
    if (getattr(sys.stdout, "encoding", "") or "").lower().replace("-", "") != "utf8":
        sys.stdout = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", errors="replace", line_buffering=True)


class LineLog:
    """A log file written line by line, safe to share between threads."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.handle = open(path, "a", encoding="utf-8", errors="replace")  # noqa: SIM115 (kept open)

    def write(self, text: str) -> None:
        with self.lock:
            self.handle.write(text if text.endswith("\n") else text + "\n")
            self.handle.flush()

    def close(self) -> None:
        with self.lock:
            self.handle.close()


def engine_command() -> "list[str]":
    """How to start this engine again (a node task): the zipapp it runs from, else its package."""
    script = os.path.abspath(sys.argv[0])
    if zipfile.is_zipfile(script):
        return [script]
    return ["-m", __name__.rsplit(".", 1)[0]]
