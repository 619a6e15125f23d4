"""Dynamo's own log lines: the mocker engine (``python3 -m dynamo.mocker``) and the frontend.

Both are Rust ``tracing`` output with ANSI colours, as Dynamo 1.6.1 writes them under srtctl
(``DYN_LOG=info,...``): ``<dim>2026-12-01T09:54:02.254974Z</dim> <green> INFO</green>
<dim>target</dim><dim>:</dim> message key=value ...``. The lines and their order are those of a
real 1P1D mocker job (tests/data/real-srtctl/1p1d-completed/).
"""

import datetime
import hashlib
import json
import os
import random
import uuid
from collections.abc import Sequence

_DIM, _ITALIC, _BOLD, _RESET = "\x1b[2m", "\x1b[3m", "\x1b[1m", "\x1b[0m"
_LEVELS = {"INFO": "\x1b[32m INFO\x1b[0m", "WARN": "\x1b[33m WARN\x1b[0m", "ERROR": "\x1b[31mERROR\x1b[0m"}


def utc_stamp() -> str:
    return datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _fields(pairs: "Sequence[tuple[str, object]]") -> str:
    return " ".join(f"{_ITALIC}{k}{_RESET}{_DIM}={_RESET}{v}" for k, v in pairs)


def line(
    level: str,
    target: str,
    message: str,
    fields: "Sequence[tuple[str, object]] | None" = None,
    spans: "tuple[str, ...]" = (),
    span_fields: "Sequence[Sequence[tuple[str, object]]] | None" = None,
) -> str:
    """One event as tracing-subscriber's full ANSI format writes it."""
    head = f"{_DIM}{utc_stamp()}{_RESET} {_LEVELS[level]} "
    if spans:
        head += "".join(f"{_BOLD}{s}{_RESET}:" for s in spans) + " "
    text = f"{head}{_DIM}{target}{_RESET}{_DIM}:{_RESET} {message}"
    if fields:
        text += " " + _fields(fields)
    for group in span_fields or []:
        text += f" {_DIM}{_fields(group)}{_RESET}"
    return text


def lease_id(job_id: str, number: int) -> int:
    """A worker's etcd lease id (its ``worker_id``), the same in the worker's and the frontend's log."""
    digest = hashlib.sha256(f"{job_id}/{number}".encode()).digest()
    return 0x694D000000000000 | int.from_bytes(digest[:6], "big")


def runtime_configuration(system_port: int) -> str:
    return (
        "dynamo runtime configuration: num_worker_threads=2, max_blocking_threads=2, system_host=0.0.0.0, "
        f"system_port={system_port}, use_endpoint_health_status=[]starting_health_status=NotReady, "
        "system_health_path=/health, system_live_path=/live, health_check_enabled=false, "
        "canary_wait_time_secs=10, health_check_request_timeout_secs=3"
    )


def discovery(infra: str) -> "list[str]":
    return [
        line(
            "INFO", "dynamo_runtime::distributed", f"Initializing KV store discovery backend: Etcd(http://{infra}:2379)"
        ),
        line(
            "INFO",
            "dynamo_runtime::pipeline::network::manager",
            "Initializing NetworkManager with TCP request plane",
            [("mode", "tcp"), ("host", '"127.0.0.1"'), ("port", "OS-assigned")],
        ),
    ]


# --------------------------------------------------------------------------- the mocker


_COMPONENT = {"prefill": "prefill", "decode": "backend", "agg": "backend"}
_WORKER_TYPE = {"prefill": "Prefill", "decode": "Decode", "agg": "Aggregated"}
_ENGINES = {"vllm": "Vllm", "sglang": "Sglang", "trtllm": "Trtllm"}


