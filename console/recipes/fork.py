"""The fork flavour: recipes as SemiAnalysisAI/srt-slurm's srtctl reads them.

The fork loads upstream's layout (schema 1) with the same loader, plus its own backends
(atom, tilert, tokenspeed), frontends and fields, and its own `schema: 2` layout (`engine:`,
`roles:`). This copy was read from the fork's source (schema.py at 019bc0a1) and lags the fork, which
moves fast: a key it does not know is only a warning (the cluster's srtctl decides).
"""

from __future__ import annotations

from typing import Any

from console.recipes import upstream
from console.recipes.spec import (
    AnyValue,
    Bool,
    Checker,
    Choice,
    Either,
    Fields,
    Int,
    LBool,
    LInt,
    ListOf,
    MapOf,
    Num,
    Scalar,
    Spec,
    SStr,
    Str,
    StrOrNum,
)
from console.recipes.yamlio import KeyPath

NAME = "the fork's srtctl"
LABEL = "the fork's srtctl (SemiAnalysisAI/srt-slurm, as read at 019bc0a1)"
FORK_BACKENDS = ("atom", "tilert", "tokenspeed")
ENGINES_V2 = ("atom", "sglang", "trtllm", "vllm", "mocker", "tilert", "tokenspeed", "sidecar")
FRONTENDS = (
    *upstream.FRONTENDS, "atomesh", "atom", "sglang-router", "vllm-router", "smg", "llm-d", "none",
)  # fmt: skip
BENCHMARKS = (*upstream.BENCHMARK_RUNNERS, "manual", "aiperf-bench", "agentic", "mlperf")

ENV = MapOf(StrOrNum())
FLAGS = MapOf(AnyValue())  # CLI flag maps: kebab-case keys, any YAML value
MODES_DICT = Fields({"prefill": FLAGS, "decode": FLAGS, "aggregated": FLAGS})
PLACEMENT = Fields({"node": Str()})

# --- schema 1: upstream's layout and loader, plus what the fork adds -------------------------


def _section(fields: dict[str, Spec]) -> Fields:
    return Fields(fields, nullable=False)


def _extend(spec: Spec, extra: dict[str, Spec]) -> Fields:
    assert isinstance(spec, Fields)
    return Fields({**spec.fields, **extra}, required=spec.required, nullable=spec.nullable, extra=spec.extra)


def _benchmark_rules(bench: dict[str, Any], path: KeyPath, out: Checker) -> None:
    kind = bench.get("type", "manual")
    if isinstance(kind, str) and kind not in BENCHMARKS:
        out.warning((*path, "type"), f"{kind!r} is not a benchmark of {NAME} as the console knows it "
                    f"({', '.join(BENCHMARKS)})")  # fmt: skip
    if kind == "sa-bench":
        needed = ("dataset_path",) if bench.get("dataset_name") == "custom" else ("isl", "osl", "concurrencies")
        for key in needed:
            if bench.get(key) is None:
                note = " with dataset_name: custom" if key == "dataset_path" else ""
                out.error((*path, key), f"is required for benchmark type sa-bench{note}")
    elif kind == "custom" and not bench.get("command"):
        out.error((*path, "command"), "is required for benchmark type custom")


_FORK_BACKEND_FIELDS: dict[str, dict[str, Spec]] = {
    "atom": {"atom_config": upstream.MODES, "connector": Choice(("mooncake",)),
             "mooncake_protocol": Choice(("rdma", "tcp")), "kv_events_config": AnyValue()},
    "tilert": {"tilert_config": upstream.MODES},
    "tokenspeed": {"tokenspeed_config": upstream.MODES},
}  # fmt: skip
BACKEND_FIELDS = {
    **upstream.BACKEND_FIELDS,
    "vllm": {**upstream.BACKEND_FIELDS["vllm"], "failover": FLAGS},
    "trtllm": {
        **upstream.BACKEND_FIELDS["trtllm"], "prefill_extra_args": AnyValue(), "decode_extra_args": AnyValue(),
        "aggregated_extra_args": AnyValue(),
    },
    **_FORK_BACKEND_FIELDS,
}  # fmt: skip

STRINGS = ListOf(SStr(False))
PHASE = _extend(upstream.PHASE, {"capture_scope": Choice(("selected", "all"), nullable=False),
                                 "worker_index": LInt(False), "worker_rank": LInt(False)})  # fmt: skip
HOST_SETUP = _section(
    {
        "commands": STRINGS, "teardown": STRINGS, "nodes": Choice(("all", "workers"), nullable=False),
        "ignore_failure": LBool(), "timeout_seconds": LInt(False),
    }
)  # fmt: skip
_REPORTING = upstream.REPORTING.fields

