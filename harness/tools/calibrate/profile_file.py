"""The calibrated profile as a file: its TOML text (provenance, method, margins and warnings as comments,
the measured medians and spreads next to every bound), validated with ``harness.profile.schema`` and
written atomically."""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from harness.definitions import current_id
from harness.node.hardware import Hardware
from harness.profile.bounds import Profile
from harness.kinds.shipped import load_shipped_profile
from harness.profile.load import ThresholdError
from harness.files import write_json_atomic
from harness.tools.calibrate import CalibrationError
from harness.tools.calibrate.bounds import CaseMeasurement, DerivedBounds
from harness.tools.calibrate.components import components_lines
from harness.tools.calibrate.health import (MIN_RUNS, POWER_MARGIN, UNIFORMITY_DEFICIT_FACTOR, UTIL_CASE_MARGIN_PCT,
                                            HealthBound, HealthBounds)
from harness.tools.calibrate.plan import CalibrationPlan
from harness.tools.calibrate.provenance import Provenance

MEMORY_MATCH_TOLERANCE = 0.10
"""The match rule accepts GPUs of the calibrated name with memory within ±10 % of this node's: it tells
40 from 80 GB and 94 from 141 GB parts apart, and tolerates what ECC and driver versions reserve."""


# ---------------------------------------------------------------------------------------------
# TOML values


def _toml_string(text: str) -> str:
    # A JSON string is a TOML basic string, once DEL (which JSON leaves raw and TOML forbids) is escaped too.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _comment_text(text: str) -> str:
    """``text`` for a ``#`` comment line: a newline in --records-dir or the command line would end the
    comment and put the rest into the profile as TOML (issue 31); control characters are written escaped."""
    return _toml_string(str(text))[1:-1]


def _toml_number(value: float) -> str:
    if float(value).is_integer() and abs(value) >= 100:
        return str(int(value))
    return repr(float(value))


def _toml_count_table(table: dict[int, float]) -> str:
    return "{ " + ", ".join(f"{count} = {_toml_number(value)}" for count, value in sorted(table.items())) + " }"


def _toml_inline(table: Mapping[str, str | float]) -> str:
    items = []
    for key, value in table.items():
        shown = _toml_string(value) if isinstance(value, str) else _toml_number(value)
        items.append(f"{key} = {shown}")
    return "{ " + ", ".join(items) + " }"


def _with_comment(line: str, comment: str, column: int = 62) -> str:
    return f"{line.ljust(column)}# {comment}" if comment else line


def _per_count(values: Sequence[str]) -> str:
    return " / ".join(values)


# ---------------------------------------------------------------------------------------------
# Facts of the node


def match_rule(hw: Hardware, device: str) -> dict[str, str | float]:
    """The [hardware] match of the detected hardware: its NVML name and memory ±10 %; {} on cpu."""
    if device == "cpu":
        return {}
    memory = min(gpu.memory_total_gib for gpu in hw.gpus)
    assert hw.gpu_name is not None  # a node with GPUs (min() above needs them) has a GPU name
    return {"gpu_name_contains": hw.gpu_name,
            "min_memory_gib": math.floor(memory * (1 - MEMORY_MATCH_TOLERANCE)),
            "max_memory_gib": math.ceil(memory * (1 + MEMORY_MATCH_TOLERANCE))}


def run_timeout_seconds(cases: Sequence[CaseMeasurement], warmup_seconds: float, measure_seconds: float) -> int:
    """3 x the longest launch seen, and at least warmup + measure + 60 s, rounded up to 10 s."""
    longest = max((c.launch_s_max for case in cases for c in case.counts), default=0.0)
    floor_s = warmup_seconds + measure_seconds + 60
    return int(math.ceil(max(3 * longest, floor_s) / 10) * 10)


# ---------------------------------------------------------------------------------------------
# The text


