"""The whole report as one view dict: every section built from the loaded inputs alone (pure)."""

from __future__ import annotations

from harness.report.format import device_word, fmt_rate
from harness.report.inputs import RunInputs
from harness.results.reading import as_dict, as_number, as_text
from harness.report.outcomes import SessionTest, collect_tests
from harness.report.sections.cases import build_case
from harness.report.sections.gpus import build_gpu_table, peer_heatmap
from harness.report.sections.kind import KindReports
from harness.report.sections.matrix import build_matrices, charts_missing, matrix_missing
from harness.report.sections.scaling import scaling_charts
from harness.report.sections.signoff import build_signoff
from harness.report.sections.telemetry import telemetry_missing
from harness.report.sections.thresholds import build_thresholds
from harness.report.sections.timeline import build_timeline
from harness.report.sections.verdict import build_verdict


def _ran(test: SessionTest) -> bool:
    """A test with something to show in Per test (not a plain skip)."""
    return bool(test.record or test.harness.get("checks")) or test.shown_outcome not in ("skipped", "xfailed",
                                                                                          "interrupted")


def _case_order(tests: list[SessionTest]):
    """Failures first, then weak before strong, by GPU count, model and precision as first seen."""
    pairs = list(dict.fromkeys((t.case.model, t.case.precision) for t in tests if t.case))
    order = {pair: index for index, pair in enumerate(pairs)}

    def key(test: SessionTest) -> tuple:
        case = test.case
        if case is None:
            return (not test.failed, True, 0, 0, test.nodeid)
        return (not test.failed, case.scaling != "weak", case.world_size, order[(case.model, case.precision)],
                test.nodeid)

    return key


def _orphans(inputs: RunInputs, tests: list[SessionTest]) -> list[dict]:
    """Run records in runs/ that no test result refers to (a case cut short, or a baseline)."""
    referenced = {as_text(t.record.get("run_id")) for t in tests} | {
        as_text(t.harness.get("baseline_run_id")) for t in tests}
    orphans = []
    for label, record in inputs.records.items():
        if as_text(record.get("run_id")) not in referenced:
            per_gpu = as_number(record.get("throughput_per_gpu"))
            orphans.append({"label": label, "status": as_text(record.get("status"), "unknown"),
                            "throughput": (f"{fmt_rate(per_gpu)} {as_text(record.get('sample_unit'), 'samples')}/s"
                                           if per_gpu is not None else "—"),
                            "reason": as_text(as_dict(record.get("failure")).get("reason"))})
    return orphans


def _units(tests: list[SessionTest]) -> dict[tuple[str, str], str]:
    """model × precision -> the unit its records measured in (images/s, sequences/s)."""
    units = {}
    for test in tests:
        if test.case and test.record.get("sample_unit"):
            units[(test.case.model, test.case.precision)] = as_text(test.record["sample_unit"]) + "/s"
    return units


def build_view(inputs: RunInputs, kinds: KindReports) -> dict:
    """Everything the template shows, from the loaded inputs alone (pure); ``kinds``: the kinds' own sections and
    per-GPU columns (harness/report/sections/kind.py), in their order, handed in by whoever renders the page."""
    header = inputs.header
    tests = collect_tests(inputs)
    signoff = build_signoff(inputs, header, tests)
    device = signoff["device"]
    cases_used = list(dict.fromkeys((t.case.model, t.case.precision) for t in tests if t.case))
    ran = [t for t in tests if _ran(t)]
    cases = [build_case(t, device) for t in sorted(ran, key=_case_order(tests))]
    return {
        "verdict": build_verdict(inputs, header, tests),
        "signoff": signoff,
        "matrices": build_matrices(tests, device),
        "matrix_missing": matrix_missing(tests),
        "cases": cases,
        "skipped": [{"nodeid": t.nodeid, "reason": t.skip_reason or "no reason given"} for t in tests if not _ran(t)],
        "orphans": _orphans(inputs, tests),
        "charts": scaling_charts(tests, device),
        "charts_missing": charts_missing(tests),
        "telemetry_cases": [c for c in cases if c["telemetry"]],
        "telemetry_missing": telemetry_missing(tests),
        "gpu_table": build_gpu_table(header, tests, kinds.gpu_columns),
        "peer_heatmap": peer_heatmap(tests),
        "kind_sections": [section(header, tests) for section in kinds.sections],
        "thresholds": build_thresholds(header, tests, cases_used, _units(tests)),
        "timeline": build_timeline(inputs),
        "device_word": device_word(device),
    }
