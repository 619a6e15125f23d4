"""The upstream flavour: recipes as NVIDIA/srt-slurm's srtctl (0.3.0 at c88ef731) reads them.

Three layers, each said in the console's own words and checked against the real srtctl by
tests/unit/test_flavour_differential.py:

- the schema its loader applies (marshmallow, unknown keys refused, its conversions: "4" is
  an integer, `yes` a boolean, 60 not a string), with the rules it checks at load time;
- what srtctl does to a recipe before checking it (a plain file's `lock:` is dropped,
  `observability.enabled` fills in defaults);
- what it refuses only once the job runs (frontend type, worker placement, the benchmark
  runner's own checks): warnings of kind "job-start:<stage>", since `srtctl apply` accepts the
  recipe.
"""

from __future__ import annotations

import copy
import math
from pathlib import PurePosixPath
from typing import Any

from console.recipes.spec import (
    AnyValue,
    Checker,
    Choice,
    Fields,
    LBool,
    LInt,
    ListOf,
    LNum,
    MapOf,
    Spec,
    SStr,
    loose_bool,
    loose_int,
    loose_num,
    type_name,
)
from console.recipes.yamlio import KeyPath

NAME = "upstream srtctl"
LABEL = "upstream srtctl (NVIDIA/srt-slurm 0.3.0, c88ef731)"
FORK_NAME = "the fork's srtctl (SemiAnalysisAI/srt-slurm)"
FORK_BACKENDS = ("atom", "tilert", "tokenspeed")
VERSION = "0.3.0"
BACKENDS = ("sglang", "trtllm", "vllm", "mocker")
FRONTENDS = ("dynamo", "sglang", "trtllm_serve", "vllm")
BENCHMARK_RUNNERS = (
    "custom", "gpqa", "gsm8k", "lm-eval", "longbenchv2", "mmlu", "mooncake-router", "router",
    "sa-bench", "sglang-bench", "trace-replay",
)  # fmt: skip
PLACEMENTS = ("head", "first_decode", "last_decode")
DEFAULT_GPUS_PER_NODE = 4


def _fields(fields: dict[str, Spec], required: tuple[str, ...] = (), null: bool = False) -> Fields:
    return Fields(fields, required=required, nullable=null)


def _strmap(values: Spec | None = None, null: bool = False) -> MapOf:
    return MapOf(values or SStr(False), nullable=null, string_keys=True)


ENV = _strmap()
FLAGS = _strmap(AnyValue(), null=True)  # engine CLI flags: any YAML value
MODES = _fields({"prefill": FLAGS, "decode": FLAGS, "aggregated": FLAGS}, null=True)
STRINGS = ListOf(SStr(False), nullable=False)
EXPORTER = _fields({"container_image": SStr(False), "port": LInt(False), "command": SStr()},
                   required=("container_image", "port"), null=True)  # fmt: skip


class AnyOf(Spec):
    """srtctl's `A | B` fields: the first alternative that loads wins."""

    def __init__(self, options: tuple[Spec, ...], expects: str, nullable: bool = True) -> None:
        self.options = options
        self.expects = expects
        self.nullable = nullable

    def check(self, value: Any, path: KeyPath, out: Checker) -> None:
        if value is None:
            if not self.nullable:
                out.error(path, f"may not be null (give {self.expects})")
            return
        for option in self.options:
            trial = Checker()
            option.check(value, path, trial)
            if not trial.found:
                return
        out.error(path, f"expected {self.expects}, got {type_name(value)} {_short(value)}")


class PathText(Spec):
    """srtctl's path templates (`{job_id}`, `$HOME`): a string, never null."""

    expects = "a path"

    def check(self, value: Any, path: KeyPath, out: Checker) -> None:
        if not isinstance(value, str):
            out.error(path, f"expected a path (a string), got {type_name(value)} {_short(value)}")


class Mounts(Spec):
    """`container_mounts: {host path: container path}`, both strings."""

    def check(self, value: Any, path: KeyPath, out: Checker) -> None:
        if not isinstance(value, dict):
            out.error(path, f"expected a mapping of host path: container path, got {type_name(value)}")
            return
        for key, item in value.items():
            if not isinstance(key, str):
                out.error((*path, key), f"a host path must be a string, got {type_name(key)} {key!r}")
            else:
                PathText().check(item, (*path, key), out)


class SweepParameters(Spec):
    """`benchmark.sweep`: parameter lists, flat or under `parameters:` (srtctl reads, never runs it)."""

    def check(self, value: Any, path: KeyPath, out: Checker) -> None:
        if value is None:
            return
        if not isinstance(value, dict):
            out.error(path, f"expected a mapping of parameter: [values], got {type_name(value)}")
            return
        params = value.get("parameters") if "parameters" in value else value
        where = (*path, "parameters") if "parameters" in value else path
        if not isinstance(params, dict):
            out.error(where, f"expected a mapping of parameter: [values], got {type_name(params)}")
            return
        for key, item in params.items():
            if (key != "mode" or "parameters" in value) and not isinstance(item, list):
                out.error((*where, key), f"a sweep parameter is a list of values, got {type_name(item)}")


MODEL = _fields({"path": SStr(False), "container": SStr(False), "precision": SStr(False), "stage_dir": SStr()},
                required=("path", "container", "precision"))  # fmt: skip