@dataclass(frozen=True, kw_only=True, slots=True)
class Measured:
    """Everything a calibration measured, as the file states it."""

    cases: Sequence[CaseMeasurement]
    bounds: dict[tuple[str, str], DerivedBounds]
    health: HealthBounds
    components: tuple[dict[str, Any], list[str]] | None = None
    """([components] values, how each came or why left out); None: not asked for (--components)."""


def render_profile(plan: CalibrationPlan, hw: Hardware, measured: Measured, prov: Provenance,
                   warnings: Sequence[str]) -> str:
    """The profile's TOML text: header (provenance, method, margins, warnings), tables, per-case comments."""
    lines = _header_lines(plan, prov, warnings)
    lines += _hardware_lines(plan, hw, prov)
    lines += _run_and_defaults_lines(plan, measured, prov)
    for case in measured.cases:
        own = measured.health.cases.get((case.model, case.precision), ())
        lines += _case_lines(plan, case, measured.bounds[(case.model, case.precision)], own, prov)
    lines += _stack_lines(prov)
    lines += _definition_lines(measured.components is not None)
    if measured.components is not None:
        values, rules = measured.components
        values = {key: {hw.gpu_count: value} if "_concurrent_" in key else value for key, value in values.items()}
        lines += components_lines(values, rules, f"measured by harness calibrate on {', '.join(prov.hosts)} "
                                                 f"{prov.date} ({prov.device_name}; {prov.software}): {plan.repeats} "
                                                 f"runs; {'; '.join(rules)}; records {prov.records_dir}/components")
    return "\n".join(lines) + "\n"


def shapes(plan: CalibrationPlan) -> dict[str, tuple[int, ...]]:
    """The GPU counts each table bound was measured at, as keyed in the profile (harness/checks/shapes.py):
    the 1-GPU case ran on ``independent_gpus`` GPUs at once, each N-GPU case on N together. A health bound
    pooled over every case is written for each of those counts: it was measured on each of them."""
    at_once = tuple(sorted({plan.independent_gpus, *(n for n in plan.gpu_counts if n > 1)}))
    together = tuple(n for n in at_once if n > 1)
    return {"min_samples_per_sec_per_gpu": (plan.independent_gpus,), "max_straggler_ratio": together,
            "min_gpu_uniformity": (plan.independent_gpus,) if plan.independent_gpus > 1 else (),
            "min_gpu_utilization_pct": at_once, "min_power_fraction_of_limit": at_once, "max_step_time_cv": at_once}


def _bound_lines(bounds: Sequence[HealthBound], plan: CalibrationPlan) -> list[str]:
    """Each written health bound (a table by the GPU counts it was measured at) with its rule as a comment;
    each left out as a comment saying why."""
    def shown(value: float) -> str:
        return str(value) if isinstance(value, int) else _toml_number(value)  # a whole percent stays whole

    counts = shapes(plan)
    lines = []
    for b in bounds:
        if b.value is None or (b.key in counts and not counts[b.key]):
            lines.append(f"# {b.key} left out: {b.rule if b.value is None else 'no GPU count it applies to'}")
        elif b.key in counts:
            table = "{ " + ", ".join(f"{n} = {shown(b.value)}" for n in counts[b.key]) + " }"
            lines.append(_with_comment(f"{b.key} = {table}", b.rule))
        else:
            lines.append(_with_comment(f"{b.key} = {shown(b.value)}", b.rule))
    return lines


SEED_DEFINITION = "calibrate-seed: one launch per case"
"""What ``harness calibrate`` (measuring) records for its training bounds: it launches each case alone, not as
a session does (harness/definitions.py), so they seed a profile that acceptance sessions can run with and
``harness calibrate fit`` derives the judged bounds from."""


def _definition_lines(components: bool) -> list[str]:
    lines = ["", "# How each family above was measured (harness/definitions.py). The training bounds come from",
             "# one launch per case: shown, not judged, until `harness calibrate fit` derives them from sessions.",
             "[definitions]", f"training = {_toml_string(SEED_DEFINITION)}"]
    if components:
        lines.append(f"components = {_toml_string(current_id('components'))}")
    return lines


