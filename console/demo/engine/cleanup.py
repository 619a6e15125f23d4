"""Cleanup: stopping the workers, the failure details, the copies into logs/, the rollup, the lockfile."""

import json
import os
import shutil
import tarfile
import time

from .rollup import write_rollup
from .steps import Steps


class CleanupSteps(Steps):
    def cleanup(self, code: int) -> None:
        self.info("Cleanup")
        self.info(f"Cleaning up {self.processes} processes...")
        self.control.stop()
        self.reap(max(2.0, 3.0 / max(self.speed, 1.0)))
        if code != 0 and self.failed:
            self.failure_details()
        try:
            self.copy_to_logs()
            if self.plan.benchmark == "sa-bench":
                self.rollup()
            self.write_lockfile(final=True)
            if self.plan.benchmark == "custom":
                self.archive_logs()
        except OSError as exc:
            self.warning(f"Post-processing failed: {exc}")
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

    def copy_to_logs(self) -> None:
        """srtctl copies what ``apply`` left in the job dir into logs/, so that logs/ alone is the record."""
        configs = sorted(n for n in os.listdir(self.job_dir) if n.startswith("config") and n.endswith(".yaml"))
        for name in [*configs, "sbatch_script.sh", f"{self.job_id}.json"]:
            source = self.path(name)
            if os.path.isfile(source):
                shutil.copy2(source, os.path.join(self.logs, name))
                self.info(f"Copied {name} to log directory")

    def rollup(self) -> None:
        try:
            with open(self.path(f"{self.job_id}.json"), encoding="utf-8") as f:
                meta = json.load(f)
        except (OSError, ValueError):
            meta = {}
        written = write_rollup(self.logs, meta if isinstance(meta, dict) else {})
        if written:
            # The rollup script's output is logged as one message.
            self.info("\n".join(f"Wrote {path}" for path in written))

    def archive_logs(self) -> None:
        target = os.path.join(self.results_root, self.job_id)
        if not os.path.isdir(target):
            os.makedirs(target)
        tmp = os.path.join(target, ".runtime-logs.tar.gz.tmp")
        with tarfile.open(tmp, "w:gz") as tar:
            tar.add(self.logs, arcname=".")
        os.replace(tmp, os.path.join(target, "runtime-logs.tar.gz"))

    def failure_details(self) -> None:
        """srtctl's block on the processes that failed: each one's exit, node, log and last 50 lines."""
        rule = "=" * 60
        self.error(rule)
        self.error("FAILURE DETAILS")
        self.error(rule)
        for seg, code in self.failed:
            path = os.path.join(self.logs, seg.log_name)
            self.error(f"\n--- Process: {seg.process_name} ---")
            self.error(f"Exit code: {code}")
            self.error(f"Node: {seg.node}")
            self.error(f"Log file: {path}")
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    tail = f.read().splitlines()[-50:]
            except OSError:
                tail = []
            if tail:
                self.error("\nLast 50 lines of log:")
                for line in tail:
                    self.error("  " + line)
        self.error(rule)
