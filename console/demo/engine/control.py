"""The control files under ``<job dir>/.demo/`` through which the orchestrator and the node tasks talk."""

import os

from .util import write_atomic

# --------------------------------------------------------------------------- shared control files


class Control:
    """The files under ``<job dir>/.demo/`` that the orchestrator and the workers share."""

    def __init__(self, job_dir: str) -> None:
        self.root = os.path.join(job_dir, ".demo")
        self.status_dir = os.path.join(self.root, "status")

    def setup(self) -> None:
        if not os.path.isdir(self.status_dir):
            os.makedirs(self.status_dir)
        for name in ("stop", "point"):
            path = os.path.join(self.root, name)
            if os.path.exists(path):
                os.remove(path)
        for name in os.listdir(self.status_dir):
            os.remove(os.path.join(self.status_dir, name))

    def set_status(self, key: str, value: str) -> None:
        write_atomic(os.path.join(self.status_dir, key), value.encode())

    def statuses(self) -> "dict[str, str]":
        out = {}  # type: dict[str, str]
        try:
            names = os.listdir(self.status_dir)
        except OSError:
            return out
        for name in names:
            if name.startswith("."):
                continue
            try:
                with open(os.path.join(self.status_dir, name)) as f:
                    out[name] = f.read().strip()
            except OSError:
                continue
        return out

    def stop(self) -> None:
        write_atomic(os.path.join(self.root, "stop"), b"stop\n")

    def stopped(self) -> bool:
        return os.path.exists(os.path.join(self.root, "stop"))

    def set_point(self, concurrency: int) -> None:
        write_atomic(os.path.join(self.root, "point"), str(concurrency).encode())

    def point(self) -> int:
        try:
            with open(os.path.join(self.root, "point")) as f:
                return int(f.read().strip() or 0)
        except (OSError, ValueError):
            return 0
