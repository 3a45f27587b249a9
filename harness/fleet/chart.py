"""A fleet figure's distribution as inline SVG: one dot per node (or GPU) on a value axis.

Dots that fall on the same spot stack upward (a dot plot), so 500 nodes stay readable; the
fleet median is a solid line, the range where a value is not an outlier is shaded, the profile's
bound is dashed. Colours and axis ticks are the node report's (harness.report.charts). Every
label is escaped here, because the result is handed to the template as markup.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Sequence

from markupsafe import Markup, escape

from harness.report.charts import AXIS, FAIL, FONT, GRID, format_tick, fraction_of, nice_ticks, padded, tick_labels

DOT_COLORS = {"pass": "#4f6fad", "fail": FAIL, "worse": "#bc4c00", "better": "#8250df", "none": "#afb8c1"}
"""pass: within the bound and the fleet; fail: the check failed; worse/better: an outlier on
that side of the median; none: no bound judged it."""
DOT_RADIUS = 4.0
MAX_STACK = 14
"""Dots stacked on one spot before they overlap (keeps the chart's height bounded)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Dot:
    label: str
    value: float
    state: str = "pass"


def _svg_text(x: float, y: float, content: str, *, size: int = 10, anchor: str = "middle",
              color: str = AXIS) -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
            f'fill="{color}">{escape(content)}</text>')


def _stacks(dots: Sequence[Dot], to_x, bin_px: float) -> list[tuple[Dot, float, int]]:
    """(dot, x, level): dots in the same bin of ``bin_px`` pixels stack up from level 0."""
    levels: dict[int, int] = {}
    placed = []
    for dot in sorted(dots, key=lambda d: d.value):
        x = to_x(dot.value)
        slot = int(x // bin_px)
        level = levels.get(slot, 0)
        levels[slot] = level + 1
        placed.append((dot, x, min(level, MAX_STACK - 1)))
    return placed


def strip_chart(*, title: str, dots: Sequence[Dot], median: float | None, calm_range: tuple[float, float] | None,
                bounds: Sequence[float] = (), unit: str = "", width: int = 560) -> Markup:
    """The distribution of one figure; ``calm_range`` is where a value is not an outlier. The title is
    the SVG's accessible name (the page shows it above the chart)."""
    values = [d.value for d in dots if math.isfinite(d.value)]
    if calm_range is not None:  # median ± z × scale can overflow where the values span the floats
        calm_range = (max(calm_range[0], -sys.float_info.max), min(calm_range[1], sys.float_info.max))
    extra = [v for v in (*bounds, *(calm_range or ()), *(() if median is None else (median,))) if math.isfinite(v)]
    low, high = padded(min(values + extra, default=0.0), max(values + extra, default=1.0), 0.06)
    ticks = nice_ticks(low, high, 6)
    x_low, x_high = min([low, *ticks[:1]]), max([high, *ticks[-1:]])
    left, right, top = 16, 16, 12

    def to_x(value: float) -> float:
        return left + fraction_of(value, x_low, x_high) * (width - left - right)

    placed = _stacks([d for d in dots if math.isfinite(d.value)], to_x, DOT_RADIUS * 2)
    stack = max((level for _, _, level in placed), default=0) + 1
    axis_y = top + 12 + stack * DOT_RADIUS * 2
    height = int(axis_y + 34)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
             f'height="{height}" role="img" style="{FONT}">', f"<title>{escape(title)}</title>"]
    if calm_range is not None:
        x1, x2 = to_x(calm_range[0]), to_x(calm_range[1])
        parts.append(f'<rect x="{x1:.1f}" y="{top}" width="{max(x2 - x1, 0.5):.1f}" height="{axis_y - top:.1f}" '
                     f'fill="#ddf4ff"><title>not an outlier between {escape(format_tick(calm_range[0]))} and '
                     f'{escape(format_tick(calm_range[1]))}</title></rect>')
    for tick, label in zip(ticks, tick_labels(ticks), strict=True):
        x = to_x(tick)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{axis_y}" stroke="{GRID}"/>')
        parts.append(_svg_text(x, axis_y + 14, label))
    parts.append(f'<line x1="{left}" x2="{width - right}" y1="{axis_y}" y2="{axis_y}" stroke="{AXIS}"/>')
    if median is not None:
        x = to_x(median)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top - 4}" y2="{axis_y}" stroke="#1f2328" '
                     f'stroke-width="1.5"><title>fleet median {escape(format_tick(median))}</title></line>')
    for bound in bounds:
        x = to_x(bound)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top - 4}" y2="{axis_y}" stroke="{FAIL}" '
                     f'stroke-width="1.5" stroke-dasharray="5 3"><title>bound {escape(format_tick(bound))}'
                     '</title></line>')
    for dot, x, level in placed:
        y = axis_y - DOT_RADIUS - 1 - level * DOT_RADIUS * 2
        color = DOT_COLORS.get(dot.state, AXIS)
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{DOT_RADIUS - 0.5}" fill="{color}" '
                     f'stroke="#fff" stroke-width="0.8"><title>{escape(dot.label)}: {escape(format_tick(dot.value))}'
                     f'{escape(" " + unit) if unit else ""}</title></circle>')
    if unit:
        parts.append(_svg_text(width - right, axis_y + 28, unit, anchor="end"))
    parts.append("</svg>")
    return Markup("".join(parts))
