"""The fleet sign-off as one view dict (pure): a verdict per node, the failing checks, and every
figure's values across nodes and GPUs against the fleet median, outliers flagged.

Each node is judged on its latest *full* session of a GPU profile at level standard or long (a
node re-run in full after a repair is judged on the re-run). A partial, quick or CPU session never
makes a node PASS: after a full session it can only add a FAIL (a failure found is final); a node
with no full session is FAIL when its latest session failed, else INCOMPLETE, and says what its
latest session was. Earlier sessions are listed, not counted. Figures are compared only among
nodes judged by the same profile: an H100 node's throughput has nothing to say about an H200 node's.

The fleet verdict follows the node verdict policy: FAIL when any node failed; INCOMPLETE when
any node is incomplete, an expected node has no session, or an input could not be read; PASS
otherwise. An outlier never changes a verdict (the bound is the contract the nodes were signed off
against); it is flagged for a person to look at, worse side first.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from harness.fleet.chart import Dot, strip_chart
from harness.fleet.facts import SessionFacts, Verdict
from harness.fleet.outliers import DEFAULT_RULE, MAD_TO_SIGMA, OutlierRule, Spread, describe, spread


def fmt_value(value: float | None) -> str:
    """One decimal from 100 up (a throughput), four significant digits below (0.957, 77.1, a CV of 0.0049)."""
    if value is None or not math.isfinite(value):
        return "—"
    if abs(value) >= 100:
        return f"{value:,.1f}"
    return f"{value:.4g}"


def fmt_pct(fraction: float | None) -> str:
    return "—" if fraction is None or not math.isfinite(fraction) else f"{fraction * 100:+.1f} %"


def fmt_z(z: float) -> str:
    # outliers.robust_z is always finite; a dash rather than "inf" should one ever reach the page.
    return f"{z:+.1f}" if math.isfinite(z) else "—"


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeJudgement:
    """One node's verdict in the fleet, and the session it rests on."""

    session: SessionFacts
    """The latest full GPU session, or the latest session when the node has none."""
    verdict: Verdict
    reasons: tuple[str, ...]
    later: tuple[SessionFacts, ...]
    """Partial, quick or CPU sessions after ``session``: shown, never a PASS."""

    @property
    def node(self) -> str:
        return self.session.node


def _said(session: SessionFacts) -> str:
    return f"{session.verdict} ({session.scope_text}, {session.run_id})"


def judge_node(sessions: list[SessionFacts]) -> tuple[NodeJudgement, list[SessionFacts]]:
    """A node's verdict from all its sessions; and the sessions not shown as its own, newest first."""
    ordered = sorted(sessions, key=lambda s: (s.when, s.run_id), reverse=True)
    full_at = next((i for i, s in enumerate(ordered) if s.full_gpu_session), None)
    if full_at is None:
        latest = ordered[0]
        verdict: Verdict = "FAIL" if latest.verdict == "FAIL" else "INCOMPLETE"
        reasons = [f"no full sign-off of a GPU profile: the latest session is {_said(latest)}, not a node sign-off"]
        return NodeJudgement(session=latest, verdict=verdict, reasons=tuple(reasons), later=()), ordered[1:]
    judged, later = ordered[full_at], ordered[:full_at]
    verdict, reasons = judged.verdict, list(judged.verdict_reasons)
    failed_later = [s for s in later if s.verdict == "FAIL"]
    if failed_later:
        verdict = "FAIL"
        reasons.insert(0, f"failed in a later session: {_said(failed_later[0])}")
    elif later:
        reasons.append(f"{len(later)} later session{'s' if len(later) > 1 else ''} not counted "
                       f"(not a full sign-off): {'; '.join(_said(s) for s in later[:3])}")
    judgement = NodeJudgement(session=judged, verdict=verdict, reasons=tuple(reasons), later=tuple(later))
    return judgement, ordered[full_at + 1:]