RESOURCES = _fields(
    {
        "gpu_type": SStr(False), "gpus_per_node": LInt(False),
        "prefill_nodes": LInt(), "decode_nodes": LInt(), "prefill_workers": LInt(), "decode_workers": LInt(),
        "agg_nodes": LInt(), "agg_workers": LInt(), "spread_workers": LBool(), "het_jobs": LBool(null=True),
        "gpus_per_prefill": LInt(), "gpus_per_decode": LInt(), "gpus_per_agg": LInt(),
    },
    required=("gpu_type",),
)  # fmt: skip
SLURM = _fields({"account": SStr(), "partition": SStr(), "time_limit": SStr()})
FRONTEND = _fields(
    {
        "type": SStr(False), "enable_multiple_frontends": LBool(), "num_additional_frontends": LInt(False),
        "nginx_container": SStr(False), "nginx_raise_ulimit": LBool(), "nginx_session_affinity": LBool(),
        "nginx_session_affinity_header": SStr(False), "nginx_keepalive_timeout": SStr(False),
        "args": FLAGS, "env": _strmap(null=True), "ctx_router": FLAGS, "gen_router": FLAGS,
        "server_config_extra": FLAGS, "orchestrator_placement": SStr(False), "dedicated_node": LBool(),
    }
)  # fmt: skip
DYNAMO = _fields(
    {
        "install": LBool(), "version": SStr(), "hash": SStr(), "top_of_tree": LBool(), "wheel": SStr(),
        "request_plane": SStr(False), "event_plane": SStr(), "cargo_patches": ListOf(SStr(False)),
    }
)  # fmt: skip
CONCURRENCIES = AnyOf((ListOf(LInt(False), nullable=False), SStr(False)),
                      'a list of integers or a string such as "4x8x16"')  # fmt: skip
BENCHMARK = _fields(
    {
        "type": SStr(False), "isl": LInt(), "osl": LInt(), "concurrencies": CONCURRENCIES,
        "req_rate": AnyOf((SStr(False), LInt(False)), '"inf" or an integer'),
        "client_placement": SStr(False), "client_dedicated_node": LBool(), "colocate_with_frontend": LBool(),
        "sweep": SweepParameters(),
        "num_examples": LInt(), "max_tokens": LInt(), "repeat": LInt(), "num_threads": LInt(),
        "max_context_length": LInt(), "categories": ListOf(SStr(False)), "num_shots": LInt(),
        "temperature": LNum(), "top_p": LNum(), "top_k": LInt(), "num_requests": LInt(), "concurrency": LInt(),
        "prefix_ratios": AnyOf((ListOf(LNum(False), nullable=False), SStr(False)), "a list of numbers or a string"),
        "mooncake_workload": SStr(), "ttft_threshold_ms": LInt(), "itl_threshold_ms": LInt(),
        "random_range_ratio": LNum(), "num_prompts_mult": LInt(), "num_warmup_mult": LInt(),
        "dataset_name": SStr(), "dataset_path": SStr(), "trace_file": SStr(), "custom_tokenizer": SStr(),
        "use_chat_template": LBool(), "reuse_http_connections": LBool(), "command": SStr(),
        "container_image": SStr(), "env": ENV, "aiperf_package": SStr(), "aiperf_args": _strmap(AnyValue()),
        "export_node_metrics": LBool(), "slow_down_sleep_time": LNum(), "slow_down_wait_time": LNum(),
    }
)  # fmt: skip
PHASE = _fields({"start_step": LInt(), "stop_step": LInt()}, null=True)
PROFILING = _fields(
    {
        "type": SStr(False), "extra_nsys_args": ListOf(SStr(False)), "prefill": PHASE, "decode": PHASE,
        "aggregated": PHASE, "delay_secs": LInt(), "duration_secs": LInt(), "benchmark_duration_secs": LInt(False),
    }
)  # fmt: skip
TACHOMETER = _fields(
    {
        "enabled": LBool(), "binary_path": SStr(False), "default_frequency": LNum(False),
        "sync_interval_secs": LInt(False), "compaction_threads": LInt(False), "storage_subdir": SStr(False),
        "extra_metadata": ENV, "dcgm_exporter": EXPORTER, "node_exporter": EXPORTER,
    }
)  # fmt: skip
OBSERVABILITY = _fields(
    {
        "enabled": LBool(), "enable_otel": LBool(), "otel_endpoint": SStr(), "scrape_metrics": LBool(null=True),
        "scrape_interval_seconds": LNum(False), "scrape_output": SStr(False), "build_dashboard": LBool(null=True),
        "tachometer": TACHOMETER,
    }
)  # fmt: skip
TELEMETRY = _fields(
    {
        "enabled": LBool(), "dcgm_exporter": EXPORTER, "default_frequency": LNum(False),
        "storage_subdir": SStr(False), "required": LBool(), "startup_timeout_seconds": LNum(False),
        "request_timeout_seconds": LNum(False), "collector_join_timeout_seconds": LNum(),
    }
)  # fmt: skip
IDENTITY = _fields(
    {
        "model": _fields({"repo": SStr(), "revision": SStr()}),
        "container": _fields({"image": SStr()}),
        "frameworks": ENV,
    }
)
REPORTING = _fields(
    {
        "status": _fields({"endpoint": SStr(), "endpoints": ListOf(SStr(False))}, null=True),
        "ai_analysis": _fields(
            {
                "enabled": LBool(), "openrouter_api_key": SStr(), "gh_token": SStr(), "repos_to_search": STRINGS,
                "pr_search_days": LInt(False), "prompt": SStr(),
            },
            null=True,
        ),
        "s3": _fields(
            {
                "bucket": SStr(False), "prefix": SStr(), "region": SStr(), "endpoint_url": SStr(),
                "access_key_id": SStr(), "secret_access_key": SStr(),
            },
            required=("bucket",), null=True,
        ),
    },
    null=True,
)  # fmt: skip

