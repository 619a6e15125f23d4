#!/usr/bin/env python3
"""The demo engine: one srtctl job, simulated faithfully, inside ``<outputs>/<jobid>/``.

A single stdlib-only file (``zmq`` is imported only for the ZMQ bind fault) that runs under
the system ``python3`` (3.6+) of a login or compute node. It is uploaded and run as
``python3 engine.py <command> ...``; it never imports the console.

Commands:

``orchestrator``  run by the batch script: writes ``config.yaml``, ``<JOBID>.json`` and the
                  sweep log lines of srtctl on stdout, starts the workers (``srun`` on Slurm,
                  subprocesses otherwise), waits for health, runs the benchmark and cleans up.
``node``          one task per worker node (``srun --ntasks-per-node=1``): runs every worker
                  segment placed on that node, each writing ``logs/<node>_<mode>_w<i>.out``.

The orchestrator and the node tasks talk through files under ``<job dir>/.demo/`` (worker
status, the concurrency being measured, a stop flag), which works on one machine and on a
shared cluster file system alike.

The plan file (``--plan``) is JSON: ``{"name", "config", "backend", "frontend", "benchmark",
"isl", "osl", "concurrencies", "gpus_per_node", "roles": [{"name", "workers", "nodes",
"gpus_per_worker", "colocated", "dp_attention", "tp"}], "model", "container", "precision",
"gpu_type"}``; a bare srtctl config (v1 resources) is accepted too. ``config.demo`` holds
``startup_seconds``, ``point_seconds``, ``shards``, ``graph_batches``, ``seed``,
``tok_s_per_gpu`` and ``faults``.
"""

import argparse
import io
import json
import math
import os
import random
import signal
import subprocess
import sys
import tarfile
import threading
import time
import traceback

FRONTEND_PORT = 8000
WORKER_PORT = 30000
ZMQ_PORT_BASE = 20000
ZMQ_PORT_SPAN = 20000
MODES = ("prefill", "decode", "agg")
MODE_KEYS = {"prefill": "prefill", "decode": "decode", "agg": "aggregated"}
FAULT_TYPES = ("zmq-bind", "oom-graph-capture", "health-hang", "crash-at-concurrency", "flake-first-attempt")
TRUE_WORDS = ("1", "true", "yes", "on")


# --------------------------------------------------------------------------- small helpers


def stamp() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")


def clock() -> str:
    return time.strftime("%H:%M:%S")


def as_int(value: "object", default: int) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return default
    return default


def as_float(value: "object", default: float) -> float:
    if isinstance(value, bool):
        return default
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return default
    return default


def as_map(value: "object") -> "dict[str, object]":
    return value if isinstance(value, dict) else {}


def parse_concurrencies(value: "object") -> "list[int]":
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [int(value)]
    if isinstance(value, str):
        return [int(p) for p in value.replace(",", "x").split("x") if p.strip().isdigit()]
    if isinstance(value, list):
        out = []  # type: list[int]
        for item in value:
            out.extend(parse_concurrencies(item))
        return out
    return []


def write_atomic(path: str, data: bytes) -> None:
    """Write a file under a temporary name and rename it, so it appears whole."""
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, "." + name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def utf8_stdout() -> None:
    # A batch job may run with no locale (ASCII stdout on old Pythons): srtctl's lines hold emoji.
    if (getattr(sys.stdout, "encoding", "") or "").lower().replace("-", "") != "utf8":
        sys.stdout = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", errors="replace", line_buffering=True)


def yaml_scalar(value: "object") -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    text = str(value)
    plain = (
        text
        and text.strip() == text
        and text[0] not in "!&*-?{}[],#|>@`\"'%:~=<"
        and ": " not in text
        and " #" not in text
        and not text.endswith(":")
        and text.lower() not in ("null", "true", "false", "yes", "no", "on", "off", "y", "n", "~")
    )
    if plain:
        try:
            float(text)
            plain = False  # would read back as a number
        except ValueError:
            pass
    if plain and all(ch.isprintable() for ch in text):
        return text
    return json.dumps(text, ensure_ascii=False)


def yaml_lines(value: "object", indent: int) -> "list[str]":
    pad = " " * indent
    lines = []  # type: list[str]
    if isinstance(value, dict):
        if not value:
            return [pad + "{}"]
        for key, item in value.items():
            head = pad + yaml_scalar(str(key)) + ":"
            lines.extend(yaml_item(head, item, indent))
        return lines
    if isinstance(value, list):
        if not value:
            return [pad + "[]"]
        for item in value:
            if isinstance(item, dict) and item:
                sub = yaml_lines(item, indent + 2)
                lines.append(pad + "- " + sub[0][indent + 2 :])
                lines.extend(sub[1:])
            else:
                lines.extend(yaml_item(pad + "-", item, indent))
        return lines
    return [pad + yaml_scalar(value)]


