"""What srtctl starts on each node: worker commands and environments, the frontend's, the benchmark's.

srtctl logs these (``Env:``, ``Command:``) before every srun; the demo prints the same and the
workers' fingerprints record the same environment.
"""

import shlex

from .plan import Plan, Segment
from .util import FRONTEND_PORT, WORKER_PORT

ETCD_PORT = 2379
NATS_PORT = 4222
SYSTEM_PORT_BASE = 7500  # DYN_SYSTEM_PORT, one per worker process
BOOTSTRAP_PORT_BASE = 7200  # one per prefill endpoint, counted per leader node
WORKER_DYN_LOG = "info,dynamo_runtime::pipeline::network::ingress::push_handler=warn"


def shell_join(argv: "list[str]") -> str:
    """``shlex.join`` (Python 3.8+)."""
    return " ".join(shlex.quote(a) for a in argv)


def system_ports(segments: "list[Segment]") -> "dict[str, int]":
    """DYN_SYSTEM_PORT of every worker process (srtctl counts them in start order)."""
    return {seg.key: SYSTEM_PORT_BASE + i for i, seg in enumerate(segments)}


def bootstrap_ports(segments: "list[Segment]") -> "dict[tuple[str, int], int]":
    """The bootstrap port of every prefill endpoint, numbered per leader node."""
    per_node = {}  # type: dict[str, int]
    out = {}  # type: dict[tuple[str, int], int]
    for seg in segments:
        if seg.mode != "prefill" or seg.node_rank != 0:
            continue
        n = per_node.get(seg.node, 0)
        per_node[seg.node] = n + 1
        out[(seg.mode, seg.index)] = BOOTSTRAP_PORT_BASE + n
    return out


def worker_env(plan: Plan, seg: Segment, infra: str, head_ip: str, sys_port: int, node_id: int) -> "dict[str, str]":
    """The environment srtctl gives a worker process, keys sorted as its ``Env:`` line shows them."""
    env = {
        "HEAD_NODE_IP": head_ip,
        "ETCD_ENDPOINTS": f"http://{infra}:{ETCD_PORT}",
        "NATS_SERVER": f"nats://{infra}:{NATS_PORT}",
        "DYN_SYSTEM_PORT": str(sys_port),
        "DYN_REQUEST_PLANE": plan.request_plane,
        "DYN_SKIP_SGLANG_LOG_FORMATTING": "1",
        "DYN_LOG": WORKER_DYN_LOG,
    }
    if plan.event_plane:
        env["DYN_EVENT_PLANE"] = plan.event_plane
    # srtctl fills {node} and {node_id} in recipe values and leaves other braces alone.
    for source in (plan.mode_environment(seg.mode), plan.environment):
        for key, value in source.items():
            env[key] = value.replace("{node_id}", str(node_id)).replace("{node}", seg.node)
    if plan.backend != "mocker" and seg.gpus < plan.gpus_per_node:
        first = seg.gpus * seg.slot
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(first + g) for g in range(seg.gpus))
    return dict(sorted(env.items()))


def worker_argv(plan: Plan, seg: Segment, bootstrap: "int | None") -> "list[str]":
    """The command srtctl runs for one worker process."""
    if plan.backend == "mocker":
        return mocker_argv(plan, seg.mode, bootstrap)
    role = plan.role(seg.mode)
    gpus = str(role.gpus if role else seg.gpus)
    if plan.backend == "atom":
        argv = ["python3", "-m", "atom.entrypoints.openai_server", "--model", "/model", "--host", "0.0.0.0",
                "--server-port", str(WORKER_PORT), "-tp", gpus]  # fmt: skip
        kv = {"prefill": "kv_producer", "decode": "kv_consumer"}.get(seg.mode)
        if kv:
            transfer = (
                '{{"kv_role":"{}","kv_connector":"mooncake","proxy_ip":"{}","handshake_port":8998,"protocol":"tcp"}}'
            )
            argv += ["--kv-transfer-config", transfer.format(kv, seg.worker_nodes[0])]
        return argv
    argv = ["python3", "-m", "sglang.launch_server", "--model-path", "/model", "--tp-size", gpus,
            "--host", "0.0.0.0", "--port", str(WORKER_PORT)]  # fmt: skip
    if seg.mode != "agg":
        argv += ["--disaggregation-mode", seg.mode]
    return argv


def mocker_argv(plan: Plan, mode: str, bootstrap: "int | None") -> "list[str]":
    """``python3 -m dynamo.mocker ...`` as srtctl builds it from ``backend:``."""
    m = plan.mocker
    argv = ["python3", "-m", "dynamo.mocker", "--model-path", plan.worker_model_arg]
    if mode != "agg":
        argv += ["--disaggregation-mode", mode]
    if mode == "prefill" and bootstrap is not None:
        argv += ["--bootstrap-ports", str(bootstrap)]
    argv += [
        "--engine-type", m.engine_type,
        "--speedup-ratio", str(m.speedup_ratio),
        "--data-parallel-size", str(m.data_parallel_size),
        "--num-gpu-blocks-override", str(m.num_gpu_blocks),
        "--max-num-seqs", str(m.max_num_seqs),
        "--max-num-batched-tokens", str(m.max_num_batched_tokens),
    ]  # fmt: skip
    if m.decode_speedup_ratio != 1.0:
        argv += ["--decode-speedup-ratio", str(m.decode_speedup_ratio)]
    if m.num_workers > 1:
        argv += ["--num-workers", str(m.num_workers)]
    for flag, setting in m.optional:
        argv += [flag, setting]
    if not m.prefix_caching:
        argv.append("--no-enable-prefix-caching")
    if not m.chunked_prefill:
        argv.append("--no-enable-chunked-prefill")
    overrides = m.mode_overrides(mode)
    for key in sorted(overrides):
        value = overrides[key]
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            if value:
                argv.append(flag)
        elif isinstance(value, list):
            argv.append(flag)
            argv += [str(v) for v in value]
        elif value is not None:
            argv += [flag, str(value)]
    return argv


def sa_bench_gpus(plan: Plan) -> "tuple[int, int, int]":
    """(total, prefill, decode) GPUs as sa-bench names its result files."""
    if plan.disagg:
        prefill, decode = plan.gpus_of("prefill"), plan.gpus_of("decode")
        return prefill + decode, prefill, decode
    return plan.sa_bench_agg_gpus, 0, 0


def sa_bench_argv(plan: Plan) -> "list[str]":
    """``bash /srtctl-benchmarks/sa-bench/bench.sh ...``: srtctl's positional arguments."""
    b = plan.bench
    total, prefill, decode = sa_bench_gpus(plan)
    return [
        "bash",
        "/srtctl-benchmarks/sa-bench/bench.sh",
        f"http://localhost:{FRONTEND_PORT}",
        str(plan.isl),
        str(plan.osl),
        "x".join(str(c) for c in plan.concurrencies),
        b.req_rate,
        plan.tokenizer,
        plan.served_model,
        str(plan.disagg).lower(),
        str(total),
        str(prefill),
        str(decode),
        b.random_range_ratio,
        str(b.num_prompts_mult),
        str(b.num_warmup_mult),
        b.custom_tokenizer,
        str(b.use_chat_template).lower(),
        b.dataset_name,
        b.dataset_path,
        str(b.reuse_http_connections).lower(),
    ]
