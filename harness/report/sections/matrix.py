"""The matrix: model × precision rows, GPU-count columns, one table per scaling mode, a badge per case.

Cases are placed by the identity the session recorded (``case_id``); a result without one (an
older harness, a damaged file) cannot be placed and is listed under "Per test" only.
"""

from __future__ import annotations

from harness.cases import SCALINGS, CaseId
from harness.report.format import device_word, fmt_number, fmt_rate, short_unit
from harness.results.reading import as_dict, as_number, as_text, clean_text
from harness.report.outcomes import SessionTest, cases_not_recorded, efficiency_check
from harness.report.sections.cases import case_anchor, check_rows

_TITLES = {"weak": "Weak scaling (per-GPU batch fixed)", "strong": "Strong scaling (global batch fixed)"}


def _cell_note(test: SessionTest) -> str:
    record = test.record
    failed = [c["name"] for c in check_rows(test.harness) if c["state"] == "fail"]
    if test.shown_outcome in ("skipped", "interrupted"):
        return test.skip_reason
    if record.get("failure"):
        return as_text(as_dict(record["failure"]).get("reason"))
    if failed:
        return "failed: " + ", ".join(failed)
    if test.outcome in ("failed", "error") and test.message.strip():
        return test.message.splitlines()[0]
    return ""


def _cell(test: SessionTest, case: CaseId) -> dict:
    record = test.record
    unit = short_unit(as_text(record.get("sample_unit"), "samples") + "/s")
    per_gpu = as_number(record.get("throughput_per_gpu"))
    efficiency, _ = test.check_value(efficiency_check(case.scaling))
    return {"state": test.state, "label": test.label,
            "throughput": f"{fmt_rate(per_gpu)} {unit}" if per_gpu is not None else "",
            "efficiency": fmt_number(efficiency) if efficiency is not None else "",
            "note": clean_text(_cell_note(test), 160, one_line=True), "anchor": case_anchor(test),
            "linked": bool(test.harness) or test.outcome in ("failed", "error")}


def _column_label(nodes: int, gpus: int, device: str) -> str:
    if nodes == 1:
        return f"{gpus} {device_word(device, gpus)}"
    return f"{nodes} × {gpus} {device_word(device, gpus)}"


def _matrix(scaling: str, cased: list[tuple[SessionTest, CaseId]], device: str) -> dict:
    pairs = list(dict.fromkeys((case.model, case.precision) for _, case in cased))
    models = list(dict.fromkeys(m for m, _ in pairs))
    rows = sorted(pairs, key=lambda pair: (models.index(pair[0]), pairs.index(pair)))
    # A column is a layout: 8 GPUs on one node and 2 nodes × 4 GPUs are different cases.
    columns = sorted({(case.world_size, case.nodes, case.gpus) for _, case in cased})
    cells = {(case.model, case.precision, case.nodes, case.gpus): _cell(test, case) for test, case in cased}
    return {
        "scaling": scaling, "title": _TITLES[scaling],
        "columns": [{"count": world, "label": _column_label(nodes, gpus, device)} for world, nodes, gpus in columns],
        "rows": [{"model": m, "precision": p, "cells": [cells.get((m, p, nodes, gpus)) for _, nodes, gpus in columns],
                  "model_rows": sum(1 for other, _ in rows if other == m) if i == 0 or rows[i - 1][0] != m else 0}
                 for i, (m, p) in enumerate(rows)],
    }


def build_matrices(tests: list[SessionTest], device: str) -> list[dict]:
    matrices = []
    for scaling in SCALINGS:
        cased = [(t, case) for t in tests if (case := t.case) is not None and case.scaling == scaling]
        if cased:
            matrices.append(_matrix(scaling, cased, device))
    return matrices


def matrix_missing(tests: list[SessionTest]) -> str:
    """Why the matrix is empty: no case ran, or the results did not record which case they were."""
    unplaced = cases_not_recorded(tests)
    if unplaced:
        return f"Case identities not recorded: {unplaced}; each is listed under Per test by its test id."
    return "No acceptance case was recorded."


def charts_missing(tests: list[SessionTest]) -> str:
    """Why no scaling chart is drawn."""
    unplaced = cases_not_recorded(tests)
    return f"Not charted, case identities not recorded: {unplaced}." if unplaced else "No measurements to chart."
