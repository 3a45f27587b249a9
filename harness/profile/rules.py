"""Rules that relate several keys of a threshold file: name vs file name, hardware match, peak
TFLOP/s per precision, matrix coverage, strong-scaling divisibility, run durations against the timeout.

Each rule sees the raw tables (to tell "absent" from "invalid", which the schema already
reported) and the checked values, and adds its problems to the file's ProblemReport.
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping

from harness.catalog import PRECISIONS
from harness.durations import default_max_measure_seconds
from harness.profile.bounds import RunSettings
from harness.profile.problems import ProblemReport


def check_relations(raw: Mapping[str, Any], checked: Mapping[str, Any], stem: str, report: ProblemReport) -> None:
    """Every rule that relates keys; ``stem`` is the file name without .toml."""
    _check_name(checked, stem, report)
    _check_hardware(raw, checked, report)
    _check_peak_per_precision(raw, checked, report)
    _check_matrix_cases(raw, checked, report)
    _check_strong_scaling(checked, report)
    _check_run(raw, checked, report)
    _check_node(raw, checked, report)


def _table_at(raw: Mapping[str, Any], *keys: str) -> Mapping[str, Any] | None:
    """The raw table at ``keys``; {} when absent; None when something on the way is not a table."""
    table: Any = raw
    for key in keys:
        table = table.get(key, {})
        if not isinstance(table, dict):
            return None
    return table


def _check_name(checked: Mapping[str, Any], stem: str, report: ProblemReport) -> None:
    name = checked.get("hardware", {}).get("name")
    if name is not None and name != stem:
        report.add(("hardware", "name"), f"must equal the file name without .toml ({json.dumps(stem)}); "
                   "rename the file or change the name", name)


def _check_hardware(raw: Mapping[str, Any], checked: Mapping[str, Any], report: ProblemReport) -> None:
    raw_hardware = _table_at(raw, "hardware")
    raw_match = _table_at(raw, "hardware", "match")
    hardware = checked.get("hardware", {})
    match = hardware.get("match", {})
    device = hardware.get("device")
    if device == "cuda" and raw_match is not None and "gpu_name_contains" not in raw_match:
        report.add(("hardware", "match", "gpu_name_contains"), "required key is missing for a cuda profile: how the "
                   "harness recognises the GPU, e.g. match = { gpu_name_contains = \"H200\", min_memory_gib = 130 }")
    if device == "cpu":
        for key, value in match.items():
            report.add(("hardware", "match", key), "a cpu profile matches no GPU; leave hardware.match out", value)
    low, high = match.get("min_memory_gib"), match.get("max_memory_gib")
    if low is not None and high is not None and high < low:
        assert raw_match is not None  # both bounds were read from it
        report.add(("hardware", "match", "max_memory_gib"), f"must be >= min_memory_gib ({low:g}); no GPU could match",
                   raw_match["max_memory_gib"])
    if raw_hardware is None:
        return
    peak_tflops = hardware.get("peak_tflops")
    if device == "cuda" and "peak_tflops" not in raw_hardware:
        report.add(("hardware", "peak_tflops"), "required key is missing for a cuda profile: dense per-GPU peak "
                   "TFLOP/s per precision, for MFU, e.g. peak_tflops = { bf16 = 989, fp16 = 989, fp32 = 67 }")
    if peak_tflops and "peak_tflops_source" not in raw_hardware:
        report.add(("hardware", "peak_tflops_source"), "required key is missing when peak_tflops is given: "
                   "cite the datasheet (dense figures, not 2:4 sparse)")


def _check_peak_per_precision(raw: Mapping[str, Any], checked: Mapping[str, Any], report: ProblemReport) -> None:
    """On cuda, every precision a case runs needs its peak, or its MFU silently goes missing."""
    hardware = checked.get("hardware", {})
    peak_tflops = hardware.get("peak_tflops")
    if hardware.get("device") != "cuda" or peak_tflops is None:
        return
    for precision in PRECISIONS:
        cases = [f"[models.{model}.{precision}]" for model, case_precision in checked.get("models", {})
                 if case_precision == precision]
        if cases and precision not in peak_tflops:
            report.add(("hardware", "peak_tflops"), f"has no {precision} entry, but {', '.join(cases)} runs "
                       f"{precision}; add {precision} = <dense TFLOP/s per GPU> (MFU needs it)",
                       raw["hardware"]["peak_tflops"])


def _check_matrix_cases(raw: Mapping[str, Any], checked: Mapping[str, Any], report: ProblemReport) -> None:
    """Every model x precision of the default matrix needs its case table: its batch size lives there."""
    defaults = checked.get("defaults", {})
    raw_models = _table_at(raw, "models")
    if raw_models is None or "models" not in defaults or "precisions" not in defaults:
        return
    for model in defaults["models"]:
        raw_cases = raw_models.get(model, {})
        for precision in defaults["precisions"]:
            if isinstance(raw_cases, dict) and precision not in raw_cases:
                report.add(("models", model, precision), f"required table is missing: defaults.models and "
                           f"defaults.precisions put {model} x {precision} in the default matrix; add "
                           f"[models.{model}.{precision}] with batch_size_per_gpu and source, or take it out of "
                           "the matrix")


def _check_strong_scaling(checked: Mapping[str, Any], report: ProblemReport) -> None:
    for (model, precision), case in checked.get("models", {}).items():
        where = ("models", model, precision)
        efficiency_by_count = case.get("min_strong_efficiency")
        global_batch_size = case.get("strong_global_batch_size")
        if efficiency_by_count and global_batch_size is None:
            report.add((*where, "min_strong_efficiency"), "needs strong_global_batch_size in the same table: strong "
                       "scaling fixes the global batch", efficiency_by_count)
        if not efficiency_by_count or global_batch_size is None:
            continue
        uneven_counts = [count for count in efficiency_by_count if global_batch_size % count]
        if uneven_counts:
            multiple = math.lcm(*efficiency_by_count)
            listed = ", ".join(str(count) for count in uneven_counts)
            report.add((*where, "strong_global_batch_size"), f"not divisible by {listed} (GPU counts in "
                       f"min_strong_efficiency); the global batch must split evenly over the GPUs: use a multiple "
                       f"of {multiple}", global_batch_size)


def _check_run(raw: Mapping[str, Any], checked: Mapping[str, Any], report: ProblemReport) -> None:
    """The durations must make a launch that can end before its timeout, default values included."""
    run = checked.get("run", {})
    raw_run = _table_at(raw, "run") or {}
    if any(key in raw_run and key not in run for key in _RUN_TIMES):
        return  # an invalid value is reported already; relating it to the others would only repeat that
    defaults = RunSettings()
    measure = run.get("measure_seconds", defaults.measure_seconds)
    if "max_measure_seconds" in run and run["max_measure_seconds"] < measure:
        report.add(("run", "max_measure_seconds"), f"must be at least measure_seconds ({measure:g} s), the least "
                   "an adaptive window lasts", raw_run["max_measure_seconds"])
        return
    warmup = run.get("warmup_seconds", defaults.warmup_seconds)
    timeout = run.get("timeout_seconds", defaults.timeout_seconds)
    if run.get("ci_target", defaults.ci_target) > 0:
        # An adaptive window that never reaches its CI target runs to its cap: the launch must outlast it.
        longest = run.get("max_measure_seconds", default_max_measure_seconds(measure))
        busy_seconds = warmup + longest
        sum_of = ("warmup_seconds + max_measure_seconds" if "max_measure_seconds" in run else
                  f"warmup_seconds + the default max_measure_seconds (6 x measure_seconds + 10 = {longest:g} s)")
    else:
        busy_seconds = warmup + measure
        sum_of = "warmup_seconds + measure_seconds"
    if timeout > busy_seconds:
        return
    if "timeout_seconds" in run:
        report.add(("run", "timeout_seconds"), f"must exceed {sum_of} ({busy_seconds:g} s), with room for start-up "
                   "and model build", raw_run["timeout_seconds"])
    else:
        report.add(("run", "timeout_seconds"), f"is not set, and its default ({timeout:g} s) does not exceed "
                   f"{sum_of} ({busy_seconds:g} s): every launch would time out; set timeout_seconds above "
                   f"{busy_seconds:g} s, with room for start-up and model build")


_RUN_TIMES = ("warmup_seconds", "measure_seconds", "timeout_seconds", "ci_target", "max_measure_seconds")


def _check_node(raw: Mapping[str, Any], checked: Mapping[str, Any], report: ProblemReport) -> None:
    """A cpu profile has CPU ranks, not GPUs per node: a [node] there would mean nothing."""
    raw_node = _table_at(raw, "node")
    if checked.get("hardware", {}).get("device") == "cpu" and raw_node:
        report.add(("node", "gpus_per_node"), "a cpu profile has no GPUs per node; leave [node] out (state "
                   "--expect-gpus N to require N CPU ranks)", raw_node.get("gpus_per_node", ""))
