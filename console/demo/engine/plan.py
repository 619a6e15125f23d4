"""The arm plan the engine runs (roles, faults, segments of workers placed on nodes)."""

import json
import math
import os
import subprocess

from .util import MODE_KEYS, MODES, as_float, as_int, as_map, parse_concurrencies

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


class BenchSettings:
    """The sa-bench settings of ``benchmark:`` with srtctl's defaults."""

    def __init__(self, bench: "dict[str, object]") -> None:
        self.req_rate = str(bench.get("req_rate") or "inf")
        ratio = bench.get("random_range_ratio")
        self.random_range_ratio = str(ratio) if ratio is not None else "0.8"
        self.num_prompts_mult = as_int(bench.get("num_prompts_mult"), 10)
        self.num_warmup_mult = as_int(bench.get("num_warmup_mult"), 2)
        self.custom_tokenizer = str(bench.get("custom_tokenizer") or "")
        self.use_chat_template = bench.get("use_chat_template", True) is not False
        self.dataset_name = str(bench.get("dataset_name") or "random")
        self.dataset_path = str(bench.get("dataset_path") or "")
        self.reuse_http_connections = bench.get("reuse_http_connections") is True


class MockerSettings:
    """``backend:`` of a Dynamo mocker recipe, with srtctl's defaults."""

    def __init__(self, backend: "dict[str, object]") -> None:
        self.engine_type = str(backend.get("engine_type") or "vllm")
        self.speedup_ratio = as_float(backend.get("speedup_ratio"), 100.0)
        self.decode_speedup_ratio = as_float(backend.get("decode_speedup_ratio"), 1.0)
        self.num_gpu_blocks = as_int(backend.get("num_gpu_blocks_override"), 16384)
        self.max_num_seqs = as_int(backend.get("max_num_seqs"), 256)
        self.max_num_batched_tokens = as_int(backend.get("max_num_batched_tokens"), 8192)
        self.data_parallel_size = as_int(backend.get("data_parallel_size"), 1)
        self.num_workers = max(1, as_int(backend.get("num_workers"), 1))
        block = backend.get("block_size")
        self.block_size = as_int(block, 0) or None
        self.optional = [
            (flag, str(backend[key]))
            for key, flag in (
                ("block_size", "--block-size"),
                ("startup_time", "--startup-time"),
                ("kv_transfer_bandwidth", "--kv-transfer-bandwidth"),
                ("kv_cache_dtype", "--kv-cache-dtype"),
                ("preemption_mode", "--preemption-mode"),
            )
            if backend.get(key) is not None
        ]
        self.prefix_caching = backend.get("enable_prefix_caching", True) is not False
        self.chunked_prefill = backend.get("enable_chunked_prefill", True) is not False
        self.overrides = as_map(backend.get("mocker_config"))

    def mode_overrides(self, mode: str) -> "dict[str, object]":
        return as_map(self.overrides.get(MODE_KEYS[mode]))


def str_map(value: "object") -> "dict[str, str]":
    return dict((str(k), str(v)) for k, v in as_map(value).items())


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
        self.recipe_path = str(data.get("recipe_path") or "")
        self.hf_model = self.model.startswith("hf:")
        # srtctl: the container's /model, or the HuggingFace id of an `hf:` model.
        self.tokenizer = self.model[3:] if self.hf_model else "/model"
        self.worker_model_arg = self.tokenizer
        self.served_model = str(env.get("SERVED_MODEL") or self.served_model_name(backend))
        self.bench = BenchSettings(bench)
        self.use_chat_template = self.bench.use_chat_template
        self.mocker = MockerSettings(backend)
        self.frontend_config = as_map(config.get("frontend"))
        self.multiple_frontends = self.frontend_config.get("enable_multiple_frontends", True) is not False
        self.additional_frontends = as_int(self.frontend_config.get("num_additional_frontends"), 9)
        dynamo = as_map(config.get("dynamo"))
        self.request_plane = str(dynamo.get("request_plane") or "tcp")
        event_plane = dynamo.get("event_plane")
        self.event_plane = str(event_plane) if event_plane else None
        self.environment = str_map(config.get("environment"))
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

    def served_model_name(self, backend: "dict[str, object]") -> str:
        """srtctl's served model name: the engine config's ``served-model-name``, else the model path's last part."""
        block = as_map(backend.get(self.backend + "_config"))
        for mode in ("prefill", "aggregated", "decode"):
            args = as_map(block.get(mode))
            name = args.get("served-model-name") or args.get("served_model_name")
            if name and self.backend in ("sglang", "vllm"):
                return str(name)
        return self.model.rstrip("/").rsplit("/", 1)[-1]

    def mode_environment(self, mode: str) -> "dict[str, str]":
        return str_map(as_map(self.config.get("backend")).get(MODE_KEYS[mode] + "_environment"))

    @property
    def sa_bench_agg_gpus(self) -> int:
        """sa-bench's GPU count of an aggregated arm: its nodes times GPUs per node, as srtctl counts."""
        agg = self.role("agg")
        return (agg.nodes if agg and agg.nodes else 1) * self.gpus_per_node

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
        self.slot = 0  # position among the workers sharing this node's GPUs

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
                seg = Segment(role.name, i, node, 0, [node], role.gpus, number)
                seg.slot = i % per_node
                segments.append(seg)
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
