"""A session's verdict and key figures in Prometheus text format, for node_exporter's textfile collector.

node_exporter (``--collector.textfile.directory=DIR``) exposes every ``DIR/*.prom`` file on each
scrape; a file must be written whole and renamed into place, or a scrape may read half of it.
Each node keeps one file, ``harness_acceptance.prom``, overwritten by its latest session: gauges
describe the latest sign-off, and series do not multiply with every run (the run id is a label
of the info metric only).

Pure text building; written by harness.fleet.textfile (whole, then renamed into place).
"""

from __future__ import annotations

import math
from datetime import datetime

from harness.fleet.facts import VERDICTS, SessionFacts

TEXTFILE_NAME = "harness_acceptance.prom"
"""The file in node_exporter's textfile directory (one per node)."""
RUN_DIR_NAME = "metrics.prom"
"""The same text kept in the session's report directory."""

_METRICS = {
    "harness_session_info": ("gauge", "The latest acceptance session of this node (always 1; its facts are labels)."),
    "harness_session_verdict": ("gauge", "1 for the latest session's verdict (PASS, FAIL or INCOMPLETE), "
                                         "0 for the others."),
    "harness_session_end_timestamp_seconds": ("gauge", "When the latest session ended (Unix time)."),
    "harness_session_checks": ("gauge", "Checks of the latest session by result: passed, failed, not_evaluated."),
    "harness_check_measured": ("gauge", "Each measured check's value, in the unit of its unit label."),
    "harness_check_bound": ("gauge", "Each measured check's bound from the threshold profile."),
    "harness_check_passed": ("gauge", "1 when the check passed, 0 when it failed (not-evaluated checks are left out)."),
    "harness_gpu_figure": ("gauge", "Each GPU's own figure in each case (throughput alone, compute throughput, "
                                    "telemetry)."),
}


def escape_label(value: str) -> str:
    """Label values escape backslash, double quote and newline (the exposition format's rules)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _series(name: str, labels: dict[str, str]) -> str:
    inner = ",".join(f'{key}="{escape_label(str(text))}"' for key, text in labels.items())
    return f"{name}{{{inner}}}"


def _number(value: float) -> str:
    """A finite value (``add`` leaves the others out) as the exposition format writes it."""
    return repr(float(value)) if value != int(value) or abs(value) >= 1e15 else str(int(value))


def _end_time(session: SessionFacts) -> float | None:
    for text in (session.finished_at, session.started_at):
        try:
            return datetime.fromisoformat(text).timestamp() if text else None
        except ValueError:
            continue
    return None


def exposition(session: SessionFacts) -> str:
    """The text a textfile collector serves for this session."""
    node = {"node": session.node}
    samples: dict[str, dict[str, str]] = {name: {} for name in _METRICS}

    def add(name: str, labels: dict[str, str], value: float) -> None:
        # One sample per series: a second check with the same labels would make the file invalid.
        # No NaN or ±Inf sample: the format allows them, but neither is a measurement (and NaN makes
        # every alert comparison false); such a value is left out, as a check not evaluated is.
        if not math.isfinite(value):
            return
        series = _series(name, labels)
        samples[name].setdefault(series, f"{series} {_number(value)}")

    add("harness_session_info", {**node, "run_id": session.run_id, "profile": session.profile_name or "",
                                 "profile_sha256": session.profile_sha256 or "", "driver": session.driver_version or "",
                                 "torch": session.torch_version or "", "harness": session.harness_version or ""}, 1)
    for verdict in VERDICTS:
        add("harness_session_verdict", {**node, "verdict": verdict}, 1 if session.verdict == verdict else 0)
    ended = _end_time(session)
    if ended is not None:
        add("harness_session_end_timestamp_seconds", node, ended)
    tally = {"passed": 0, "failed": 0, "not_evaluated": 0}
    for check in session.checks:
        tally["passed" if check.passed else "not_evaluated" if check.passed is None else "failed"] += 1
        labels = {**node, "case": check.case_key, "check": check.key, "unit": check.unit}
        if check.measured is not None:
            add("harness_check_measured", labels, check.measured)
            if check.bound is not None:
                add("harness_check_bound", labels, check.bound)
        if check.passed is not None:
            add("harness_check_passed", labels, int(check.passed))
    for result, count in tally.items():
        add("harness_session_checks", {**node, "result": result}, count)
    for figure in session.gpu_figures:
        add("harness_gpu_figure", {**node, "host": figure.host, "gpu": figure.gpu_label.removeprefix("GPU "),
                                   "uuid": figure.gpu_uuid or "", "case": figure.case_key, "figure": figure.key,
                                   "unit": figure.unit}, figure.value)
    lines = []
    for name, (kind, help_text) in _METRICS.items():
        if samples[name]:
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *samples[name].values()]
    return "\n".join(lines) + "\n"