def _health_text(bounds: Sequence[HealthBound]) -> str:
    return "; ".join(b.text for b in bounds)


def _stack_lines(prov: Provenance) -> list[str]:
    """[stack]: the versions every record gave; one that differs between records is left out, and said."""
    known = {key: value for key, value in (("torch", prov.torch), ("cuda", prov.cuda), ("nccl", prov.nccl),
                                           ("driver", prov.driver)) if value}
    mixed = [key for key, value in known.items() if " / " in value]
    lines = ["", "# The stack every bound above was measured on (the records' versions): a run on another is told so.",
             "[stack]"]
    lines += [f"{key} = {_toml_string(value)}" for key, value in known.items() if key not in mixed]
    source = f"versions recorded in every run record of this calibration ({prov.records_dir}/runs)"
    if mixed:
        source += f"; left out: {', '.join(mixed)} (the records disagree: {', '.join(known[k] for k in mixed)})"
    lines.append(f"source = {_toml_string(source)}")
    return lines


def _header_lines(plan: CalibrationPlan, prov: Provenance, warnings: Sequence[str]) -> list[str]:
    """The comments at the top: the node, the software, the command, the method, the margins, the warnings."""
    m = plan.margins
    counts_text = "/".join(str(g) for g in plan.gpu_counts)
    lines = [
        f"# {plan.name}: made by `harness calibrate` on a node assumed healthy. Every bound below is",
        "# MEASURED on that node (not published): a slower node fails, a node like it passes.",
        "#",
        f"# Node:       {_comment_text(prov.node)}",
        f"# Software:   {_comment_text(prov.software)}",
        f"# When:       {prov.started_at} .. {prov.finished_at} (UTC)",
        f"# Command:    {_comment_text(prov.command_line)}",
        f"# Records:    {_comment_text(prov.records_dir)}/runs/*.json (`harness compare` reads them)",
        f"# Method:     weak scaling at {counts_text} {'GPUs' if plan.device == 'cuda' else 'CPU ranks (gloo)'}; "
        f"{plan.repeats} repeat{'s' if plan.repeats != 1 else ''} of the whole matrix, one after the other",
        f"#             (so slow drift hits every case alike); warmup >= {plan.warmup_seconds:g} s, measured window "
        f"{plan.measure_seconds:g} s. The 1-GPU case ran on {plan.independent_gpus} "
        f"{'GPUs' if plan.device == 'cuda' else 'CPU ranks'} at once, each its own model, as the acceptance",
        "#             suite runs it: each GPU's own rate, their median the 1-GPU figure.",
        "# Statistics: per case and GPU count the median of the repeats; spread = (max - min) / median;",
        "#             efficiency = per-GPU throughput at N / at 1 GPU within a repeat, then its median.",
        "# Bounds:     min_samples_per_sec_per_gpu = lowest median over the GPU counts x "
        f"(1 - {m.throughput:g}), rounded down",
        f"#             min_weak_efficiency         = median efficiency - {m.efficiency:g}, rounded down",
        "#             max_straggler_ratio         = " + (
            f"1 + {m.straggler_factor:g} x (highest of any multi-GPU run - 1), rounded up" if m.straggler_factor
            is not None else "not bounded (--straggler-factor off)"),
        "#             max_step_time_cv            = " + (
            f"per case: its highest + {m.step_time_cv:g}, rounded up" if m.step_time_cv is not None
            else "not bounded (--cv-margin off)"),
        f"#             min_gpu_utilization_pct     = per case: its lowest of any GPU - {UTIL_CASE_MARGIN_PCT:g} "
        "points, rounded down",
        f"#             min_power_fraction_of_limit = lowest of any GPU in any case x {POWER_MARGIN:g}, rounded down",
        f"#             min_gpu_uniformity          = 1 - {UNIFORMITY_DEFICIT_FACTOR:g} x the worst (1 - slowest GPU / "
        "median GPU) of any run, rounded down",
        f"#             A health bound needs {MIN_RUNS} runs or more: with fewer it is left out, and said so below.",
        "#             Strong scaling is not calibrated: add strong_global_batch_size and min_strong_efficiency",
        "#             by hand (thresholds/README.md) if the node should be held to it.",
    ]
    if warnings:
        lines.append("# WARNINGS during calibration (the repeats disagreed; see docs/calibration.md):")
        lines.extend(f"#   {_comment_text(warning)}" for warning in warnings)
    else:
        lines.append("# Warnings:   none (every case's repeats agreed within the margins).")
    return lines


