"""From one resolved config to an arm: topology, node demand, grid and srtctl's cross-field rules."""

from __future__ import annotations

from typing import Any

from console.model import Mode, Role, RoleName, Topology
from console.recipes.expand import parse_concurrencies
from console.recipes.spec import Checker, loose_bool, loose_int
from console.recipes.yamlio import KeyPath

DEFAULT_GPUS_PER_NODE = 4  # srtctl's default without a cluster config (srtslurm.yaml)

_TP_KEYS = ("tp-size", "tp", "tensor-parallel-size", "tensor_parallel_size")
_DPA_KEYS = ("enable-dp-attention", "dp-attention", "enable_dp_attention")
_MODE_KEYS: dict[RoleName, str] = {"prefill": "prefill", "decode": "decode", "agg": "aggregated"}


def _int(value: Any, default: int | None = None) -> int | None:
    # As srtctl's loader reads integers: "4" is 4 (a type error is reported by the schema).
    read = loose_int(value)
    return default if read is None else read


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def schema_version(config: dict[str, Any]) -> int:
    return 2 if config.get("schema") == 2 else 1


def backend_type(config: dict[str, Any]) -> str:
    if schema_version(config) == 2:
        engine = config.get("engine")
        kind = engine.get("type") if isinstance(engine, dict) else engine
        return str(kind) if kind else "?"
    return str(_map(config.get("backend")).get("type") or "sglang")


def frontend_type(config: dict[str, Any]) -> str:
    return str(_map(config.get("frontend")).get("type") or "dynamo")


def topology(config: dict[str, Any], out: Checker) -> Topology:
    """Roles, GPUs and the node count srtctl asks sbatch for."""
    resources = _map(config.get("resources"))
    gpn = _int(resources.get("gpus_per_node"), DEFAULT_GPUS_PER_NODE) or DEFAULT_GPUS_PER_NODE
    roles = _roles_v2(config, gpn, out) if schema_version(config) == 2 else _roles_v1(resources, gpn, out)
    mode: Mode = "agg" if any(r.name == "agg" for r in roles) else "disagg"
    packed = _packed_nodes(config, roles, gpn)
    for role in roles:
        if packed is None and role.nodes and role.workers * role.gpus_per_worker > role.nodes * gpn:
            out.error(
                _role_path(config, role.name),
                f"{role.workers} {role.name} worker(s) x {role.gpus_per_worker} GPUs do not fit on "
                f"{role.nodes} node(s) x {gpn} GPUs",
            )
    tp, dpa = _parallelism(config)
    if backend_type(config) == "atom":
        # ATOM is launched with `-tp <gpus per worker>`; recipes may not set it themselves.
        tp = {r.name: r.gpus_per_worker for r in roles}
    count = packed if packed is not None else _declared_nodes(config, roles)
    return Topology(mode, gpn, tuple(roles), _dedicated(config), tp, dpa, count)


def _declared_nodes(config: dict[str, Any], roles: list[Role]) -> int | None:
    """srtctl asks for prefill_nodes + decode_nodes even where a side has no workers."""
    res = _map(config.get("resources"))
    if schema_version(config) == 2 or (res.get("prefill_nodes") is None and res.get("decode_nodes") is None):
        return None
    declared = (_int(res.get("prefill_nodes"), 0) or 0) + (_int(res.get("decode_nodes"), 0) or 0)
    return declared if declared != sum(r.nodes for r in roles) else None


