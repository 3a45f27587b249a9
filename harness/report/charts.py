"""Small inline-SVG charts for the HTML report: a line chart and a grouped bar chart.

Pure functions from numbers and labels to SVG text, so the report stays one self-contained file
(no chart library, no script). Every label is escaped here, because the result is handed to the
template as markup: callers may pass strings that came from any input file.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Sequence

from markupsafe import Markup, escape

FONT = "font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif"
AXIS = "#57606a"
GRID = "#e6e8eb"
PASS = "#1a7f37"
FAIL = "#cf222e"
PRECISION_COLORS = {"bf16": "#2f6fdf", "fp16": "#d9480f", "fp32": "#7048e8"}
OTHER_COLORS = ("#0b7285", "#5c940d", "#a61e4d", "#495057")
"""Line colours of precisions not in PRECISION_COLORS, in turn."""
GPU_COLORS = ("#2f6fdf", "#d9480f", "#2b8a3e", "#7048e8", "#0b7285", "#c2255c", "#e67700", "#495057")
"""One colour per GPU (telemetry) or GPU count (all-reduce), in turn."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Series:
    """One line of a line chart."""

    label: str
    points: tuple[tuple[float, float], ...]
    """(x, y) in data units, drawn in the order given."""
    color: str
    dashed: bool = False
    """Dashed and without markers: a bound, not a measurement."""
    failed_x: frozenset[float] = frozenset()
    """x values whose point failed its check: drawn with a red ring."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Bar:
    label: str
    value: float | None
    """None: no measurement (the bar is left out, the label says so)."""
    state: str = "pass"
    """pass, fail or none: picks the bar's colour."""


@dataclass(frozen=True, kw_only=True, slots=True)
class BarGroup:
    label: str
    bars: tuple[Bar, ...]
    threshold: float | None = None
    """A lower bound drawn as a dashed line across the group."""
    color: str = "#4f6fad"


@dataclass(frozen=True, kw_only=True, slots=True)
class _Frame:
    """Plot area inside the SVG, and the data ranges it maps."""

    width: int
    height: int
    left: int = 52
    right: int = 12
    top: int = 30
    bottom: int = 40
    x_range: tuple[float, float] = (0.0, 1.0)
    y_range: tuple[float, float] = (0.0, 1.0)

    def x(self, value: float) -> float:
        return self.left + fraction_of(value, *self.x_range) * (self.width - self.left - self.right)

    def y(self, value: float) -> float:
        return self.height - self.bottom - fraction_of(value, *self.y_range) * (self.height - self.top - self.bottom)


def fraction_of(value: float, low: float, high: float) -> float:
    """Where ``value`` lies in [low, high] (0 to 1 inside), without overflow for any finite floats:
    halves first, so a range from -1e308 to 1e308 is still a finite span."""
    span = high / 2 - low / 2
    return (value / 2 - low / 2) / span if span > 0 else 0.5


def padded(low: float, high: float, fraction: float) -> tuple[float, float]:
    """[low, high] widened by ``fraction`` of its span on each side (a point when low == high),
    within the finite floats."""
    pad = (high / 2 - low / 2) * 2 * fraction or abs(high) * 0.05 or 0.05
    return max(low - pad, -sys.float_info.max), min(high + pad, sys.float_info.max)


MAX_TICKS = 40
"""Never more ticks than this, whatever the range: a bound on the tick loop."""


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2, 2.5, 5 × 10^k steps) covering [low, high], distinct, at most MAX_TICKS.

    Overflow-safe (spans are taken by halves) and always finite in its work: the ticks are
    indices × step, never a running sum, so a step below the values' resolution (9e15 to 9e15 + 2)
    cannot loop forever; such ticks collapse into the distinct values they round to."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return []
    if high <= low:
        high = min(low + (abs(low) or 1.0), sys.float_info.max)
        if high <= low:
            return [low]
    count = max(count, 1)
    raw = high / count - low / count
    if not (raw > 0 and math.isfinite(raw)):
        return [low, high]
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    if not (step > 0 and math.isfinite(step)):
        return [low, high]
    first, last = math.ceil(low / step - 1e-9), math.floor(high / step + 1e-9)
    if last - first + 1 > MAX_TICKS:
        last = first + MAX_TICKS - 1
    values = (round(index * step, 10) if abs(index * step) < 1e15 else index * step
              for index in range(int(first), int(last) + 1))
    return list(dict.fromkeys(v for v in values if math.isfinite(v)))


def format_tick(value: float, digits: int = 3) -> str:
    if not math.isfinite(value):
        return "—"
    if value == int(value) and abs(value) < 1e15:
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.0f}"
    if abs(value) >= 1000 and digits <= 3:
        return f"{value:,.0f}" if abs(value) < 1e15 else f"{value:.{digits}g}"
    return f"{value:.{digits}g}"