def _hardware_lines(plan: CalibrationPlan, hw: Hardware, prov: Provenance) -> list[str]:
    """schema_version and [hardware]: name, description, device; on cuda the match rule and the peaks."""
    lines = ["", "schema_version = 1", "", "[hardware]", f"name = {_toml_string(plan.name)}"]
    description = plan.description or (
        f"{prov.device_name}, {prov.memory_gib:.0f} GiB per GPU; calibrated on {', '.join(prov.hosts)} {prov.date}"
        if plan.device == "cuda" else
        f"CPU ranks (gloo) on {', '.join(prov.hosts)}, calibrated {prov.date}: checks the harness, not the CPU's speed")
    lines += [f"description = {_toml_string(description)}", f"device = {_toml_string(plan.device)}"]
    if plan.device == "cuda":
        rule = match_rule(hw, plan.device)
        lines.append("# The NVML name of the calibrated GPU and its memory +-10 %: edit to widen or narrow the match.")
        lines.append(f"match = {_toml_inline(rule)}")
        lines.append(f"peak_tflops = {_toml_inline(plan.peak_tflops)}")
        lines.append(f"peak_tflops_source = {_toml_string(plan.peak_tflops_source or '')}")
    return lines


def _run_and_defaults_lines(plan: CalibrationPlan, measured: Measured, prov: Provenance) -> list[str]:
    """[run] (the durations calibrated with, a timeout from the launches seen) and [defaults] (the matrix and the
    node-wide health bounds, each with its rule, or why it is left out)."""
    m = plan.margins
    timeout = run_timeout_seconds(measured.cases, plan.warmup_seconds, plan.measure_seconds)
    lines = ["", "[run]",
             f"warmup_seconds = {_toml_number(plan.warmup_seconds)}",
             f"measure_seconds = {_toml_number(plan.measure_seconds)}",
             _with_comment(f"timeout_seconds = {timeout}", "3 x the longest calibration launch, >= warmup + measure "
                                                            "+ 60 s")]
    lines += ["", "[defaults]",
              f"gpu_counts = [{', '.join(str(g) for g in plan.gpu_counts)}]",
              f"models = [{', '.join(_toml_string(x) for x in plan.models)}]",
              f"precisions = [{', '.join(_toml_string(x) for x in plan.precisions)}]",
              *_bound_lines(measured.health.defaults, plan),
              "source = " + _toml_string(
                  f"measured by harness calibrate on {', '.join(prov.hosts)} {prov.date} ({prov.software}); "
                  f"{plan.repeats} repeats; per-case bounds, margins: throughput x (1 - {m.throughput:g}), "
                  f"efficiency - {m.efficiency:g}; health (harness/tools/calibrate/health.py): "
                  f"{_health_text(measured.health.defaults)}")]
    return lines


def _measurement_comments(plan: CalibrationPlan, case: CaseMeasurement, b: DerivedBounds) -> list[str]:
    """The case's measurements per GPU count, as comments above its table."""
    unit = f"{case.sample_unit}/s per GPU"
    lines = ["", f"# {case.model} {case.precision}, batch {case.batch.batch_size} per GPU ({case.batch.how}); "
                 f"{unit}, {plan.repeats} repeats:"]
    for count in case.counts:
        runs = ", ".join(f"{t:.1f}" for t in count.throughput_per_gpu)
        text = (f"#   {count.gpus} GPU{'s' if count.gpus > 1 else ' '}: median {count.median:.1f}, spread "
                f"{count.spread:.1%} ({runs})")
        if count.efficiency:
            text += (f"; efficiency median {count.efficiency_median:.3f} "
                     f"({', '.join(f'{e:.3f}' for e in count.efficiency)})")
        if count.straggler_ratio_max is not None:
            text += f"; straggler max {count.straggler_ratio_max:.3f}"
        text += f"; step CV max {count.step_time_cv_max:.2%}"
        if count.ci95_rel_max is not None:
            text += f"; CI95 max +-{count.ci95_rel_max:.2%}"
        lines.append(text)
    lines.extend(f"#   note: {note}" for note in b.notes)
    return lines


