"""Startup: the workers (srun on Slurm, subprocesses elsewhere), the frontend, faults at startup, health."""

import os
import socket
import subprocess
import sys
import time

from .commands import shell_join, worker_argv, worker_env
from .dynamo import FrontendLog, lease_id
from .plan import Segment
from .steps import Interrupted, Steps
from .util import FRONTEND_PORT, MODES, WORKER_PORT, LineLog, as_int, engine_command, stamp

INTERNAL_FRONTEND_PORT = 8180  # dynamo frontends behind nginx


class StartupSteps(Steps):
    @property
    def head_ip(self) -> str:
        """HEAD_NODE_IP: the head node's address (every node of the local scheduler is this machine)."""
        if not self.slurm:
            return "127.0.0.1"
        try:
            return socket.gethostbyname(self.head)
        except OSError:
            return "127.0.0.1"

    def worker_environment(self, seg: Segment) -> "dict[str, str]":
        node_id = self.worker_nodes.index(seg.node) if seg.node in self.worker_nodes else 0
        return worker_env(self.plan, seg, self.infra, self.head_ip, self.sys_ports[seg.key], node_id)

    def start_workers(self) -> None:
        """One srun per worker process, as srtctl starts SGLang, vLLM and mocker workers."""
        self.info("Starting backend workers")
        for seg in self.segments:
            self.info(f"Starting {seg.mode} worker {seg.index} on {seg.node}")
            env = self.worker_environment(seg)
            self.info("Env: {}".format(" ".join(f"{k}={v}" for k, v in env.items())))
            bootstrap = self.bootstraps.get((seg.mode, seg.index))
            self.info(f"Command: {shell_join(worker_argv(self.plan, seg, bootstrap))}")
            self.info(f"Log: {os.path.join(self.logs, seg.log_name)}")
        self.processes += len(self.segments)
        task_nodes = self.worker_nodes
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
            "--control",
            self.control.root,
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
        self.info(f"Started {len(self.segments)} worker processes")

    def endpoints(self, mode: str) -> "list[str]":
        out = []
        for seg in self.segments:
            if seg.mode == mode and seg.node_rank == 0:
                out.append(f"http://{seg.node}:{WORKER_PORT}")
        return out

    def frontend_nodes(self) -> "tuple[str | None, list[str]]":
        """(nginx node, frontend nodes) by srtctl's rule: nginx in front of several routers only with
        two or more nodes and ``enable_multiple_frontends`` (its default)."""
        nodes = self.worker_nodes
        if len(nodes) <= 1 or not self.plan.multiple_frontends:
            return None, [self.head]
        others = [n for n in nodes if n != self.head]
        return self.head, others[: min(self.plan.additional_frontends + 1, len(others))]

    def start_frontend(self) -> None:
        plan = self.plan
        self.info("Starting frontend layer")
        kind = plan.frontend
        nginx, nodes = self.frontend_nodes()
        port = FRONTEND_PORT
        if nginx is not None:
            self.info(f"Frontend topology: nginx on {nginx}, {len(nodes)} frontends on {nodes}")
            self.info(f"Starting nginx on {nginx}")
            port = INTERNAL_FRONTEND_PORT
            self.write_nginx(nginx, nodes, port)
            self.processes += 1
        if kind == "dynamo":
            self.frontend = FrontendLog(plan.served_model, plan.tokenizer, self.job_id)
            for idx, node in enumerate(nodes):
                self.info(f"Starting dynamo frontend {idx} on {node}")
                log = LineLog(os.path.join(self.logs, f"{node}_frontend_{idx}.out"))
                if idx == 0:
                    self.frontend_log = log
                    lines = self.frontend.start(self.infra, port)
                else:
                    lines = FrontendLog(plan.served_model, plan.tokenizer, self.job_id).start(self.infra, port)
                for text in lines:
                    log.write(text)
                if idx:
                    log.close()
            self.processes += len(nodes)
            return
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
        else:
            self.info(f"Starting {kind} 0 on {self.head}")
            name = f"{kind}_0"
        self.processes += 1
        self.frontend_log = LineLog(os.path.join(self.logs, f"{self.head}_{name}.out"))
        self.frontend_log.write(
            "[{}] {} listening on 0.0.0.0:{}".format(stamp(), name.rsplit("_", 1)[0], FRONTEND_PORT)
        )

    def write_nginx(self, node: str, frontends: "list[str]", port: int) -> None:
        upstream = "\n".join(f"        server {n}:{port};" for n in frontends)
        conf = (
            "events {\n    worker_connections 65536;\n}\n\nhttp {\n    upstream backend {\n"
            f"{upstream}\n    }}\n\n    server {{\n        listen {FRONTEND_PORT};\n"
            "        location / {\n            proxy_pass http://backend;\n        }\n    }\n}\n"
        )
        with open(os.path.join(self.logs, "nginx.conf"), "w", encoding="utf-8") as f:
            f.write(conf)
        open(os.path.join(self.logs, f"{node}_nginx.out"), "a").close()

    def connection_info(self) -> None:
        """srtctl's Connection Commands block: the public URL and how to get a shell on each node."""
        plan = self.plan
        mounts = [f"{self.logs}:/logs"]
        if not plan.hf_model:
            mounts.append(f"{plan.model}:/model")
        container = f"--container-image={plan.container} --container-mounts={','.join(mounts)}"
        rule = "=" * 60
        self.info("")
        self.info(rule)
        self.info("Connection Commands")
        self.info(rule)
        self.info(f"Frontend URL: http://{self.head}:{FRONTEND_PORT}")
        self.info("")
        self.info(f"To connect to head node ({self.head}):")
        self.info(f"  srun {container} --jobid {self.job_id} -w {self.head} --overlap --pty bash")
        for node in self.worker_nodes:
            if node != self.head:
                self.info("")
                self.info(f"To connect to worker node ({node}):")
                self.info(f"  srun {container} --jobid {self.job_id} -w {node} --overlap --pty bash")
        self.info(rule)
        self.info("")

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
                if seg.key not in self.registered:
                    self.registered.add(seg.key)
                    self.announce_worker(seg)
        return counts["prefill"], counts["decode"], counts["agg"]

    def announce_worker(self, seg: Segment) -> None:
        """The frontend sees a new worker."""
        if self.frontend is not None:
            self.frontend_write(self.frontend.worker(seg.mode, lease_id(self.job_id, seg.number)))
        elif self.frontend_log is not None:
            self.frontend_log.write(f"[{stamp()}] Added {seg.mode} worker http://{seg.node}:{WORKER_PORT}")

    def await_health(self) -> bool:
        plan = self.plan
        n_p, n_d, n_a = (plan.workers_of(mode) for mode in MODES)
        self.info("Waiting for workers to be ready...")
        interval = plan.health_interval
        if plan.disagg:
            self.info(f"Waiting for server health (expecting {n_p + n_d} health entries: {n_p}P + {n_d}D)...")
        else:
            self.info(f"Waiting for server health (expecting {n_a} health entries: {n_a} agg)...")
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
        # srtctl reports progress every 60 s; a demo recipe that shortens its health check to
        # less than two minutes gets its reports as much sooner.
        report_every = min(60.0, timeout / 2.0)
        started = time.time()
        last_report = 0.0
        polls = 0
        while True:
            elapsed = (time.time() - started) * self.speed
            if self.check_workers():
                self.warning("Wait for model aborted by stop event")
                self.error("Server did not become healthy")
                return False
            if self.frontend is not None and elapsed >= polls * interval:
                polls += 1
                self.frontend_write([self.frontend.health()])
            hp, hd, ha = self.readiness()
            if hp >= n_p and hd + ha >= n_d + n_a:
                self.info(f"Model is ready. Have {hp} prefills and {hd + ha} decodes.")
                self.info("Server is healthy - starting benchmark")
                return True
            if elapsed >= timeout:
                self.error(f"Model did not get healthy in {int(timeout)} seconds")
                self.error("Server did not become healthy")
                return False
            if elapsed - last_report >= report_every:
                last_report = elapsed
                self.info(
                    f"Model is not ready, waiting for {n_p - hp} prefills and "
                    f"{n_d + n_a - hd - ha} decodes. Have {hp} prefills and {hd + ha} decodes."
                )
            self.stop_event.wait(0.05)
            if self.stop_event.is_set():
                raise Interrupted()
