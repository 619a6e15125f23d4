"""Draws an arm's workers across nodes and GPUs: one row per node, one cell per GPU."""

from __future__ import annotations

from typing import ClassVar

from rich.console import RenderableType
from rich.text import Text
from textual.widget import Widget

from console.describe import placement, topology_label
from console.model import Topology

_LETTER = {"prefill": "P", "decode": "D", "agg": "A"}


class TopologyView(Widget):
    """`node 1  ▣▣▣▣▣▣▣▣  prefill w0 (TP8 DPA)` for every node of the allocation."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "topology--prefill",
        "topology--decode",
        "topology--agg",
        "topology--idle",
        "topology--label",
    }

    def __init__(self, topology: Topology, *, id: str | None = None, classes: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id, classes=classes)
        self.topology = topology

    def render(self) -> RenderableType:
        topo = self.topology
        label = self.get_component_rich_style("topology--label")
        text = Text()
        text.append(f"{topology_label(topo)}  ·  {topo.gpus_per_node} GPUs/node\n", style=label)
        for row in placement(topo):
            text.append(f"node {row.index + 1:<3}", style=label)
            for slot in row.slots:
                name = f"topology--{slot.role}" if slot.role else "topology--idle"
                text.append("■" if slot.role else "□", style=self.get_component_rich_style(name))
            workers = []
            for role in row.roles:
                ids = sorted({s.worker for s in row.slots if s.role == role and s.worker is not None})
                span = ",".join(f"w{i}" for i in ids)
                extra = " DPA" if topo.dp_attention.get(role) else ""
                tp = topo.tp.get(role)
                workers.append(f"{role} {span}" + (f" (TP{tp}{extra})" if tp else extra))
            text.append("  " + "; ".join(workers) + "\n", style=label)
        for name in topo.dedicated:
            text.append(f"node +   dedicated: {name}\n", style=label)
        text.rstrip()
        return text