_ENVS: dict[str, Spec] = {"prefill_environment": ENV, "decode_environment": ENV, "aggregated_environment": ENV}
_KV_EVENTS = AnyOf((LBool(), _strmap(AnyValue())), "true/false or a mapping per mode")
_MOONCAKE: dict[str, Spec] = {"container": SStr(), "env": ENV, "master_extra_args": STRINGS}
BACKEND_FIELDS: dict[str, dict[str, Spec]] = {
    "sglang": {
        "gpu_type": SStr(), "sglang_config": MODES, "kv_events_config": _KV_EVENTS,
        "mooncake_kv_store": _fields(_MOONCAKE, null=True),
    },
    "trtllm": {
        "trtllm_config": MODES, "publish_events_and_metrics": LBool(), "sequential_node_start": LInt(False),
        "numa_memory_bind": LBool(null=True),
    },
    "vllm": {
        "vllm_config": MODES, "set_cuda_visible_devices": LBool(), "connector": SStr(),
        "mooncake_kv_store": _fields({**_MOONCAKE, "store_config": FLAGS}, null=True),
        "kv_events_config": _KV_EVENTS, "allow_prefill_decode_colocation": LBool(),
        "allow_prefill_decode_colocation_across_nodes": LBool(),
        "dp_launch_mode": Choice(("per_gpu", "per_node"), nullable=False),
    },
    "mocker": {
        "engine_type": SStr(False), "speedup_ratio": LNum(False), "decode_speedup_ratio": LNum(False),
        "num_gpu_blocks_override": LInt(False), "max_num_seqs": LInt(False), "max_num_batched_tokens": LInt(False),
        "block_size": LInt(), "data_parallel_size": LInt(False), "num_workers": LInt(False),
        "startup_time": LNum(), "kv_transfer_bandwidth": LNum(), "kv_cache_dtype": SStr(),
        "enable_prefix_caching": LBool(), "enable_chunked_prefill": LBool(), "preemption_mode": SStr(),
        "mocker_config": MODES,
    },
}  # fmt: skip


class Backend(Spec):
    """`backend:` is read by its `type` (default sglang); each type has its own keys."""

    def __init__(self, fields: dict[str, dict[str, Spec]], name: str = NAME,
                 elsewhere: tuple[tuple[str, ...], str] = (FORK_BACKENDS, FORK_NAME)) -> None:  # fmt: skip
        self.fields = fields
        self.name = name
        self.elsewhere = elsewhere  # backends of another flavour, and its name

    def check(self, value: Any, path: KeyPath, out: Checker) -> None:
        if value is None:
            out.error(path, "may not be null (leave the key out for the default, sglang)")
            return
        if not isinstance(value, dict):
            out.error(path, f"expected a mapping, got {type_name(value)} {_short(value)}")
            return
        kind = value.get("type", "sglang")
        if not isinstance(kind, str) or kind not in self.fields:
            known = ", ".join(self.fields)
            if kind in self.elsewhere[0]:
                message = f"{kind!r} is a backend of {self.elsewhere[1]}, not of {self.name} ({known})"
            else:
                message = f"{_short(kind)} is not a backend of {self.name} ({known})"
            out.error((*path, "type"), message)
            return
        Fields({"type": AnyValue(), **_ENVS, **self.fields[kind]}).check(value, path, out)


TOP_FIELDS: dict[str, Spec] = {
    "name": SStr(False), "model": MODEL, "resources": RESOURCES, "slurm": SLURM,
    "backend": Backend(BACKEND_FIELDS), "frontend": FRONTEND, "dynamo": DYNAMO, "benchmark": BENCHMARK,
    "profiling": PROFILING, "output": _fields({"log_dir": PathText()}), "health_check":
    _fields({"max_attempts": LInt(False), "interval_seconds": LInt(False)}),
    "infra": _fields({"etcd_nats_dedicated_node": LBool(), "nats_max_payload_mb": LInt()}),
    "observability": OBSERVABILITY, "telemetry": TELEMETRY, "environment": ENV, "container_mounts": Mounts(),
    "extra_mount": ListOf(SStr(False)), "srun_options": ENV, "sbatch_directives": ENV,
    "enable_config_dump": LBool(), "setup_script": SStr(), "identity": IDENTITY, "reporting": REPORTING,
}  # fmt: skip
REQUIRED = ("name", "model", "resources")
TOP = Fields(TOP_FIELDS, required=REQUIRED)


def check(config: dict[str, Any], out: Checker, *, plain_file: bool, extra_top: dict[str, Spec]) -> None:
    """Every problem upstream srtctl has with one job's config, in its order of work.

    `plain_file`: the config is a whole plain recipe file, not an override variant or a sweep
    job (srtctl drops `lock:` only there). `extra_top`: the console's own top-level sections.
    """
    config = {k: v for k, v in config.items() if k not in extra_top}
    if config.get("schema") == 2 or "engine" in config or "roles" in config:
        key = next(k for k in ("schema", "engine", "roles") if k in config)
        out.error((key,), f"`schema: 2` (`engine:`, `roles:`) is the recipe layout of {FORK_NAME}; "
                  f"{NAME} reads only its own layout (`backend:`, `resources:`)")  # fmt: skip
        return
    if plain_file:
        config.pop("lock", None)
    config = prepared(config)
    TOP.check(config, (), out)
    if any(f.kind != "unknown" for f in out.errors):
        return  # srtctl's rules run only on a config that loaded
    rules(config, out)
    job_start(config, out)


