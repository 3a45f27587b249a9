"""A node's or a GPU's figures over its sessions, each compared with its own earlier sign-offs (pure).

A GPU is followed by its UUID, so its history goes with it when it moves to another node. A
point has drifted when it lies at least ``threshold`` (3 %) from the median of every earlier
session of the same figure that signed the node off (``sign_off``: a PASS over the full scope of
a GPU profile, not quick), on the figure's worse side (either side for a figure with no better
side). The median keeps one odd earlier session from moving the reference; a failed, partial,
quick or CPU session is no reference, so a GPU that got slower and failed is not measured against
its own failure. Without an earlier sign-off there is nothing to drift from, and the history says
so ("no earlier sign-off to compare against"), never "no drift".
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Iterable

from harness.fleet.facts import Direction, SessionFacts

DRIFT_THRESHOLD = 0.03


@dataclass(frozen=True, kw_only=True, slots=True)
class Point:
    run_id: str
    node: str
    when: str
    verdict: str
    value: float
    reference: float | None
    """The median of this figure over the earlier sign-offs; None before the first."""
    drift: float | None
    """(value - reference) / |reference|."""
    flagged: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class Trend:
    profile: str
    case_key: str
    key: str
    name: str
    unit: str
    direction: Direction
    where: str
    """Which GPU (``GPU 3 (GPU-8d1c...)``) or ``node`` for a node-level check."""
    points: tuple[Point, ...]

    @property
    def drifted(self) -> bool:
        return bool(self.points) and self.points[-1].flagged

    @property
    def compared(self) -> bool:
        """Whether the latest point had an earlier sign-off to compare against."""
        return bool(self.points) and self.points[-1].reference is not None

    @property
    def title(self) -> str:
        return f"{self.case_key} · {self.name} · {self.where}"


def drift_points(series: list[tuple[SessionFacts, float]], direction: Direction, threshold: float) -> list[Point]:
    """Each value against the median of the values of the earlier sign-offs."""
    points = []
    for position, (session, value) in enumerate(series):
        earlier = [v for s, v in series[:position] if s.sign_off is True and s.verdict == "PASS"]
        reference = statistics.median(earlier) if earlier else None
        drift = (value - reference) / abs(reference) if reference else None
        flagged = False
        if drift is not None and drift != 0:
            worse = direction == "either" or (drift < 0) == (direction == "higher")
            flagged = worse and abs(drift) >= threshold
        points.append(Point(run_id=session.run_id, node=session.node, when=session.when, verdict=session.verdict,
                            value=value, reference=reference, drift=drift, flagged=flagged))
    return points


def _trends(grouped: dict[tuple, tuple[dict, list]], threshold: float) -> list[Trend]:
    trends = []
    for meta, series in grouped.values():
        series.sort(key=lambda pair: (pair[0].when, pair[0].run_id))
        trends.append(Trend(**meta, points=tuple(drift_points(series, meta["direction"], threshold))))
    return sorted(trends, key=lambda t: (not t.drifted, t.case_key, t.name, t.where))


def _gpu_where(index: int | None, rank: int, uuid: str | None) -> str:
    named = f"GPU {index}" if index is not None else f"rank {rank}"
    return f"{named} ({uuid})" if uuid else named


def node_history(sessions: Iterable[SessionFacts], node: str, threshold: float = DRIFT_THRESHOLD) -> list[Trend]:
    """Every measured check of ``node``'s sessions, and every figure of its GPUs."""
    grouped: dict[tuple, tuple[dict, list]] = {}
    for session in sessions:
        if session.node != node:
            continue
        profile = session.profile_name or ""
        seen: set[tuple] = set()
        for check in session.checks:
            ident = (profile, check.case_key, check.key, "node")
            if check.measured is None or ident in seen:
                continue
            seen.add(ident)
            meta = {"profile": profile, "case_key": check.case_key, "key": check.key, "name": check.name,
                    "unit": check.unit, "direction": check.direction, "where": "node"}
            grouped.setdefault(ident, (meta, []))[1].append((session, check.measured))
        for figure in session.gpu_figures:
            where = _gpu_where(figure.gpu_index, figure.rank, figure.gpu_uuid)
            ident = (profile, figure.case_key, figure.key, f"{figure.host} {where}")
            if figure.host != node or ident in seen:
                continue
            seen.add(ident)
            meta = {"profile": profile, "case_key": figure.case_key, "key": figure.key, "name": figure.name,
                    "unit": figure.unit, "direction": figure.direction, "where": where}
            grouped.setdefault(ident, (meta, []))[1].append((session, figure.value))
    return _trends(grouped, threshold)


