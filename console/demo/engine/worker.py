"""One node task and the workers on it: each writes ``logs/<node>_<mode>_w<i>.out`` as its engine would."""

import argparse
import contextlib
import os
import random
import signal
import threading
import time
import traceback

from .commands import bootstrap_ports, system_ports, worker_env
from .control import Control
from .dynamo import MockerLog
from .fingerprint import write_fingerprint
from .plan import Fault, Segment, load_plan, place
from .util import (
    FRONTEND_PORT,
    WORKER_PORT,
    ZMQ_PORT_BASE,
    ZMQ_PORT_SPAN,
    LineLog,
    StopFlag,
    as_int,
    clock,
    stamp,
)

# --------------------------------------------------------------------------- workers


class Stopped(Exception):
    """The worker was told to stop."""


class Worker:
    """One worker segment: engine-like startup lines, faults, then serving until stopped."""

    def __init__(self, task: "NodeTask", seg: Segment) -> None:
        self.task = task
        self.plan = task.plan
        self.seg = seg
        self.log = LineLog(os.path.join(task.logs, seg.log_name))
        self.atom = self.plan.backend == "atom"
        self.mocker = self.plan.backend == "mocker"
        self.rng = random.Random(self.plan.seed * 31 + seg.number * 101 + seg.node_rank)
        self.pid = os.getpid() * 10 + seg.number % 10
        self.unregistered = False  # up, but never registered with the router (zmq-bind)

    # ------------------------------------------------------------- output

    def say(self, text: str, rank: "int | None" = None) -> None:
        if self.atom:
            self.log.write(f"[atom {clock()}] {text}")
        else:
            tag = f" TP{rank}" if rank is not None else ""
            self.log.write(f"[{stamp()}{tag}] {text}")

    def raw(self, text: str) -> None:
        self.log.write(text)

    def pause(self, seconds: float) -> None:
        deadline = time.time() + max(0.0, seconds) / self.task.speed
        while True:
            if self.task.stop_event.is_set() or self.task.control.stopped():
                raise Stopped()
            left = deadline - time.time()
            if left <= 0:
                return
            self.task.stop_event.wait(min(left, 0.05))

    def fault(self, kind: str) -> "Fault | None":
        for f in self.plan.faults_of(kind):
            if f.hits(self.seg.mode, self.seg.index):
                return f
        return None

    def status(self, value: str) -> None:
        self.task.control.set_status(self.seg.key, value)

    # ------------------------------------------------------------- lifecycle

    def run(self) -> int:
        code = 0
        try:
            self.status("starting")
            self.fingerprint()
            code = self.start_mocker() if self.mocker else self.start()
            if code == 0:
                code = self.serve()
        except Stopped:
            if not self.mocker:  # the mocker is stopped by srun without a word
                self.say("Received shutdown request, shutting down" if self.atom else "Shutting down server")
            code = 0
        except Exception:
            for line in traceback.format_exc().splitlines():
                self.raw(line)
            code = 1
        self.status(f"exit {code}")
        self.log.close()
        return code

    def fingerprint(self) -> None:
        """What srtctl's preamble records before the engine starts (once per worker)."""
        seg = self.seg
        if seg.node_rank != 0:
            return
        node_id = self.task.nodes.index(seg.node) if seg.node in self.task.nodes else 0
        env = worker_env(self.plan, seg, self.task.head, "127.0.0.1", self.task.sys_ports[seg.key], node_id)
        with contextlib.suppress(OSError):  # srtctl's capture never fails a worker
            write_fingerprint(os.path.join(self.task.logs, f"fingerprint_{seg.mode}_w{seg.index}.json"), env)

    def start_mocker(self) -> int:
        """Dynamo's mocker: no weights and no graphs, only a tokenizer; it registers and serves."""
        plan, seg = self.plan, self.seg
        t = plan.startup_seconds
        log = MockerLog(
            plan.mocker,
            seg.mode,
            self.task.job_id,
            seg.number,
            self.task.head,
            self.task.sys_ports[seg.key],
            self.task.bootstraps.get((seg.mode, seg.index)),
        )
        flake = self.fault("flake-first-attempt")
        if flake is not None and self.task.attempt <= 1:
            return self.fail_flake(flake)
        self.pause(t * 0.6)  # Python and Dynamo's imports
        self.lines(log.launch())
        self.pause(t * 0.05)
        self.lines(log.engine())
        oom = self.fault("oom-graph-capture")
        if oom is not None:
            self.fail_oom(oom, 512)
            return 1
        self.lines(log.running())
        zmq_fault = self.fault("zmq-bind")
        if zmq_fault is not None:
            code = self.fail_zmq(zmq_fault)
            if code and zmq_fault.exit:
                return code
            self.unregistered = bool(code)
        self.pause(t * 0.1)
        if self.fault("health-hang") is None and not self.unregistered:
            self.lines(log.register())
            if seg.node_rank == 0:
                self.status("ready")
            self.lines(log.after_register())
        return 0

    def lines(self, texts: "list[str]") -> None:
        for text in texts:
            self.log.write(text)

    def start(self) -> int:
        plan, seg = self.plan, self.seg
        t = plan.startup_seconds
        role = plan.role(seg.mode)
        tp = role.tp if role else seg.gpus
        self.banner(tp)
        self.pause(t * 0.05)
        flake = self.fault("flake-first-attempt")
        if flake is not None and self.task.attempt <= 1:
            return self.fail_flake(flake)
        self.load_shards(t * 0.5)
        oom = self.fault("oom-graph-capture")
        if not self.capture_graphs(t * 0.3, oom):
            return 1
        zmq_fault = self.fault("zmq-bind")
        if zmq_fault is not None:
            code = self.fail_zmq(zmq_fault)
            if code and zmq_fault.exit:
                return code
            self.unregistered = bool(code)
        if self.atom:
            self.say(f"Initializing KV event publisher hook: endpoint={self.endpoint()} topic=kv-events")
        self.pause(t * 0.1)
        return 0

    def banner(self, tp: int) -> None:
        plan, seg = self.plan, self.seg
        if self.atom:
            role = {"prefill": "kv_producer", "decode": "kv_consumer"}.get(seg.mode, "kv_both")
            self.say(
                "Starting ATOM OpenAI server: model=/model host=0.0.0.0 "
                f"server-port={WORKER_PORT} -tp {tp} kv_role={role}"
            )
            self.say(f"ATOM_HOST_IP={seg.node} node_rank={seg.node_rank} nnodes={len(seg.worker_nodes)}")
            for dp in range(self.dp_size()):
                self.say(f"EngineCore_DP{dp} started (pid {self.pid + dp})")
        else:
            self.say(
                "server_args=ServerArgs(model_path='/model', served_model_name='{}', tp_size={}, "
                "disaggregation_mode='{}', host='0.0.0.0', port={})".format(
                    plan.served_model, tp, seg.mode if seg.mode != "agg" else "null", WORKER_PORT
                )
            )
            self.say("Init torch distributed begin.", 0)
            self.say("Init torch distributed ends. mem usage=0.42 GB", 0)
            self.say("Load weight begin. avail mem=78.52 GB", 0)

    def dp_size(self) -> int:
        role = self.plan.role(self.seg.mode)
        if role is not None and role.dp_attention:
            return max(2, self.seg.gpus)
        return 2

    def load_shards(self, seconds: float) -> None:
        total = self.plan.shards
        steps = min(total, 16)
        started = time.time()
        self.raw(f"Loading safetensors checkpoint shards:   0% Completed | 0/{total} [00:00<?, ?it/s]")
        for i in range(1, steps + 1):
            self.pause(seconds / steps)
            done = round(total * i / float(steps))
            spent = max(0.01, time.time() - started) * self.task.speed
            rate = done / spent
            left = (total - done) / rate if rate else 0.0
            self.raw(
                f"Loading safetensors checkpoint shards: {int(100 * done / total):3d}% "
                f"Completed | {done}/{total} [{mmss(spent)}<{mmss(left)}, {rate:5.2f}it/s]"
            )
        weights = 18.4 if self.plan.total_gpus <= 8 else 182.4
        if self.atom:
            self.say(f"Model loaded in {seconds:.1f} s, weights {weights:.1f} GiB")
        else:
            self.say(
                "Load weight end. type=Model, dtype=torch.bfloat16, "
                f"avail mem=60.12 GB, mem usage={weights / 8:.2f} GB.",
                0,
            )
            self.say("KV Cache is allocated. #tokens: 1843200, K size: 12.66 GB, V size: 12.66 GB", 0)

    def capture_graphs(self, seconds: float, oom: "Fault | None") -> bool:
        batches = self.plan.graph_batches
        fail_at = max(1, batches // 2) if oom is not None else None
        if self.atom:
            self.say(f"Capturing CUDA graphs for {batches} batch sizes")
        else:
            self.say("Capture cuda graph begin. This can take up to several minutes. avail mem=20.14 GB", 0)
        for i in range(1, batches + 1):
            self.pause(seconds / batches)
            bs = max(1, 512 >> (i - 1))
            if fail_at is not None and i == fail_at and oom is not None:
                self.fail_oom(oom, bs)
                return False
            bar = "█" * int(10 * i / batches)
            self.raw(
                f"Capturing batches (bs={bs} avail_mem={20.0 - 0.1 * i:.2f} GB): "
                f"{int(100 * i / batches):3d}%|{bar:<10}| "
                f"{i}/{batches} [00:0{min(i, 9)}<00:0{min(batches - i, 9)}, 2.91it/s]"
            )
        if self.atom:
            self.say(f"CUDA graph capture done in {seconds:.1f} s")
        else:
            self.say(
                f"Capture cuda graph end. Time elapsed: {seconds:.2f} s. mem usage=1.21 GB. avail mem=18.93 GB.",
                0,
            )
        return True

    def endpoint(self) -> str:
        job = as_int(self.task.job_id, 0)
        port = ZMQ_PORT_BASE + (job * 37 + self.seg.number * 3 + self.seg.node_rank) % ZMQ_PORT_SPAN
        return f"tcp://127.0.0.1:{port}"

    # ------------------------------------------------------------- faults

    def fail_flake(self, fault: Fault) -> int:
        rank = fault.rank if fault.rank >= 0 else 1
        self.pause(self.plan.startup_seconds * 0.1)
        self.raw(
            f"{self.seg.node}:{self.pid}:{self.pid + rank} [{rank}] NCCL WARN Net "
            f": Connect to 10.0.0.{10 + rank}<43215> failed : Connection refused"
        )
        message = (
            fault.message or "RuntimeError: NCCL Error 2: unhandled system error (run with NCCL_DEBUG=INFO for details)"
        )
        self.raw("Traceback (most recent call last):")
        self.raw('  File "/sgl-workspace/python/model_executor/model_runner.py", line 412, in init_torch_distributed')
        self.raw("    initialize_model_parallel(tensor_model_parallel_size=self.tp_size)")
        self.raw(message)
        self.say("Scheduler hit an exception: " + message, rank)
        return 1

    def fail_oom(self, fault: Fault, bs: int) -> None:
        gpu = fault.rank if fault.rank >= 0 else 3
        vendor = "HIP" if self.plan.gpu_type.lower().startswith("mi") else "CUDA"
        capacity = 287.98 if vendor == "HIP" else 79.19
        message = fault.message or (
            f"torch.OutOfMemoryError: {vendor} out of memory. Tried "
            f"to allocate 2.00 GiB. GPU {gpu} has a total capacity "
            f"of {capacity:.2f} GiB of which 1.07 GiB is free. Including non-PyTorch memory, this process has "
            f"{capacity - 1.07:.2f} GiB memory in use. Of the allocated "
            f"memory {capacity - 2.5:.2f} GiB is allocated by PyTorch, and "
            "512.00 MiB is reserved by PyTorch but unallocated."
        )
        self.raw("Traceback (most recent call last):")
        self.raw('  File "/sgl-workspace/python/model_executor/cuda_graph_runner.py", line 318, in capture')
        self.raw("    graph, output_buffers = self.capture_one_batch_size(bs, forward)")
        self.raw('  File "/usr/local/lib/python3.10/dist-packages/torch/cuda/graphs.py", line 186, in __exit__')
        self.raw("    self.cuda_graph.capture_end()")
        self.raw(message)
        self.raw("")
        self.raw("During handling of the above exception, another exception occurred:")
        self.raw("")
        self.raw(f"Exception: Capture cuda graph failed: {vendor} out of memory. Tried to allocate 2.00 GiB. (bs={bs})")
        self.say(f"Scheduler hit an exception: Capture cuda graph failed (bs={bs})", gpu)

    def fail_zmq(self, fault: Fault) -> int:
        try:
            import zmq  # type: ignore[import-not-found,unused-ignore]
        except ImportError as exc:
            self.say(
                "ERROR: the demo's zmq-bind fault needs pyzmq (Debian/Ubuntu: apt-get install python3-zmq); "
                f"cannot import zmq: {exc}"
            )
            return 1
        addr = self.endpoint()
        first = fault.rank if 0 <= fault.rank < self.dp_size() else 0
        held = []
        failed = []
        contexts = []
        try:
            order = [first] + [r for r in range(self.dp_size()) if r != first]
            for dp in order:
                ctx = zmq.Context()
                contexts.append(ctx)
                sock = ctx.socket(zmq.PUB)
                sock.setsockopt(zmq.LINGER, 0)
                try:
                    sock.bind(addr)
                except zmq.ZMQError as exc:
                    sock.close()
                    failed.append(dp)
                    prefix = f"(EngineCore_DP{dp} pid={self.pid + dp}) "
                    self.say(
                        f"EngineCore_DP{dp} failed while initialising the KV event publisher hook on {addr}: {exc}"
                    )
                    for line in traceback.format_exc().rstrip().splitlines():
                        self.raw(prefix + line)
                    continue
                held.append(sock)
                self.say(f"EngineCore_DP{dp} KV event publisher bound to {addr}")
        finally:
            for bound in held:
                bound.close()
            for ctx in contexts:
                ctx.term()
        if not failed:
            return 0
        if not fault.exit:
            return 1
        self.say("Some processes failed to start, shutting down all")
        self.say(
            "Failed to start all EngineCore processes: {}".format(
                ", ".join(f"EngineCore_DP{dp} exited with code 1" for dp in failed)
            )
        )
        self.raw("RuntimeError: Failed to initialize all EngineCores")
        return 1

    # ------------------------------------------------------------- serving

    def serve(self) -> int:
        plan, seg = self.plan, self.seg
        hang = self.fault("health-hang") is not None or self.unregistered
        if not self.mocker:  # the mocker registered (or did not) as it started
            self.server_up(hang)
        crash = self.fault("crash-at-concurrency")
        last = 0
        while True:
            self.pause(0.1 * self.task.speed)  # wall-clock polling, whatever the speed
            if hang:
                continue
            conc = self.task.control.point()
            if conc and conc != last:
                last = conc
                self.serving_line(conc)
                if crash is not None and crash.concurrency == conc and seg.node_rank == 0:
                    self.pause(plan.point_seconds * 0.3)
                    return self.fail_crash(crash)

    def server_up(self, hang: bool) -> None:
        """An SGLang or ATOM server's lines once it listens, then its registration (or why not)."""
        seg = self.seg
        if self.atom:
            self.say(f"Server started on http://0.0.0.0:{WORKER_PORT}")
        else:
            self.raw(f"[{stamp()}] INFO:     Started server process [{self.pid}]")
            self.raw(f"[{stamp()}] INFO:     Waiting for application startup.")
            self.raw(f"[{stamp()}] INFO:     Application startup complete.")
            self.raw(f"[{stamp()}] INFO:     Uvicorn running on http://0.0.0.0:{WORKER_PORT} (Press CTRL+C to quit)")
        if self.unregistered:
            self.say("KV event publisher not running on every DP rank: not registering with the router")
        elif hang:
            self.say(f"Waiting for the KV transfer bootstrap server at {seg.worker_nodes[0]}:8998 before registering")
        elif seg.node_rank == 0:
            if self.atom:
                self.say(f"Registered with atomesh router at http://{self.task.head}:{FRONTEND_PORT} as {seg.mode}")
            else:
                self.raw(f'[{stamp()}] INFO:     127.0.0.1:45678 - "GET /get_model_info HTTP/1.1" 200 OK')
                self.raw(f"[{stamp()}] The server is fired up and ready to roll!")
            self.status("ready")

    def serving_line(self, conc: int) -> None:
        running = conc if self.seg.mode != "prefill" else 0
        if self.mocker:
            return  # the mocker logs nothing per batch at info level
        if self.atom:
            self.say(f"{self.seg.mode} step: running={running} waiting=0 kv_cache_usage={min(0.95, conc / 4096.0):.1%}")
        elif self.seg.mode == "prefill":
            self.say(
                f"Prefill batch. #new-seq: {min(conc, 8)}, #new-token: {min(conc, 8) * self.plan.isl}, "
                f"#cached-token: 0, token usage: {min(0.9, conc / 512.0):.2f}, "
                f"#running-req: 0, #queue-req: {max(0, conc - 8)},",
                0,
            )
        else:
            self.say(
                f"Decode batch. #running-req: {running}, #token: {running * (self.plan.isl + self.plan.osl // 2)}, "
                f"token usage: {min(0.95, conc / 512.0):.2f}, gen throughput (token/s): {conc * 38.5:.2f}, "
                "#queue-req: 0,",
                0,
            )

    def fail_crash(self, fault: Fault) -> int:
        rank = fault.rank if fault.rank >= 0 else 0
        message = fault.message or "RuntimeError: CUDA error: an illegal memory access was encountered"
        if self.atom:
            self.say(f"ModelRunner{rank} hit an exception in the forward pass")
        else:
            self.say("Scheduler hit an exception: Traceback (most recent call last):", rank)
        self.raw('  File "/sgl-workspace/python/managers/scheduler.py", line 2480, in run_scheduler_process')
        self.raw("    scheduler.event_loop_overlap()")
        self.raw('  File "/sgl-workspace/python/model_executor/model_runner.py", line 1711, in forward_decode')
        self.raw("    return self.model.forward(forward_batch.input_ids, forward_batch.positions, forward_batch)")
        self.raw(message)
        self.raw(
            "CUDA kernel errors might be asynchronously reported at some "
            "other API call, so the stacktrace below might be incorrect."
        )
        self.raw("For debugging consider passing CUDA_LAUNCH_BLOCKING=1")
        self.raw("Fatal Python error: Aborted")
        return -6


def mmss(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60:02d}:{seconds % 60:02d}"


class NodeTask:
    """One task per worker node: runs every worker segment placed on it, one thread each."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.plan = load_plan(args.plan).for_attempt(args.attempt)
        self.job_dir = args.job_dir
        self.logs = os.path.join(self.job_dir, "logs")
        self.job_id = args.job_id
        self.attempt = args.attempt
        self.speed = args.speed
        self.control = Control(args.control)
        self.stop_event = StopFlag()
        self.nodes = [n for n in args.nodes.split(",") if n]
        procid = as_int(os.environ.get("SLURM_PROCID"), args.procid)
        here = os.environ.get("SLURMD_NODENAME") or args.node
        if here in self.nodes:
            self.node = here
        else:
            self.node = self.nodes[min(procid, len(self.nodes) - 1)]
        self.head = self.nodes[0]
        self.segments = place(self.plan, self.nodes)
        self.sys_ports = system_ports(self.segments)
        self.bootstraps = bootstrap_ports(self.segments)

    def run(self) -> int:
        signal.signal(signal.SIGTERM, lambda *_: self.stop_event.set())
        signal.signal(signal.SIGINT, lambda *_: self.stop_event.set())
        mine = [s for s in self.segments if s.node == self.node]
        codes = [0] * len(mine)
        threads = []

        def run_one(i: int, seg: Segment) -> None:
            codes[i] = Worker(self, seg).run()

        for i, seg in enumerate(mine):
            th = threading.Thread(target=run_one, args=(i, seg), name=seg.key)
            th.daemon = True
            th.start()
            threads.append(th)
        while any(th.is_alive() for th in threads):
            for th in threads:
                th.join(0.1)
        failed = [c for c in codes if c]
        if not failed:
            return 0
        return failed[0] if failed[0] > 0 else 128 - failed[0]
