"""The console in a real pseudo-terminal, read back through a terminal emulator (pyte).

Pilot renders the screen's compositor on demand, so it cannot see a screen that the app no
longer repaints. This harness runs `srt-console` as a subprocess on a pty of a given size and
keeps a pyte screen of exactly what the program wrote, which is what an operator would see.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import pyte


class Terminal:
    def __init__(self, argv: list[str], env: Mapping[str, str], cols: int = 120, rows: int = 36) -> None:
        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self._fd = master
        self.proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, env={**env, "TERM": "xterm-256color"},
            start_new_session=True, close_fds=True,
        )  # fmt: skip
        os.close(slave)

    def _pump(self, timeout: float) -> None:
        ready, _, _ = select.select([self._fd], [], [], timeout)
        if ready:
            try:
                data = os.read(self._fd, 65536)
            except OSError:  # the program has exited and the pty is closed
                data = b""
            self.stream.feed(data)

    def text(self) -> str:
        return "\n".join(self.screen.display)

    def wait(self, condition: Callable[[str], bool], what: str, timeout: float = 15.0) -> str:
        """Read output until `condition(screen text)` holds; fail with the screen after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.text()
            if condition(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"terminal never showed {what} within {timeout}s; screen:\n{text}")
            if self.proc.poll() is not None:
                self._pump(0.05)
                code = self.proc.returncode
                raise AssertionError(f"srt-console exited ({code}) before {what}; screen:\n{self.text()}")
            self._pump(0.05)

    def press(self, *keys: str) -> None:
        for key in keys:
            os.write(self._fd, KEYS.get(key, key).encode())

    def settle(self, quiet: float = 0.3, timeout: float = 5.0) -> str:
        """Read until the program has written nothing for ``quiet`` seconds (a frame is complete)."""
        deadline = time.monotonic() + timeout
        last = self.text()
        calm_since = time.monotonic()
        while time.monotonic() < deadline:
            self._pump(0.05)
            text = self.text()
            if text != last:
                last, calm_since = text, time.monotonic()
            elif time.monotonic() - calm_since >= quiet:
                break
        return last

    @property
    def title(self) -> str:
        return self.screen.display[0] if self.screen.display else ""

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        os.close(self._fd)


KEYS = {
    "escape": "\x1b", "enter": "\r", "tab": "\t", "down": "\x1b[B", "up": "\x1b[A", "f1": "\x1bOP",
    "end": "\x1b[F", "home": "\x1b[H", "space": " ", "ctrl+p": "\x10",
}  # fmt: skip


def console_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "screens", *args]


def console_env(data_dir: Path, config: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SRT_CONSOLE")}
    env["SRT_CONSOLE_DATA"] = str(data_dir)
    env["SRT_CONSOLE_CONFIG"] = str(config or data_dir / "no-config.yaml")
    # Escape is sent alone: tell Textual not to wait long for the rest of a sequence.
    env["ESCDELAY"] = "25"
    return env
