"""All-reduce bus bandwidth by message size, per GPU count, against the bound the session applied.

The bandwidth rows are the session's ``interconnect`` summary; the bound is the one recorded with
the all-reduce results (``bounds.min_allreduce_busbw_gbps``), never read back from the profile.
"""

from __future__ import annotations

import math

from markupsafe import Markup

from harness.report import charts as svg
from harness.results.job import failure_reason
from harness.results.reading import as_dict, as_int, as_list, as_number, as_text, by_gpu_count
from harness.report.outcomes import SessionTest
from harness.report.sections.kind import KindSection
from harness.kinds.interconnect.busbw import size_label

BUSBW_BOUND = "min_allreduce_busbw_gbps"


def recorded_busbw_bounds(tests: list[SessionTest]) -> dict[int, float] | None:
    """GPU count -> the bus-bandwidth bound the all-reduce results recorded; None when none recorded one."""
    tables = [t.bounds[BUSBW_BOUND] for t in tests if BUSBW_BOUND in t.bounds]
    if not tables:
        return None
    bounds: dict[int, float] = {}
    for table in tables:
        bounds.update(by_gpu_count(table))
    return bounds


def _rows(header: dict) -> list[dict]:
    return [as_dict(r) for r in as_list(as_dict(header.get("interconnect")).get("allreduce"))]


def interconnect_charts(header: dict, tests: list[SessionTest]) -> list[Markup]:
    """All-reduce bus bandwidth vs message size per GPU count, with the recorded bound, when measured.

    Shape (``harness["interconnect"]`` in report.json / session.json, written by harness/kinds/interconnect/runner.py)::

        {"allreduce": [{"gpus": 4, "size_bytes": 1073741824, "busbw_gbps": 350.2}, ...]}
    """
    rows = _rows(header)
    bounds = recorded_busbw_bounds(tests) or {}
    series: list[svg.Series] = []
    sizes: set[float] = set()
    for index, gpus in enumerate(sorted({g for r in rows if (g := as_int(r.get("gpus")))})):
        points = sorted((math.log2(s), b) for r in rows if as_int(r.get("gpus")) == gpus
                        for s, b in [(as_number(r.get("size_bytes")), as_number(r.get("busbw_gbps")))]
                        if s and s > 0 and b is not None)
        if not points:
            continue
        color = svg.GPU_COLORS[index % len(svg.GPU_COLORS)]
        series.append(svg.Series(label=f"{gpus} GPUs", points=tuple(points), color=color))
        sizes.update(x for x, _ in points)
        if gpus in bounds:
            series.append(svg.Series(label=f"{gpus} GPUs bound", points=((points[0][0], bounds[gpus]),
                                                                         (points[-1][0], bounds[gpus])),
                                     color=color, dashed=True))
    if not series:
        return []
    ticks = [(x, size_label(2 ** x)) for x in sorted(sizes)][:: max(1, len(sizes) // 8)]
    return [svg.line_chart(title="all-reduce bus bandwidth (GB/s)", series=series, x_ticks=ticks,
                           x_label="message size", y_label="GB/s", width=520)]


def interconnect_missing(header: dict) -> str:
    """Why no bandwidth is drawn: the test did not run, or each run's failure."""
    interconnect = header.get("interconnect")
    if not isinstance(interconnect, dict):
        # A harness with the test writes "interconnect" only when it ran: absent, it did not run here.
        return ("Not recorded: no all-reduce bandwidth test ran in this session "
                "(not selected, or a harness version without one).")
    failures = [f"{as_text(g)} GPUs: {reason}" for g, run in as_dict(interconnect.get("runs")).items()
                if (reason := failure_reason(as_dict(run).get("failure")))]
    return "No all-reduce bandwidth was measured" + (f" ({'; '.join(failures[:4])})." if failures else ".")


def interconnect_bound_note(header: dict, tests: list[SessionTest]) -> str:
    """A line under the chart when the bandwidth was measured but no bound was recorded with it."""
    if not _rows(header) or recorded_busbw_bounds(tests) is not None:
        return ""
    return "Bound: not recorded with the all-reduce results (no bound line is drawn)."


def interconnect_section(header: dict, tests: list[SessionTest]) -> KindSection:
    """The page's Interconnect section: the bandwidth charts and their note, or why there are none."""
    return KindSection(title="Interconnect", charts=interconnect_charts(header, tests),
                       note=interconnect_bound_note(header, tests), missing=interconnect_missing(header))
