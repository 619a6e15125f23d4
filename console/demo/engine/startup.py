"""Startup: the workers (srun on Slurm, subprocesses elsewhere), the frontend, faults at startup, health."""

import os
import subprocess
import sys
import time

from .plan import Segment
from .steps import Interrupted, Steps
from .util import FRONTEND_PORT, MODE_KEYS, MODES, WORKER_PORT, LineLog, as_int, as_map, engine_command, stamp


class StartupSteps(Steps):
    def start_workers(self) -> None:
        self.info("Starting backend workers")
        seen = set()
        for seg in self.segments:
            if (seg.mode, seg.index) in seen:
                continue
            seen.add((seg.mode, seg.index))
            nodes = seg.worker_nodes
            if len(nodes) > 1:
                self.info(
                    "Starting {} worker {} on {} nodes ({})".format(seg.mode, seg.index, len(nodes), ", ".join(nodes))
                )
            else:
                self.info(f"Starting {seg.mode} worker {seg.index} on {nodes[0]}")
            env = self.plan.config.get("backend")
            env_map = as_map(as_map(env).get(f"{MODE_KEYS[seg.mode]}_environment"))
            self.info("Env: {}".format(" ".join(f"{k}={v}" for k, v in env_map.items()) or "(none)"))
            self.info(f"Command: {self.worker_command(seg)}")
            for node in nodes:
                self.info("Log: {}".format(os.path.join(self.logs, f"{node}_{seg.mode}_w{seg.index}.out")))
        task_nodes = []  # type: list[str]
        for seg in self.segments:
            if seg.node not in task_nodes:
                task_nodes.append(seg.node)
        base = [
            self.args.python or sys.executable,
            *engine_command(),
            "node",
            "--plan",
            os.path.abspath(self.args.plan),
            "--job-dir",
            self.job_dir,
            "--job-id",
            self.job_id,
            "--nodes",
            ",".join(task_nodes),
            "--attempt",
            str(self.attempt),
            "--speed",
            repr(self.speed),
        ]
        if self.slurm:
            srun = [
                "srun",
                f"--nodes={len(task_nodes)}",
                f"--ntasks={len(task_nodes)}",
                "--ntasks-per-node=1",
                "--nodelist={}".format(",".join(task_nodes)),
                "--kill-on-bad-exit=0",
                f"--job-name={self.plan.name}_workers",
            ]
            self.procs.append(subprocess.Popen(srun + base, stdin=subprocess.DEVNULL))
        else:
            env = dict(os.environ)
            for i, node in enumerate(task_nodes):
                env["SLURM_PROCID"] = str(i)
                self.procs.append(
                    subprocess.Popen([*base, "--node", node, "--procid", str(i)], stdin=subprocess.DEVNULL, env=env)
                )
        self.info(f"Started {len(seen)} worker processes")

    def worker_command(self, seg: Segment) -> str:
        role = self.plan.role(seg.mode)
        gpus = role.gpus if role else seg.gpus
        if self.plan.backend == "atom":
            kv = {"prefill": "kv_producer", "decode": "kv_consumer"}.get(seg.mode)
            cmd = (
                "python3 -m atom.entrypoints.openai_server --model /model "
                f"--host 0.0.0.0 --server-port {WORKER_PORT} -tp {gpus}"
            )
            if kv:
                cmd += (
                    " --kv-transfer-config "
                    f'\'{{"kv_role":"{kv}","kv_connector":"mooncake","proxy_ip":"{seg.worker_nodes[0]}","handshake_port":8998,"protocol":"tcp"}}\''
                )
            return cmd
        return "python3 -m sglang.launch_server --model-path /model --tp-size {} --host 0.0.0.0 --port {}{}".format(
            gpus, WORKER_PORT, "" if seg.mode == "agg" else " --disaggregation-mode " + seg.mode
        )

    def endpoints(self, mode: str) -> "list[str]":
        out = []
        for seg in self.segments:
            if seg.mode == mode and seg.node_rank == 0:
                out.append(f"http://{seg.node}:{WORKER_PORT}")
        return out

    def start_frontend(self) -> None:
        plan = self.plan
        self.info("Starting frontend layer")
        kind = plan.frontend
        if kind == "atomesh":
            if plan.disagg:
                args = "--pd-disaggregation " + " ".join(
                    ["--prefill " + u for u in self.endpoints("prefill")]
                    + ["--decode " + u for u in self.endpoints("decode")]
                )
            else:
                args = "--worker-urls " + " ".join(self.endpoints("agg"))
            cmd = f"atomesh launch {args} --host 0.0.0.0 --port {FRONTEND_PORT} --backend atom"
            self.info(f"Starting atomesh 0 on {self.head}: {cmd}")
            name = "atomesh_0"
        elif kind in ("sglang", "sglang-router"):
            self.info(f"Starting sglang-router 0 on {self.head}")
            name = "sglang-router_0"
        elif kind == "dynamo":
            self.info(f"Frontend topology: nginx on {self.head}")
            self.info(f"Starting dynamo frontend 0 on {self.head}")
            name = "frontend_0"
        else:
            self.info(f"Starting {kind} 0 on {self.head}")
            name = f"{kind}_0"
        self.frontend_log = LineLog(os.path.join(self.logs, f"{self.head}_{name}.out"))
        self.frontend_log.write(
            "[{}] {} listening on 0.0.0.0:{}".format(stamp(), name.rsplit("_", 1)[0], FRONTEND_PORT)
        )
        self.out("")
        self.out("Connection Commands")
        self.out(f"Frontend URL: http://{self.head}:{FRONTEND_PORT}")
        self.out("")

    def worker_keys(self) -> "dict[tuple[str, int], list[Segment]]":
        out = {}  # type: dict[tuple[str, int], list[Segment]]
        for seg in self.segments:
            out.setdefault((seg.mode, seg.index), []).append(seg)
        return out

    def exited(self) -> "list[tuple[Segment, int]]":
        """Worker segments that died and are not reported yet."""
        statuses = self.control.statuses()
        newly = []
        for seg in self.segments:
            value = statuses.get(seg.key, "")
            if not value.startswith("exit "):
                continue
            code = as_int(value[5:], 1)
            if code and all(s is not seg for s, _ in self.failed):
                newly.append((seg, code))
        return newly

    def startup_fault(self, seg: Segment) -> bool:
        for fault in self.plan.faults:
            if not fault.hits(seg.mode, seg.index):
                continue
            if fault.type == "oom-graph-capture" or (fault.type == "zmq-bind" and fault.exit):
                return True
            if fault.type == "flake-first-attempt" and self.attempt <= 1:
                return True
        return False

    def settle_startup_faults(self) -> None:
        """Workers that share a deterministic startup fault die together, as on hardware (they
        load and capture in lockstep): let every one of them report before cleaning up."""
        deadline = time.time() + self.plan.startup_seconds / self.speed + 10.0
        while time.time() < deadline and not self.stop_event.is_set():
            statuses = self.control.statuses()
            pending = [
                seg
                for seg in self.segments
                if self.startup_fault(seg) and not statuses.get(seg.key, "").startswith("exit ")
            ]
            if not pending:
                return
            self.stop_event.wait(0.05)

    def check_workers(self) -> bool:
        """Report worker processes that died; True when one did (a critical failure)."""
        newly = self.exited()
        if newly and not self.failed:
            self.settle_startup_faults()
            newly = self.exited()
        for seg, code in newly:
            self.failed.append((seg, code))
            self.error(f"Critical process '{seg.process_name}' exited with code {code}")
        if newly:
            self.error("Critical process failure detected!")
        return bool(self.failed)

    def readiness(self) -> "tuple[int, int, int]":
        statuses = self.control.statuses()
        counts = {"prefill": 0, "decode": 0, "agg": 0}
        for seg in self.segments:
            if seg.node_rank == 0 and statuses.get(seg.key) == "ready":
                counts[seg.mode] += 1
                if self.frontend_log is not None and seg.key not in self.registered:
                    self.registered.add(seg.key)
                    self.frontend_log.write(f"[{stamp()}] Added {seg.mode} worker http://{seg.node}:{WORKER_PORT}")
        return counts["prefill"], counts["decode"], counts["agg"]

    def await_health(self) -> bool:
        plan = self.plan
        n_p, n_d, n_a = (plan.workers_of(mode) for mode in MODES)
        self.info("Waiting for workers to be ready...")
        interval = plan.health_interval
        if plan.disagg:
            self.info(f"Waiting for server health (expecting {n_p + n_d} health entries: {n_p}P + {n_d}D)...")
        else:
            self.info(f"Waiting for server health (expecting {n_a} agg)...")
        if plan.frontend in ("sglang", "sglang-router"):
            self.info(
                f"Polling http://{self.head}:{FRONTEND_PORT}/workers every {interval:.1f}s "
                f"for {n_p} prefills and {n_d + n_a} decodes (sglang frontend)"
            )
        else:
            self.info(
                f"Polling http://{self.head}:{FRONTEND_PORT}/health every "
                f"{interval:.1f}s for {n_p} prefills and {n_d + n_a} decodes"
            )
        timeout = plan.health_attempts * interval
        if plan.health_seconds is not None:
            timeout = min(timeout, plan.health_seconds)
        started = time.time()
        last_report = None  # type: float | None
        while True:
            elapsed = (time.time() - started) * self.speed
            if self.check_workers():
                self.warning("Wait for model aborted by stop event")
                self.error("Server did not become healthy")
                return False
            hp, hd, ha = self.readiness()
            if hp >= n_p and hd + ha >= n_d + n_a:
                self.info(f"Model is ready. Have {hp} prefills and {hd + ha} decodes.")
                self.info("Server is healthy - starting benchmark")
                return True
            if elapsed >= timeout:
                self.error(f"Model did not get healthy in {int(timeout)} seconds")
                self.error("Server did not become healthy")
                return False
            if elapsed >= interval and (last_report is None or elapsed - last_report >= 60.0):
                last_report = elapsed
                self.info(
                    f"Model is not ready, waiting for {n_p - hp} prefills and "
                    f"{n_d + n_a - hd - ha} decodes. Have {hp} prefills and {hd + ha} decodes."
                )
            self.stop_event.wait(0.05)
            if self.stop_event.is_set():
                raise Interrupted()

    # ------------------------------------------------------------- benchmark
