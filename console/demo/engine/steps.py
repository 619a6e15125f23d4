"""What every step of the orchestrator shares: the job's state, srtctl's log line format, interruptible waits."""

import argparse
import os
import signal
import subprocess  # noqa: F401 - named in type comments (Python 3.6 keeps them there)
import sys
import time

from .commands import bootstrap_ports, system_ports
from .control import Control, control_dir
from .dynamo import FrontendLog  # noqa: F401 - named in type comments
from .numbers import PointNumbers  # noqa: F401 - named in type comments
from .plan import Segment, job_nodes, load_plan, place  # noqa: F401 - Segment: in type comments
from .records import lockfile_text
from .util import (
    LineLog,  # noqa: F401 - named in type comments
    StopFlag,
    stamp,
    write_atomic,
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
        self.infra = self.head  # NATS and etcd run on the head node
        self.segments = place(self.plan, self.nodes)
        self.worker_nodes = []  # type: list[str]
        for seg in self.segments:
            if seg.node not in self.worker_nodes:
                self.worker_nodes.append(seg.node)
        self.sys_ports = system_ports(self.segments)
        self.bootstraps = bootstrap_ports(self.segments)
        self.control = Control(control_dir(args.plan, self.job_id))
        self.stop_event = StopFlag()
        self.signal_name = None  # type: str | None
        self.procs = []  # type: list[subprocess.Popen[bytes]]
        self.bench_log = None  # type: LineLog | None
        self.frontend_log = None  # type: LineLog | None
        self.frontend = None  # type: FrontendLog | None  # the dynamo frontend's lines
        self.processes = 0  # what srtctl would have registered: infra, workers, frontends
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

    def path(self, name: str) -> str:
        return os.path.join(self.job_dir, name)

    def write_lockfile(self, final: bool) -> None:
        """``recipe.lock.yaml``: written when the run starts, and again with the fingerprints at its end."""
        path = self.path("recipe.lock.yaml")
        try:
            with open(self.path("config.yaml"), encoding="utf-8") as f:
                recipe = f.read()
            write_atomic(path, lockfile_text(recipe, self.plan, self.logs if final else None).encode("utf-8"))
            self.info(f"Wrote lockfile: {path}")
        except OSError as exc:
            self.warning(f"Failed to write lockfile: {exc}")

    def frontend_write(self, lines: "list[str]") -> None:
        if self.frontend_log is not None:
            for text in lines:
                self.frontend_log.write(text)

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