TOP_V1 = Fields(
    {
        **upstream.TOP_FIELDS,
        "schema": Choice((1, 2)),
        "resources": Fields(
            {**upstream.RESOURCES.fields, "prefill_critical": LBool(), "decode_critical": LBool(),
             "agg_critical": LBool()},
            nullable=False,
        ),  # gpu_type may come from srtslurm.yaml (default_gpu_type)
        "backend": upstream.Backend(BACKEND_FIELDS, NAME, ((), "")),
        "frontend": _extend(upstream.FRONTEND, {"placement": PLACEMENT, "worker_selection": FLAGS,
                                                "container_image": SStr()}),
        "dynamo": _extend(upstream.DYNAMO, {
            "source": MapOf(), "sidecar": LBool(), "sidecar_port": LInt(False), "sidecar_binary": SStr(),
            "sidecar_startup_timeout": LInt(False), "sidecar_context_length": LInt(), "sidecar_args": STRINGS,
        }),
        "profiling": _extend(upstream.PROFILING, {
            "prefill": PHASE, "decode": PHASE, "aggregated": PHASE, "nsys_trace": SStr(False),
            "trace_fork_before_exec": LBool(null=True), "capture_range_end": SStr(False),
            "nsys_library_paths": STRINGS,
        }),
        "reporting": Fields(
            {
                **_REPORTING,
                "status": _extend(_REPORTING["status"], {"token_env": SStr()}),
                "s3": _extend(_REPORTING["s3"], {"exclude": STRINGS, "archive": STRINGS}),
            },
            nullable=True,
        ),
        "host_setup": HOST_SETUP,
        "services": ListOf(MapOf(), nullable=False),
        "post_eval": _section({"passthrough_env": STRINGS, "command": STRINGS}),
        "benchmark": Fields(
            {**_extend(upstream.BENCHMARK, {}).fields, "tokenizer_mode": SStr(),
             "stream_output": LBool(), "placement": PLACEMENT, "agentperf_client_dir": SStr(),
             "agentperf_config": SStr()},
            nullable=False, extra=_benchmark_rules,
        ),
        "sweep": MapOf(),
        "lock": AnyValue(),
    },
    required=upstream.REQUIRED,
)  # fmt: skip

# --- schema 2 --------------------------------------------------------------------------------

CONCURRENCIES = Either(
    (Int(minimum=1), Str(), ListOf(Either((Int(minimum=1), Str()), "an integer or a string"))),
    'a list of integers, or a string such as "4x8x16"',
)
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


_BENCH_V2: dict[str, Spec] = {
    "type": Str(),
    "isl": Int(minimum=1), "osl": Int(minimum=1), "concurrencies": CONCURRENCIES,
    "req_rate": StrOrNum(), "sweep": MapOf(),
    "random_range_ratio": Num(0), "num_prompts_mult": Int(1), "num_warmup_mult": Int(0),
    "custom_tokenizer": Str(), "tokenizer_mode": Str(), "use_chat_template": Bool(),
    "dataset_name": Str(), "dataset_path": Str(), "reuse_http_connections": Bool(),
    "slow_down_sleep_time": Num(0), "slow_down_wait_time": Num(0), "export_node_metrics": Bool(),
    "client_placement": Str("head", "last_decode"), "client_dedicated_node": Bool(),
    "colocate_with_frontend": Bool(), "stream_output": Bool(), "placement": PLACEMENT,
    "command": Str(), "container_image": Str(), "env": ENV,
    "num_examples": Int(1), "max_tokens": Int(1), "repeat": Int(1), "num_threads": Int(1),
    "max_context_length": Int(1), "categories": ListOf(Str()), "num_shots": Int(0),
    "temperature": Num(0), "top_p": Num(0), "top_k": Int(),
    "num_requests": Int(1), "concurrency": Int(1), "prefix_ratios": Either((ListOf(Num()), Str())),
    "mooncake_workload": Str(), "ttft_threshold_ms": Num(0), "itl_threshold_ms": Num(0),
    "trace_file": Str(), "aiperf_package": Str(), "aiperf_args": AnyValue(),
}  # fmt: skip
_V2_FRONTEND = Fields(
    {
        "type": Str(), "enable_multiple_frontends": Bool(), "num_additional_frontends": Int(),
        "nginx_container": Str(), "nginx_raise_ulimit": Bool(), "args": FLAGS, "env": ENV,
        "ctx_router": MapOf(), "gen_router": MapOf(), "server_config_extra": MapOf(),
        "dedicated_node": Bool(), "placement": PLACEMENT,
    }
)  # fmt: skip

TOP_V2 = Fields(
    {
        "name": Str(), "model": upstream.MODEL, "slurm": upstream.SLURM, "frontend": _V2_FRONTEND,
        "dynamo": MapOf(), "benchmark": Fields(_BENCH_V2, extra=_benchmark_rules), "profiling": MapOf(),
        "output": MapOf(), "health_check": Fields({"max_attempts": Int(1), "interval_seconds": Num(0)}),
        "infra": MapOf(), "observability": MapOf(), "telemetry": MapOf(), "environment": ENV,
        "container_mounts": MapOf(), "extra_mount": ListOf(Str()), "srun_options": MapOf(),
        "sbatch_directives": MapOf(), "enable_config_dump": Bool(), "setup_script": Str(), "identity": MapOf(),
        "reporting": MapOf(), "sweep": MapOf(), "lock": AnyValue(),
        "schema": Scalar((int,), "1 or 2", choices=(1, 2)), "resources": RESOURCES_V2,
        "engine": Engine(), "roles": ROLES, "services": ListOf(MapOf()), "host_setup": AnyValue(),
        "post_eval": AnyValue(),
    },
    required=("name", "model", "engine", "roles"),
)  # fmt: skip


def check(config: dict[str, Any], out: Checker, *, extra_top: dict[str, Spec]) -> None:
    """The fork's schema and rules for one job's config (topology rules are the loader's)."""
    config = {k: v for k, v in config.items() if k not in extra_top}
    frontend = config.get("frontend")
    kind = frontend.get("type") if isinstance(frontend, dict) else None
    if isinstance(kind, str) and kind not in FRONTENDS:  # frontend types are open-ended in the fork
        out.warning(("frontend", "type"), f"{kind!r} is not a frontend of {NAME} as the console knows it "
                    f"({', '.join(FRONTENDS)})")  # fmt: skip
    if config.get("schema") == 2:
        TOP_V2.check(config, (), out)
        return
    if "engine" in config or "roles" in config:
        out.error(("schema",), "`engine`/`roles` are the schema 2 layout: add `schema: 2`")
    TOP_V1.check(config, (), out)
    if not any(f.kind != "unknown" for f in out.errors):
        upstream.rules(config, out)
