"""srtctl's recipe schema (v1 and the fork's `schema: 2`) as spec tables, plus its cross-field rules."""

from __future__ import annotations

from typing import Any

from console.recipes.spec import (
    AnyValue,
    Bool,
    Checker,
    Either,
    Fields,
    Int,
    ListOf,
    MapOf,
    Num,
    Scalar,
    Spec,
    Str,
    StrOrNum,
)
from console.recipes.yamlio import KeyPath

BACKENDS_V1 = ("sglang", "trtllm", "vllm", "mocker", "atom", "tilert", "tokenspeed")
ENGINES_V2 = ("atom", "sglang", "trtllm", "vllm", "mocker", "tilert", "tokenspeed", "sidecar")
# Frontend types are opaque strings in srtctl; these are the ones it knows, for warnings.
KNOWN_FRONTENDS = (
    "dynamo", "sglang", "trtllm_serve", "vllm", "atomesh", "atom", "sglang-router",
    "vllm-router", "smg", "llm-d", "none",
)  # fmt: skip
BENCHMARKS = (
    "manual", "custom", "sa-bench", "sglang-bench", "router", "mooncake-router", "trace-replay",
    "mmlu", "gpqa", "gsm8k", "longbenchv2", "lm-eval", "aiperf-bench", "agentic", "mlperf",
)  # fmt: skip
DEMO_FAULTS = ("zmq-bind", "oom-graph-capture", "health-hang", "crash-at-concurrency", "flake-first-attempt")

ENV = MapOf(StrOrNum())
FLAGS = MapOf(AnyValue())  # CLI flag maps: kebab-case keys, any YAML value
MODES_DICT = Fields({"prefill": FLAGS, "decode": FLAGS, "aggregated": FLAGS})

CONCURRENCIES = Either(
    (Int(minimum=1), Str(), ListOf(Either((Int(minimum=1), Str()), "an integer or a string"))),
    'a list of integers, or a string such as "4x8x16"',
)

MODEL = Fields(
    {"path": Str(), "container": Str(), "precision": Str(), "stage_dir": Str()},
    required=("path", "container", "precision"),
)
SLURM = Fields({"account": Str(), "partition": Str(), "time_limit": StrOrNum()})
HEALTH = Fields({"max_attempts": Int(minimum=1), "interval_seconds": Num(minimum=0)})
INFRA = Fields({"etcd_nats_dedicated_node": Bool(), "nats_max_payload_mb": Int(minimum=1)})
DYNAMO = Fields(
    {
        "install": Bool(), "version": StrOrNum(), "hash": Str(), "top_of_tree": Bool(), "wheel": Str(),
        "request_plane": Str(), "event_plane": Str(), "cargo_patches": AnyValue(), "source": MapOf(),
    }
)  # fmt: skip
PHASE = Fields({"start_step": Int(), "stop_step": Int()})
PROFILING = Fields(
    {
        "type": Str("none", "nsys", "nsys-time", "torch"),
        "prefill": PHASE,
        "decode": PHASE,
        "aggregated": PHASE,
    }
)
OUTPUT = Fields({"log_dir": Str()})
PLACEMENT = Fields({"node": Str()})

FRONTEND = Fields(
    {
        "type": Str(), "enable_multiple_frontends": Bool(), "num_additional_frontends": Int(),
        "nginx_container": Str(), "nginx_raise_ulimit": Bool(), "args": FLAGS, "env": ENV,
        "ctx_router": MapOf(), "gen_router": MapOf(), "server_config_extra": MapOf(),
        "dedicated_node": Bool(), "placement": PLACEMENT,
    }
)  # fmt: skip