def tick_labels(ticks: Sequence[float]) -> list[str]:
    """One label per tick, with as few significant digits as keep every label distinct (six ticks
    between 10.25 and 10.5 read 10.25, 10.3, 10.35, …, never "10.3" six times)."""
    labels = [format_tick(t) for t in ticks]
    for digits in range(4, 18):
        if len(set(labels)) == len(labels):
            break
        labels = [format_tick(t, digits) for t in ticks]
    return labels


TITLE_CHAR_PX = 6.8
"""The width of one character of the 12 px title, generously (for wrapping, not measuring)."""


def title_lines(title: str, width: int, left: int = 8) -> list[str]:
    """The title in lines that fit ``width`` (at most three, the last clipped): never cut mid-view."""
    room = max(int((width - left - 4) / TITLE_CHAR_PX), 8)
    lines: list[str] = []
    for word in title.split():
        if lines and len(lines[-1]) + 1 + len(word) <= room:
            lines[-1] += " " + word
        else:
            lines.append(word)
    if len(lines) > 3:
        lines = lines[:2] + [_clip(" ".join(lines[2:]), room)]
    return [_clip(line, room) for line in lines] or [""]


def _text(x: float, y: float, content: str, *, size: int = 11, anchor: str = "middle", color: str = AXIS,
          weight: str = "normal") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" fill="{color}" '
            f'font-weight="{weight}">{escape(content)}</text>')


def _open(frame: _Frame, title: str) -> list[str]:
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {frame.width} {frame.height}" '
             f'width="{frame.width}" height="{frame.height}" role="img" style="{FONT}">',
             f"<title>{escape(title)}</title>"]
    for index, line in enumerate(title_lines(title, frame.width)):
        parts.append(_text(8, 16 + 15 * index, line, size=12, anchor="start", color="#1f2328", weight="600"))
    return parts


def _title_room(title: str, width: int) -> int:
    """Extra pixels above the plot for a title of more than one line."""
    return 15 * (len(title_lines(title, width)) - 1)


def _y_axis(frame: _Frame, ticks: Sequence[float], label: str) -> list[str]:
    parts = []
    for tick, shown in zip(ticks, tick_labels(ticks), strict=True):
        y = frame.y(tick)
        parts.append(f'<line x1="{frame.left}" x2="{frame.width - frame.right}" y1="{y:.1f}" y2="{y:.1f}" '
                     f'stroke="{GRID}"/>')
        parts.append(_text(frame.left - 6, y + 4, shown, size=10, anchor="end"))
    if label:
        mid = (frame.top + frame.height - frame.bottom) / 2
        parts.append(f'<text x="12" y="{mid:.1f}" font-size="10" text-anchor="middle" fill="{AXIS}" '
                     f'transform="rotate(-90 12 {mid:.1f})">{escape(label)}</text>')
    bottom = frame.height - frame.bottom
    parts.append(f'<line x1="{frame.left}" x2="{frame.width - frame.right}" y1="{bottom}" y2="{bottom}" '
                 f'stroke="{AXIS}"/>')
    return parts


def line_chart(*, title: str, series: Sequence[Series], x_ticks: Sequence[tuple[float, str]], x_label: str = "",
               y_label: str = "", y_range: tuple[float, float] | None = None, width: int = 360,
               height: int = 240) -> Markup:
    """Lines over numeric x (pass log2(N) with ticks labelled N for GPU counts), legend below."""
    ys = [y for s in series for _, y in s.points if math.isfinite(y)]
    xs = [x for s in series for x, _ in s.points] + [x for x, _ in x_ticks]
    if y_range is None:
        y_range = padded(*((min(ys), max(ys)) if ys else (0.0, 1.0)), 0.1)
    ticks = nice_ticks(*y_range)
    if ticks:
        y_range = (min(y_range[0], ticks[0]), max(y_range[1], ticks[-1]))
    xs = [x for x in xs if math.isfinite(x)]
    x_range = (min(xs), max(xs)) if xs else (0.0, 1.0)
    if x_range[0] == x_range[1]:
        x_range = (x_range[0] - 1, x_range[1] + 1)
    legend_rows = math.ceil(len(series) / 2)
    extra = _title_room(title, width)
    frame = _Frame(width=width, height=height + 16 * legend_rows + extra, bottom=40 + 16 * legend_rows,
                   top=30 + extra, left=52, right=16, x_range=padded(*x_range, 0.06), y_range=y_range)
    parts = _open(frame, title)
    parts += _y_axis(frame, ticks, y_label)
    axis_y = frame.height - frame.bottom
    for value, label in x_ticks:
        x = frame.x(value)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{axis_y}" y2="{axis_y + 4}" stroke="{AXIS}"/>')
        parts.append(_text(x, axis_y + 15, label, size=10))
    if x_label:
        parts.append(_text((frame.left + frame.width - frame.right) / 2, axis_y + 29, x_label, size=10))
    for s in series:
        points = [(x, y) for x, y in s.points if math.isfinite(x) and math.isfinite(y)]
        if not points:
            continue
        path = " ".join(f"{frame.x(x):.1f},{frame.y(y):.1f}" for x, y in points)
        dash = ' stroke-dasharray="5 4"' if s.dashed else ""
        parts.append(f'<polyline points="{path}" fill="none" stroke="{s.color}" stroke-width="{1.5 if s.dashed else 2}"'
                     f'{dash}><title>{escape(s.label)}</title></polyline>')
        if s.dashed:
            # A bound is a value at each count: a short bar there, so a single bound is visible too.
            for x, y in points:
                parts.append(f'<line x1="{frame.x(x) - 7:.1f}" x2="{frame.x(x) + 7:.1f}" y1="{frame.y(y):.1f}" '
                             f'y2="{frame.y(y):.1f}" stroke="{s.color}" stroke-width="2.5"><title>{escape(s.label)}: '
                             f'{y:.3f}</title></line>')
        else:
            for x, y in points:
                failed = x in s.failed_x
                parts.append(f'<circle cx="{frame.x(x):.1f}" cy="{frame.y(y):.1f}" r="{4.5 if failed else 3}" '
                             f'fill="{s.color}" stroke="{FAIL if failed else "#fff"}" '
                             f'stroke-width="{2 if failed else 1}"><title>{escape(s.label)}: {y:.3f}</title></circle>')
    for index, s in enumerate(series):
        row, column = divmod(index, 2)
        x = frame.left + column * ((frame.width - frame.left) / 2)
        y = height + extra + 4 + row * 16
        dash = ' stroke-dasharray="5 4"' if s.dashed else ""
        parts.append(f'<line x1="{x:.1f}" x2="{x + 18:.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="{s.color}" '
                     f'stroke-width="2"{dash}/>')
        parts.append(_text(x + 22, y + 4, _clip(s.label, 22), size=10, anchor="start"))
    parts.append("</svg>")
    return Markup("".join(parts))