def judge_nodes(sessions: Iterable[SessionFacts]) -> tuple[list[NodeJudgement], list[SessionFacts]]:
    """(each node's judgement, by node name; every session not judged on, newest first)."""
    by_node: dict[str, list[SessionFacts]] = {}
    for session in sessions:
        by_node.setdefault(session.node, []).append(session)
    judged, earlier = [], []
    for node in sorted(by_node):
        judgement, rest = judge_node(by_node[node])
        judged.append(judgement)
        earlier += list(judgement.later) + rest
    return judged, sorted(earlier, key=lambda s: s.when, reverse=True)


def _slug(*parts: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(parts))[:120]


def fleet_verdict(latest: list[NodeJudgement], missing: list[str], problems: list[str]) -> tuple[str, list[str]]:
    reasons = []
    failed = [s.node for s in latest if s.verdict == "FAIL"]
    incomplete = [s.node for s in latest if s.verdict == "INCOMPLETE"]
    if failed:
        reasons.append(f"{len(failed)} node{'s' if len(failed) > 1 else ''} failed: {', '.join(failed)}")
    if incomplete:
        reasons.append(f"{len(incomplete)} node{'s are' if len(incomplete) > 1 else ' is'} incomplete: "
                       f"{', '.join(incomplete)}")
    if missing:
        reasons.append(f"{len(missing)} expected node{'s have' if len(missing) > 1 else ' has'} no session: "
                       f"{', '.join(missing)}")
    if problems:
        reasons.append(f"{len(problems)} input{'s' if len(problems) > 1 else ''} could not be read (listed below)")
    if not latest:
        reasons.append("no session was found")
    if failed:
        return "FAIL", reasons
    return ("INCOMPLETE" if reasons else "PASS"), reasons


# --- figures ---------------------------------------------------------------------------------


def _calm_range(found: Spread, rule: OutlierRule) -> tuple[float, float]:
    """Where a value is not an outlier: within the z threshold (the scale is floored at the relative
    distance, so this is also within the relative floor)."""
    half = rule.z_threshold * found.scale
    return found.median - half, found.median + half


def _scale_text(found: Spread, rule: OutlierRule, unit: str) -> str:
    """What the robust z-scores of a figure divide by, in words, for the page."""
    scale = f"{fmt_value(found.scale)}{' ' + unit if unit else ''}"
    return {"mad": f"robust SD {scale} (1.4826 × MAD)",
            "floor": f"robust SD {scale} (the floor, {rule.min_relative * 100:g} % of the median / "
                     f"{rule.z_threshold:g}: 1.4826 × MAD is {fmt_value(MAD_TO_SIGMA * found.mad)})",
            "mean_ad": f"robust SD {scale} (1.2533 × the mean absolute deviation: the MAD and the median are 0)",
            "none": "every value equal"}[found.scale_basis]


