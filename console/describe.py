"""Short human labels for arms and topologies, shared by the CLI and the UI.

Recipe text is untrusted like logs: a name, key or value may hold escape sequences. Every
label here, and every string the CLI or the UI shows from a recipe, a store row or a cluster,
goes through :func:`shown` (the one display route; JSON output escapes control characters itself).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from console.sanitize import clean_line

if TYPE_CHECKING:  # annotations only: `shown` is used by every command
    from console.model import Arm, Role, RoleName, Topology

SHOWN_MAX_CHARS = 400


def shown(value: object, max_chars: int = SHOWN_MAX_CHARS) -> str:
    """Any value as inert one-line text for a terminal (no escape sequence, no control character)."""
    return clean_line("" if value is None else str(value), max_chars)


def arm_facts(arm: Arm) -> str:
    """`engine/frontend · benchmark`, as shown."""
    return shown(f"{arm.backend}/{arm.frontend}") + " · " + shown(arm.benchmark)


_LETTER = {"prefill": "P", "decode": "D", "agg": "A"}


def topology_label(topo: Topology) -> str:
    """`1P TP8 + 1D TP8`, `2P DPA TP8 + 1D TP8`, `4A TP2`."""
    parts = []
    for role in topo.roles:
        tp = topo.tp.get(role.name, role.gpus_per_worker)
        dpa = " DPA" if topo.dp_attention.get(role.name) else ""
        parts.append(f"{role.workers}{_LETTER[role.name]}{dpa} TP{tp}")
    return shown(" + ".join(parts)) or "no workers"


def nodes_label(topo: Topology) -> str:
    extra = f" + {len(topo.dedicated)} dedicated" if topo.dedicated else ""
    return shown(f"{topo.worker_nodes}{extra} = {topo.node_demand}")


def grid_label(points: tuple[int, ...]) -> str:
    return ", ".join(str(p) for p in points) or "-"


def seq_label(arm: Arm) -> str:
    if arm.isl is None and arm.osl is None:
        return "-"
    return shown(f"{arm.isl or '?'}/{arm.osl or '?'}")


@dataclass(frozen=True)
class Slot:
    """One GPU of one node: which role and worker use it (None: idle)."""

    role: RoleName | None
    worker: int | None


@dataclass(frozen=True)
class NodeRow:
    """One node of an arm's allocation, GPU by GPU, for drawing the topology."""

    index: int
    slots: tuple[Slot, ...]

    @property
    def roles(self) -> tuple[RoleName, ...]:
        return tuple(dict.fromkeys(s.role for s in self.slots if s.role))


def placement(topo: Topology) -> list[NodeRow]:
    """Workers laid out across nodes and GPUs the way srtctl packs them: each role fills
    its own nodes in order; a colocated decode role fills the GPUs its prefill left."""
    gpn = topo.gpus_per_node
    rows: list[list[Slot]] = []
    starts: dict[str, int] = {}
    for role in topo.roles:
        if role.colocated:
            continue
        starts[role.name] = len(rows)
        rows.extend([Slot(None, None)] * gpn for _ in range(role.nodes))
        _fill(rows, starts[role.name], role.nodes, role, gpn)
    for role in topo.roles:
        if role.colocated:
            host = starts.get("prefill", 0)
            host_nodes = next((r.nodes for r in topo.roles if r.name == "prefill"), 0)
            _fill(rows, host, max(host_nodes, 1), role, gpn)
    return [NodeRow(i, tuple(slots)) for i, slots in enumerate(rows)]


def _fill(rows: list[list[Slot]], first: int, count: int, role: Role, gpn: int) -> None:
    # Free GPUs of the role's nodes, in order; workers take consecutive GPUs.
    free = [(n, g) for n in range(first, first + count) if n < len(rows) for g in range(gpn) if rows[n][g].role is None]
    cursor = 0
    for worker in range(role.workers):
        for _ in range(role.gpus_per_worker):
            if cursor >= len(free):
                return  # over-subscribed; validation reports it
            n, g = free[cursor]
            rows[n][g] = Slot(role.name, worker)
            cursor += 1


def iso_time(when: float | None) -> str | None:
    """Local ISO time of an epoch (JSON documents), None for None."""
    if when is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(when))


def clock_label(when: float | None, *, date: bool = False) -> str:
    """`14:02:11` (or `12-01 14:02:11` with the date) in local time; `-` when unknown."""
    if when is None:
        return "-"
    return time.strftime("%m-%d %H:%M:%S" if date else "%H:%M:%S", time.localtime(when))


def duration_label(seconds: float | None) -> str:
    """`1:02:03`, `4:05`; `-` when unknown."""
    if seconds is None:
        return "-"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
