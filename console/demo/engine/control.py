"""The control files through which the orchestrator and the node tasks talk.

They live beside the arm's plan (``<run dir>/control-<JOBID>/``), never in the job dir, which
holds only what srtctl writes there. The run dir is on the same shared file system as the job's
outputs, so node tasks on other nodes see the same files.
"""

import os
import shutil

from .util import write_atomic


def control_dir(plan_path: str, job_id: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(plan_path)), f"control-{job_id}")


class Control:
    """Worker status, the concurrency being measured and a stop flag, one small file each."""

    def __init__(self, root: str) -> None:
        self.root = root
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

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

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
        # Gone altogether (the orchestrator removed it at its end): stop as well.
        return os.path.exists(os.path.join(self.root, "stop")) or not os.path.isdir(self.root)

    def set_point(self, concurrency: int) -> None:
        write_atomic(os.path.join(self.root, "point"), str(concurrency).encode())

    def point(self) -> int:
        try:
            with open(os.path.join(self.root, "point")) as f:
                return int(f.read().strip() or 0)
        except (OSError, ValueError):
            return 0
