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
import re
from datetime import datetime

from harness.fleet.facts import VERDICTS, SessionFacts

TEXTFILE_NAME = "harness_acceptance.prom"
"""The file in node_exporter's textfile directory (one per node)."""
RUN_DIR_NAME = "metrics.prom"
"""The same text kept in the session's report directory."""

_METRICS = {
    "harness_session_info": ("gauge", "The latest acceptance session of this node (always 1; its facts are labels)."),
    "harness_session_verdict": ("gauge", "1 for the latest session's verdict (PASS, FAIL or INCOMPLETE), "
                                         "0 for the others; scope, level and sign_off say what the session covered."),
    "harness_session_sign_off": ("gauge", "1 when the latest session signed the node off (PASS over the full scope "
                                          "of a GPU profile at level standard or long), else 0."),
    "harness_session_end_timestamp_seconds": ("gauge", "When the latest session ended (Unix time)."),
    "harness_session_checks": ("gauge", "Checks of the latest session by result: passed, failed, not_evaluated."),
    "harness_check_ratio_to_bound": ("gauge", "Each measured check's value divided by its bound (unitless; >= 1 "
                                              "passes a lower bound, <= 1 an upper bound)."),
    "harness_check_passed": ("gauge", "1 when the check passed, 0 when it failed (not-evaluated checks are left out)."),
}
"""The fixed metrics. Each measured check and GPU figure also gets a metric of its own unit
(``harness_check_measured_images_per_second``, ``harness_check_bound_gigabytes_per_second``,
``harness_gpu_figure_watts``), so one metric never mixes units."""

_UNIT_WORDS = {"images/s": "images_per_second", "sequences/s": "sequences_per_second", "tokens/s": "tokens_per_second",
               "samples/s": "samples_per_second", "GB/s": "gigabytes_per_second", "TFLOP/s": "teraflops_per_second",
               "GiB": "gibibytes", "MHz": "megahertz", "W": "watts", "%": "percent", "°C": "celsius",
               "us": "microseconds", "ms": "milliseconds", "s": "seconds", "": "ratio", "x": "ratio"}


def unit_suffix(unit: str) -> str:
    """A unit as a metric-name suffix (Prometheus' conventions: base words, ``_per_second``)."""
    known = _UNIT_WORDS.get(unit.strip())
    if known:
        return known
    return re.sub(r"[^a-z0-9]+", "_", unit.strip().lower().replace("/s", "_per_second")).strip("_") or "ratio"


def _help_for(name: str) -> tuple[str, str]:
    for prefix, text in (("harness_check_measured_", "Each measured check's value"),
                         ("harness_check_bound_", "Each measured check's bound from the threshold profile"),
                         ("harness_gpu_figure_", "Each GPU's own figure in each case (throughput alone, compute "
                                                 "throughput, telemetry)")):
        if name.startswith(prefix):
            return "gauge", f"{text}, in {name.removeprefix(prefix).replace('_', ' ')}."
    return _METRICS[name]


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


def scope_labels(session: SessionFacts) -> dict[str, str]:
    """What the session covered, as labels: an alert can tell a sign-off from a partial, quick or CPU PASS."""
    def flag(value: bool | None) -> str:
        return "unknown" if value is None else str(value).lower()
    scope = session.scope or "unknown"
    return {"scope": "partial" if scope.startswith("partial") else scope, "level": session.level or "unknown",
            "cpu_self_check": flag(session.cpu_self_check), "sign_off": flag(session.sign_off)}


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
        samples.setdefault(name, {}).setdefault(series, f"{series} {_number(value)}")

    scope = scope_labels(session)
    add("harness_session_info", {**node, "run_id": session.run_id, "profile": session.profile_name or "",
                                 "profile_sha256": session.profile_sha256 or "", "driver": session.driver_version or "",
                                 "torch": session.torch_version or "", "harness": session.harness_version or "",
                                 **scope, "scope_text": session.scope_text}, 1)
    for verdict in VERDICTS:
        add("harness_session_verdict", {**node, "verdict": verdict, **scope}, 1 if session.verdict == verdict else 0)
    add("harness_session_sign_off", node, 1 if session.sign_off and session.verdict == "PASS" else 0)
    ended = _end_time(session)
    if ended is not None:
        add("harness_session_end_timestamp_seconds", node, ended)
    tally = {"passed": 0, "failed": 0, "not_evaluated": 0}
    for check in session.checks:
        tally["passed" if check.passed else "not_evaluated" if check.passed is None else "failed"] += 1
        labels = {**node, "case": check.case_key, "check": check.key}
        suffix = unit_suffix(check.unit)
        if check.measured is not None:
            add(f"harness_check_measured_{suffix}", labels, check.measured)
            if check.bound is not None:
                add(f"harness_check_bound_{suffix}", labels, check.bound)
                if check.bound != 0:
                    add("harness_check_ratio_to_bound", labels, check.measured / check.bound)
        if check.passed is not None:
            add("harness_check_passed", labels, int(check.passed))
    for result, count in tally.items():
        add("harness_session_checks", {**node, "result": result}, count)
    for figure in session.gpu_figures:
        add(f"harness_gpu_figure_{unit_suffix(figure.unit)}",
            {**node, "host": figure.host, "gpu": figure.gpu_label.removeprefix("GPU "),
             "uuid": figure.gpu_uuid or "", "case": figure.case_key, "figure": figure.key}, figure.value)
    lines = []
    for name, series in samples.items():
        if series:
            kind, help_text = _help_for(name)
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *series.values()]
    return "\n".join(lines) + "\n"
