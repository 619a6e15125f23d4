"""A small scatter/line plot drawn with braille dots: one series per arm, theme colours only.

Each character cell holds a 2x4 grid of braille dots, so a 60x14 plot has 120x56 dots. Lines
join a series' points in the order given; each point is a 2x2 block of dots so it stands out.
Where series cross, the cell takes the colour of the series drawn last.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.console import RenderableType
from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

SERIES_STYLES = 6
_BRAILLE = 0x2800
# Dot bit for (row 0..3, column 0..1) inside one braille cell.
_BITS = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))
_Y_LABEL_WIDTH = 8


@dataclass(frozen=True)
class Series:
    """One named line of (x, y) points."""

    name: str
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class PlotMode:
    """What the plot shows: axis titles and whether x is logarithmic."""

    key: str
    title: str
    x_label: str
    y_label: str
    log_x: bool = False


PARETO = PlotMode("pareto", "tok/s/GPU (y) vs tok/s/user (x)", "tok/s/user", "tok/s/GPU")
THROUGHPUT = PlotMode(
    "throughput", "output tok/s (y) vs concurrency (x, log2)", "concurrency", "output tok/s", log_x=True
)
MODES = (PARETO, THROUGHPUT)


def _fmt(value: float) -> str:
    size = abs(value)
    if size >= 10_000:
        return f"{value / 1000:.0f}k"
    if size >= 1000:
        return f"{value / 1000:.1f}k"
    if size >= 100 or value == int(value):
        return f"{value:.0f}"
    return f"{value:.1f}"


def _bounds(values: Sequence[float]) -> tuple[float, float]:
    low, high = min(values), max(values)
    if high - low < 1e-9:
        pad = abs(high) * 0.1 or 1.0
        return low - pad, high + pad
    pad = (high - low) * 0.05
    return low - pad, high + pad


def _line(x0: int, y0: int, x1: int, y1: int) -> list[tuple[int, int]]:
    """Bresenham: the dots from (x0, y0) to (x1, y1)."""
    dots = []
    dx, dy = abs(x1 - x0), -abs(y1 - y0)
    sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
    err = dx + dy
    while True:
        dots.append((x0, y0))
        if x0 == x1 and y0 == y1:
            return dots
        e2 = 2 * err
        if e2 >= dy:
            err += dy
            x0 += sx
        if e2 <= dx:
            err += dx
            y0 += sy


def render_plot(
    series: Sequence[Series],
    width: int,
    height: int,
    mode: PlotMode,
    styles: Sequence[Style] = (),
    axis: Style | None = None,
) -> Text:
    """The plot as rich Text of ``height`` lines of at most ``width`` cells."""
    axis = axis or Style()
    text = Text(no_wrap=True, overflow="crop")
    text.append(mode.title, style=axis)
    for index, s in enumerate(series):
        text.append("  ")
        text.append("⣿ ", style=styles[index % len(styles)] if styles else Style())
        text.append(s.name, style=axis)
    text.append("\n")

    def tx(x: float) -> float:
        return math.log2(x) if mode.log_x else x

    usable = [
        (s_index, [(tx(x), y) for x, y in s.points if (x > 0 or not mode.log_x) and math.isfinite(y)])
        for s_index, s in enumerate(series)
    ]
    every = [p for _, pts in usable for p in pts]
    plot_w = max(1, width - _Y_LABEL_WIDTH - 1)
    plot_h = max(1, height - 3)
    if not every:
        text.append("\n" * max(0, plot_h // 2))
        text.append(" " * _Y_LABEL_WIDTH + "no points yet", style=axis)
        return text
    x_low, x_high = _bounds([x for x, _ in every])
    y_low, y_high = _bounds([y for _, y in every])
    y_low = min(y_low, 0.0)  # throughput axes start at zero
    dots_w, dots_h = plot_w * 2, plot_h * 4
    cells: dict[tuple[int, int], int] = {}
    owner: dict[tuple[int, int], int] = {}

    def dot(x: int, y: int, s_index: int) -> None:
        if 0 <= x < dots_w and 0 <= y < dots_h:
            cell = (y // 4, x // 2)
            cells[cell] = cells.get(cell, 0) | _BITS[y % 4][x % 2]
            owner[cell] = s_index

    def to_dots(x: float, y: float) -> tuple[int, int]:
        px = round((x - x_low) / (x_high - x_low) * (dots_w - 1))
        py = dots_h - 1 - round((y - y_low) / (y_high - y_low) * (dots_h - 1))
        return px, py

    for s_index, pts in usable:
        previous: tuple[int, int] | None = None
        for x, y in pts:
            px, py = to_dots(x, y)
            if previous is not None:
                for lx, ly in _line(*previous, px, py):
                    dot(lx, ly, s_index)
            previous = (px, py)
        for x, y in pts:
            px, py = to_dots(x, y)
            for ox, oy in ((0, 0), (1, 0), (0, 1), (1, 1)):
                dot(px + ox, py + oy, s_index)

    labels = {0: _fmt(y_high), plot_h // 2: _fmt((y_high + y_low) / 2), plot_h - 1: _fmt(y_low)}
    for row in range(plot_h):
        label = labels.get(row, "")
        text.append(f"{label:>{_Y_LABEL_WIDTH - 1}} ", style=axis)
        text.append("┤" if row in labels else "│", style=axis)
        run_style: Style | None = None
        run = ""
        for col in range(plot_w):
            bits = cells.get((row, col))
            char = chr(_BRAILLE + bits) if bits else " "
            style = (styles[owner[(row, col)] % len(styles)] if styles else Style()) if bits else Style()
            if style != run_style and run:
                text.append(run, style=run_style)
                run = ""
            run_style = style
            run += char
        if run:
            text.append(run, style=run_style)
        text.append("\n")
    text.append(" " * _Y_LABEL_WIDTH + "└" + "─" * plot_w + "\n", style=axis)

    def x_value(v: float) -> float:
        return 2**v if mode.log_x else v

    left, mid, right = _fmt(x_value(x_low)), _fmt(x_value((x_low + x_high) / 2)), _fmt(x_value(x_high))
    ticks = [" "] * plot_w
    for pos, label in ((0, left), ((plot_w - len(mid)) // 2, mid), (plot_w - len(right), right)):
        for i, ch in enumerate(label):
            if 0 <= pos + i < plot_w:
                ticks[pos + i] = ch
    text.append(" " * (_Y_LABEL_WIDTH + 1) + "".join(ticks).rstrip(), style=axis)
    return text


class PointsPlot(Widget):
    """Arms' points as a braille plot; ``mode`` switches between the two views (``toggle()``)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"plot--axis", *(f"plot--series-{i}" for i in range(SERIES_STYLES))}
    mode: reactive[str] = reactive(PARETO.key)

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id, classes=classes)
        self._series: dict[str, list[Series]] = {m.key: [] for m in MODES}

    @property
    def plot_mode(self) -> PlotMode:
        return next(m for m in MODES if m.key == self.mode)

    def set_series(self, mode: str, series: Sequence[Series]) -> None:
        self._series[mode] = list(series)
        if mode == self.mode:
            self.refresh()

    def series(self, mode: str | None = None) -> list[Series]:
        return list(self._series[mode or self.mode])

    def toggle(self) -> None:
        keys = [m.key for m in MODES]
        self.mode = keys[(keys.index(self.mode) + 1) % len(keys)]

    def render(self) -> RenderableType:
        styles = [self.get_component_rich_style(f"plot--series-{i}") for i in range(SERIES_STYLES)]
        return render_plot(
            self._series[self.mode],
            self.size.width,
            self.size.height,
            self.plot_mode,
            styles,
            self.get_component_rich_style("plot--axis"),
        )
