"""The diagnosis banner and the findings list of one attempt."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Static

from console.diagnosis import Diagnosis, FindingGroup, Observation
from console.signatures import Matcher, default_matcher
from console.stages import SWEEP_LOG_RE
from screens.widgets.live_table import LiveTable

VERDICT_CLASSES = {v: f"-{v}" for v in ("healthy", "degraded", "failed", "doomed")} | {"stalled": "-degraded"}
# Where first comes before the worker (a file name says its worker too): in a narrow panel the
# line number stays in view.
FINDING_COLUMNS = ("sev", "count", "signature", "first at", "worker")
_SEVERITY_ORDER = {"fatal": 0, "error": 1, "warning": 2, "info": 3}


class DiagnosisBanner(Static, can_focus=True):
    """Verdict, root cause and advice; says so when the job is doomed and offers cancel. On a
    short terminal it is cut to a few lines: focused (tab) and maximised (`z`) it shows all."""

    ALLOW_MAXIMIZE = True

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__("", id=id)
        self.diagnosis: Diagnosis | None = None
        self.cancellable = False
        self._shown: tuple[str | None, Text] | None = None

    def show(self, diagnosis: Diagnosis | None, *, cancellable: bool, nodes: int | None = None) -> None:
        self.diagnosis = diagnosis
        self.cancellable = cancellable
        if diagnosis is None:
            self._show(None, Text("no diagnosis yet: waiting for log lines", "italic"))
            return
        text = Text(no_wrap=False)
        text.append(f" {diagnosis.verdict.upper()} ", "bold reverse")
        root = diagnosis.root_cause
        if root is not None:
            text.append("  ")
            text.append(root.first.finding.title, "bold")
            text.append(f"  [{root.id}]")
            if diagnosis.deterministic:
                roles = f" ({', '.join(diagnosis.deterministic_roles)})" if diagnosis.deterministic_roles else ""
                text.append("  ")
                text.append(f" deterministic{roles} ", "reverse")
            where = ", ".join(diagnosis.root_workers) or _short(root.first.file)
            text.append(f"\n  {diagnosis.root_count} line(s) in {where}; first at {_short(root.first.file)}:")
            text.append(f"{root.first.line_no}", "bold")
            if diagnosis.consequences:
                names = sorted({g.id for g in diagnosis.consequences})
                text.append(f"  ·  consequences: {', '.join(names)}", "dim")
        else:
            text.append("  no failure found")
        if diagnosis.verdict == "doomed":
            held = f"its {nodes} nodes" if nodes and nodes > 1 else "its node" if nodes else "its nodes"
            text.append(f"\n  This job is doomed: it holds {held} but cannot recover.", "bold")
            if cancellable:
                text.append("  Press ")
                text.append(" c ", "bold reverse")
                text.append(" to cancel it.")
        if diagnosis.advice and diagnosis.verdict != "healthy":
            # The catalog's hint is shown with the findings; the banner keeps to what to do.
            advice = diagnosis.advice.split(". Hint: ", 1)[0]
            text.append(f"\n  {advice}")
        self._show(VERDICT_CLASSES.get(diagnosis.verdict, "-failed"), text)

    def _show(self, verdict_class: str | None, text: Text) -> None:
        """Update only on a change: the banner's height follows its text, so each update is a
        layout pass of the screen (a busy job's findings arrive many times a second)."""
        if (verdict_class, text) == self._shown:
            return
        self._shown = (verdict_class, text)
        for cls in VERDICT_CLASSES.values():
            if cls != verdict_class:
                self.remove_class(cls)
        if verdict_class is not None:
            self.add_class(verdict_class)
        self.update(text)


def _short(file: str) -> str:
    return PurePosixPath(file).name


def _where(obs: Observation) -> str:
    """``<file>:<line>`` of the first occurrence."""
    return f"{_short(obs.file)}:{obs.line_no}"


@dataclass(frozen=True)
class FindingRow:
    """Findings of one signature in one worker (or file), merged across ranks."""

    key: str
    signature: str
    title: str
    severity: str
    worker: str
    count: int
    first: Observation


def _who(obs: Observation) -> str:
    name = _short(obs.file)
    return obs.worker or obs.node or ("sweep log" if SWEEP_LOG_RE.match(name) else name)


def finding_rows(
    groups: Iterable[FindingGroup], root: str | None = None, root_first: Observation | None = None
) -> list[FindingRow]:
    """Groups merged per (signature, worker); the root cause's rows first, then by severity.
    ``root_first`` is the diagnosis' first line of the root cause: its row shows that line,
    as the banner does."""
    merged: dict[tuple[str, str], tuple[int, Observation]] = {}
    for group in groups:
        first = group.first
        key = (first.id, _who(first))
        count, earliest = merged.get(key, (0, first))
        if (first.file, first.line_no) < (earliest.file, earliest.line_no) and first.file == earliest.file:
            earliest = first
        merged[key] = (count + group.count, earliest)
    if root_first is not None and (root_first.id, _who(root_first)) in merged:
        count, _ = merged[(root_first.id, _who(root_first))]
        merged[(root_first.id, _who(root_first))] = (count, root_first)
    rows = [
        FindingRow(f"{sig}@{who}", sig, obs.finding.title, obs.severity, who, count, obs)
        for (sig, who), (count, obs) in merged.items()
    ]
    rows.sort(key=lambda r: (r.signature != root, _SEVERITY_ORDER.get(r.severity, 3), r.signature, r.worker))
    return rows


class FindingsPanel(Vertical):
    """Findings grouped by signature and worker, with counts and the catalog's hint."""

    ALLOW_MAXIMIZE = True  # `z` fills the screen with it

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "findings--fatal", "findings--error", "findings--warning", "findings--info"
    }  # fmt: skip
    DEFAULT_CSS = """
    FindingsPanel > .findings--fatal { color: $error; text-style: bold; }
    FindingsPanel > .findings--error { color: $error; }
    FindingsPanel > .findings--warning { color: $warning; }
    FindingsPanel > .findings--info { color: $text-muted; }
    FindingsPanel { height: 1fr; }
    FindingsPanel #findings-title { height: 1; padding: 0 1; text-style: bold; }
    FindingsPanel DataTable { height: 1fr; }
    FindingsPanel #finding-hint { height: auto; max-height: 3; padding: 0 1; color: $text-muted; }
    """

    class Selected(Message):
        """The operator chose a finding: show its first line."""

        def __init__(self, file: str, line_no: int) -> None:
            super().__init__()
            self.file = file
            self.line_no = line_no

    def __init__(self, matcher: Matcher | None = None, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self.matcher = matcher or default_matcher()
        self.rows: dict[str, FindingRow] = {}
        self._root: str | None = None
        self._hint: Text | None = None

    def compose(self) -> ComposeResult:
        yield Static("findings", id="findings-title")
        yield LiveTable(id="findings", cursor_type="row", zebra_stripes=True)
        yield Static("", id="finding-hint")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for column in FINDING_COLUMNS:
            table.add_column(column, key=column)

    def update_groups(
        self, groups: Iterable[FindingGroup], root: str | None = None, root_first: Observation | None = None
    ) -> None:
        table: DataTable[object] = self.query_one(DataTable)
        rows = finding_rows(groups, root, root_first)
        reorder = root != self._root
        self._root = root
        for row in rows:
            old = self.rows.get(row.key)
            if old == row:
                continue  # most rows stay as they are while one group grows
            cells: dict[str, object] = {
                "sev": Text(row.severity, self._severity_style(row.severity)),
                "count": Text(str(row.count), justify="right"),
                "signature": Text(row.signature),
                "first at": Text(_where(row.first)),
                "worker": Text(row.worker),
            }
            self.rows[row.key] = row
            if old is None:
                table.add_row(*cells.values(), key=row.key)
                reorder = True
            else:
                for column, value in cells.items():
                    table.update_cell(row.key, column, value, update_width=True)
        if reorder and len(rows) > 1:
            rank = {(r.signature, r.worker): i for i, r in enumerate(rows)}
            table.sort("signature", "worker", key=lambda cells: rank.get((str(cells[0]), str(cells[1])), len(rank)))
            table.move_cursor(row=0)
        total = sum(r.count for r in rows)
        self.query_one("#findings-title", Static).update(
            Text(f"findings: {total} line(s) in {len(rows)} group(s)  (enter: show in log)"), layout=False
        )
        if rows:
            self._show_hint(table)

    def _severity_style(self, severity: str) -> Style:
        name = f"findings--{severity}"
        return self.get_component_rich_style(name, partial=True) if name in self.COMPONENT_CLASSES else Style()

    def _show_hint(self, table: DataTable[object]) -> None:
        row = self.highlighted()
        if row is None:
            return
        try:
            hint = self.matcher.signature(row.signature).hint
        except KeyError:
            hint = ""
        text = Text(f"{row.title}", "bold")
        by = f"; by {row.first.basis}, no regex of it matched" if row.first.basis else ""
        text.append(f" (first at {_where(row.first)}{by}): ", "italic")
        text.append(hint)
        if text != self._hint:  # the same hint again: no layout pass (its height follows its text)
            self._hint = text
            self.query_one("#finding-hint", Static).update(text)

    def highlighted(self) -> FindingRow | None:
        table: DataTable[object] = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return self.rows.get(key or "")

    @on(DataTable.RowHighlighted, "#findings")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_hint(event.data_table)

    @on(DataTable.RowSelected, "#findings")
    def _selected(self, event: DataTable.RowSelected) -> None:
        row = self.rows.get(event.row_key.value or "")
        if row is not None:
            self.post_message(self.Selected(row.first.file, row.first.line_no))