def prepared(config: dict[str, Any]) -> dict[str, Any]:
    """What srtctl makes of the recipe before its schema sees it: `observability.enabled`
    fills in backend and frontend environment mappings (replacing whatever was there that
    was not a mapping)."""
    obs = config.get("observability")
    if not isinstance(obs, dict) or not obs.get("enabled"):
        return config
    config = copy.deepcopy(config)
    backend = config.get("backend")
    if not isinstance(backend, dict):
        backend = config["backend"] = {}
    for mode in ("prefill", "decode", "aggregated"):
        if not isinstance(backend.get(f"{mode}_environment"), dict):
            backend[f"{mode}_environment"] = {}
    frontend = config.get("frontend")
    if not isinstance(frontend, dict):
        frontend = config["frontend"] = {}
    if not isinstance(frontend.get("env"), dict):
        frontend["env"] = {}
    if backend.get("type", "sglang") == "trtllm":
        backend.setdefault("publish_events_and_metrics", True)
        if not isinstance(backend.get("trtllm_config"), dict):
            backend["trtllm_config"] = {}
    return config


# --- the loaded config's values, as srtctl holds them ----------------------------------------


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(section: dict[str, Any], key: str, default: int | None = None) -> int | None:
    value = section.get(key)
    read = loose_int(value)
    return default if read is None else read


def _num(section: dict[str, Any], key: str, default: float) -> float:
    read = loose_num(section.get(key))
    return default if read is None else read


def _bool(section: dict[str, Any], key: str, default: bool = False) -> bool:
    value = section.get(key)
    read = loose_bool(value) if value is not None else None
    return default if read is None else read


def _str(section: dict[str, Any], key: str, default: str) -> str:
    value = section.get(key)
    return value if isinstance(value, str) else default


