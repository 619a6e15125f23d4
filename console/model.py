"""The words of the console as data: problems, topology, pins, arms and recipes.

Plain frozen dataclasses so the CLI, the store and the UI can share them freely.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from console.sanitize import clean_line

Severity = Literal["error", "warning"]
RecipeKind = Literal["plain", "sweep", "override", "invalid"]
Mode = Literal["disagg", "agg"]
RoleName = Literal["prefill", "decode", "agg"]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a recipe, located at a file, line and field."""

    path: str
    line: int | None
    field: str
    message: str
    severity: Severity = "error"
    # "job-start:<stage>": srtctl accepts the recipe, but its job stops at that stage.
    kind: str = ""

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        label = f"{self.field}: " if self.field else ""
        prefix = "warning: " if self.severity == "warning" else ""
        # Keys and values quoted from a recipe are untrusted: shown inert, wherever it is printed.
        return clean_line(f"{where}: {prefix}{label}{self.message}", 4000)


@dataclass(frozen=True)
class Role:
    """Workers of one kind (prefill, decode or aggregated) and where they sit."""

    name: RoleName
    workers: int
    nodes: int  # dedicated nodes; 0 when the role shares another role's nodes
    gpus_per_worker: int
    colocated: bool = False  # decode sharing the prefill nodes (decode_nodes: 0 / nodes: colocate)

    @property
    def gpus(self) -> int:
        return self.workers * self.gpus_per_worker


@dataclass(frozen=True)
class Topology:
    """What one arm asks of the cluster, counted as srtctl counts it for sbatch."""

    mode: Mode
    gpus_per_node: int
    roles: tuple[Role, ...]
    # Extra whole nodes srtctl adds: etcd/NATS, frontend, benchmark client, services.
    dedicated: tuple[str, ...] = ()
    tp: dict[str, int] = field(default_factory=dict)  # tensor-parallel size per role, where stated
    dp_attention: dict[str, bool] = field(default_factory=dict)
    # The worker nodes srtctl asks for when that is not the sum of the roles' nodes: vLLM packing
    # prefill and decode together, or a side given nodes but no workers.
    node_count: int | None = None

    def role(self, name: RoleName) -> Role | None:
        return next((r for r in self.roles if r.name == name), None)

    def gpus_of(self, name: RoleName) -> int:
        role = self.role(name)
        return role.gpus if role else 0

    @property
    def worker_nodes(self) -> int:
        return self.node_count if self.node_count is not None else sum(r.nodes for r in self.roles)

    @property
    def node_demand(self) -> int:
        return self.worker_nodes + len(self.dedicated)

    @property
    def total_gpus(self) -> int:
        return sum(r.gpus for r in self.roles)


@dataclass(frozen=True)
class Pin:
    """Something an attempt runs that must be recorded exactly: an image, a commit."""

    name: str
    value: str
    source: str  # e.g. "model.container", "backend.prefill_environment.ATOM_COMMIT", "comment line 3"


@dataclass(frozen=True)
class Arm:
    """One Slurm job's worth of work: one resolved config, its points run in sequence."""

    name: str
    recipe_path: str
    variant: str | None  # override section, zip member or sweep parameters; None for a plain file
    selector: str | None  # how to submit exactly this arm with srtctl (`file.yaml:<selector>`)
    config: dict[str, Any]  # the resolved config srtctl would run
    schema: int
    backend: str
    frontend: str
    benchmark: str
    isl: int | None
    osl: int | None
    concurrencies: tuple[int, ...]
    topology: Topology
    gpu_type: str | None
    model_path: str | None
    container: str | None
    precision: str | None
    pins: tuple[Pin, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)  # sweep parameters of this arm

    @property
    def mode(self) -> Mode:
        return self.topology.mode

    def summary(self) -> dict[str, Any]:
        """The arm as `srt-console recipes --json` prints it."""
        topo = self.topology
        return {
            "name": self.name,
            "variant": self.variant,
            "selector": self.selector,
            "mode": topo.mode,
            "backend": self.backend,
            "frontend": self.frontend,
            "benchmark": self.benchmark,
            "isl": self.isl,
            "osl": self.osl,
            "concurrencies": list(self.concurrencies),
            "gpu_type": self.gpu_type,
            "gpus_per_node": topo.gpus_per_node,
            "worker_nodes": topo.worker_nodes,
            "dedicated_nodes": list(topo.dedicated),
            "node_demand": topo.node_demand,
            "prefill_workers": _workers(topo, "prefill"),
            "decode_workers": _workers(topo, "decode"),
            "agg_workers": _workers(topo, "agg"),
            "prefill_gpus": topo.gpus_of("prefill"),
            "decode_gpus": topo.gpus_of("decode"),
            "agg_gpus": topo.gpus_of("agg"),
            "total_gpus": topo.total_gpus,
            "model": self.model_path,
            "container": self.container,
            "precision": self.precision,
            "params": self.params,
            "pins": [{"name": p.name, "value": p.value, "source": p.source} for p in self.pins],
        }


def _workers(topo: Topology, name: RoleName) -> int:
    role = topo.role(name)
    return role.workers if role else 0


@dataclass(frozen=True)
class Recipe:
    """One recipe file, loaded and validated, with the arms it expands into."""

    path: str
    arms: tuple[Arm, ...]
    problems: tuple[Problem, ...]
    text: str = ""
    kind: RecipeKind = "plain"

    @property
    def errors(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.severity == "error")

    @property
    def warnings(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.severity == "warning")

    @property
    def ok(self) -> bool:
        return not self.errors

    def summary(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "ok": self.ok,
            "kind": self.kind,
            "errors": [str(p) for p in self.errors],
            "warnings": [str(p) for p in self.warnings],
            "arms": [a.summary() for a in self.arms],
        }