def bar_chart(*, title: str, groups: Sequence[BarGroup], y_label: str = "", width: int = 360,
              height: int = 240) -> Markup:
    """Grouped bars from zero, each group with its own dashed lower bound and its value labels."""
    values = [b.value for g in groups for b in g.bars if b.value is not None and math.isfinite(b.value)]
    values += [g.threshold for g in groups if g.threshold is not None and math.isfinite(g.threshold)]
    top = min(max(values) * 1.15, sys.float_info.max) if values and max(values) > 0 else 1.0
    ticks = nice_ticks(0.0, top)
    extra = _title_room(title, width)
    frame = _Frame(width=width, height=height + extra, top=30 + extra, left=56, right=10,
                   y_range=(0.0, max(top, ticks[-1] if ticks else top)))
    parts = _open(frame, title)
    parts += _y_axis(frame, ticks, y_label)
    plot_width = frame.width - frame.left - frame.right
    group_width = plot_width / max(len(groups), 1)
    axis_y = frame.height - frame.bottom
    for index, group in enumerate(groups):
        start = frame.left + index * group_width
        slots = max(len(group.bars), 1)
        bar_width = min(28.0, (group_width - 16) / slots)
        used = bar_width * slots
        offset = start + (group_width - used) / 2
        for slot, bar in enumerate(group.bars):
            x = offset + slot * bar_width
            center = x + bar_width / 2
            parts.append(_text(center, axis_y + 13, bar.label, size=9))
            if bar.value is None or not math.isfinite(bar.value):
                failed = bar.state == "fail"
                parts.append(_text(center, axis_y - 4, "✕" if failed else "–", size=11 if failed else 10,
                                   color=FAIL if failed else AXIS, weight="bold" if failed else "normal"))
                continue
            y = frame.y(bar.value)
            color = {"fail": FAIL, "none": "#afb8c1"}.get(bar.state, group.color)
            parts.append(f'<rect x="{x + 2:.1f}" y="{y:.1f}" width="{bar_width - 4:.1f}" height="{axis_y - y:.1f}" '
                         f'fill="{color}"><title>{escape(group.label)} {escape(bar.label)}: '
                         f'{escape(format_tick(bar.value))}</title></rect>')
            parts.append(_text(center, y - 3, _compact(bar.value), size=8, color="#1f2328"))
        label = _clip(group.label, 24)
        if group.threshold is not None and math.isfinite(group.threshold):
            label += f" (min {_compact(group.threshold)})"
        parts.append(_text(start + group_width / 2, axis_y + 27, label, size=10, color="#1f2328"))
        if group.threshold is not None and math.isfinite(group.threshold):
            y = frame.y(group.threshold)
            parts.append(f'<line x1="{offset - 4:.1f}" x2="{offset + used + 4:.1f}" y1="{y:.1f}" y2="{y:.1f}" '
                         f'stroke="#1f2328" stroke-width="1.5" stroke-dasharray="5 3"><title>bound '
                         f'{escape(format_tick(group.threshold))}</title></line>')
    parts.append("</svg>")
    return Markup("".join(parts))


def _compact(value: float) -> str:
    if abs(value) >= 10_000:
        return f"{value / 1000:.1f}k"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"

