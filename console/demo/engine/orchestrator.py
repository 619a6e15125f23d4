"""The orchestrator: srtctl's sweep log on stdout, the workers, health, the benchmark, cleanup."""

import json
import os
import signal
import time
import traceback

from .benchmark import BenchmarkSteps
from .cleanup import CleanupSteps
from .startup import StartupSteps
from .steps import Interrupted
from .util import as_int, as_map, stamp, write_atomic
from .yamlout import to_yaml


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
            code = self.sweep()
        except Interrupted:
            code = 143 if self.signal_name == "SIGTERM" else 130
        except Exception:
            self.error("Error during sweep")
            self.out(traceback.format_exc().rstrip())
            code = 1
        if self.stop_event.is_set() and self.signal_name:
            self.info(f"Received signal {self.signal_name}, initiating cleanup...")
            code = 143 if self.signal_name == "SIGTERM" else 130
        self.cleanup(code)
        return code

    def write_files(self) -> None:
        plan = self.plan
        write_atomic(os.path.join(self.job_dir, "config.yaml"), to_yaml(plan.config).encode("utf-8"))
        res = as_map(plan.config.get("resources"))
        role_p, role_d, role_a = plan.role("prefill"), plan.role("decode"), plan.role("agg")
        resources = {
            "gpu_type": plan.gpu_type,
            "gpus_per_node": plan.gpus_per_node,
            "prefill_nodes": role_p.nodes if role_p else None,
            "decode_nodes": role_d.nodes if role_d else None,
            "agg_nodes": role_a.nodes if role_a else None,
            "prefill_workers": role_p.workers if role_p else 0,
            "decode_workers": role_d.workers if role_d else 0,
            "agg_workers": role_a.workers if role_a else 0,
            "gpus_per_prefill": role_p.gpus if role_p else as_int(res.get("gpus_per_prefill"), plan.gpus_per_node),
            "gpus_per_decode": role_d.gpus if role_d else as_int(res.get("gpus_per_decode"), plan.gpus_per_node),
            "gpus_per_agg": role_a.gpus if role_a else as_int(res.get("gpus_per_agg"), plan.gpus_per_node),
        }
        bench = {"type": plan.benchmark, "isl": plan.isl, "osl": plan.osl}
        meta = [
            ("version", "2.0"),
            ("orchestrator", True),
            ("job_id", self.job_id),
            ("job_name", os.environ.get("SLURM_JOB_NAME") or plan.name),
            ("generated_at", stamp()),
            ("model", {"path": plan.model, "container": plan.container, "precision": plan.precision}),
            ("resources", resources),
            ("backend_type", plan.backend),
            ("frontend_type", plan.frontend),
            ("benchmark", bench),
            ("demo", {"attempt": self.attempt, "faults": [f.type for f in plan.faults]}),
        ]
        text = json.dumps(dict(meta), indent=2)
        write_atomic(os.path.join(self.job_dir, f"{self.job_id}.json"), (text + "\n").encode())

    def banner(self) -> None:
        plan = self.plan
        rule = "=" * 42
        self.out(rule)
        self.out("🚀 srtctl Sweep Orchestrator")
        self.out(rule)
        self.out(f"Job ID: {self.job_id}")
        self.out("Config: {}".format(os.path.join(self.job_dir, "config.yaml")))
        self.out(f"Nodes: {len(self.nodes)}")
        self.out("CPUs per node: {}".format(os.environ.get("SLURM_CPUS_ON_NODE") or os.cpu_count() or 1))
        self.out(f"GPUs per node: {plan.gpus_per_node}")
        self.out(f"Container: {plan.container}")
        self.out("Start: {}".format(time.strftime("%a %b %d %H:%M:%S %Z %Y")))
        self.out("Runtime config: {}".format(os.path.join(self.job_dir, "config.yaml")))
        self.out(rule)
        self.out("Preparing srtctl environment...")
        self.out("Running orchestrator on host (with srun access)...")
        self.info("Sweep Orchestrator")
        self.info(f"Job ID: {self.job_id}")
        self.info(f"Run name: {plan.name}_{self.job_id}")
        self.info("Config: {}".format(os.path.join(self.job_dir, "config.yaml")))
        self.info(f"Infra node: {self.head}")
        self.info(f"Head node: {self.head}")
        worker_nodes = []  # type: list[str]
        for seg in self.segments:
            if seg.node not in worker_nodes:
                worker_nodes.append(seg.node)
        self.info("Worker nodes: {}".format(", ".join(worker_nodes)))
        self.info("CPU allocation check: ok (demo engine)")

    def sweep(self) -> int:
        plan = self.plan
        if plan.frontend == "dynamo":
            self.info("Starting infrastructure services (NATS, etcd)")
            self.wait(0.2)
            self.info("NATS is ready")
            self.info("etcd is ready")
        else:
            self.info(f"Skipping NATS/etcd infrastructure (frontend.type={plan.frontend})")
        self.start_workers()
        self.start_frontend()
        if not self.await_health():
            return 1
        if plan.benchmark == "manual":
            self.info("Benchmark type is 'manual' - server is ready for testing")
            while True:
                self.wait(1.0)
                if self.check_workers():
                    return 1
        ok = self.run_benchmark()
        if ok:
            self.info("Benchmark completed successfully")
            return 0
        return 1
