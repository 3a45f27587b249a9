"""The report's and the fleet's charts: ticks that always end and always read, autoscaled efficiency
charts, titles in full, and values at the ends of the floats that draw instead of crashing."""

from __future__ import annotations

import math
import re
import signal

import pytest

from harness.fleet.chart import Dot, strip_chart
from harness.fleet.facts import CheckFact, SessionFacts
from harness.fleet.page import render_html
from harness.fleet.view import build_fleet
from harness.report.charts import (MAX_TICKS, Bar, BarGroup, Series, bar_chart, line_chart, nice_ticks,
                                   tick_labels)
from harness.report.sections.scaling import _efficiency_chart


@pytest.fixture
def within_two_seconds():
    """The tick loop once never returned: fail the test instead of hanging the suite."""
    def stop(*_):
        raise TimeoutError("did not return within 2 s")
    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(2)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize(("low", "high"), [
    (9e15, 9e15 + 2), (-1e308, 1e308), (1e308, 1e308), (-1.7976931348623157e308, 1.7976931348623157e308),
    (0.0, 5e-324), (1e-300, 1e-300), (10.25, 10.55), (0.0, 1.0), (4439.2, 4439.2)])
def test_ticks_always_end_are_finite_distinct_and_few(within_two_seconds, low, high):
    ticks = nice_ticks(low, high)
    assert 1 <= len(ticks) <= MAX_TICKS
    assert all(math.isfinite(t) for t in ticks) and len(set(ticks)) == len(ticks)
    labels = tick_labels(ticks)
    assert len(set(labels)) == len(labels), f"identical tick labels: {labels}"


def test_ticks_of_a_narrow_range_read_with_enough_digits():
    ticks = nice_ticks(10.25, 10.52, 6)
    assert tick_labels(ticks) == ["10.25", "10.3", "10.35", "10.4", "10.45", "10.5"]


def _plot_ys(svg: str) -> list[float]:
    return [float(y) for y in re.findall(r'<circle cx="[\d.]+" cy="([\d.-]+)"', svg)]


def test_an_efficiency_above_one_is_drawn_inside_the_plot_not_across_the_title():
    series = [Series(label="bf16", points=((1.0, 1.222), (2.0, 0.95)), color="#2f6fdf"),
              Series(label="bf16 bound", points=((1.0, 0.8), (2.0, 0.8)), color="#2f6fdf", dashed=True)]
    svg = str(_efficiency_chart("resnet50 (strong): strong-scaling efficiency", series, {2, 4}, "GPU"))
    labels = [float(t.replace(",", "")) for t in re.findall(r'text-anchor="end" fill="[^"]+" font-weight="normal">'
                                                             r'([\d.,-]+)</text>', svg)]
    assert max(labels) > 1.0, f"the y axis stops at {max(labels)}: clamped at 1"
    title_bottom = max(float(y) for y in re.findall(r'<text x="8.0" y="([\d.]+)" font-size="12"', svg))
    assert min(_plot_ys(svg)) > title_bottom + 5, "a point is drawn over the title"
    assert "efficiency vs 1</text>" in svg, "the axis keeps its label"


def test_a_long_title_is_shown_in_full_on_more_lines():
    title = "resnet152 (strong): strong-scaling efficiency"
    svg = str(line_chart(title=title, series=[Series(label="bf16", points=((1.0, 0.9),), color="#000")],
                         x_ticks=[(1.0, "2")], width=300))
    shown = re.findall(r'font-size="12" text-anchor="start" fill="#1f2328" font-weight="600">([^<]+)</text>', svg)
    assert len(shown) >= 2 and " ".join(shown) == title, shown
    assert "…" not in "".join(shown)


@pytest.mark.parametrize("value", [1e308, -1e308, 1.7976931348623157e308])
def test_values_at_the_ends_of_the_floats_draw(within_two_seconds, value):
    line = str(line_chart(title="t", series=[Series(label="a", points=((0.0, value), (1.0, -value)), color="#000")],
                          x_ticks=[(0.0, "1"), (1.0, "2")]))
    bars = str(bar_chart(title="t", groups=[BarGroup(label="g", bars=(Bar(label="1", value=abs(value)),))]))
    strip = str(strip_chart(title="t", dots=[Dot(label="a", value=value, state="pass"),
                                               Dot(label="b", value=-value, state="pass")],
                            median=0.0, calm_range=(-value, value), bounds=(value,)))
    for svg in (line, bars, strip):
        assert "nan" not in svg.lower() and "inf" not in svg.lower()


def test_the_fleet_page_is_built_with_figures_of_plus_minus_1e308(within_two_seconds):
    def session(node: str, value: float) -> SessionFacts:
        check = CheckFact(test="t", case_key="c", key="k", name="figure", kind="performance", measured=value,
                          bound=None, unit="", comparison="", passed=None)
        return SessionFacts(run_id=f"r-{node}", node=node, verdict="PASS", profile_name="h200", checks=(check,),
                            scope="full", level="standard", sign_off=True, cpu_self_check=False)

    view = build_fleet([session("n1", 1e308), session("n2", -1e308), session("n3", 0.0)])
    html = render_html(view)
    assert "<svg" in html and view["verdict"] == "PASS"