def _figure(meta: dict, values: dict, extra: dict, rule: OutlierRule) -> dict | None:
    """One figure: ``values`` by (node, gpu label); ``extra`` per label: bound, passed, uuid, verdict."""
    found = spread(values, meta["direction"], rule)
    if found is None:
        return None
    rows = []
    for (node, gpu), deviation in found.deviations.items():
        more = extra[(node, gpu)]
        if more.get("passed") is False:
            state = "fail"
        elif deviation.outlier:
            state = "worse" if deviation.worse else "better"
        else:
            state = "pass"
        rows.append({"node": node, "gpu": gpu, "uuid": more.get("uuid") or "", "value": deviation.value,
                     "value_text": fmt_value(deviation.value), "deviation": deviation.relative,
                     "deviation_text": fmt_pct(deviation.relative), "robust_z": deviation.robust_z,
                     "robust_z_text": fmt_z(deviation.robust_z), "outlier": deviation.outlier,
                     "worse": deviation.worse, "state": state, "bound": more.get("bound"),
                     "bound_text": fmt_value(more.get("bound")), "passed": more.get("passed"),
                     "text": describe(f"{node} {gpu}".strip(), deviation, meta["unit"])})
    worst_first = meta["direction"] == "higher"
    rows.sort(key=lambda r: (r["value"] if worst_first else -r["value"], r["node"], r["gpu"]))
    bounds = sorted({r["bound"] for r in rows if r["bound"] is not None})[:3]
    who = "GPU" if meta["level"] == "gpu" else "node"
    chart = strip_chart(title=f"{meta['case_key']} · {meta['name']}", unit=meta["unit"], median=found.median,
                        calm_range=_calm_range(found, rule) if found.count >= rule.min_count else None, bounds=bounds,
                        dots=[Dot(label=f"{r['node']} {r['gpu']}".strip(), value=r["value"], state=r["state"])
                              for r in rows])
    return {**meta, "id": _slug(meta["level"], meta["profile"], meta["case_key"], meta["key"]),
            "median": found.median, "median_text": fmt_value(found.median), "mad": found.mad,
            "scale": found.scale, "scale_basis": found.scale_basis,
            "scale_text": _scale_text(found, rule, meta["unit"]),
            "count": found.count, "who": who, "judged": found.count >= rule.min_count, "rows": rows,
            "outliers": sum(r["outlier"] for r in rows), "chart": chart}


def node_figures(latest: list[SessionFacts], rule: OutlierRule) -> list[dict]:
    """Every numeric check measured on the nodes, one figure per (profile, case, check)."""
    grouped: dict[tuple, tuple[dict, dict, dict]] = {}
    for session in latest:
        for check in session.checks:
            if check.measured is None:
                continue
            ident = (session.profile_name or "", check.case_key, check.key)
            meta = {"level": "node", "profile": ident[0], "case_key": check.case_key, "key": check.key,
                    "name": check.name, "unit": check.unit, "direction": check.direction}
            _, values, extra = grouped.setdefault(ident, (meta, {}, {}))
            values.setdefault((session.node, ""), check.measured)
            extra.setdefault((session.node, ""), {"bound": check.bound, "passed": check.passed})
    return [f for f in (_figure(m, v, e, rule) for m, v, e in grouped.values()) if f is not None]


def gpu_figures(latest: list[SessionFacts], rule: OutlierRule) -> list[dict]:
    """Every GPU's own figures, one figure per (profile, case, figure) across all GPUs of the fleet."""
    grouped: dict[tuple, tuple[dict, dict, dict]] = {}
    for session in latest:
        for figure in session.gpu_figures:
            ident = (session.profile_name or "", figure.case_key, figure.key)
            meta = {"level": "gpu", "profile": ident[0], "case_key": figure.case_key, "key": figure.key,
                    "name": figure.name, "unit": figure.unit, "direction": figure.direction}
            _, values, extra = grouped.setdefault(ident, (meta, {}, {}))
            label = (figure.host, figure.gpu_label)
            values.setdefault(label, figure.value)
            extra.setdefault(label, {"uuid": figure.gpu_uuid})
    return [f for f in (_figure(m, v, e, rule) for m, v, e in grouped.values()) if f is not None]


# --- nodes -----------------------------------------------------------------------------------


def _gpu_text(session: SessionFacts) -> str:
    if not session.gpus:
        return "none (CPU ranks)" if session.device == "cpu" else "not recorded"
    names = Counter(g.name or "unknown GPU" for g in session.gpus)
    return "; ".join(f"{count} × {name}" for name, count in names.items())


def _failed_rows(session: SessionFacts) -> list[dict]:
    return [{"node": session.node, "case": c.case_key, "check": c.name, "measured": fmt_value(c.measured),
             "bound": fmt_value(c.bound), "comparison": c.comparison, "unit": c.unit, "note": c.note,
             "test": c.test} for c in session.failed_checks]