class MockerLog:
    """The lines of one ``dynamo.mocker`` worker process, in the order it writes them."""

    def __init__(
        self,
        settings: "object",
        mode: str,
        job_id: str,
        number: int,
        infra: str,
        system_port: int,
        bootstrap: "int | None",
    ) -> None:
        self.m = settings
        self.mode = mode
        self.component = _COMPONENT[mode]
        self.system_port = system_port
        self.bootstrap = bootstrap
        self.infra = infra
        self.worker_id = lease_id(job_id, number)
        self.rng = random.Random(self.worker_id)
        self.tcp_port = self.rng.randint(32768, 60999)
        self.zmq_context = False

    def _hex(self) -> str:
        return format(self.rng.getrandbits(56), "x")

    def launch(self) -> "list[str]":
        workers = getattr(self.m, "num_workers", 1)
        return [
            line("INFO", "main.prefetch_model", "Using local model path: /model"),
            line("INFO", "main.worker", "Created canonical engine config from CLI arguments"),
            line(
                "INFO",
                "main.worker",
                f"Launching {workers} mocker worker(s) with isolated DistributedRuntime instances",
            ),
            line("INFO", "main.launch_workers", f"Creating mocker worker 1/{workers}"),
        ]

    def engine(self) -> "list[str]":
        """The runtime up to the engine: discovery, the system status server, the mocker engine."""
        port = self.system_port
        return [
            line("INFO", "dynamo_runtime::worker", runtime_configuration(port)),
            line("INFO", "dynamo_runtime::runtime", "Compute pool disabled (compute_threads = 0)"),
            *discovery(self.infra),
            line(
                "INFO",
                "dynamo_runtime::system_status_server",
                f"[spawn_system_status_server] binding to: 0.0.0.0:{port}",
            ),
            line(
                "INFO",
                "dynamo_runtime::system_status_server",
                f"[spawn_system_status_server] system status server bound to: 0.0.0.0:{port}",
            ),
            line(
                "INFO",
                "dynamo_runtime::distributed",
                "System HTTP listener started",
                [("address", f"0.0.0.0:{port}"), ("policy", "Worker")],
            ),
            line("INFO", "dynamo_llm::mocker", "Creating mocker engine with config: " + self.mocker_config()),
        ]

    def running(self) -> "list[str]":
        workers = getattr(self.m, "num_workers", 1)
        return [
            line("INFO", "main.launch_workers", f"All {workers} mocker worker(s) created and running"),
            line("INFO", "main.launch_workers", "Signal handlers set up for graceful shutdown"),
        ]

    def register(self) -> "list[str]":
        """Up to the generate endpoint's registration: from then on the frontend sees the worker."""
        out = []  # type: list[str]
        if self.mode != "prefill":
            out += self.publisher("active_sequences_events")
        out.append(self.loopback_warning())
        out += self.tcp_server()
        out.append(self.registered("generate"))
        return out

    def after_register(self) -> "list[str]":
        out = []  # type: list[str]
        if self.mode == "prefill":
            out.append(
                line(
                    "INFO",
                    "dynamo_llm::mocker",
                    "Initializing KV event publisher with block_size 64, enable_local_indexer=true",
                )
            )
        out += self.publisher("forward-pass-metrics")
        out.append(
            line("INFO", "dynamo_llm::fpm_publisher", "FPM direct publisher started", [("worker_id", self.worker_id)])
        )
        if self.mode == "prefill":
            endpoint = f"dynamo/{self.component}/generate"
            out += [
                line(
                    "INFO",
                    "dynamo_llm::kv_router::publisher",
                    f"Initializing KvEventPublisher for worker {self.worker_id} on serving endpoint {endpoint}",
                    [("kv_state_endpoint", endpoint)],
                ),
                line(
                    "INFO",
                    "dynamo_llm::kv_router::publisher",
                    f"LocalKvIndexer enabled for worker {self.worker_id} on endpoint {endpoint}",
                ),
                line("INFO", "dynamo_llm::kv_router::publisher", "Using event plane for KV event publishing"),
                line(
                    "INFO",
                    "aisimulate_core::engine::kv_manager::vllm_backend",
                    "VllmKvManager initialized",
                    [("dp_rank", 0), ("block_size", self.block_size)],
                ),
            ]
        out += self.publisher("kv_metrics")
        out.append(line("INFO", "dynamo_llm::mocker", "Metrics background tasks started"))
        if self.mode == "prefill":
            source = "worker_kv_query_source_" + self._hex()
            out.append(
                line(
                    "INFO",
                    "dynamo_llm::mocker",
                    "Bootstrap server started for prefill worker",
                    [("port", self.bootstrap)],
                )
            )
            out += self.publisher("kv-events", key=source.rsplit("_", 1)[1])
            out.append(
                line(
                    "INFO",
                    "dynamo_llm::kv_router::indexer::recovery::worker_query_endpoint",
                    f"WorkerKvQuery endpoint starting for worker {self.worker_id} dp_rank 0 routed by instance "
                    f"{self.worker_id} on endpoint '{source}'",
                )
            )
            out.append(self.registered(source))
        return out

    # ------------------------------------------------------------- pieces

    @property
    def block_size(self) -> int:
        return getattr(self.m, "block_size", None) or 64

    def publisher(self, topic: str, key: "str | None" = None) -> "list[str]":
        out = []  # type: list[str]
        zmq = "dynamo_runtime::transports::event_plane::zmq_transport"
        if not self.zmq_context:
            self.zmq_context = True
            out.append(line("INFO", zmq, "Configured shared event-plane ZMQ context", [("io_threads", 4)]))
        port = self.rng.randint(32768, 60999)
        channel = f"namespace/dynamo/component/{self.component}/endpoint/generate/topic/{topic}/{key or self._hex()}"
        return [
            *out,
            line(
                "INFO",
                zmq,
                "ZMQ PUB transport bound with configured HWM",
                [("endpoint", f"tcp://0.0.0.0:{port}"), ("topic", topic), ("sndhwm", 100000)],
            ),
            line(
                "INFO",
                "dynamo_runtime::transports::event_plane",
                "direct ZMQ publisher advertised endpoint",
                [("public_endpoint", f"tcp://127.0.0.1:{port}")],
            ),
            line(
                "INFO",
                "dynamo_runtime::discovery::kv_store",
                f"KVStoreDiscovery::register: EventChannel bucket=v1/event_channels, key={channel}",
            ),
            line(
                "INFO",
                "dynamo_runtime::transports::event_plane",
                "EventPublisher registered with discovery (direct mode)",
                [("topic", topic), ("transport", "Zmq"), ("publisher_id", self.rng.randint(10**14, 10**16 - 1))],
            ),
        ]

    def loopback_warning(self) -> str:
        port = self.system_port
        return line(
            "WARN",
            "dynamo_runtime::system_status_server",
            "System status server found no non-loopback address in the bound family, so remote callers cannot "
            "reach the advertised address; on IPv6-only hosts, set DYN_SYSTEM_HOST=::",
            [("bind", f"0.0.0.0:{port}"), ("advertised", f"127.0.0.1:{port}")],
        )

    def tcp_server(self) -> "list[str]":
        tcp = "dynamo_runtime::pipeline::network::ingress::shared_tcp_endpoint"
        manager = "dynamo_runtime::pipeline::network::manager"
        actual = f"127.0.0.1:{self.tcp_port}"
        return [
            line(
                "INFO",
                manager,
                "Creating TCP request plane server",
                [("bind_addr", "127.0.0.1:0"), ("port_source", '"OS-assigned"')],
            ),
            line("INFO", tcp, "Initializing TCP server with dispatcher (concurrency=10000, queue=40000)"),
            line("INFO", tcp, "Started TCP worker dispatcher with concurrency limit 10000"),
            line("INFO", tcp, "Binding TCP server to 127.0.0.1:0"),
            line("INFO", tcp, "TCP server bound successfully", [("requested", "127.0.0.1:0"), ("actual", actual)]),
            line(
                "INFO",
                manager,
                "TCP request plane server started",
                [("actual_addr", actual), ("advertised_addr", actual)],
            ),
        ]

    def registered(self, endpoint: str) -> str:
        return line(
            "INFO",
            "dynamo_runtime::pipeline::network::ingress::shared_tcp_endpoint",
            f"Registered endpoint 'dynamo.{self.component}.{endpoint}' with shared TCP server on "
            f"127.0.0.1:{self.tcp_port}",
        )

    def mocker_config(self) -> str:
        m = self.m
        bootstrap = f"Some({self.bootstrap})" if self.bootstrap is not None else "None"
        block = self.block_size
        engine = _ENGINES.get(str(getattr(m, "engine_type", "vllm")), "Vllm")
        return (
            "MockerConfig { engine: EngineLaunchConfig { engine: EngineConfig { "
            f"backend: {engine}, num_gpu_blocks: {getattr(m, 'num_gpu_blocks', 16384)}, block_size: {block}, "
            f"max_model_len: None, max_num_seqs: {getattr(m, 'max_num_seqs', 256)}, "
            f"max_num_batched_tokens: {getattr(m, 'max_num_batched_tokens', 8192)}, prefill_schedule_interval: 1, "
            "prefill_decode_interval: 0, "
            f"enable_prefix_caching: {str(getattr(m, 'prefix_caching', True)).lower()}, "
            f"enable_chunked_prefill: {str(getattr(m, 'chunked_prefill', True)).lower()}, "
            f"speedup_ratio: {float(getattr(m, 'speedup_ratio', 1.0))!r}, "
            f"decode_speedup_ratio: {float(getattr(m, 'decode_speedup_ratio', 1.0))!r}, "
            "aic_nextn: None, aic_nextn_accept_rates: None, aic_mtp_seed: 42, "
            f"worker_type: {_WORKER_TYPE[self.mode]}, preemption_mode: Lifo, emit_kv_events: false, "
            "emit_kv_token_ids: false, kv_transfer_bytes_per_token: Some(512), kv_cache_bytes_per_token: None, "
            "kv_cache_groups: [], kv_cache_capacity_bytes: None, native_host_offload: None, g3_offload: None, "
            "state_cache: None, prefix_match_unit: None, kv_transfer_bandwidth: None, "
            "kv_transfer_timing_mode: FullPrompt, timing_model: Polynomial, sglang: SglangConfig { "
            "schedule_policy: Fifo, max_prefill_tokens: 16384, chunked_prefill_size: 8192, "
            "clip_max_new_tokens: 4096, schedule_conservativeness: 1.0 }, trtllm: TrtllmConfig { "
            "capacity_scheduler_policy: GuaranteedNoEvict } }, "
            f"dp_size: {getattr(m, 'data_parallel_size', 1)}, tensor_parallel_size: 1, startup_time: None, "
            "num_gpu_blocks_is_explicit: true, gpu_memory_utilization: None, mem_fraction_static: None, "
            "free_gpu_memory_fraction: None, cuda_graph_reserved_bytes: None }, runtime: MockerRuntimeOptions { "
            f"enable_local_indexer: true, bootstrap_port: {bootstrap}, handoff_session_timeout_ms: 300000, "
            "reasoning: None, response_replay_trace_path: None, zmq_kv_events_port: None, zmq_replay_port: None, "
            "router_queue_policy: None }, perf_model: PerfModel::Polynomial }"
        )


