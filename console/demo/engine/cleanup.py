"""Cleanup: stopping the workers, the rollup, the log archive, and the failure details srtctl prints."""

import json
import os
import tarfile
import time

from .steps import Steps
from .util import write_atomic
from .yamlout import to_yaml


class CleanupSteps(Steps):
    def cleanup(self, code: int) -> None:
        self.info("Cleanup")
        self.info(f"Cleaning up {len(self.procs) + 1} processes...")
        self.control.stop()
        self.reap(max(2.0, 3.0 / max(self.speed, 1.0)))
        try:
            write_atomic(os.path.join(self.logs, "config.yaml"), to_yaml(self.plan.config).encode("utf-8"))
            self.info("Copied config.yaml to log directory")
            if self.plan.benchmark == "sa-bench":
                self.write_rollup()
            if self.plan.benchmark == "custom":
                self.archive_logs()
        except OSError as exc:
            self.warning(f"Post-processing failed: {exc}")
        if code != 0 and self.failed:
            self.failure_details()
        for log in (self.bench_log, self.frontend_log):
            if log is not None:
                log.close()

    def reap(self, grace: float) -> None:
        deadline = time.time() + grace
        for proc in self.procs:
            while proc.poll() is None and time.time() < deadline:
                time.sleep(0.05)
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        deadline = time.time() + 2.0
        for proc in self.procs:
            while proc.poll() is None and time.time() < deadline:
                time.sleep(0.05)
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def write_rollup(self) -> None:
        plan = self.plan
        runs = []
        for conc, n in self.done_points:
            m = n.metrics()
            runs.append(
                {
                    "concurrency": conc,
                    "throughput_toks": round(n.output_tps, 2),
                    "request_throughput": round(n.request_tps, 4),
                    "ttft_mean_ms": round(m["ttft"]["mean"], 2),
                    "ttft_p99_ms": round(m["ttft"]["p99"], 2),
                    "tpot_mean_ms": round(m["tpot"]["mean"], 2),
                    "tpot_p99_ms": round(m["tpot"]["p99"], 2),
                    "itl_mean_ms": round(m["itl"]["mean"], 2),
                    "itl_p99_ms": round(m["itl"]["p99"], 2),
                    "e2el_mean_ms": round(m["e2el"]["mean"], 2),
                    "completed_requests": n.completed,
                    "total_input_tokens": n.input_tokens,
                    "total_output_tokens": n.output_tokens,
                }
            )
        rollup = {
            "benchmark_type": "sa-bench",
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "config": {"model": plan.served_model, "isl": plan.isl, "osl": plan.osl},
            "runs": runs,
        }
        path = os.path.join(self.logs, "benchmark-rollup.json")
        write_atomic(path, json.dumps(rollup, indent=2).encode())
        self.info(f"Wrote {path}")

    def archive_logs(self) -> None:
        target = os.path.join(self.results_root, self.job_id)
        if not os.path.isdir(target):
            os.makedirs(target)
        tmp = os.path.join(target, ".runtime-logs.tar.gz.tmp")
        with tarfile.open(tmp, "w:gz") as tar:
            tar.add(self.logs, arcname=".")
        os.replace(tmp, os.path.join(target, "runtime-logs.tar.gz"))

    def failure_details(self) -> None:
        rule = "=" * 60
        self.error(rule)
        self.error("FAILURE DETAILS")
        self.error(rule)
        for seg, code in self.failed:
            path = os.path.join(self.logs, seg.log_name)
            self.out(f"--- Process: {seg.process_name} ---")
            self.out(f"Exit code: {code}")
            self.out(f"Node: {seg.node}")
            self.out(f"Log file: {path}")
            self.out("Last 50 lines of log:")
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    tail = f.read().splitlines()[-50:]
            except OSError:
                tail = []
            for line in tail:
                self.out("    " + line)
        self.error(rule)
