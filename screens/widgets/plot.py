"""A small scatter/line plot drawn with braille dots: one series per arm, theme colours only.

Each character cell holds a 2x4 grid of braille dots, so a 60x14 plot has 120x56 dots. Lines
join a series' points in the order given; each point is drawn as its series' marker (● ▲ ■ ...),
so arms differ by shape as well as colour. Where series cross, the cell takes the colour of
the series drawn last. The axes have ticks and labels; the throughput plot's x axis is the
concurrency, log2, with a tick at each power of two.
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
    pad = (abs(high) * 0.1 or 1.0) if high - low < 1e-9 else (high - low) * 0.05
    # Rates and latencies are never negative: the padding does not push the axis below zero.
    floor = 0.0 if low >= 0 else low - pad
    return max(floor, low - pad), high + pad


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


MARKERS = "●▲■◆✚✖"
"""Each arm's points get their own marker, so the arms can be told apart without colour."""


def _x_ticks(low: float, high: float, log_x: bool) -> list[float]:
    """Tick values (in plot space): each power of two on a log2 axis (concurrencies), else five
    evenly spaced values."""
    if log_x:
        first, last = math.ceil(low), math.floor(high)
        ticks = [float(v) for v in range(first, last + 1)]
        return ticks or [low, high]
    return [low + (high - low) * i / 4 for i in range(5)]


def render_plot(
    series: Sequence[Series],
    width: int,
    height: int,
    mode: PlotMode,
    styles: Sequence[Style] = (),
    axis: Style | None = None,
) -> Text:
    """The plot as rich Text of ``height`` lines of at most ``width`` cells: a legend (each arm's
    marker and name), the y axis with its label and ticks, the points (lines between them in
    braille, each point its arm's marker), the x axis with ticks, tick labels and its label."""
    axis = axis or Style()
    text = Text(no_wrap=True, overflow="crop")

    def style_of(index: int) -> Style:
        return styles[index % len(styles)] if styles else Style()

    for index, s in enumerate(series):
        if index:
            text.append("  ")
        text.append(f"{MARKERS[index % len(MARKERS)]} ", style=style_of(index))
        text.append(s.name, style=axis)
    text.append("\n")
    text.append(f"{mode.y_label}\n", style=axis)

    def tx(x: float) -> float:
        return math.log2(x) if mode.log_x else x

    usable = [
        (s_index, [(tx(x), y) for x, y in s.points if (x > 0 or not mode.log_x) and math.isfinite(y)])
        for s_index, s in enumerate(series)
    ]
    every = [p for _, pts in usable for p in pts]
    plot_w = max(1, width - _Y_LABEL_WIDTH - 1)
    plot_h = max(1, height - 5)
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
    markers: dict[tuple[int, int], int] = {}

    def dot(x: int, y: int, s_index: int) -> None:
        if 0 <= x < dots_w and 0 <= y < dots_h:
            cell = (y // 4, x // 2)
            cells[cell] = cells.get(cell, 0) | _BITS[y % 4][x % 2]
            owner[cell] = s_index

    def to_dots(x: float, y: float) -> tuple[int, int]:
        px = round((x - x_low) / (x_high - x_low) * (dots_w - 1))
        py = dots_h - 1 - round((y - y_low) / (y_high - y_low) * (dots_h - 1))
        return px, py

    def to_col(x: float) -> int:
        return min(plot_w - 1, max(0, round((x - x_low) / (x_high - x_low) * (dots_w - 1)) // 2))

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
            markers[(min(plot_h - 1, max(0, py // 4)), min(plot_w - 1, max(0, px // 2)))] = s_index

    labels = {0: _fmt(y_high), plot_h // 2: _fmt((y_high + y_low) / 2), plot_h - 1: _fmt(y_low)}
    for row in range(plot_h):
        label = labels.get(row, "")
        text.append(f"{label:>{_Y_LABEL_WIDTH - 1}} ", style=axis)
        text.append("┤" if row in labels else "│", style=axis)
        run_style: Style | None = None
        run = ""
        for col in range(plot_w):
            bits = cells.get((row, col))
            if (row, col) in markers:
                index = markers[(row, col)]
                char, style = MARKERS[index % len(MARKERS)], style_of(index) + Style(bold=True)
            else:
                char = chr(_BRAILLE + bits) if bits else " "
                style = style_of(owner[(row, col)]) if bits else Style()
            if style != run_style and run:
                text.append(run, style=run_style)
                run = ""
            run_style = style
            run += char
        if run:
            text.append(run, style=run_style)
        text.append("\n")

    def x_value(v: float) -> float:
        return 2**v if mode.log_x else v

    ruler = ["─"] * plot_w
    ticks = [" "] * plot_w
    placed_until = -1
    for tick in _x_ticks(x_low, x_high, mode.log_x):
        col = to_col(tick)
        ruler[col] = "┬"
        label = _fmt(x_value(tick))
        start = min(max(0, col - len(label) // 2), plot_w - len(label))
        if start > placed_until and start >= 0:  # labels that would overlap are left out
            for i, ch in enumerate(label):
                ticks[start + i] = ch
            placed_until = start + len(label)
    text.append(" " * _Y_LABEL_WIDTH + "└" + "".join(ruler) + "\n", style=axis)
    text.append(" " * (_Y_LABEL_WIDTH + 1) + "".join(ticks).rstrip() + "\n", style=axis)
    x_label = mode.x_label + (" (log2)" if mode.log_x else "")
    text.append(" " * (_Y_LABEL_WIDTH + 1) + f"{x_label:>{plot_w}}", style=axis)
    return text


class PointsPlot(Widget):
    """Arms' points as a braille plot; ``mode`` switches between the two views (``toggle()``)."""

    ALLOW_MAXIMIZE = True  # `z` fills the screen with it

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
