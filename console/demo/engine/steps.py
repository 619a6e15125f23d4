"""What every step of the orchestrator shares: the job's state, srtctl's log line format, interruptible waits."""

import argparse
import os
import signal
import subprocess  # noqa: F401 - named in type comments (Python 3.6 keeps them there)
import sys
import threading
import time

from .control import Control
from .numbers import PointNumbers  # noqa: F401 - named in type comments
from .plan import Segment, job_nodes, load_plan, place  # noqa: F401 - Segment: in type comments
from .util import (
    LineLog,  # noqa: F401 - named in type comments
    stamp,
)


class Interrupted(Exception):
    """SIGTERM/SIGINT: clean up and leave."""


class Steps:
    """The orchestrator's state; each group of its steps is a subclass."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.plan = load_plan(args.plan).for_attempt(args.attempt)
        self.registered = set()  # type: set[str]
        self.job_id = str(args.job_id or os.environ.get("SLURM_JOB_ID") or "0")
        template = args.job_dir or args.job_dir_template or os.path.join(os.getcwd(), "outputs", "%j")
        self.job_dir = os.path.abspath(template.replace("%j", self.job_id))
        self.logs = os.path.join(self.job_dir, "logs")
        root = args.results_root or os.path.join(self.job_dir, "results")
        self.results_root = os.path.abspath(root.replace("%j", self.job_id))
        self.speed = args.speed
        self.attempt = args.attempt
        self.slurm = bool(os.environ.get("SLURMD_NODENAME"))
        self.nodes = job_nodes(self.plan.node_demand)
        self.head = self.nodes[0]
        self.segments = place(self.plan, self.nodes)
        self.control = Control(self.job_dir)
        self.stop_event = threading.Event()
        self.signal_name = None  # type: str | None
        self.procs = []  # type: list[subprocess.Popen[bytes]]
        self.bench_log = None  # type: LineLog | None
        self.frontend_log = None  # type: LineLog | None
        self.failed = []  # type: list[tuple[Segment, int]]
        self.done_points = []  # type: list[tuple[int, PointNumbers]]

    # ------------------------------------------------------------- output

    def out(self, text: str) -> None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def info(self, text: str) -> None:
        self.out(f"{stamp()} [INFO] {text}")

    def warning(self, text: str) -> None:
        self.out(f"{stamp()} [WARNING] {text}")

    def error(self, text: str) -> None:
        self.out(f"{stamp()} [ERROR] {text}")

    def wait(self, seconds: float) -> None:
        """Sleep for demo seconds (divided by the speed); SIGTERM interrupts it."""
        deadline = time.time() + max(0.0, seconds) / self.speed
        while True:
            if self.stop_event.is_set():
                raise Interrupted()
            left = deadline - time.time()
            if left <= 0:
                return
            self.stop_event.wait(min(left, 0.05))

    def on_signal(self, signum: int, _frame: object) -> None:
        self.signal_name = "SIGTERM" if signum == signal.SIGTERM else "SIGINT"
        self.stop_event.set()

    # ------------------------------------------------------------- main

    def check_workers(self) -> bool:
        """Whether every worker still runs (the startup steps'; the benchmark checks on them too)."""
        raise NotImplementedError