_BENCH_FIELDS: dict[str, Spec] = {
    "type": Str(*BENCHMARKS),
    "isl": Int(minimum=1), "osl": Int(minimum=1), "concurrencies": CONCURRENCIES,
    "req_rate": StrOrNum(), "sweep": MapOf(),
    # sa-bench
    "random_range_ratio": Num(0), "num_prompts_mult": Int(1), "num_warmup_mult": Int(0),
    "custom_tokenizer": Str(), "tokenizer_mode": Str(), "use_chat_template": Bool(),
    "dataset_name": Str(), "dataset_path": Str(), "reuse_http_connections": Bool(),
    "slow_down_sleep_time": Num(0), "slow_down_wait_time": Num(0), "export_node_metrics": Bool(),
    "client_placement": Str("head", "last_decode"), "client_dedicated_node": Bool(),
    "colocate_with_frontend": Bool(), "stream_output": Bool(), "placement": PLACEMENT,
    # custom
    "command": Str(), "container_image": Str(), "env": ENV,
    # accuracy
    "num_examples": Int(1), "max_tokens": Int(1), "repeat": Int(1), "num_threads": Int(1),
    "max_context_length": Int(1), "categories": ListOf(Str()), "num_shots": Int(0),
    "temperature": Num(0), "top_p": Num(0), "top_k": Int(),
    # router / mooncake-router / trace-replay
    "num_requests": Int(1), "concurrency": Int(1), "prefix_ratios": Either((ListOf(Num()), Str())),
    "mooncake_workload": Str(), "ttft_threshold_ms": Num(0), "itl_threshold_ms": Num(0),
    "trace_file": Str(), "aiperf_package": Str(), "aiperf_args": AnyValue(),
}  # fmt: skip


def _benchmark_rules(bench: dict[str, Any], path: KeyPath, out: Checker) -> None:
    kind = bench.get("type", "manual")
    if kind == "sa-bench":
        needed = ("dataset_path",) if bench.get("dataset_name") == "custom" else ("isl", "osl", "concurrencies")
        for key in needed:
            if bench.get(key) is None:
                out.error((*path, key), f"is required for benchmark type sa-bench{_custom_note(key)}")
    elif kind == "custom" and not bench.get("command"):
        out.error((*path, "command"), "is required for benchmark type custom")


def _custom_note(key: str) -> str:
    return " with dataset_name: custom" if key == "dataset_path" else ""


BENCHMARK = Fields(_BENCH_FIELDS, extra=_benchmark_rules)

RESOURCES_V1 = Fields(
    {
        "gpu_type": Str(), "gpus_per_node": Int(1),
        "prefill_nodes": Int(), "decode_nodes": Int(), "prefill_workers": Int(1), "decode_workers": Int(1),
        "agg_nodes": Int(1), "agg_workers": Int(1),
        "gpus_per_prefill": Int(1), "gpus_per_decode": Int(1), "gpus_per_agg": Int(1),
        "spread_workers": Bool(), "het_jobs": Bool(),
    },
    required=("gpu_type",),
)  # fmt: skip

_BACKEND_COMMON: dict[str, Spec] = {
    "type": Str(*BACKENDS_V1),
    "prefill_environment": ENV, "decode_environment": ENV, "aggregated_environment": ENV,
    "kv_events_config": Either((Bool(), MapOf())), "mooncake_kv_store": AnyValue(),
}  # fmt: skip
_BACKEND_EXTRA: dict[str, dict[str, Spec]] = {
    "sglang": {"sglang_config": MODES_DICT},
    "vllm": {"vllm_config": MODES_DICT, "dp_launch_mode": Str("per_node", "per_gpu"), "connector": Str()},
    "trtllm": {
        "trtllm_config": MODES_DICT, "prefill_extra_args": AnyValue(), "decode_extra_args": AnyValue(),
        "aggregated_extra_args": AnyValue(),
    },
    "mocker": {"mocker_config": MODES_DICT},
    "atom": {"atom_config": MODES_DICT, "connector": Str("mooncake"), "mooncake_protocol": Str("rdma", "tcp")},
    "tilert": {"tilert_config": MODES_DICT},
    "tokenspeed": {"tokenspeed_config": MODES_DICT},
}  # fmt: skip


class Backend(Spec):
    """srtctl's backend field is polymorphic on `type`; each type has its own keys."""

    expects = "a mapping"

    def check(self, value: Any, path: KeyPath, out: Checker) -> None:
        kind = value.get("type", "sglang") if isinstance(value, dict) else "sglang"
        extra = _BACKEND_EXTRA.get(kind, {}) if isinstance(kind, str) else {}
        Fields({**_BACKEND_COMMON, **extra}).check(value, path, out)


