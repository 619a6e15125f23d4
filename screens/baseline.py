"""A baseline on the results screen (`b`): ask for it, and the delta columns of each arm's table.

The comparison itself is the headless one (`console.compare`, as `srt-console compare` makes
it); this module only turns it into cells.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from console.compare import METRICS, Comparison, Delta

DELTA_COLUMNS = (
    ("d_out", "Δ out", "output_tok_s"),
    ("d_gpu", "Δ tok/s/GPU", "tok_s_per_gpu"),
    ("d_user", "Δ tok/s/user", "tok_s_per_user"),
    ("d_ttft", "Δ TTFT p50", "ttft_p50"),
    ("d_tpot", "Δ TPOT p50", "tpot_p50"),
)
VERDICT_COLUMN = ("vs_base", "vs baseline")
_LABELS = {m.key: m.label for m in METRICS}


class BaselineDialog(ModalScreen[str | None]):
    """Asks which run to compare with; dismisses with the text (empty: no baseline), or None."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", "Cancel")]

    def __init__(self, current: str | None) -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(Text("Compare with a baseline"), id="dialog-title")
            yield Static(
                Text(
                    "An attempt (a3.1), an arm (a3), a sweep (s2), or a results directory on this machine. "
                    "Empty: no baseline."
                ),
                id="plan",
            )
            yield Input(value=self.current or "", placeholder="a3.1 | a3 | s2 | /path/to/results", id="baseline")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


def _pct(delta: Delta | None, style: Style | None) -> Text:
    if delta is None or delta.pct is None:
        return Text("-", justify="right")
    return Text(f"{delta.pct:+.1f}%", justify="right", style=style or "")


def delta_cells(comparison: Comparison, bad: Style | None = None) -> dict[int, dict[str, Any]]:
    """Per concurrency of the candidate: its delta cells (regressed ones in ``bad``)."""
    rows: dict[int, dict[str, Any]] = {}
    for m in comparison.matched:
        by_key: Mapping[str, Delta] = {d.metric.key: d for d in m.deltas}
        cells: dict[str, Any] = {
            column: _pct(by_key.get(key), bad if key in m.regressed else None) for column, _, key in DELTA_COLUMNS
        }
        verdict = "regressed: " + ", ".join(_LABELS[k] for k in m.regressed) if m.regressed else "ok"
        cells[VERDICT_COLUMN[0]] = Text(verdict, style=(bad or "") if m.regressed else "")
        rows[m.b.concurrency] = cells
    empty = {column: Text("-", justify="right") for column, _, _ in DELTA_COLUMNS}
    for _, b in comparison.lost:
        if b is not None:
            rows[b.concurrency] = {**empty, VERDICT_COLUMN[0]: Text(f"lost ({b.point.status})", style=bad or "")}
    for p in comparison.new:
        rows[p.concurrency] = {**empty, VERDICT_COLUMN[0]: Text("not in the baseline")}
    return rows