class Resources:
    """`resources:` with srtctl's derived values (GPUs per worker, node count)."""

    def __init__(self, config: dict[str, Any]) -> None:
        res = _map(config.get("resources"))
        self.gpn = _int(res, "gpus_per_node", DEFAULT_GPUS_PER_NODE) or 0
        self.prefill_nodes = _int(res, "prefill_nodes")
        self.decode_nodes = _int(res, "decode_nodes")
        self.agg_nodes = _int(res, "agg_nodes")
        self.prefill = _int(res, "prefill_workers") or 0
        self.decode = _int(res, "decode_workers") or 0
        self.agg = _int(res, "agg_workers") or 0
        self.disagg = res.get("prefill_nodes") is not None or res.get("decode_nodes") is not None
        self.spread = _bool(res, "spread_workers")
        self.het = res.get("het_jobs") is not None and _bool(res, "het_jobs")
        self.gpus_prefill = self._per_worker(_int(res, "gpus_per_prefill"), self.prefill_nodes, self.prefill)
        explicit = _int(res, "gpus_per_decode")
        if explicit is None and not (self.decode_nodes and self.decode) and self.decode_nodes == 0 and self.decode:
            self.gpus_decode = self.gpus_prefill  # decode shares the prefill nodes and inherits their GPUs
        else:
            self.gpus_decode = self._per_worker(explicit, self.decode_nodes, self.decode)
        self.gpus_agg = self._per_worker(_int(res, "gpus_per_agg"), self.agg_nodes, self.agg)
        backend = _map(config.get("backend"))
        self.colocated = backend.get("type") == "vllm" and self._vllm_packs(backend)
        if self.colocated:
            gpus = self.prefill * self.gpus_prefill + self.decode * self.gpus_decode + self.agg * self.gpus_agg
            self.nodes = -(-gpus // self.gpn)
        elif self.disagg:
            self.nodes = (self.prefill_nodes or 0) + (self.decode_nodes or 0)
        else:
            self.nodes = self.agg_nodes or 1

    def _per_worker(self, explicit: int | None, nodes: int | None, workers: int) -> int:
        if explicit is not None:
            return explicit
        if nodes and workers:
            return (nodes * self.gpn) // workers
        return self.gpn

    def _vllm_packs(self, backend: dict[str, Any]) -> bool:
        if not _bool(backend, "allow_prefill_decode_colocation") or self.prefill <= 0 or self.decode <= 0:
            return False
        if self.gpn <= 0:
            return False
        gpus = self.prefill * self.gpus_prefill + self.decode * self.gpus_decode + self.agg * self.gpus_agg
        return gpus <= self.gpn or _bool(backend, "allow_prefill_decode_colocation_across_nodes")


# --- rules srtctl checks when it loads a config ----------------------------------------------


def rules(config: dict[str, Any], out: Checker) -> None:
    """srtctl's checks across fields of a config that loaded (its `__post_init__` rules)."""
    res = Resources(config)
    backend = _map(config.get("backend"))
    kind = _str(backend, "type", "sglang")
    frontend = _map(config.get("frontend"))
    bench = _map(config.get("benchmark"))
    fe_type = _str(frontend, "type", "dynamo")
    _dynamo_rules(_map(config.get("dynamo")), out)
    _vllm_dp_rules(backend, kind, out)
    _profiling_rules(config, res, kind, out)
    _observability_rules(config, out)
    _telemetry_rules(config, out)
    _mooncake_rules(backend, kind, res, out)
    if res.het:
        if not res.disagg:
            out.error(("resources", "het_jobs"), "het_jobs: true needs a disaggregated layout "
                      "(prefill_nodes and decode_nodes)")  # fmt: skip
        elif (res.prefill_nodes or 0) < 1 or (res.decode_nodes or 0) < 1:
            out.error(("resources", "het_jobs"), "het_jobs: true needs prefill_nodes >= 1 and decode_nodes >= 1")
        elif kind != "sglang":
            out.error(("resources", "het_jobs"), f"het_jobs: true works with the sglang backend only, not {kind}")
        elif _bool(frontend, "dedicated_node") or _bool(bench, "client_dedicated_node"):
            out.error(("resources", "het_jobs"), "het_jobs: true cannot have a dedicated frontend or "
                      "benchmark-client node")  # fmt: skip
    if _bool(frontend, "dedicated_node") and _str(frontend, "orchestrator_placement", "head") != "head":
        out.error(("frontend", "orchestrator_placement"), "must be head with frontend.dedicated_node: true "
                  "(otherwise the reserved node is never used)")  # fmt: skip
    if _bool(bench, "client_dedicated_node") and _str(bench, "client_placement", "head") != "head":
        out.error(("benchmark", "client_placement"), "must be head with benchmark.client_dedicated_node: true "
                  "(otherwise the reserved node is never used)")  # fmt: skip
    multiple = _bool(frontend, "enable_multiple_frontends", True)
    if fe_type == "trtllm_serve":
        if kind != "trtllm":
            out.error(("frontend", "type"), f"frontend trtllm_serve needs backend trtllm, not {kind}")
        elif multiple:
            out.error(("frontend", "enable_multiple_frontends"), "must be false with frontend trtllm_serve")
        elif not res.disagg and res.agg != 1:
            out.error(("resources", "agg_workers"), "frontend trtllm_serve serves one aggregated worker "
                      "(agg_workers: 1)")  # fmt: skip
    elif fe_type == "vllm":
        if kind != "vllm":
            out.error(("frontend", "type"), f"frontend vllm needs backend vllm, not {kind}")
        elif multiple:
            out.error(("frontend", "enable_multiple_frontends"), "must be false with frontend vllm")
        elif res.disagg:
            out.error(("frontend", "type"), "frontend vllm serves aggregated jobs only, not prefill/decode")
        elif res.agg != 1:
            out.error(("resources", "agg_workers"), f"frontend vllm serves exactly one aggregated worker, "
                      f"got {res.agg}: use frontend dynamo for several, or agg_nodes for a bigger one")  # fmt: skip


def _dynamo_rules(dynamo: dict[str, Any], out: Checker) -> None:
    sources = [k for k in ("hash", "wheel") if dynamo.get(k) is not None]
    if _bool(dynamo, "top_of_tree"):
        sources.insert(1 if "hash" in sources else 0, "top_of_tree")
    if len(sources) > 1:
        out.error(("dynamo",), f"give one install source, not {', '.join(sources)}")
    wheel = dynamo.get("wheel")
    if isinstance(wheel, str):
        if not wheel.strip():
            out.error(("dynamo", "wheel"), "must be a package version, not empty")
        elif PurePosixPath(wheel).name.endswith(".whl") or "/" in wheel:
            out.error(("dynamo", "wheel"), "is a package version such as 1.2.0.dev20260426, not a file name")
    if dynamo.get("cargo_patches") and dynamo.get("hash") is None:
        out.error(("dynamo", "cargo_patches"), "needs a source build: set dynamo.hash to a commit")
    if _str(dynamo, "request_plane", "tcp") not in ("nats", "tcp", "http"):
        out.error(("dynamo", "request_plane"), f"{dynamo.get('request_plane')!r} is not one of: nats, tcp, http")
    plane = dynamo.get("event_plane")
    if plane is not None and plane not in ("nats", "zmq"):
        out.error(("dynamo", "event_plane"), f"{plane!r} is not one of: nats, zmq")


def _dp_modes(backend: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    block = _map(backend.get("vllm_config"))
    found = []
    for mode in ("prefill", "decode", "aggregated"):
        args = _map(block.get(mode))
        if any(str(k).replace("_", "-") == "data-parallel-size" and v is not None for k, v in args.items()):
            found.append((mode, args))
    return found


def _vllm_dp_rules(backend: dict[str, Any], kind: str, out: Checker) -> None:
    if kind != "vllm" or backend.get("dp_launch_mode", "per_node") != "per_node":
        return
    for mode, args in _dp_modes(backend):
        if "headless" in {str(k).replace("_", "-") for k in args}:
            out.error(("backend", "vllm_config", mode, "headless"), "cannot be set with dp_launch_mode: per_node "
                      "(srtctl derives the headless ranks from the topology)")  # fmt: skip


def _profiling_rules(config: dict[str, Any], res: Resources, kind: str, out: Checker) -> None:
    prof = _map(config.get("profiling"))
    ptype = _str(prof, "type", "none")
    if ptype == "none":
        return
    path: KeyPath = ("profiling",)
    if ptype == "torch" and kind == "trtllm":
        out.error((*path, "type"), "torch profiling does not work with the trtllm backend; use nsys")
        return
    if ptype == "nsys-time":
        if prof.get("delay_secs") is None or prof.get("duration_secs") is None:
            out.error(path, "nsys-time profiling needs delay_secs and duration_secs")
        return
    phases = {m: prof.get(m) is not None for m in ("prefill", "decode", "aggregated")}
    if res.disagg:
        if phases["aggregated"]:
            out.error((*path, "aggregated"), "a prefill/decode job profiles prefill and decode, not aggregated")
        elif not (phases["prefill"] and phases["decode"]):
            out.error(path, "a prefill/decode job needs both profiling.prefill and profiling.decode")
        elif res.prefill <= 0 or res.decode <= 0:
            out.error(("resources",), "profiling needs prefill_workers and decode_workers above 0")
    else:
        if phases["prefill"] or phases["decode"]:
            out.error(path, "an aggregated job profiles profiling.aggregated only, not prefill/decode")
        elif not phases["aggregated"]:
            out.error(path, "an aggregated job needs profiling.aggregated")
        elif res.agg <= 0:
            out.error(("resources", "agg_workers"), "profiling needs agg_workers above 0")
    if not out.errors and ptype == "nsys" and kind == "vllm":
        block = _map(_map(config.get("backend")).get("vllm_config"))
        for mode in ("prefill", "decode", "aggregated"):
            for key in _map(block.get(mode)):
                if str(key).replace("_", "-").startswith("profiler-config"):
                    out.error(("backend", "vllm_config", mode, key), "is derived from the profiling: block "
                              "with nsys profiling; remove it")  # fmt: skip


def _safe_subdir(value: Any) -> bool:
    if not isinstance(value, str) or not value or value.startswith(("/", "~")):
        return False
    parts = PurePosixPath(value).parts
    return bool(parts) and not any(p in ("..", "") for p in parts)


def _exporter_rules(exporter: dict[str, Any], path: KeyPath, out: Checker) -> None:
    if not exporter.get("container_image"):
        out.error((*path, "container_image"), "must not be empty")
    port = loose_int(exporter.get("port"))
    if port is None or not 1 <= port <= 65535:
        out.error((*path, "port"), "must be a port number, 1 to 65535")


def _observability_rules(config: dict[str, Any], out: Checker) -> None:
    obs = _map(config.get("observability"))
    tach = _map(obs.get("tachometer"))
    if not _bool(tach, "enabled"):
        return
    path: KeyPath = ("observability", "tachometer")
    telemetry = _map(config.get("telemetry"))
    if not _bool(obs, "enabled"):
        out.error((*path, "enabled"), "needs observability.enabled: true")
    elif _bool(telemetry, "enabled") and tach.get("dcgm_exporter") is not None:
        out.error((*path, "dcgm_exporter"), "with DCGM power telemetry on, configure the exporter under telemetry")
    elif _bool(telemetry, "enabled") and _str(tach, "storage_subdir", "tachometer") == _str(
        telemetry, "storage_subdir", "power"
    ):
        out.error((*path, "storage_subdir"), "must differ from telemetry.storage_subdir")
    else:
        for name in ("dcgm_exporter", "node_exporter"):
            if isinstance(tach.get(name), dict):
                _exporter_rules(tach[name], (*path, name), out)
        if out.errors:
            return
        if not _str(tach, "binary_path", "tachometer-scraper"):
            out.error((*path, "binary_path"), "must not be empty")
        elif _num(tach, "default_frequency", 5.0) <= 0:
            out.error((*path, "default_frequency"), "must be above 0")
        elif (_int(tach, "sync_interval_secs", 120) or 0) < 0:
            out.error((*path, "sync_interval_secs"), "must be 0 or more")
        elif (_int(tach, "compaction_threads", 4) or 0) < 0:
            out.error((*path, "compaction_threads"), "must be 0 or more")
        elif not _safe_subdir(tach.get("storage_subdir", "tachometer")):
            out.error((*path, "storage_subdir"), "must be a relative path inside the job's log dir")


def _telemetry_rules(config: dict[str, Any], out: Checker) -> None:
    tel = _map(config.get("telemetry"))
    if not _bool(tel, "enabled"):
        return
    path: KeyPath = ("telemetry",)
    exporter = tel.get("dcgm_exporter")
    if not isinstance(exporter, dict):
        out.error((*path, "dcgm_exporter"), "is required when telemetry is enabled")
        return
    _exporter_rules(exporter, (*path, "dcgm_exporter"), out)
    if out.errors:
        return
    request = _num(tel, "request_timeout_seconds", 2.0)
    for name, default in (("default_frequency", 1.0), ("startup_timeout_seconds", 30.0),
                          ("request_timeout_seconds", 2.0)):  # fmt: skip
        value = _num(tel, name, default)
        if not (math.isfinite(value) and value > 0):
            out.error((*path, name), "must be above 0")
            return
    if _num(tel, "default_frequency", 1.0) > 3.0:
        out.error((*path, "default_frequency"), "above the 3 s gap between power samples that srtctl accepts")
        return
    worst = 2 * (2 * request + 1.0)
    join = loose_num(tel.get("collector_join_timeout_seconds"))
    if join is None:
        join = worst + 2.0
    if not (math.isfinite(join) and join > 0) or join <= worst:
        out.error((*path, "collector_join_timeout_seconds"), "must exceed two collector cycles "
                  "(2 x (2 x request_timeout_seconds + 1 s))")  # fmt: skip
        return
    if not _safe_subdir(tel.get("storage_subdir", "power")):
        out.error((*path, "storage_subdir"), "must be a relative path inside the job's log dir")
        return
    bench = _map(config.get("benchmark"))
    if _str(bench, "type", "manual") != "sa-bench":
        out.error(("benchmark", "type"), "telemetry needs benchmark type sa-bench")
    elif _str(bench, "client_placement", "head") != "head":
        out.error(("benchmark", "client_placement"), "telemetry needs client_placement: head")
    elif _bool(_map(config.get("infra")), "etcd_nats_dedicated_node"):
        out.error(("infra", "etcd_nats_dedicated_node"), "telemetry needs etcd/NATS on the head node (false)")
    else:
        points = _concurrency_list(bench.get("concurrencies"))
        if not points or len(set(points)) != len(points) or any(c <= 0 for c in points):
            out.error(("benchmark", "concurrencies"), "telemetry needs a non-empty list of distinct positive "
                      "concurrencies")  # fmt: skip


def _mooncake_rules(backend: dict[str, Any], kind: str, res: Resources, out: Checker) -> None:
    if backend.get("mooncake_kv_store") is None or not res.disagg or kind not in ("sglang", "vllm"):
        return
    block = _map(backend.get(f"{kind}_config"))
    modes = [_map(block.get("prefill")), _map(block.get("decode"))]
    if kind == "sglang":
        wired = any(m.get(k) == "mooncake" for m in modes for k in ("disaggregation-transfer-backend",
                                                                     "disaggregation_transfer_backend"))  # fmt: skip
        hint = "sglang_config.prefill/decode need disaggregation-transfer-backend: mooncake"
    else:
        wired = any(isinstance(m.get(k), str) and "mooncake" in m[k].lower() for m in modes
                    for k in ("kv-transfer-config", "kv_transfer_config"))  # fmt: skip
        hint = "vllm_config.prefill/decode need a kv-transfer-config naming a Mooncake connector"
    if not wired:
        out.error(("backend", "mooncake_kv_store"), f"is set but the workers do not use it: {hint}")


def _concurrency_list(value: Any) -> list[int] | None:
    """srtctl's `get_concurrency_list`; None where it would raise."""
    if value is None:
        return []
    try:
        if isinstance(value, str):
            return [int(x) for x in value.split("x")]
        return [loose_int(v) or 0 for v in value] if isinstance(value, list) else None
    except ValueError:
        return None


# --- what srtctl refuses only when the job runs ----------------------------------------------


def job_start(config: dict[str, Any], out: Checker) -> None:
    """Problems srtctl finds in this config only once the job is running, as warnings."""
    frontend = _map(config.get("frontend"))
    fe_type = _str(frontend, "type", "dynamo")
    if fe_type not in FRONTENDS:
        _late(out, ("frontend", "type"), "frontend", f"{fe_type!r} is not a frontend of {NAME} "
              f"({', '.join(FRONTENDS)})")  # fmt: skip
    res = Resources(config)
    if not res.het:
        failure = _placement_failure(res)
        if failure:
            _late(out, ("resources",), "placement", failure)
        elif fe_type != "vllm" and (dp := _vllm_dp_failure(config, res)):
            _late(out, dp[0], "placement", dp[1])
        else:
            bench = _map(config.get("benchmark"))
            for path, value in (
                (("frontend", "orchestrator_placement"), frontend.get("orchestrator_placement", "head")),
                (("benchmark", "client_placement"), bench.get("client_placement", "head")),
            ):
                if value not in PLACEMENTS:
                    _late(out, path, "placement", f"{value!r} is not one of: {', '.join(PLACEMENTS)}")
                elif value != "head" and res.decode <= 0:
                    _late(out, path, "placement", f"{value} needs decode workers, and this job has none")
    _runner_rules(config, out)


def _late(out: Checker, path: KeyPath, stage: str, message: str) -> None:
    when = "once the workers are up and its benchmark starts" if stage == "benchmark" else "as it starts"
    out.warning(path, f"{message}: srtctl accepts the recipe, but the job stops {when} ({stage})", f"job-start:{stage}")


def _placement_failure(res: Resources) -> str | None:
    """srtctl's worker placement: prefill, then decode, then aggregated workers, packed onto the
    job's nodes in order; a worker of a whole node or more takes whole nodes. None if all fit."""
    gpn, nodes = res.gpn, res.nodes
    if gpn == 0:
        return "gpus_per_node: 0 leaves no GPUs to place workers on" if res.prefill + res.decode + res.agg else None
    node, offset = 0, 0
    for mode, count, gpus in (("prefill", res.prefill, res.gpus_prefill), ("decode", res.decode, res.gpus_decode),
                              ("agg", res.agg, res.gpus_agg)):  # fmt: skip
        if count <= 0:
            continue
        if mode == "decode" and not res.colocated and offset > 0 and node + 1 < nodes:
            node, offset = node + 1, 0
        span = (gpus + gpn - 1) // gpn
        for _ in range(count):
            if span >= 1 and gpus >= gpn:
                if node + span > nodes:
                    return _short_of(mode, count, gpus, nodes, gpn)
                node += span
            else:
                if offset + gpus > gpn:
                    node, offset = node + 1, 0
                if node >= nodes:
                    return _short_of(mode, count, gpus, nodes, gpn)
                offset += gpus
                if offset >= gpn or res.spread:
                    node, offset = node + 1, 0
    return None


def _vllm_dp_failure(config: dict[str, Any], res: Resources) -> tuple[KeyPath, str] | None:
    """vLLM's data-parallel layout with dp_launch_mode per_node: each worker's GPUs must be
    data-parallel x tensor-parallel x pipeline-parallel, laid out whole on its nodes."""
    backend = _map(config.get("backend"))
    if backend.get("type") != "vllm" or backend.get("dp_launch_mode", "per_node") != "per_node":
        return None
    block = _map(backend.get("vllm_config"))
    for mode, key, count, gpus in (("prefill", "prefill", res.prefill, res.gpus_prefill),
                                   ("decode", "decode", res.decode, res.gpus_decode),
                                   ("agg", "aggregated", res.agg, res.gpus_agg)):  # fmt: skip
        args = _map(block.get(key))
        raw_dp = args.get("data-parallel-size", args.get("data_parallel_size"))
        if count <= 0 or raw_dp is None:
            continue
        sizes = [args.get(k) or args.get(k.replace("-", "_")) or 1 for k in
                 ("tensor-parallel-size", "pipeline-parallel-size")]  # fmt: skip
        if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in [*sizes, raw_dp or 1]):
            continue  # not numbers: vLLM itself will say so
        replica = sizes[0] * sizes[1]
        dp = raw_dp or gpus // replica
        local, nodes = (res.gpn, -(-gpus // res.gpn)) if gpus >= res.gpn else (gpus, 1)
        path: KeyPath = ("backend", "vllm_config", key)
        if dp * replica != gpus:
            return path, (f"{mode} data-parallel-size {dp} x tensor-parallel-size {sizes[0]} x "
                          f"pipeline-parallel-size {sizes[1]} needs {dp * replica} GPUs, but each {mode} worker "
                          f"has {gpus}")  # fmt: skip
        if replica > local:
            if nodes < 2 or replica % local or nodes != dp * (replica // local):
                return path, (f"{mode} TP x PP replicas of {replica} GPUs do not lay out on {nodes} node(s) "
                              f"of {local} GPUs each")  # fmt: skip
        elif local % replica:
            return path, f"{mode} TP x PP replicas of {replica} GPUs do not divide the {local} GPUs of a node"
    return None


def _short_of(mode: str, count: int, gpus: int, nodes: int, gpn: int) -> str:
    return (f"{count} {mode} worker(s) x {gpus} GPUs do not fit on the job's {nodes} node(s) x {gpn} GPUs "
            "after the workers placed before them")  # fmt: skip


def _runner_rules(config: dict[str, Any], out: Checker) -> None:
    bench = _map(config.get("benchmark"))
    kind = _str(bench, "type", "manual")
    path: KeyPath = ("benchmark",)
    if kind == "manual":
        return
    if kind not in BENCHMARK_RUNNERS:
        _late(out, (*path, "type"), "benchmark", f"{kind!r} is not a benchmark of {NAME} "
              f"({', '.join(BENCHMARK_RUNNERS)})")  # fmt: skip
        return
    problems: list[tuple[str, str]] = []
    if kind == "sa-bench":
        custom = bench.get("dataset_name") == "custom"
        if not custom:
            problems += [(k, "is required for sa-bench") for k in ("isl", "osl") if bench.get(k) is None]
        if bench.get("concurrencies") is None:
            problems.append(("concurrencies", "is required for sa-bench"))
        if custom and not bench.get("dataset_path"):
            problems.append(("dataset_path", "is required with dataset_name: custom"))
    elif kind == "custom" and not bench.get("command"):
        problems.append(("command", "is required for benchmark type custom"))
    elif kind == "gsm8k":
        for key in ("num_examples", "max_tokens", "num_threads", "repeat"):
            value = _int(bench, key)
            if value is not None and value <= 0:
                problems.append((key, "must be above 0"))
        if (_int(bench, "num_shots") or 0) < 0:
            problems.append(("num_shots", "must be 0 or more"))
    elif kind == "mooncake-router":
        workload = bench.get("mooncake_workload") or "conversation"
        if workload not in ("mooncake", "conversation", "synthetic", "toolagent"):
            problems.append(("mooncake_workload", "is not one of: mooncake, conversation, synthetic, toolagent"))
        for key in ("ttft_threshold_ms", "itl_threshold_ms"):
            if (_int(bench, key) or 1) <= 0:
                problems.append((key, "must be above 0"))
    elif kind == "router" and _str(_map(config.get("frontend")), "type", "dynamo") != "sglang":
        problems.append(("type", "the router benchmark needs frontend.type: sglang"))
    elif kind == "sglang-bench":
        problems += _sglang_bench(bench)
    elif kind == "trace-replay":
        if not bench.get("trace_file"):
            problems.append(("trace_file", "is required for trace-replay"))
        if bench.get("concurrencies") is None:
            problems.append(("concurrencies", "is required for trace-replay"))
    for key, message in problems:
        _late(out, (*path, key), "benchmark", message)


def _sglang_bench(bench: dict[str, Any]) -> list[tuple[str, str]]:
    problems = []
    for key in ("isl", "osl"):
        value = _int(bench, key)
        if value is None:
            problems.append((key, "is required for sglang-bench"))
        elif value <= 0:
            problems.append((key, "must be above 0 for sglang-bench"))
    if bench.get("concurrencies") is None:
        problems.append(("concurrencies", "is required for sglang-bench"))
    else:
        points = _concurrency_list(bench.get("concurrencies"))
        if points is None:
            problems.append(("concurrencies", 'must be a list of integers or a string such as "4x8"'))
        elif not points:
            problems.append(("concurrencies", "must not be empty for sglang-bench"))
        elif any(p <= 0 for p in points):
            problems.append(("concurrencies", "must all be above 0 for sglang-bench"))
    rate = bench.get("req_rate", "inf")
    if (isinstance(rate, int | float) and not isinstance(rate, bool) and int(rate) <= 0) or (
        isinstance(rate, str) and rate.strip() in ("0", "0.0")
    ):
        problems.append(("req_rate", "must be above 0, or inf, for sglang-bench"))
    return problems


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