# --------------------------------------------------------------------------- the frontend

_HTTP = "dynamo_llm::http::service::service_v2"
_WATCHER = "dynamo_llm::discovery::watcher"
_ROUTER = "dynamo_runtime::pipeline::network::egress::push_router"
_METRICS = "dynamo_llm::http::service::metrics"
_ZMQ = "dynamo_runtime::transports::event_plane::zmq_transport"

_KV_ROUTER_CONFIG = (
    "KvRouterConfig { overlap_score_credit: 1.0, overlap_score_credit_decay: 0.0, prefill_load_scale: 1.0, "
    "decode_active_request_weight: 0.0, host_cache_hit_weight: 0.75, disk_cache_hit_weight: 0.25, "
    "router_temperature: 0.0, use_kv_events: true, router_replica_sync: false, router_track_active_blocks: false, "
    "router_track_output_blocks: false, router_assume_kv_reuse: true, router_track_prefill_tokens: true, "
    "router_tracking_hash: PublicXxh3V1, router_tracking_key_file: None, router_tracking_key_id: None, "
    "router_prefill_load_model: None, router_ttl_secs: 120.0, router_approximate_cache_policy: Ttl, "
    "router_queue_threshold: None, router_policy_config: None, router_prefill_policy: None, "
    "router_decode_policy: None, policy_model_name: None, policy_config_cache: OnceLock(<uninit>), "
    "router_event_threads: 4, skip_initial_worker_wait: false, router_queue_policy: Fcfs, "
    "use_remote_indexer: false, serve_indexer: false, enable_session_prefix_index: false, "
    "shared_cache_multiplier: None, shared_cache_type: None, router_predicted_ttl_secs: None, "
    "conditional_disagg_enabled: false, conditional_disagg_policy: IslBounding, "
    "conditional_disagg_eff_isl_threshold: 2048, conditional_disagg_eff_isl_ratio_threshold: 0.7, "
    "conditional_disagg_prefill_busy_threshold: None, conditional_disagg_decode_busy_threshold: None }"
)


