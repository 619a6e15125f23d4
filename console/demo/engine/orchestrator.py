"""The orchestrator: srtctl's sweep log on stdout, the workers, health, the benchmark, cleanup."""

import json
import os
import shutil
import signal
import time
import traceback

from .benchmark import BenchmarkSteps
from .cleanup import CleanupSteps
from .infra import Infra
from .records import SNAPSHOT, job_metadata, resource_snapshot, resource_summary
from .startup import StartupSteps
from .steps import Interrupted
from .util import as_map, write_atomic
from .yamlout import to_yaml

_NO_INFRA = ("trtllm_serve", "vllm", "atomesh")  # frontends that need no NATS/etcd


class Orchestrator(StartupSteps, BenchmarkSteps, CleanupSteps):
    """One job from start to end, as srtctl's orchestrator runs it."""

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self.on_signal)
        signal.signal(signal.SIGINT, self.on_signal)
        for folder in (self.job_dir, self.logs):
            if not os.path.isdir(folder):
                os.makedirs(folder)
        self.control.setup()
        self.write_files()
        code = 1
        try:
            self.banner()
            self.info(f"Loaded config: {self.plan.name}")
            self.announce()
            code = self.sweep()
        except Interrupted:
            code = 143 if self.signal_name == "SIGTERM" else 130
        except Exception:
            self.error("Error during sweep")
            self.out(traceback.format_exc().rstrip())
            code = 1
        if self.stop_event.is_set() and self.signal_name:
            self.warning(f"Received signal {self.signal_name}, initiating cleanup...")
            code = 143 if self.signal_name == "SIGTERM" else 130
        self.cleanup(code)
        self.control.remove()
        return code

    # ------------------------------------------------------------- what srtctl writes at submission

    def write_files(self) -> None:
        """``config.yaml``, ``sbatch_script.sh`` and ``<JOBID>.json`` in the job dir, as ``srtctl apply``
        leaves them."""
        write_atomic(self.path("config.yaml"), to_yaml(self.plan.config).encode("utf-8"))
        script = getattr(self.args, "batch_script", None)
        if script:
            try:
                shutil.copyfile(script, self.path("sbatch_script.sh"))
            except OSError as exc:
                self.warning(f"Could not keep the batch script {script}: {exc}")
        meta = job_metadata(self.plan, self.job_id)
        write_atomic(self.path(f"{self.job_id}.json"), json.dumps(meta, indent=2).encode())

    def banner(self) -> None:
        """What srtctl's batch script echoes before its orchestrator starts."""
        plan = self.plan
        env = os.environ
        rule = "=" * 42
        for text in (
            rule,
            "🚀 srtctl Sweep Orchestrator",
            rule,
            f"Job ID: {self.job_id}",
            "Config: {}".format(plan.recipe_path or self.path("config.yaml")),
            "Nodes: {}".format(env.get("SLURM_JOB_NUM_NODES") or len(self.nodes)),
            "CPUs per node: {}".format(env.get("SLURM_JOB_CPUS_PER_NODE") or "unknown"),
            "CPUs on orchestrator node: {}".format(env.get("SLURM_CPUS_ON_NODE") or "unknown"),
            "GPUs per node: {}".format(env.get("SLURM_GPUS_PER_NODE") or "unknown"),
            f"Container: {plan.container}",
            "Start: {}".format(time.strftime("%a %b %e %H:%M:%S %Z %Y")),
            rule,
            "",
            "Runtime config: {}".format(self.path("config.yaml")),
            "",
            "Preparing srtctl environment...",
            "Running orchestrator on host (with srun access)...",
            "",
        ):
            self.out(text)

    def announce(self) -> None:
        """The orchestrator's first lines: the job, its nodes, the resource snapshot, the lockfile."""
        plan = self.plan
        self.info("Sweep Orchestrator")
        self.info(f"Job ID: {self.job_id}")
        self.info(f"Run name: {plan.name}_{self.job_id}")
        self.info(f"Config: {plan.name}")
        self.info(f"Infra node: {self.infra}")
        self.info(f"Head node: {self.head}")
        self.info("Worker nodes: {}".format(", ".join(self.worker_nodes)))
        names = list(dict.fromkeys([self.infra, *self.worker_nodes]))
        snapshot = resource_snapshot(plan, self.job_id, names, self.segments)
        snapshot_path = os.path.join(self.logs, SNAPSHOT)
        write_atomic(snapshot_path, (json.dumps(snapshot, indent=2) + "\n").encode())
        self.add_cpu_allocation(snapshot)
        self.info("\n" + resource_summary(snapshot, snapshot_path))
        check = as_map(snapshot["cpu_check"])
        if check["status"] == "warning":
            self.warning("CPU ALLOCATION WARNING: {}".format(check["message"]))
        elif check["status"] == "unknown":
            self.warning("CPU allocation check unavailable: {}".format(check["message"]))
        else:
            self.info("CPU allocation check: {}".format(check["message"]))
        self.write_lockfile(final=False)

    def add_cpu_allocation(self, snapshot: "dict[str, object]") -> None:
        path = self.path(f"{self.job_id}.json")
        try:
            with open(path, encoding="utf-8") as f:
                meta = json.load(f)
            resources = meta.setdefault("resources", {})
            resources["cpu_allocation"] = snapshot["cpus"]
            resources["cpu_check"] = snapshot["cpu_check"]
            write_atomic(path, (json.dumps(meta, indent=2) + "\n").encode())
        except (OSError, ValueError, AttributeError) as exc:
            self.warning(f"Failed to add CPU allocation to job metadata {path}: {exc}")

    # ------------------------------------------------------------- the sweep

    def sweep(self) -> int:
        plan = self.plan
        if plan.frontend in _NO_INFRA:
            self.info(f"Skipping NATS/etcd infrastructure (frontend.type={plan.frontend})")
        else:
            self.start_infra()
        self.start_workers()
        self.start_frontend()
        self.info("Tachometer disabled")
        self.connection_info()
        if not self.await_health():
            return 1
        if plan.benchmark == "manual":
            self.info("Benchmark type is 'manual' - server is ready for testing")
            self.info(f"Frontend URL: http://{self.head}:8000")
            self.info("Press Ctrl+C to stop the job")
            while True:
                self.wait(1.0)
                if self.check_workers():
                    self.error("Worker failure detected during manual mode")
                    return 1
        ok = self.run_benchmark()
        if ok:
            self.info("Benchmark completed successfully")
            return 0
        return 1

    def start_infra(self) -> None:
        self.info("Starting infrastructure services (NATS, etcd)")
        self.info(f"Infra node: {self.infra}")
        infra = Infra(self.logs, self.plan.name)
        infra.start(os.getpid() + 7)
        self.processes += 1
        self.info(f"Waiting for NATS (port 4222) on {self.infra}...")
        self.wait(0.2)
        self.info("NATS is ready")
        self.info(f"Waiting for etcd (port 2379) on {self.infra}...")
        self.info("etcd is ready")
        infra.ready()
        infra.close()