def yaml_item(head: str, item: "object", indent: int) -> "list[str]":
    if isinstance(item, (dict, list)) and item:
        return [head, *yaml_lines(item, indent + 2)]
    if isinstance(item, str) and "\n" in item and all(ch.isprintable() or ch == "\n" for ch in item):
        body = item if item.endswith("\n") else item + "\n"
        chomp = "" if item.endswith("\n") and not item.endswith("\n\n") else ("-" if not item.endswith("\n") else "+")
        if body[0] == " ":
            return [head + " " + json.dumps(item, ensure_ascii=False)]
        pad = " " * (indent + 2)
        return [head + " |" + chomp] + [(pad + ln) if ln else "" for ln in body[:-1].split("\n")]
    if isinstance(item, (dict, list)):
        return [head + (" {}" if isinstance(item, dict) else " []")]
    return [head + " " + yaml_scalar(item)]


def to_yaml(value: "object") -> str:
    """A block-style YAML rendering of JSON-like data (config.yaml for people and tools)."""
    return "\n".join(yaml_lines(value, 0)) + "\n"


class LineLog:
    """A log file written line by line, safe to share between threads."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.handle = open(path, "a", encoding="utf-8", errors="replace")  # noqa: SIM115 (kept open)

    def write(self, text: str) -> None:
        with self.lock:
            self.handle.write(text if text.endswith("\n") else text + "\n")
            self.handle.flush()

    def close(self) -> None:
        with self.lock:
            self.handle.close()


# --------------------------------------------------------------------------- the plan


class Role:
    def __init__(self, name: str, workers: int, nodes: int, gpus: int, colocated: bool, dpa: bool, tp: int) -> None:
        self.name = name
        self.workers = max(1, workers)
        self.nodes = max(0, nodes)
        self.gpus = max(1, gpus)
        self.colocated = colocated
        self.dp_attention = dpa
        self.tp = tp or gpus


class Fault:
    def __init__(self, raw: "dict[str, object]") -> None:
        self.type = str(raw.get("type") or "")
        role = raw.get("role")
        self.role = str(role) if role else None
        self.concurrency = as_int(raw.get("concurrency"), 0) or None
        self.rank = as_int(raw.get("rank"), -1)
        worker = raw.get("worker")
        self.worker = as_int(worker, 0) if worker is not None else None
        message = raw.get("message")
        self.message = str(message) if message else None
        # zmq-bind: as on hardware (job 39443) the worker stays up but never registers, so the
        # job keeps its nodes until the health check gives up; `exit: true` shuts it down at once.
        self.exit = bool(raw.get("exit", False))
        # A transient fault: only the first attempt of the arm meets it (a rerun gets past it).
        self.once = bool(raw.get("once", False))

    def hits(self, mode: str, index: int) -> bool:
        if self.role and self.role != mode:
            return False
        return self.worker is None or self.worker == index


class Plan:
    def __init__(self, data: "dict[str, object]") -> None:
        config = as_map(data.get("config")) if "config" in data else data
        self.config = config
        self.name = str(data.get("name") or config.get("name") or "demo")
        backend = as_map(config.get("backend"))
        engine = config.get("engine")
        self.backend = str(
            data.get("backend")
            or backend.get("type")
            or (as_map(engine).get("type") if isinstance(engine, dict) else engine)
            or "sglang"
        )
        self.frontend = str(data.get("frontend") or as_map(config.get("frontend")).get("type") or "dynamo")
        bench = as_map(config.get("benchmark"))
        env = as_map(bench.get("env"))
        self.bench_env = dict((str(k), str(v)) for k, v in env.items())
        self.benchmark = str(data.get("benchmark") or bench.get("type") or "manual")
        raw_conc = data.get("concurrencies")
        if raw_conc is None:
            raw_conc = bench.get("concurrencies", env.get("CONCURRENCIES"))
        self.concurrencies = parse_concurrencies(raw_conc)
        self.isl = as_int(data.get("isl"), 0) or as_int(bench.get("isl"), 0) or as_int(env.get("ISL"), 1024)
        self.osl = as_int(data.get("osl"), 0) or as_int(bench.get("osl"), 0) or as_int(env.get("OSL"), 1024)
        resources = as_map(config.get("resources"))
        model = as_map(config.get("model"))
        self.gpus_per_node = as_int(data.get("gpus_per_node"), 0) or as_int(resources.get("gpus_per_node"), 4)
        self.model = str(data.get("model") or model.get("path") or "model")
        self.container = str(data.get("container") or model.get("container") or "")
        self.precision = str(data.get("precision") or model.get("precision") or "")
        self.gpu_type = str(data.get("gpu_type") or resources.get("gpu_type") or "gpu")
        self.served_model = str(env.get("SERVED_MODEL") or self.model.split(":", 1)[-1])
        roles = data.get("roles")
        self.roles = self.roles_from(roles) if isinstance(roles, list) else self.roles_v1(resources)
        self.node_demand = as_int(data.get("node_demand"), 0) or max(1, sum(r.nodes for r in self.roles))
        health = as_map(config.get("health_check"))
        self.health_attempts = as_int(health.get("max_attempts"), 180)
        self.health_interval = as_float(health.get("interval_seconds"), 10.0)
        demo = as_map(config.get("demo"))
        self.startup_seconds = as_float(demo.get("startup_seconds"), 3.0)
        self.point_seconds = as_float(demo.get("point_seconds"), 2.0)
        self.shards = max(1, as_int(demo.get("shards"), 8))
        self.graph_batches = max(1, as_int(demo.get("graph_batches"), 12))
        self.seed = as_int(demo.get("seed"), 0)
        # A recipe's health check is sized for real models (an hour for the seed's 64 shards);
        # the demo may shorten the wait, which is still simulated time.
        self.health_seconds = as_float(demo.get("health_seconds"), 0.0) or None
        self.tok_s_per_gpu = as_float(demo.get("tok_s_per_gpu"), 0.0) or self.default_tok_s()
        faults = demo.get("faults")
        self.faults = [Fault(f) for f in faults if isinstance(f, dict)] if isinstance(faults, list) else []

    def roles_from(self, items: "list[object]") -> "list[Role]":
        roles = []
        for raw in items:
            r = as_map(raw)
            name = str(r.get("name") or "agg")
            gpus = as_int(r.get("gpus_per_worker"), self.gpus_per_node)
            roles.append(
                Role(
                    name,
                    as_int(r.get("workers"), 1),
                    as_int(r.get("nodes"), 1),
                    gpus,
                    bool(r.get("colocated")),
                    bool(r.get("dp_attention")),
                    as_int(r.get("tp"), gpus),
                )
            )
        return roles

    def roles_v1(self, res: "dict[str, object]") -> "list[Role]":
        gpn = self.gpus_per_node
        block = as_map(as_map(self.config.get("backend")).get(self.backend + "_config"))
        roles = []
        if res.get("prefill_nodes") is None and res.get("decode_nodes") is None:
            nodes = as_int(res.get("agg_nodes"), 1) or 1
            workers = as_int(res.get("agg_workers"), 1) or 1
            gpus = as_int(res.get("gpus_per_agg"), 0) or max(1, nodes * gpn // workers)
            return [Role("agg", workers, nodes, gpus, False, self.dpa(block, "agg"), gpus)]
        for mode in ("prefill", "decode"):
            nodes = as_int(res.get(mode + "_nodes"), 0)
            workers = as_int(res.get(mode + "_workers"), 0)
            if not workers:
                continue
            gpus = as_int(res.get("gpus_per_" + mode), 0) or (nodes * gpn // workers if nodes else gpn)
            roles.append(Role(mode, workers, nodes, gpus, nodes == 0, self.dpa(block, mode), gpus))
        return roles

    @staticmethod
    def dpa(block: "dict[str, object]", mode: str) -> bool:
        args = as_map(block.get(MODE_KEYS[mode]))
        return any(args.get(k) is True for k in ("enable-dp-attention", "dp-attention", "enable_dp_attention"))

    def default_tok_s(self) -> float:
        gpu = self.gpu_type.lower()
        for prefix, value in (("mi355", 2600.0), ("gb300", 3200.0), ("gb200", 2800.0), ("b200", 2400.0)):
            if gpu.startswith(prefix):
                return value
        return 1500.0

    def role(self, name: str) -> "Role | None":
        for r in self.roles:
            if r.name == name:
                return r
        return None

    def workers_of(self, name: str) -> int:
        r = self.role(name)
        return r.workers if r else 0

    def gpus_of(self, name: str) -> int:
        r = self.role(name)
        return r.workers * r.gpus if r else 0

    @property
    def total_gpus(self) -> int:
        return sum(r.workers * r.gpus for r in self.roles)

    @property
    def disagg(self) -> bool:
        return self.role("agg") is None

    def faults_of(self, kind: str) -> "list[Fault]":
        return [f for f in self.faults if f.type == kind]

    def for_attempt(self, attempt: int) -> "Plan":
        """This plan as attempt ``attempt`` meets it: `once` faults only hit the first."""
        self.faults = [f for f in self.faults if not (f.once and attempt > 1)]
        return self


class Segment:
    """The part of one worker that runs on one node (a multi-node worker has several)."""

    def __init__(self, mode: str, index: int, node: str, rank: int, nodes: "list[str]", gpus: int, number: int) -> None:
        self.mode = mode
        self.index = index
        self.node = node
        self.node_rank = rank  # 0 on the worker's leader node
        self.worker_nodes = nodes
        self.gpus = gpus  # GPUs of this segment
        self.number = number  # position of the worker in the whole job

    @property
    def log_name(self) -> str:
        return f"{self.node}_{self.mode}_w{self.index}.out"

    @property
    def process_name(self) -> str:
        return f"{self.mode}_{self.index}_{self.worker_nodes[0]}"

    @property
    def key(self) -> str:
        return f"{self.mode}_w{self.index}_{self.node}"


def place(plan: Plan, nodes: "list[str]") -> "list[Segment]":
    """Where every worker runs, in srtctl's order: prefill, decode, agg; nodes used in order."""
    segments = []  # type: list[Segment]
    cursor = 0
    first_nodes = nodes[: max(1, plan.roles[0].nodes)] if plan.roles else nodes[:1]
    number = 0
    for role in sorted(plan.roles, key=lambda r: MODES.index(r.name) if r.name in MODES else 9):
        if role.nodes == 0:
            role_nodes = first_nodes
        else:
            role_nodes = nodes[cursor : cursor + role.nodes] or nodes[-1:]
            cursor += role.nodes
        if role.workers <= len(role_nodes):
            per = len(role_nodes) // role.workers
            for i in range(role.workers):
                mine = role_nodes[i * per : (i + 1) * per]
                share = max(1, role.gpus // len(mine))
                for rank, node in enumerate(mine):
                    segments.append(Segment(role.name, i, node, rank, mine, share, number))
                number += 1
        else:
            per_node = math.ceil(role.workers / float(len(role_nodes)))
            for i in range(role.workers):
                node = role_nodes[min(i // per_node, len(role_nodes) - 1)]
                segments.append(Segment(role.name, i, node, 0, [node], role.gpus, number))
                number += 1
    return segments


def job_nodes(count: int) -> "list[str]":
    """The job's node names: Slurm's allocation, or node1..nodeN without Slurm."""
    nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
    if os.environ.get("SLURMD_NODENAME") and nodelist:
        try:
            out = subprocess.check_output(["scontrol", "show", "hostnames", nodelist], stderr=subprocess.DEVNULL)
            names = [n for n in out.decode().split() if n]
            if names:
                return names
        except (OSError, subprocess.CalledProcessError):
            pass
        return [os.environ["SLURMD_NODENAME"]]
    return [f"node{i + 1}" for i in range(max(1, count))]


def load_plan(path: str) -> Plan:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: the plan is a JSON object")
    return Plan(data)


# --------------------------------------------------------------------------- shared control files


class Control:
    """The files under ``<job dir>/.demo/`` that the orchestrator and the workers share."""

    def __init__(self, job_dir: str) -> None:
        self.root = os.path.join(job_dir, ".demo")
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
        return os.path.exists(os.path.join(self.root, "stop"))

    def set_point(self, concurrency: int) -> None:
        write_atomic(os.path.join(self.root, "point"), str(concurrency).encode())

    def point(self) -> int:
        try:
            with open(os.path.join(self.root, "point")) as f:
                return int(f.read().strip() or 0)
        except (OSError, ValueError):
            return 0


# --------------------------------------------------------------------------- the numbers


class PointNumbers:
    """A simple deterministic throughput/latency model for one concurrency point."""

    def __init__(self, plan: Plan, conc: int, num_prompts: int, salt: int) -> None:
        rng = random.Random(plan.seed * 1000003 + conc * 7919 + salt)
        self.rng = rng
        gpus = max(1, plan.total_gpus)
        isl, osl = plan.isl, plan.osl
        half = 16.0 * max(1.0, gpus / 8.0)
        peak_total = plan.tok_s_per_gpu * gpus
        total = peak_total * conc / (conc + half) * rng.uniform(0.97, 1.03)
        self.output_tps = total * osl / float(isl + osl)
        self.total_tps = total
        self.conc = conc
        self.num_prompts = num_prompts
        self.completed = num_prompts
        self.input_tokens = num_prompts * isl
        self.output_tokens = num_prompts * osl
        self.duration = self.output_tokens / self.output_tps
        self.request_tps = num_prompts / self.duration
        self.tpot = 1000.0 * conc / self.output_tps * rng.uniform(0.95, 1.0)
        self.ttft = (30.0 + isl * 0.012) * (1.0 + conc / 64.0) * rng.uniform(0.95, 1.05)
        self.itl = self.tpot * 0.99
        self.e2el = self.ttft + self.tpot * (osl - 1)
        self.peak_tps = self.output_tps * rng.uniform(1.15, 1.35)

    def stats(self, mean: float, spread: float) -> "dict[str, float]":
        return {
            "mean": mean,
            "median": mean * (1.0 - spread * 0.1),
            "std": mean * spread * 0.5,
            "p90": mean * (1.0 + spread * 1.2),
            "p99": mean * (1.0 + spread * 2.5),
            "p99.9": mean * (1.0 + spread * 3.5),
        }

    def metrics(self) -> "dict[str, dict[str, float]]":
        return {
            "ttft": self.stats(self.ttft, 0.35),
            "tpot": self.stats(self.tpot, 0.08),
            "itl": self.stats(self.itl, 0.25),
            "e2el": self.stats(self.e2el, 0.1),
        }

    def per_request(self, osl: int) -> "tuple[list[float], list[list[float]]]":
        rng = self.rng
        ttfts = [round(self.ttft / 1000.0 * rng.uniform(0.6, 1.6), 6) for _ in range(self.num_prompts)]
        base = self.itl / 1000.0
        itls = [[round(base * rng.uniform(0.7, 1.4), 6) for _ in range(max(0, osl - 1))] for _ in ttfts]
        return ttfts, itls


def fmt_block(n: PointNumbers, percentiles: "tuple[str, ...]") -> "list[str]":
    lines = ["{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")]
    lines.append("{:<40} {:<10}".format("Successful requests:", n.completed))
    lines.append("{:<40} {:<10.2f}".format("Benchmark duration (s):", n.duration))
    lines.append("{:<40} {:<10}".format("Total input tokens:", n.input_tokens))
    lines.append("{:<40} {:<10}".format("Total generated tokens:", n.output_tokens))
    lines.append("{:<40} {:<10.2f}".format("Request throughput (req/s):", n.request_tps))
    lines.append("{:<40} {:<10.2f}".format("Output token throughput (tok/s):", n.output_tps))
    if "99" in percentiles and len(percentiles) == 1:
        lines.append("{:<40} {:<10.2f}".format("Peak output token throughput (tok/s):", n.peak_tps))
    lines.append("{:<40} {:<10.2f}".format("Total Token throughput (tok/s):", n.total_tps))
    metrics = n.metrics()
    titles = (
        ("ttft", "Time to First Token", "TTFT"),
        ("tpot", "Time per Output Token (excl. 1st token)", "TPOT"),
        ("itl", "Inter-token Latency", "ITL"),
        ("e2el", "End-to-end Latency", "E2EL"),
    )
    for key, title, short in titles:
        lines.append("{s:{c}^{n}}".format(s=title, n=50, c="-"))
        stats = metrics[key]
        lines.append("{:<40} {:<10.2f}".format(f"Mean {short} (ms):", stats["mean"]))
        lines.append("{:<40} {:<10.2f}".format(f"Median {short} (ms):", stats["median"]))
        for p in percentiles:
            lines.append("{:<40} {:<10.2f}".format(f"P{p} {short} (ms):", stats["p" + p]))
    lines.append("=" * 50)
    return lines


def json_float(value: float) -> float:
    return round(value, 6)


def sa_bench_json(plan: Plan, n: PointNumbers) -> bytes:
    """One line, no newline, in sa-bench's benchmark_serving key order, per-request arrays included."""
    ttfts, itls = n.per_request(plan.osl)
    words = ("the", "model", "writes", "tokens", "for", "a", "demo", "benchmark")
    text = " ".join(words[i % len(words)] for i in range(max(1, min(plan.osl, 64))))
    head = [
        ("date", time.strftime("%Y%m%d-%H%M%S")),
        ("backend", "dynamo"),
        ("model_id", plan.served_model),
        ("tokenizer_id", plan.served_model),
        ("best_of", 1),
        ("num_prompts", n.num_prompts),
        ("request_rate", "inf"),
        ("burstiness", 1.0),
        ("max_concurrency", n.conc),
        ("duration", json_float(n.duration)),
        ("completed", n.completed),
        ("total_input_tokens", n.input_tokens),
        ("total_output_tokens", n.output_tokens),
        ("request_throughput", json_float(n.request_tps)),
        ("request_goodput", None),
        ("output_throughput", json_float(n.output_tps)),
        ("peak_output_tokens_per_s", json_float(n.peak_tps)),
        ("total_token_throughput", json_float(n.total_tps)),
        ("input_lens", [plan.isl] * n.num_prompts),
        ("output_lens", [plan.osl] * n.num_prompts),
        ("ttfts", ttfts),
        ("itls", itls),
        ("generated_texts", [text] * n.num_prompts),
        ("errors", [""] * n.num_prompts),
    ]
    metrics = n.metrics()
    for key in ("ttft", "tpot", "itl", "e2el"):
        for stat in ("mean", "median", "std", "p99"):
            head.append((f"{stat}_{key}_ms", json_float(metrics[key][stat])))
    head.append(("reuse_http_connections", False))
    return ordered_json(head)


def fixed_seq_json(plan: Plan, n: PointNumbers, started: float) -> bytes:
    """InferenceX's benchmark_serving result: ``request_goodput:`` key, p90/p99/p99.9, no per-request detail."""
    items = [
        ("date", time.strftime("%Y%m%d-%H%M%S")),
        ("backend", "openai-chat"),
        ("model_id", plan.served_model),
        ("tokenizer_id", plan.served_model),
        ("best_of", 1),
        ("num_prompts", n.num_prompts),
        ("request_rate", "inf"),
        ("burstiness", 1.0),
        ("max_concurrency", n.conc),
        ("duration", json_float(n.duration)),
        ("benchmark_start_time_unix", json_float(started)),
        ("benchmark_end_time_unix", json_float(started + n.duration)),
        ("completed", n.completed),
        ("total_input_tokens", n.input_tokens),
        ("total_output_tokens", n.output_tokens),
        ("request_throughput", json_float(n.request_tps)),
        ("request_goodput:", None),
        ("output_throughput", json_float(n.output_tps)),
        ("total_token_throughput", json_float(n.total_tps)),
        ("input_lens", [plan.isl] * n.num_prompts),
        ("output_lens", [plan.osl] * n.num_prompts),
    ]  # type: list[tuple[str, object]]
    metrics = n.metrics()
    for key in ("ttft", "tpot", "itl", "e2el"):
        for stat in ("mean", "median", "std", "p90", "p99", "p99.9"):
            items.append((f"{stat}_{key}_ms", json_float(metrics[key][stat])))
    return ordered_json(items)


def ordered_json(items: "list[tuple[str, object]]") -> bytes:
    parts = [json.dumps(k) + ": " + json.dumps(v) for k, v in items]
    return ("{" + ", ".join(parts) + "}").encode("utf-8")


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
            code = self.start()
            if code == 0:
                code = self.serve()
        except Stopped:
            self.say("Received shutdown request, shutting down" if self.atom else "Shutting down server")
            code = 0
        except Exception:
            for line in traceback.format_exc().splitlines():
                self.raw(line)
            code = 1
        self.status(f"exit {code}")
        self.log.close()
        return code

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

    def serving_line(self, conc: int) -> None:
        running = conc if self.seg.mode != "prefill" else 0
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
        self.control = Control(self.job_dir)
        self.stop_event = threading.Event()
        self.nodes = [n for n in args.nodes.split(",") if n]
        procid = as_int(os.environ.get("SLURM_PROCID"), args.procid)
        here = os.environ.get("SLURMD_NODENAME") or args.node
        if here in self.nodes:
            self.node = here
        else:
            self.node = self.nodes[min(procid, len(self.nodes) - 1)]
        self.head = self.nodes[0]

    def run(self) -> int:
        signal.signal(signal.SIGTERM, lambda *_: self.stop_event.set())
        signal.signal(signal.SIGINT, lambda *_: self.stop_event.set())
        mine = [s for s in place(self.plan, self.nodes) if s.node == self.node]
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


# --------------------------------------------------------------------------- the orchestrator


class Interrupted(Exception):
    """SIGTERM/SIGINT: clean up and leave."""


class Orchestrator:
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
            os.path.abspath(__file__),
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

    def run_benchmark(self) -> bool:
        plan = self.plan
        self.bench_log = LineLog(os.path.join(self.logs, "benchmark.out"))
        custom = plan.benchmark == "custom"
        runner = "Custom" if custom else ("SA-Bench" if plan.benchmark == "sa-bench" else plan.benchmark)
        self.info(f"Running {runner} benchmark")
        if custom:
            self.info("Script: bash -lc <benchmark.command>")
            self.info(
                "Command: {}".format(
                    " ".join(str(as_map(plan.config.get("benchmark")).get("command") or "").split())[:300]
                )
            )
        else:
            self.info("Script: /srtctl-benchmarks/sa-bench/bench.sh")
            self.info(
                "Command: bash /srtctl-benchmarks/sa-bench/bench.sh http://localhost:{} {} {} {} inf".format(
                    FRONTEND_PORT, plan.isl, plan.osl, "x".join(str(c) for c in plan.concurrencies)
                )
            )
        self.info("Log: {}".format(os.path.join(self.logs, "benchmark.out")))
        ok = self.custom_benchmark() if custom else self.sa_bench()
        if not ok and not self.stop_event.is_set():
            self.error("Benchmark failed with exit code 1")
        return ok

    def bout(self, text: str) -> None:
        assert self.bench_log is not None
        self.bench_log.write(text)

    def measure(self, conc: int) -> bool:
        """Let one point run for point_seconds; False when a worker died meanwhile."""
        self.control.set_point(conc)
        crash = [f for f in self.plan.faults_of("crash-at-concurrency") if f.concurrency == conc]
        deadline = time.time() + self.plan.point_seconds / self.speed
        # A worker told to crash at this point dies mid-measurement; wait for it (bounded).
        hard = deadline + (30.0 if crash else 0.0)
        while True:
            if self.check_workers():
                return False
            now = time.time()
            if now >= deadline and not crash:
                return True
            if now >= hard:
                return True
            self.stop_event.wait(0.05)
            if self.stop_event.is_set():
                raise Interrupted()

    def sa_bench(self) -> bool:
        plan = self.plan
        conc_text = "x".join(str(c) for c in plan.concurrencies)
        self.bout(
            f"SA-Bench Config: endpoint=http://localhost:{FRONTEND_PORT}; "
            f"isl={plan.isl}; osl={plan.osl}; concurrencies={conc_text}; req_rate=inf; "
            f"model={plan.served_model}; dataset=random; random_range_ratio=0.8; num_prompts_mult=10; num_warmup_mult=2"
        )
        self.bout("Verifying endpoint...")
        reply = '{"id":"chatcmpl-demo","object":"chat.completion","created":' + str(int(time.time()))
        self.bout((reply + ',"model":' + json.dumps(plan.served_model) + ',"choices":[{"index":0,"message":')[:200])
        total = plan.total_gpus
        suffix = ""
        if plan.disagg:
            suffix = "_ctx_{}_gen_{}".format(plan.gpus_of("prefill"), plan.gpus_of("decode"))
        folder = os.path.join(self.logs, f"sa-bench_isl_{plan.isl}_osl_{plan.osl}")
        if not os.path.isdir(folder):
            os.makedirs(folder)
        for conc in plan.concurrencies:
            warm = PointNumbers(plan, conc, conc * 2, 1)
            self.bout("Traffic request rate: 250.0")
            self.bout("Burstiness factor: 1.0 (Poisson process)")
            self.bout(f"Maximum request concurrency: {conc}")
            for line in fmt_block(warm, ("99",)):
                self.bout(line)
            self.bout(f"Running benchmark with concurrency: {conc}")
            self.bout(time.strftime("%a %b %d %H:%M:%S %Z %Y"))
            self.bout(
                "+ python3 -u /srtctl-benchmarks/sa-bench/benchmark_serving.py "
                f"--model {plan.served_model} --backend dynamo "
                f"--base-url http://localhost:{FRONTEND_PORT} --dataset-name random "
                f"--random-input-len {plan.isl} --random-output-len {plan.osl} "
                f"--random-range-ratio 0.8 --num-prompts {conc * 10} --max-concurrency {conc} --request-rate inf "
                "--percentile-metrics ttft,tpot,itl,e2el --save-result "
                f"--result-dir /logs/sa-bench_isl_{plan.isl}_osl_{plan.osl} "
                f"--result-filename results_concurrency_{conc}_gpus_{total}{suffix}.json"
            )
            self.bout("Traffic request rate: inf")
            self.bout("Burstiness factor: 1.0 (Poisson process)")
            self.bout(f"Maximum request concurrency: {conc}")
            if not self.measure(conc):
                self.bout(f"Error: benchmark_serving.py failed at concurrency {conc}: Server disconnected")
                return False
            numbers = PointNumbers(plan, conc, conc * 10, 0)
            name = f"results_concurrency_{conc}_gpus_{total}{suffix}.json"
            write_atomic(os.path.join(folder, name), sa_bench_json(plan, numbers))
            for line in fmt_block(numbers, ("99",)):
                self.bout(line)
            self.done_points.append((conc, numbers))
            self.bout(time.strftime("%a %b %d %H:%M:%S %Z %Y"))
            self.bout(f"Completed benchmark with concurrency: {conc}")
            self.bout("-" * 41)
        self.bout(f"SA-Bench complete. Results in /logs/sa-bench_isl_{plan.isl}_osl_{plan.osl}")
        return True

    def custom_benchmark(self) -> bool:
        plan = self.plan
        stem = plan.bench_env.get("RESULT_STEM") or plan.name
        folder = os.path.join(self.results_root, self.job_id, "fixed-seq")
        if not os.path.isdir(folder):
            os.makedirs(folder)
        for conc in plan.concurrencies:
            self.bout(
                f"Namespace(backend='openai-chat', base_url='http://{self.head}:{FRONTEND_PORT}', "
                "endpoint='/v1/chat/completions', "
                f"dataset_name='random', model='{plan.served_model}', "
                f"num_prompts={conc * 2}, max_concurrency={conc}, request_rate=inf, "
                f"random_input_len={plan.isl}, random_output_len={plan.osl}, "
                f"random_range_ratio=1.0, num_warmups={conc}, "
                "percentile_metrics='ttft,tpot,itl,e2el', metric_percentiles='90,99,99.9', save_result=True)"
            )
            self.bout("Starting initial single prompt test run...")
            self.bout("Initial test run completed. Starting main benchmark run...")
            self.bout(f"Warming up with {conc} requests...")
            self.bout("Warmup completed.")
            self.bout("Traffic request rate: inf")
            self.bout("Burstiness factor: 1.0 (Poisson process)")
            self.bout(f"Maximum request concurrency: {conc}")
            started = time.time()
            if not self.measure(conc):
                self.bout("Traceback (most recent call last):")
                self.bout("aiohttp.client_exceptions.ServerDisconnectedError: Server disconnected")
                return False
            numbers = PointNumbers(plan, conc, conc * 2, 0)
            name = f"{stem}-isl{plan.isl}-osl{plan.osl}-c{conc}.json"
            write_atomic(os.path.join(folder, name), fixed_seq_json(plan, numbers, started))
            for line in fmt_block(numbers, ("90", "99", "99.9")):
                self.bout(line)
            self.done_points.append((conc, numbers))
        return True

    # ------------------------------------------------------------- cleanup

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


# --------------------------------------------------------------------------- command line


def env_speed() -> float:
    value = as_float(os.environ.get("SRT_DEMO_SPEED"), 1.0)
    return value if value > 0 else 1.0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="engine.py", description="Simulate one srtctl job (demo engine).")
    sub = p.add_subparsers(dest="command")
    orch = sub.add_parser("orchestrator", help="run the job (what the batch script calls)")
    orch.add_argument("--plan", required=True, help="the arm's plan/config JSON")
    orch.add_argument("--job-dir", default=None, help="the job output dir (default: from --job-dir-template)")
    orch.add_argument("--job-dir-template", default=None, help="e.g. <outputs>/%%j; %%j becomes the job id")
    orch.add_argument("--job-id", default=None, help="default: $SLURM_JOB_ID")
    orch.add_argument("--results-root", default=None, help="InferenceX results root (default <job dir>/results)")
    orch.add_argument("--attempt", type=int, default=as_int(os.environ.get("SRT_DEMO_ATTEMPT"), 1))
    orch.add_argument("--speed", type=float, default=env_speed(), help="divide every demo duration by this")
    orch.add_argument("--python", default=None, help="interpreter for the worker tasks (default: this one)")
    node = sub.add_parser("node", help="one worker-node task (started by the orchestrator)")
    node.add_argument("--plan", required=True)
    node.add_argument("--job-dir", required=True)
    node.add_argument("--job-id", required=True)
    node.add_argument("--nodes", required=True, help="comma-separated worker nodes, in task order")
    node.add_argument("--node", default="", help="this node (default: $SLURMD_NODENAME)")
    node.add_argument("--procid", type=int, default=0, help="this task (default: $SLURM_PROCID)")
    node.add_argument("--attempt", type=int, default=1)
    node.add_argument("--speed", type=float, default=1.0)
    return p


def main(argv: "list[str] | None" = None) -> int:
    utf8_stdout()
    args = parser().parse_args(argv)
    if args.command is None:
        parser().print_help()
        return 2
    if args.speed <= 0:
        args.speed = 1.0
    if args.command == "orchestrator":
        try:
            orchestrator = Orchestrator(args)
        except (OSError, ValueError) as exc:
            print(f"{stamp()} [ERROR] Config error: cannot load the plan {args.plan}: {exc}", flush=True)
            return 1
        return orchestrator.run()
    if args.command == "node":
        try:
            task = NodeTask(args)
        except (OSError, ValueError) as exc:
            print(f"node task: cannot load the plan {args.plan}: {exc}", file=sys.stderr, flush=True)
            return 1
        return task.run()
    parser().print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
