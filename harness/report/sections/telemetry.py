"""GPU telemetry timelines of a run, when it recorded them; otherwise the reason none is drawn."""

from __future__ import annotations

from markupsafe import Markup

from harness.report import charts as svg
from harness.results.reading import as_dict, as_list, as_number, as_text
from harness.report.outcomes import SessionTest
from harness.results.telemetry_summary import read_telemetry

MAX_POINTS = 5000
"""Samples drawn per GPU and metric: enough for an hour at 1 Hz, bounded for a damaged file."""


def _points(samples: object) -> tuple[tuple[float, float], ...]:
    """The [t_seconds, value] pairs that are two numbers; anything else in a damaged file is left out."""
    pairs = ((as_number(p[0]), as_number(p[1])) for p in as_list(samples)[:MAX_POINTS]
             if isinstance(p, list) and len(p) == 2)
    return tuple((x, y) for x, y in pairs if x is not None and y is not None)


def _series(per_gpu: dict) -> list[svg.Series]:
    series = []
    for index, (gpu, samples) in enumerate(per_gpu.items()):
        points = _points(samples)
        if points:
            color = svg.GPU_COLORS[index % len(svg.GPU_COLORS)]
            series.append(svg.Series(label=f"GPU {gpu}", points=points, color=color))
    return series


def telemetry_charts(record: dict) -> list[Markup]:
    """Timelines of ``record["telemetry"]`` when a run recorded it; nothing otherwise (nothing is invented).

    Shape (written by harness/telemetry.py; see docs/report.md and docs/telemetry.md)::

        {"metrics": {"<name>": {"label": "GPU utilization", "unit": "%",
                                "per_gpu": {"<gpu index>": [[t_seconds, value], ...]}}}}
    """
    charts = []
    for name, metric in read_telemetry(record.get("telemetry")).metrics.items():
        metric = as_dict(metric)
        series = _series(as_dict(metric.get("per_gpu")))
        if series:
            xs = [x for s in series for x, _ in s.points]
            found = svg.nice_ticks(min(xs), max(xs))
            ticks = list(zip(found, svg.tick_labels(found), strict=True))
            charts.append(svg.line_chart(title=as_text(metric.get("label")) or name, series=series, x_ticks=ticks,
                                         x_label="seconds", y_label=as_text(metric.get("unit")), width=420))
    return charts


def telemetry_missing(tests: list[SessionTest]) -> str:
    """Why no timeline is drawn: the reasons the runs recorded, or that they predate telemetry."""
    reasons = list(dict.fromkeys(
        as_text(telemetry.reason) for telemetry in (read_telemetry(t.record.get("telemetry")) for t in tests)
        if telemetry.status != "ok" and telemetry.reason))
    if not reasons and not any(t.record.get("model") for t in tests):
        return "None: no benchmark ran in this session, so no GPU timeline was sampled."
    if not reasons:
        return ("Not recorded: this harness version collects no GPU utilization, power or temperature timelines "
                "(the utilization check of each test says “not evaluated”).")
    return f"Not recorded: {'; '.join(reasons[:5])}. The checks that need telemetry say “not evaluated”."