class FrontendLog:
    """The lines of ``python3 -m dynamo.frontend``: startup, discovered workers, health polls, requests."""

    def __init__(self, model: str, tokenizer: str, job_id: str) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.job_id = job_id
        self.rng = random.Random(job_id)
        self.card_loaded = False
        self.zmq_context = False
        self.prefill_ids = []  # type: list[int]
        self.decode_ids = []  # type: list[int]
        self.turn = 0

    def start(self, infra: str, port: int) -> "list[str]":
        return [
            line(
                "INFO",
                "router_args.log_rejection_thresholds",
                "busy-worker rejection disabled: no rejection threshold is configured",
            ),
            line("INFO", "main.async_main", "Request migration disabled (limit: 0)"),
            line("INFO", "dynamo_runtime::worker", runtime_configuration(-1)),
            *discovery(infra),
            line("INFO", _HTTP, "Starting HTTP(S) service", [("protocol", '"HTTP"'), ("address", f'"0.0.0.0:{port}"')]),
        ]

    def health(self) -> str:
        return line("INFO", _HTTP, "http response sent", [("status", 200), ("latency_ms", 1)])

    def worker(self, mode: str, worker_id: int) -> "list[str]":
        """What the frontend logs when a worker's generate endpoint appears in discovery."""
        out = []  # type: list[str]
        model = self.model
        if mode == "prefill":
            self.prefill_ids.append(worker_id)
            namespace = '["dynamo","prefill","generate","","prefill"]'
            if len(self.prefill_ids) == 1:
                out.append(
                    line(
                        "INFO",
                        _WATCHER,
                        "Prefill worker detected, registering and activating prefill router",
                        [("model_name", json.dumps(model))],
                    )
                )
            out += self.model_group(namespace)
            if len(self.prefill_ids) == 1:
                activation = "dynamo_llm::kv_router::prefill_router::activation"
                out += [
                    line(
                        "INFO",
                        activation,
                        "Activating prefill router",
                        [("prefill_router_mode", "RoundRobin"), ("decode_router_mode", "RoundRobin"),
                         ("advertised", "false"), ("is_eagle", "false"), ("block_size", 64),
                         ("session_affinity_ttl", "None"), ("kv_tuning", f"Some({_KV_ROUTER_CONFIG})")],
                    ),
                    line(
                        "INFO",
                        activation,
                        "Prefill router target activated",
                        [("model_name", model), ("namespace", "dynamo"), ("endpoint_id", "dynamo/prefill/generate")],
                    ),
                ]  # fmt: skip
        else:
            self.decode_ids.append(worker_id)
            kind = "decode" if mode == "decode" else "aggregated"
            namespace = f'["dynamo","backend","generate","chat|completions","{kind}"]'
            if not self.card_loaded:
                self.card_loaded = True
                out += self.model_card()
            out += self.model_group(namespace)
            if len(self.decode_ids) == 1:
                out += [
                    line("INFO", _HTTP, f"{name} endpoints enabled") for name in ("chat", "responses", "completion")
                ]
        return out + self.kv_metrics_stream()

    def model_card(self) -> "list[str]":
        card = "dynamo_llm::model_card"
        out = [
            line("INFO", card, "initializing process-wide tokenizer cache", [("cache_bytes", 67108864)]),
            line(
                "INFO",
                card,
                "wrapping tokenizer in L1 prefix cache",
                [("cache_bytes", 67108864), ("cache_extend", "true"), ("specials", 3)],
            ),
            line(
                "INFO",
                "dynamo_runtime::distributed",
                "TCP request callback server using OS-assigned port on host 127.0.0.1",
            ),
        ]
        for ready in ("Chat completions", "Completions"):
            out += [self.parser_route(), self.mm_routing_warning(), line("INFO", _WATCHER, f"{ready} is ready")]
        return out

    def parser_route(self) -> str:
        return line(
            "INFO",
            "dynamo_llm::preprocessor",
            "Selected model parser route",
            [("model", self.model), ("parser_version", "Auto"), ("unified_family", "None"),
             ("tool_parser", "None"), ("reasoning_parser", "None")],
        )  # fmt: skip

    def mm_routing_warning(self) -> str:
        slug = hashlib.sha256(f"{self.model}/{self.job_id}".encode()).hexdigest()
        home = os.environ.get("HOME") or "/root"
        path = f"{home}/.cache/dynamo/mdc/by-slug/{self.model}/{slug}/preprocessor_config.json"
        reason = (
            f"image routing processor unavailable (mm-routing: failed to read preprocessor_config.json at {path}); "
            "image-placeholder token or model-specific prompt layout unresolvable from config.json / "
            "processor_config.json / tokenizer_config.json / vocab probe"
        )
        return line(
            "WARN",
            "mm_routing",
            f"{self.tokenizer} is not supported for MM-aware KV routing ({reason}). Falling back to KV routing "
            "without MM awareness — text-prefix overlap still works but the router cannot distinguish requests "
            "by image content.",
            [("model", self.tokenizer), ("reasons", reason)],
        )

    def model_group(self, namespace: str) -> "list[str]":
        group = json.dumps([self.model, namespace], separators=(",", ":"))
        return [
            line(
                "INFO",
                "dynamo_llm::discovery::model",
                "Adding worker set to model",
                [("model", self.model), ("namespace", namespace)],
            ),
            line(
                "INFO",
                _WATCHER,
                "Committed discovered model group",
                [("model_name", json.dumps(self.model)), ("group", group), ("members", 1)],
            ),
        ]

    def kv_metrics_stream(self) -> "list[str]":
        out = []  # type: list[str]
        if not self.zmq_context:
            self.zmq_context = True
            out.append(line("INFO", _ZMQ, "Configured shared event-plane ZMQ context", [("io_threads", 4)]))
        port = self.rng.randint(32768, 60999)
        out.append(
            line(
                "INFO",
                _ZMQ,
                "ZMQ single-consumer stream connected",
                [("endpoint", f'"tcp://127.0.0.1:{port}"'), ("topic", '"kv_metrics"'), ("rcvhwm", 100000)],
            )
        )
        return out

    def request(self, chat: bool, input_tokens: int, output_tokens: int, elapsed_ms: int) -> "tuple[str, list[str]]":
        """One request through the frontend (received, routed to a prefill and a decode worker, done):
        its id and its lines."""
        inner, outer = (
            str(uuid.UUID(int=self.rng.getrandbits(128), version=4)),
            str(uuid.UUID(int=self.rng.getrandbits(128), version=4)),
        )
        self.turn += 1
        prefill = self.prefill_ids[self.turn % len(self.prefill_ids)] if self.prefill_ids else None
        decode = self.decode_ids[self.turn % len(self.decode_ids)] if self.decode_ids else 0
        workers = [w for w in (prefill, decode) if w is not None]
        endpoint, kind, uri = (
            ("chat_completions", "unary", "/v1/chat/completions")
            if chat
            else ("completions", "stream", "/v1/completions")
        )
        spans = ("http-request",) if chat else ("http-request", "completions", "completions_single")
        request_span = [("method", "POST"), ("uri", uri), ("version", "HTTP/1.1"), ("request_id", outer)]  # type: list[tuple[str, object]]
        if chat:
            request_span.append(("model", json.dumps(self.model)))
        usage = [("input_tokens", input_tokens), ("output_tokens", output_tokens), ("image_count", 0),
                 ("video_count", 0), ("audio_count", 0)]  # type: list[tuple[str, object]]  # fmt: skip
        if chat:
            ttft = elapsed_ms * 0.85
            usage += [
                ("ttft_ms", f'"{ttft:.2f}"'),
                ("avg_itl_ms", f'"{(elapsed_ms - ttft) / max(1, output_tokens):.2f}"'),
            ]
        if prefill is not None:
            usage.append(("prefill_worker_id", prefill))
        usage.append(("decode_worker_id", decode))
        if chat:
            usage.append(("request.outcome", '"success"'))
        done_span = request_span + usage
        basic = [("request_id", inner), ("model", self.model), ("endpoint", endpoint), ("request_type", kind)]
        out = [line("INFO", _METRICS, "request received", basic, spans, [request_span])]
        for worker in workers:
            out.append(
                line(
                    "INFO",
                    _ROUTER,
                    "Selected worker",
                    [("router_mode", '"round-robin"'), ("worker_id", worker)],
                    spans,
                    [request_span],
                )
            )
        sent = [("status", 200), ("latency_ms", elapsed_ms if chat else max(1, elapsed_ms // 30))]
        if not chat:
            out.append(line("INFO", _HTTP, "http response sent", sent, ("http-request",), [request_span]))
        for i, worker in enumerate(workers):
            route = [("otel.kind", '"client"'), ("request_id", inner), ("router_mode", "RoundRobin"),
                     ("worker_id", worker), ("request.attempt", 0), ("migration.is_retry", "false")]  # fmt: skip
            if i == len(workers) - 1:
                route.append(("migration.tokens_completed", 0))
            route.append(("request.outcome", '"success"'))
            out.append(
                line(
                    "INFO",
                    "request_span",
                    "route request completed",
                    [("request.outcome", '"success"')],
                    (*spans, "router.route_request"),
                    [request_span, route],
                )
            )
        finished = [*basic, ("status", "success"), ("elapsed_ms", elapsed_ms)]
        out.append(line("INFO", _METRICS, "request completed", finished, spans, [done_span]))
        if chat:
            out.append(line("INFO", _HTTP, "http response sent", sent, ("http-request",), [done_span]))
        return inner, out
