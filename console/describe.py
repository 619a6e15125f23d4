"""Short human labels for arms and topologies, shared by the CLI and the UI."""

from __future__ import annotations

from console.model import Arm, Topology

_LETTER = {"prefill": "P", "decode": "D", "agg": "A"}


def topology_label(topo: Topology) -> str:
    """`1P TP8 + 1D TP8`, `2P DPA TP8 + 1D TP8`, `4A TP2`."""
    parts = []
    for role in topo.roles:
        tp = topo.tp.get(role.name, role.gpus_per_worker)
        dpa = " DPA" if topo.dp_attention.get(role.name) else ""
        parts.append(f"{role.workers}{_LETTER[role.name]}{dpa} TP{tp}")
    return " + ".join(parts) or "no workers"


def nodes_label(topo: Topology) -> str:
    extra = f" + {len(topo.dedicated)} dedicated" if topo.dedicated else ""
    return f"{topo.worker_nodes}{extra} = {topo.node_demand}"


def grid_label(points: tuple[int, ...]) -> str:
    return ", ".join(str(p) for p in points) or "-"


def seq_label(arm: Arm) -> str:
    if arm.isl is None and arm.osl is None:
        return "-"
    return f"{arm.isl or '?'}/{arm.osl or '?'}"