def node_row(judgement: NodeJudgement, outliers: list[dict]) -> dict:
    session = judgement.session
    failed = [row for s in (session, *judgement.later) for row in _failed_rows(s)]
    return {"node": session.node, "verdict": judgement.verdict, "state": judgement.verdict.lower(),
            "reasons": list(judgement.reasons), "scope": session.scope_text, "sign_off": session.sign_off is True,
            "profile": session.profile_name or "not recorded",
            "profile_sha256": session.profile_sha256 or "", "gpus": _gpu_text(session),
            "driver": session.driver_version or ("none (CPU run)" if session.device == "cpu" else "not recorded"),
            "torch": session.torch_version or "not recorded", "harness": session.harness_version or "not recorded",
            "checks": len(session.checks), "failed": failed, "failed_count": len(failed),
            "outliers": len([o for o in outliers if o["node"] == session.node]),
            "worse_outliers": len([o for o in outliers if o["node"] == session.node and o["worse"]]),
            "run_id": session.run_id, "finished": session.finished_at or "not recorded", "source": session.source}


def build_fleet(sessions: list[SessionFacts], *, problems: Sequence[str] = (), rule: OutlierRule = DEFAULT_RULE,
                expected_nodes: list[str] | None = None) -> dict[str, Any]:
    """Everything the fleet page, its JSON and its CSV show (pure)."""
    judged, earlier = judge_nodes(sessions)
    latest = [j.session for j in judged]
    found = {s.node for s in latest}
    missing = [n for n in dict.fromkeys(expected_nodes or []) if n not in found]
    unexpected = sorted(found - set(expected_nodes)) if expected_nodes else []
    figures = node_figures(latest, rule) + gpu_figures(latest, rule)
    figures.sort(key=lambda f: (-f["outliers"], f["profile"], f["case_key"], f["level"], f["name"]))
    outliers = [{**row, "figure": f["name"], "case_key": f["case_key"], "figure_id": f["id"], "unit": f["unit"],
                 "median_text": f["median_text"]} for f in figures for row in f["rows"] if row["outlier"]]
    # Worse side first; among those, nodes that passed first: a failed node is news already, an
    # outlier on a node within every bound is what only the fleet can show. Then the largest distance.
    failed_nodes = {j.node for j in judged if j.verdict != "PASS"}
    outliers.sort(key=lambda o: (not o["worse"], o["node"] in failed_nodes,
                                 -abs(o["deviation"]) if o["deviation"] is not None else -math.inf))
    verdict, reasons = fleet_verdict(judged, missing, list(problems))
    profiles = Counter((s.profile_name or "not recorded", s.profile_sha256 or "") for s in latest)
    notes = []
    if len(profiles) > 1:
        notes.append("nodes were judged against different profiles (or versions of one): "
                     + "; ".join(f"{name} {sha[:12]} ({count} node{'s' if count > 1 else ''})"
                                 for (name, sha), count in profiles.items()) + "; figures are compared per profile")
    if unexpected:
        notes.append(f"sessions of nodes not in the expected list: {', '.join(unexpected)}")
    nodes = [node_row(j, outliers) for j in judged]
    return {
        "verdict": verdict, "state": verdict.lower(), "reasons": reasons, "notes": notes,
        "problems": list(problems), "missing": missing,
        "counts": {v: sum(1 for j in judged if j.verdict == v) for v in ("PASS", "FAIL", "INCOMPLETE")},
        "node_count": len(latest), "nodes": nodes,
        "failed_checks": [row for node in nodes for row in node["failed"]],
        "outliers": outliers, "worse_outliers": sum(1 for o in outliers if o["worse"]), "figures": figures,
        "earlier": [{"node": s.node, "verdict": s.verdict, "scope": s.scope_text, "run_id": s.run_id,
                     "finished": s.finished_at or "", "source": s.source} for s in earlier],
        "rule": {"z_threshold": rule.z_threshold, "min_relative": rule.min_relative, "min_count": rule.min_count},
    }