def _packed_nodes(config: dict[str, Any], roles: list[Role], gpn: int) -> int | None:
    """vLLM with `allow_prefill_decode_colocation` packs prefill and decode workers onto as few
    nodes as hold their GPUs (one node, or several with `..._across_nodes`)."""
    backend = _map(config.get("backend"))
    if schema_version(config) == 2 or backend_type(config) != "vllm":
        return None
    if loose_bool(backend.get("allow_prefill_decode_colocation")) is not True:
        return None
    if not any(r.name == "prefill" for r in roles) or not any(r.name == "decode" for r in roles):
        return None
    gpus = sum(r.gpus for r in roles)
    if gpus > gpn and loose_bool(backend.get("allow_prefill_decode_colocation_across_nodes")) is not True:
        return None
    return -(-gpus // gpn)


def _role_path(config: dict[str, Any], role: RoleName) -> KeyPath:
    if schema_version(config) == 2:
        return ("roles", role)
    return ("resources", f"{role}_workers")


def _roles_v1(res: dict[str, Any], gpn: int, out: Checker) -> list[Role]:
    disagg = res.get("prefill_nodes") is not None or res.get("decode_nodes") is not None
    agg = res.get("agg_nodes") is not None or res.get("agg_workers") is not None
    if disagg and agg:
        out.error(("resources", "agg_nodes"), "cannot mix aggregated (agg_*) with prefill/decode resources")
    if not disagg and not agg:
        out.error(
            ("resources",),
            "no workers: set prefill_nodes/decode_nodes (disaggregated) or agg_nodes/agg_workers",
        )
        return []
    if not disagg:
        nodes = _int(res.get("agg_nodes"), 1) or 1
        workers = _int(res.get("agg_workers"), 1) or 1
        gpus = _int(res.get("gpus_per_agg")) or max((nodes * gpn) // workers, 1)
        return [Role("agg", workers, nodes, gpus)]
    roles: list[Role] = []
    p_nodes = _int(res.get("prefill_nodes"), 0) or 0
    p_workers = _int(res.get("prefill_workers"), 0) or 0
    if p_nodes and not p_workers:
        out.error(("resources", "prefill_workers"), "is required with prefill_nodes")
    p_gpus = _int(res.get("gpus_per_prefill")) or ((p_nodes * gpn) // p_workers if p_nodes and p_workers else gpn)
    if p_workers:
        roles.append(Role("prefill", p_workers, p_nodes, p_gpus))
    d_nodes = _int(res.get("decode_nodes"), 0) or 0
    d_workers = _int(res.get("decode_workers"), 0) or 0
    if res.get("decode_nodes") is not None and not d_workers:
        out.error(("resources", "decode_workers"), "is required with decode_nodes")
    explicit = _int(res.get("gpus_per_decode"))
    if explicit:
        d_gpus = explicit
    elif d_nodes and d_workers:
        d_gpus = (d_nodes * gpn) // d_workers
    elif res.get("decode_nodes") == 0 and d_workers:
        d_gpus = p_gpus  # decode shares the prefill nodes and inherits their TP
    else:
        d_gpus = gpn
    if d_workers:
        roles.append(Role("decode", d_workers, d_nodes, d_gpus, colocated=d_nodes == 0))
    if not p_workers and not d_workers:
        out.error(("resources", "prefill_workers"), "no prefill or decode workers")
    for role in roles:
        if role.gpus_per_worker < 1:
            out.error(("resources", f"gpus_per_{role.name}"), "works out to 0 GPUs per worker; set it explicitly")
    return roles


def _roles_v2(config: dict[str, Any], gpn: int, out: Checker) -> list[Role]:
    roles_cfg = _map(config.get("roles"))
    if "agg" in roles_cfg and ("prefill" in roles_cfg or "decode" in roles_cfg):
        out.error(("roles", "agg"), "cannot mix an agg role with prefill/decode roles")
    roles: list[Role] = []
    prefill_gpus: int | None = None
    names: tuple[RoleName, ...] = ("prefill", "decode", "agg")
    for name in names:
        if name not in roles_cfg:
            continue
        spec = _map(roles_cfg.get(name))
        raw_nodes = spec.get("nodes", 1)
        colocated = raw_nodes == "colocate"
        if colocated and name != "decode":
            out.error(("roles", name, "nodes"), "only the decode role may be `colocate`")
        nodes = 0 if colocated else (_int(raw_nodes, 1) or 0)
        workers = _int(spec.get("workers"), 1) or 1
        explicit = _int(spec.get("gpus"))
        if explicit:
            gpus = explicit
        elif colocated and prefill_gpus:
            gpus = prefill_gpus
        else:
            gpus = max((nodes * gpn) // workers, 1) if nodes else gpn
        if name == "prefill":
            prefill_gpus = gpus
        roles.append(Role(name, workers, nodes, gpus, colocated=colocated))
    if not roles:
        out.error(("roles",), "no roles: define prefill and decode, or agg")
    return roles


def _dedicated(config: dict[str, Any]) -> tuple[str, ...]:
    """Whole nodes srtctl adds to the workers', one entry per node. In schema 1 the etcd/NATS,
    frontend and benchmark-client roles share one reserved node unless
    `benchmark.colocate_with_frontend: false` (then one node each)."""
    extra: list[str] = []
    if loose_bool(_map(config.get("infra")).get("etcd_nats_dedicated_node")) is True:
        extra.append("etcd-nats")
    frontend = _map(config.get("frontend"))
    if loose_bool(frontend.get("dedicated_node")) is True or _map(frontend.get("placement")).get("node") == "dedicated":
        extra.append("frontend")
    bench = _map(config.get("benchmark"))
    if (
        loose_bool(bench.get("client_dedicated_node")) is True
        or _map(bench.get("placement")).get("node") == "dedicated"
    ):
        extra.append("benchmark")
    shared = schema_version(config) == 1 and loose_bool(bench.get("colocate_with_frontend", True)) is not False
    if shared and len(extra) > 1:
        extra = ["+".join(extra)]
    services = config.get("services")
    if isinstance(services, list):
        for i, svc in enumerate(services):
            svc = _map(svc)
            if _map(svc.get("placement")).get("node") == "dedicated":
                extra.append(f"service:{svc.get('name') or svc.get('type') or i}")
    return tuple(extra)


def _parallelism(config: dict[str, Any]) -> tuple[dict[str, int], dict[str, bool]]:
    tp: dict[str, int] = {}
    dpa: dict[str, bool] = {}
    per_role: dict[str, dict[str, Any]] = {}
    if schema_version(config) == 2:
        for name, spec in _map(config.get("roles")).items():
            per_role[str(name)] = _map(_map(spec).get("args"))
    else:
        backend = _map(config.get("backend"))
        block = _map(backend.get(f"{backend_type(config)}_config"))
        for mode, key in _MODE_KEYS.items():
            per_role[mode] = _map(block.get(key))
    for role, args in per_role.items():
        for key in _TP_KEYS:
            value = _int(args.get(key))
            if value:
                tp[role] = value
                break
        if any(args.get(k) is True for k in _DPA_KEYS):
            dpa[role] = True
    return tp, dpa


def grid(config: dict[str, Any], out: Checker) -> tuple[tuple[int, ...], int | None, int | None]:
    """Concurrency points and ISL/OSL. A custom benchmark carries them in its env
    (srtctl runs its command verbatim, without placeholders)."""
    bench = _map(config.get("benchmark"))
    env = _map(bench.get("env"))
    raw = bench.get("concurrencies")
    where: KeyPath = ("benchmark", "concurrencies")
    if raw is None and bench.get("type") == "custom" and "CONCURRENCIES" in env:
        raw, where = env["CONCURRENCIES"], ("benchmark", "env", "CONCURRENCIES")
    try:
        points = tuple(parse_concurrencies(raw))
    except ValueError as exc:
        out.error(where, str(exc))
        points = ()
    if len(set(points)) != len(points):
        out.warning(where, "repeats a concurrency; each repeat runs again")
    isl = _int(bench.get("isl")) or _env_int(env, "ISL")
    osl = _int(bench.get("osl")) or _env_int(env, "OSL")
    return points, isl, osl


def _env_int(env: dict[str, Any], key: str) -> int | None:
    value = env.get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def combination_rules(config: dict[str, Any], topo: Topology, out: Checker) -> None:
    """The fork's pairings of its ATOM backend and frontends (reference/srtctl.md §1.7); the
    pairings both flavours share are srtctl's load-time rules (console.recipes.upstream.rules)."""
    backend, frontend = backend_type(config), frontend_type(config)
    fe_path: KeyPath = ("frontend", "type")
    be_path: KeyPath = ("engine",) if schema_version(config) == 2 else ("backend", "type")
    single_agg = topo.mode == "agg" and sum(r.workers for r in topo.roles) == 1
    if frontend in ("atomesh", "atom") and backend != "atom":
        out.error(fe_path, f"frontend {frontend} needs backend atom, not {backend}")
    if backend == "atom":
        if frontend == "atom" and not single_agg:
            out.error(fe_path, "frontend atom (direct) serves a single aggregated worker; use atomesh")
        elif frontend not in ("atomesh", "atom"):
            out.error(be_path, f"backend atom needs frontend atomesh (got {frontend})")
        for role in topo.roles:
            if role.gpus_per_worker > topo.gpus_per_node:
                out.error(
                    _role_path(config, role.name),
                    f"an ATOM endpoint must fit on one node: {role.gpus_per_worker} GPUs > {topo.gpus_per_node}",
                )
    if schema_version(config) == 2 and frontend == "vllm" and topo.mode != "agg":
        out.error(fe_path, "frontend vllm is aggregated only")