ROLE = Fields(
    {
        "nodes": Either((Int(), Str("colocate")), "an integer or \"colocate\""), "workers": Int(1), "gpus": Int(1),
        "env": ENV, "args": FLAGS, "extra_args": AnyValue(), "kv_events": AnyValue(), "sidecar": AnyValue(),
        "critical": Bool(), "restart": AnyValue(), "placement": PLACEMENT,
    }
)  # fmt: skip
ROLES = Fields({"prefill": ROLE, "decode": ROLE, "agg": ROLE})
RESOURCES_V2 = Fields(
    {
        "gpu_type": Str(), "gpus_per_node": Int(1), "prefill_critical": Bool(), "decode_critical": Bool(),
        "agg_critical": Bool(), "spread_workers": Bool(), "het_jobs": Bool(),
    }
)  # fmt: skip
ENGINE = Either(
    (
        Str(*ENGINES_V2),
        Fields({"type": Str(*ENGINES_V2), "mooncake_protocol": Str("rdma", "tcp")}, extra=None),
    ),
    "an engine type or a mapping with `type`",
)


class Engine(Spec):
    """`engine: atom` or `engine: {type: atom, ...engine-wide knobs}`."""

    expects = "an engine type or a mapping"

    def check(self, value: Any, path: KeyPath, out: Checker) -> None:
        if isinstance(value, str):
            Str(*ENGINES_V2).check(value, path, out)
        elif isinstance(value, dict):
            if "type" not in value:
                out.error((*path, "type"), "is required")
            # Engine-wide knobs differ per engine and release; only `type` is checked strictly.
            MapOf().check(value, path, out)
            Str(*ENGINES_V2).check(value.get("type"), (*path, "type"), out)
        else:
            out.error(path, f"expected {self.expects}")


FAULT = Fields(
    {
        "type": Str(*DEMO_FAULTS), "role": Str("prefill", "decode", "agg"), "concurrency": Int(1),
        "rank": Int(), "worker": Int(), "message": Str(), "exit": Bool(), "once": Bool(),
    },
    required=("type",),
)  # fmt: skip
# srt-console's own section: only the demo launcher reads it (and strips it before srtctl sees a recipe).
DEMO = Fields(
    {
        "startup_seconds": Num(0), "point_seconds": Num(0), "shards": Int(1), "graph_batches": Int(1),
        "seed": Int(), "faults": ListOf(FAULT), "tok_s_per_gpu": Num(0), "health_seconds": Num(0),
    }
)  # fmt: skip

_COMMON_TOP: dict[str, Spec] = {
    "name": Str(), "model": MODEL, "slurm": SLURM, "frontend": FRONTEND, "dynamo": DYNAMO,
    "benchmark": BENCHMARK, "profiling": PROFILING, "output": OUTPUT, "health_check": HEALTH, "infra": INFRA,
    "observability": MapOf(), "telemetry": MapOf(), "environment": ENV, "container_mounts": MapOf(),
    "extra_mount": ListOf(Str()), "srun_options": MapOf(), "sbatch_directives": MapOf(),
    "enable_config_dump": Bool(), "setup_script": Str(), "identity": MapOf(), "reporting": MapOf(),
    "sweep": MapOf(), "lock": AnyValue(), "demo": DEMO,
}  # fmt: skip

TOP_V1 = Fields(
    {**_COMMON_TOP, "schema": Scalar((int,), "1 or 2", choices=(1, 2)), "resources": RESOURCES_V1,
     "backend": Backend()},
    required=("name", "model", "resources"),
)  # fmt: skip
TOP_V2 = Fields(
    {**_COMMON_TOP, "schema": Scalar((int,), "1 or 2", choices=(1, 2)), "resources": RESOURCES_V2,
     "engine": Engine(), "roles": ROLES, "services": ListOf(MapOf()), "host_setup": AnyValue(),
     "post_eval": AnyValue()},
    required=("name", "model", "engine", "roles"),
)  # fmt: skip