def gpu_history(sessions: Iterable[SessionFacts], uuid: str, threshold: float = DRIFT_THRESHOLD) -> list[Trend]:
    """Every figure of the GPU with this UUID, on whichever node it was."""
    grouped: dict[tuple, tuple[dict, list]] = {}
    for session in sessions:
        profile = session.profile_name or ""
        seen: set[tuple] = set()
        for figure in session.gpu_figures:
            ident = (profile, figure.case_key, figure.key)
            if figure.gpu_uuid != uuid or ident in seen:
                continue
            seen.add(ident)
            meta = {"profile": profile, "case_key": figure.case_key, "key": figure.key, "name": figure.name,
                    "unit": figure.unit, "direction": figure.direction, "where": f"GPU {uuid}"}
            grouped.setdefault(ident, (meta, []))[1].append((session, figure.value))
    return _trends(grouped, threshold)


# --- as text ---------------------------------------------------------------------------------


def _value(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:,.1f}"
    return f"{value:.4g}"


def _better(direction: Direction) -> str:
    return {"higher": "higher is better", "lower": "lower is better", "either": "no side is better"}[direction]


NO_REFERENCE = "no earlier sign-off to compare against"


def history_summary(trends: list[Trend], threshold: float) -> str:
    """The one line over a history: drift, no drift, or nothing to compare with."""
    drifted = [t for t in trends if t.drifted]
    uncompared = [t for t in trends if not t.compared]
    if drifted:
        return (f"DRIFT: {len(drifted)} figure{'s' if len(drifted) != 1 else ''} at least {threshold * 100:g} % "
                "worse than the median of earlier sign-offs (listed first)")
    if len(uncompared) == len(trends):
        return (f"{NO_REFERENCE}: no session before the latest signed the node off (a PASS over the full scope "
                "of a GPU profile), so drift cannot be judged")
    text = f"no drift: no latest value is {threshold * 100:g} % worse than the median of earlier sign-offs"
    if uncompared:
        text += f"; {len(uncompared)} figure{'s have' if len(uncompared) != 1 else ' has'} {NO_REFERENCE}"
    return text


def format_trends(subject: str, trends: list[Trend], threshold: float) -> str:
    """The terminal's view: drifted figures first, one line per session."""
    sessions = {p.run_id for t in trends for p in t.points}
    lines = [f"history of {subject}: {len(trends)} figure{'s' if len(trends) != 1 else ''} over "
             f"{len(sessions)} session{'s' if len(sessions) != 1 else ''}"]
    lines.append(history_summary(trends, threshold))
    for trend in trends:
        unit = f"{trend.unit}, " if trend.unit else ""
        lines += ["", f"{trend.title} ({unit}{_better(trend.direction)})"]
        for point in trend.points:
            change = (NO_REFERENCE if point.reference is None else "" if point.drift is None else
                      f"{point.drift * 100:+6.1f} % vs {_value(point.reference)}")
            mark = "  DRIFT" if point.flagged else ""
            lines.append(f"  {point.when[:19]:19s}  {point.verdict:10s} {point.node:16s} {_value(point.value):>12s}"
                         f"  {change}{mark}".rstrip())
    return "\n".join(lines)


def trends_to_dict(subject: str, trends: list[Trend], threshold: float) -> dict:
    def point(p: Point) -> dict:
        return {"run_id": p.run_id, "node": p.node, "when": p.when, "verdict": p.verdict, "value": p.value,
                "reference": p.reference, "drift": p.drift if p.drift is None or math.isfinite(p.drift) else None,
                "flagged": p.flagged}

    return {"subject": subject, "drift_threshold": threshold, "drifted": sum(t.drifted for t in trends),
            "summary": history_summary(trends, threshold), "compared": sum(t.compared for t in trends),
            "trends": [{"profile": t.profile, "case_key": t.case_key, "key": t.key, "name": t.name, "unit": t.unit,
                        "direction": t.direction, "where": t.where, "drifted": t.drifted, "compared": t.compared,
                        "points": [point(p) for p in t.points]} for t in trends]}
