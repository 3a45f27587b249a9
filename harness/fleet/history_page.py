"""A history as one self-contained HTML page: a line chart per figure (the node report's
``line_chart``) with the reference each point was compared with, and the points as a table."""

from __future__ import annotations

from harness.fleet.history import NO_REFERENCE, Trend, history_summary
from harness.fleet.page import render_template
from harness.report.charts import Series, line_chart

LINE_COLOR = "#2f6fdf"
REFERENCE_COLOR = "#57606a"


def _chart(trend: Trend):
    points = tuple((float(i), p.value) for i, p in enumerate(trend.points))
    references = tuple((float(i), p.reference) for i, p in enumerate(trend.points) if p.reference is not None)
    marked = frozenset(float(i) for i, p in enumerate(trend.points) if p.flagged or p.verdict == "FAIL")
    series = [Series(label=trend.name, points=points, color=LINE_COLOR, failed_x=marked)]
    if references:
        series.append(Series(label="median of earlier sign-offs", points=references, color=REFERENCE_COLOR,
                             dashed=True))
    ticks = [(float(i), p.when[5:10]) for i, p in enumerate(trend.points)]
    return line_chart(title=trend.name, series=series, x_ticks=ticks, y_label=trend.unit, width=600, height=220)


def render_history_html(subject: str, trends: list[Trend], threshold: float) -> str:
    better = {"higher": "higher is better", "lower": "lower is better", "either": "no side is better"}
    view = {"subject": subject, "threshold_pct": f"{threshold * 100:g}", "drifted": sum(t.drifted for t in trends),
            "summary": history_summary(trends, threshold),
            "trends": [{"title": t.title, "profile": t.profile, "unit": t.unit, "better": better[t.direction],
                        "drifted": t.drifted, "chart": _chart(t),
                        "points": [{"when": p.when[:19], "verdict": p.verdict, "node": p.node,
                                    "value": f"{p.value:,.4g}" if abs(p.value) < 100 else f"{p.value:,.1f}",
                                    "drift": NO_REFERENCE if p.reference is None else
                                    "—" if p.drift is None else f"{p.drift * 100:+.1f} %",
                                    "flagged": p.flagged} for p in t.points]} for t in trends]}
    return render_template("history.html.j2", history=view)