def _case_lines(plan: CalibrationPlan, case: CaseMeasurement, b: DerivedBounds, health: Sequence[HealthBound],
               prov: Provenance) -> list[str]:
    """One [models.<model>.<precision>] table: the batch, each bound with how it was derived, and its source."""
    m = plan.margins
    counts = case.counts
    lines = _measurement_comments(plan, case, b)
    lowest = min(counts, key=lambda c: c.median)
    lines.append(f"[models.{case.model}.{case.precision}]")
    lines.append(f"batch_size_per_gpu = {case.batch.batch_size}")
    at_once = plan.independent_gpus
    lines.append(_with_comment(f"min_samples_per_sec_per_gpu = {{ {at_once} = "
                               f"{_toml_number(b.min_samples_per_sec_per_gpu)} }}",
                               f"{lowest.median:.1f} ({lowest.gpus} GPU{'s' if lowest.gpus > 1 else ''}) x "
                               f"{1 - m.throughput:g}"))
    efficiency_medians = [f"{c.efficiency_median:.3f}" for c in counts if c.efficiency_median is not None]
    if b.min_weak_efficiency:
        lines.append(_with_comment(f"min_weak_efficiency = {_toml_count_table(b.min_weak_efficiency)}",
                                   f"medians {_per_count(efficiency_medians)} - {m.efficiency:g}"))
    lines += _bound_lines(health, plan)
    medians = _per_count([f"{c.median:.1f}" for c in counts])
    spreads = _per_count([f"{c.spread:.1%}" for c in counts])
    gpus = "/".join(str(c.gpus) for c in counts)
    efficiency_text = ""
    if b.min_weak_efficiency:
        efficiency_text = "; weak efficiency medians " + _per_count(efficiency_medians)
    lines.append("source = " + _toml_string(
        f"measured by harness calibrate on {', '.join(prov.hosts)} {prov.date} ({prov.device_name}; "
        f"{prov.software}): {case.sample_unit}/s per GPU medians of {plan.repeats} repeats {medians} at {gpus} GPUs "
        f"(spread {spreads}){efficiency_text}; batch {case.batch.batch_size} ({case.batch.how}); bounds: throughput x "
        f"(1 - {m.throughput:g}) of the lowest median, efficiency - {m.efficiency:g}; health: {_health_text(health)}; "
        f"records {prov.records_dir}"))
    return lines


# ---------------------------------------------------------------------------------------------
# Writing the file


def validate_profile_text(text: str, name: str) -> Profile:
    """The Profile the text loads as (harness.kinds.shipped.load_shipped_profile), or ThresholdError."""
    with tempfile.TemporaryDirectory(prefix="harness-calibrate-") as scratch:
        path = Path(scratch) / f"{name}.toml"
        path.write_text(text, encoding="utf-8")
        return load_shipped_profile(path)


def write_profile(text: str, path: Path, *, force: bool) -> None:
    """Validate, then write atomically; refuse to replace an existing file unless ``force``."""
    try:
        validate_profile_text(text, path.stem)
    except ThresholdError as exc:  # a bug of ours, never the user's: say so and keep the text
        raise CalibrationError(f"the profile made from these measurements does not validate (a harness bug; please "
                               f"report it):\n{exc}\n--- the text ---\n{text}") from None
    if path.exists() and not force:
        raise CalibrationError(f"{path} exists; pass --force to replace it, or choose another --name")
    write_json_atomic(path, text)  # write-then-rename: any text, despite the name
