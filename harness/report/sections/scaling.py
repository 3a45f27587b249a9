"""Scaling charts, per model and scaling mode: efficiency by GPU count and per-GPU throughput bars.

Measured values come from each case's checks (by key) and record; the dashed bounds from the
bounds the session recorded with the case.
"""

from __future__ import annotations

import math

from markupsafe import Markup

from harness.cases import SCALINGS, CaseId
from harness.report import charts as svg
from harness.report.format import device_word, short_unit
from harness.results.reading import as_number, as_text, by_gpu_count
from harness.report.outcomes import THROUGHPUT_CHECK, SessionTest, efficiency_check

Run = tuple[SessionTest, CaseId]
"""A test and its recorded case."""


def _color(precision: str, index: int) -> str:
    return svg.PRECISION_COLORS.get(precision, svg.OTHER_COLORS[index % len(svg.OTHER_COLORS)])


def _sample_unit(runs: list[Run]) -> str:
    """The unit of the runs that measured something (a failed launch's record only says "samples")."""
    for test, _ in runs:
        if as_number(test.record.get("throughput_per_gpu")) is not None and test.record.get("sample_unit"):
            return as_text(test.record["sample_unit"]) + "/s"
    return "samples/s"


def _bounds(runs: list[Run]) -> dict:
    """The bounds recorded with these runs (one model × precision: every result holds the same)."""
    return next((test.bounds for test, _ in runs if test.bounds), {})


def _efficiency_series(precision: str, runs: list[Run], scaling: str, color: str) -> tuple[list[svg.Series], set[int]]:
    """Measured efficiency by count (1 at one GPU, by definition) and the recorded bound at those counts."""
    points, failed_x, counts = [(0.0, 1.0)], set(), {1}
    for test, case in runs:
        efficiency, passed = test.check_value(efficiency_check(scaling))
        if case.world_size > 1 and efficiency is not None:
            points.append((math.log2(case.world_size), efficiency))
            counts.add(case.world_size)
            if passed is False:
                failed_x.add(math.log2(case.world_size))
    if len(points) < 2:
        return [], set()
    series = [svg.Series(label=f"{precision} measured", points=tuple(points), color=color,
                         failed_x=frozenset(failed_x))]
    table = by_gpu_count(_bounds(runs).get("min_weak_efficiency" if scaling == "weak" else "min_strong_efficiency"))
    bound_points = tuple((math.log2(n), v) for n, v in table.items() if n in counts)
    if bound_points:
        series.append(svg.Series(label=f"{precision} bound", points=bound_points, color=color, dashed=True))
    return series, counts


def _throughput_group(precision: str, runs: list[Run], scaling: str, color: str) -> svg.BarGroup:
    bars = []
    threshold = None
    for test, case in runs:
        bound, passed = test.check_value(THROUGHPUT_CHECK, "bound")
        threshold = threshold if threshold is not None else bound
        failed = passed is False or test.failed
        bars.append(svg.Bar(label=str(case.world_size), value=as_number(test.record.get("throughput_per_gpu")),
                            state="fail" if failed else "pass"))
    if threshold is None and scaling == "weak":
        # A case that failed before its throughput check still had this bound to meet.
        threshold = as_number(_bounds(runs).get("min_samples_per_sec_per_gpu"))
    return svg.BarGroup(label=precision, bars=tuple(bars), threshold=threshold, color=color)


def _efficiency_chart(title: str, series: list[svg.Series], counts: set[int], word: str) -> Markup:
    # Autoscaled over every value and the bounds, with 1.0 (perfect scaling) always in view: an
    # efficiency above 1 (a superlinear case, a noisy 1-GPU baseline) is drawn, never clamped.
    values = [y for s in series for _, y in s.points if math.isfinite(y)] + [1.0]
    low, high = svg.padded(min(values), max(values), 0.1)
    return svg.line_chart(
        title=title, series=series, x_ticks=[(math.log2(n), str(n)) for n in sorted(counts)],
        x_label=f"{word}s (log scale)", y_label="efficiency vs 1", width=300, y_range=(max(0.0, low), high))


def _model_charts(model: str, scaling: str, runs: list[Run], word: str) -> dict | None:
    unit = short_unit(_sample_unit(runs))
    series, groups, counts = [], [], set()
    for index, precision in enumerate(dict.fromkeys(case.precision for _, case in runs)):
        mine = sorted((run for run in runs if run[1].precision == precision), key=lambda run: run[1].world_size)
        color = _color(precision, index)
        more, seen = _efficiency_series(precision, mine, scaling, color)
        series += more
        counts |= seen
        groups.append(_throughput_group(precision, mine, scaling, color))
    has_bars = any(bar.value is not None for group in groups for bar in group.bars)
    if not series and not has_bars:
        return None
    label = model if scaling == "weak" else f"{model} (strong)"
    return {"model": model, "scaling": scaling,
            "efficiency": (_efficiency_chart(f"{label}: {scaling}-scaling efficiency", series, counts, word)
                           if series else None),
            "throughput": (svg.bar_chart(title=f"{label}: {unit} per {word}", groups=groups, y_label=unit, width=320)
                           if has_bars else None)}


def scaling_charts(tests: list[SessionTest], device: str) -> list[dict]:
    """Per model and scaling: efficiency vs GPU count with the bound, and per-GPU throughput bars vs the bound."""
    charts = []
    word = device_word(device)
    for scaling in SCALINGS:
        runs = [(t, case) for t in tests if (case := t.case) is not None and case.scaling == scaling and t.record]
        for model in dict.fromkeys(case.model for _, case in runs):
            entry = _model_charts(model, scaling, [run for run in runs if run[1].model == model], word)
            if entry is not None:
                charts.append(entry)
    return charts
