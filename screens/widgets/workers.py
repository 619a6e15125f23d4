"""One row per logical worker: node(s), mode, stage, shards, graphs, ready; updated in place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from console.stages import StageSnapshot, WorkerProgress, WorkerStage
from screens.widgets.live_table import LiveTable

COLUMNS = ("worker", "nodes", "mode", "stage", "shards", "graphs", "ready")


@dataclass(frozen=True)
class WorkerRow:
    """A logical worker (one or more per-node log files) as one row."""

    worker: str
    nodes: tuple[str, ...]
    mode: str
    stage: WorkerStage
    shards: str
    graphs: str
    ready: bool
    failure: str | None
    failure_line: int | None = None  # the line of the worker's log naming it (as the diagnosis' first at)


def worker_rows(snapshot: StageSnapshot) -> list[WorkerRow]:
    """Per-node progress folded into logical workers, in mode then index order."""
    by_worker: dict[str, list[WorkerProgress]] = {}
    for progress in snapshot.workers.values():
        by_worker.setdefault(progress.worker, []).append(progress)
    order = {"prefill": 0, "decode": 1, "agg": 2}
    rows = []
    for name, parts in sorted(by_worker.items(), key=lambda kv: (order.get(kv[1][0].mode, 3), kv[1][0].index)):
        failed = [p for p in parts if p.stage is WorkerStage.FAILED]
        stage = WorkerStage.FAILED if failed else min((p.stage for p in parts), key=lambda s: s.rank)
        lead = min(parts, key=lambda p: p.node)
        rows.append(
            WorkerRow(
                worker=name,
                nodes=tuple(sorted(p.node for p in parts)),
                mode=lead.mode,
                stage=stage,
                shards=lead.shards_label,
                graphs=lead.graphs_label,
                ready=all(p.ready for p in parts),
                failure=next((p.failure for p in failed if p.failure), None),
                failure_line=next((p.failure_line for p in failed if p.failure), None),
            )
        )
    return rows


class WorkersPanel(Vertical):
    """The attempt's overall stage and readiness, and its workers."""

    ALLOW_MAXIMIZE = True  # `z` fills the screen with it

    COMPONENT_CLASSES: ClassVar[set[str]] = {"workers--failed", "workers--ready", "workers--starting"}
    DEFAULT_CSS = """
    WorkersPanel > .workers--failed { color: $error; text-style: bold reverse; }
    WorkersPanel > .workers--ready { color: $success; text-style: bold; }
    WorkersPanel > .workers--starting { color: $warning; }
    WorkersPanel { height: 1fr; }
    WorkersPanel #workers-title { height: 1; padding: 0 1; text-style: bold; }
    WorkersPanel DataTable { height: 1fr; }
    """

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self.shown: dict[str, str] = {}  # worker -> stage shown
        self._rows: dict[str, WorkerRow] = {}

    def compose(self) -> ComposeResult:
        yield Static("workers", id="workers-title")
        yield LiveTable(id="workers", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for column in COLUMNS:
            table.add_column(column, key=column)

    def update_snapshot(self, snapshot: StageSnapshot) -> None:
        title = Text("stage ", "dim")
        title.append(snapshot.stage.value, "bold")
        if snapshot.readiness.label:
            title.append("  ready ", "dim")
            title.append(snapshot.readiness.label, "bold")
        if snapshot.failure:
            title.append("  ")
            title.append(snapshot.failure[:120], "italic")
        self.query_one("#workers-title", Static).update(title, layout=False)  # one row, always
        table: DataTable[object] = self.query_one(DataTable)
        for row in worker_rows(snapshot):
            if self._rows.get(row.worker) == row:
                continue  # as shown
            self._rows[row.worker] = row
            stage = Text(f" {row.stage.value} ", self._stage_style(row.stage))
            if row.stage is WorkerStage.FAILED and row.failure:
                stage.append(f" {row.failure}" + (f":{row.failure_line}" if row.failure_line else ""))
            cells: dict[str, object] = {
                "worker": row.worker,
                "nodes": Text(",".join(row.nodes)),
                "mode": row.mode,
                "stage": stage,
                "shards": row.shards or "-",
                "graphs": row.graphs or "-",
                "ready": "yes" if row.ready else "no",
            }
            self.shown[row.worker] = row.stage.value
            if row.worker in table.rows:
                for column, value in cells.items():
                    if table.get_cell(row.worker, column) != value:
                        table.update_cell(row.worker, column, value, update_width=True)
            else:
                table.add_row(*cells.values(), key=row.worker)

    def _stage_style(self, stage: WorkerStage) -> Style:
        if stage is WorkerStage.FAILED:
            name = "workers--failed"
        elif stage in (WorkerStage.READY, WorkerStage.SERVER_UP):
            name = "workers--ready"
        else:
            name = "workers--starting"
        return self.get_component_rich_style(name, partial=True)

    def stages(self) -> dict[str, str]:
        """Worker -> stage as shown."""
        return dict(self.shown)
