"""Calibration: a new threshold profile measured on a node known to be healthy (``harness calibrate``).

On new hardware (a B200, an MI300, an L40S...) there is no profile to sign nodes off against.
Calibration makes one from a golden node: it finds the batch sizes (``harness find-max-bs``) or
takes them, runs the weak-scaling matrix ``repeats`` times through ``harness.launch.run.run_benchmark``
(the very launch the acceptance suite makes), and writes ``thresholds/<name>.toml`` with the
measured medians and spreads as comments, bounds derived from them with stated margins, a match
rule for the detected hardware, and where every number came from. The file is validated with
``harness.profile.schema.load_profile`` before it is written (atomically), so it is usable at once:
``make acceptance ARGS="--hardware <name>"``.

Statistics (docs/calibration.md says why):

* per case and GPU count, the **median** of the repeats; **spread** = (max - min) / median;
* weak-scaling **efficiency** is paired within a repeat (per-GPU throughput at N GPUs / at 1 GPU
  of the same repeat, so slow drift of the node cancels), then its median over the repeats;
* bounds: throughput = the lowest median over the GPU counts x (1 - throughput margin), rounded
  down to 3 significant digits; efficiency = median - efficiency margin, rounded down to 0.001;
  straggler ratio and step-time CV = the highest measured value + their margin, rounded up.

Calibrating on an unhealthy node bakes its faults into the bounds: that is the user's risk, so
the spread of every case is printed and a WARNING is given (and kept in the file) when repeats
disagree by more than the margin. A failed run stops calibration with its reason; no bound is
ever written from a failed run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import shlex
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Literal, Sequence

if TYPE_CHECKING:
    from harness.tools.batchsize.search import SearchResult
    from harness.node.hardware import Hardware
    from harness.launch.run import BenchmarkSpec
    from harness.records import RunRecord

DEFAULT_MATRIX: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "cuda": (("resnet50", "resnet152", "vit_b_16", "bert_large"), ("bf16", "fp16")),
    "cpu": (("resnet18", "tiny_bert"), ("fp32", "bf16")),
}
"""The default matrix per device kind, as the shipped profiles run it."""
DEFAULT_REPEATS = 3
DEFAULT_BATCH_MULTIPLE = 8
"""find-max-bs answers in multiples of 8 during calibration: tensor-core friendly shapes, fewer probes."""
MEMORY_MATCH_TOLERANCE = 0.10
"""The match rule accepts GPUs of the calibrated name with memory within ±10 % of this node's: it tells
40 from 80 GB and 94 from 141 GB parts apart, and tolerates what ECC and driver versions reserve."""
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class CalibrationError(Exception):
    """Calibration cannot start or cannot finish; the message says why and what to do."""


# ---------------------------------------------------------------------------------------------
# What to run


@dataclass(frozen=True, kw_only=True, slots=True)
class Margins:
    """How far below (above) the measured values the bounds sit. docs/calibration.md justifies the defaults."""

    throughput: float = 0.10
    """Fraction: throughput bound = lowest median x (1 - throughput). Covers GPU-to-GPU spread within a
    SKU (up to 8 %, SC22) plus run-to-run spread (0.3 % on H200)."""
    efficiency: float = 0.03
    """Points (0.03 = 3 points): efficiency bound = median - efficiency."""
    straggler: float | None = 0.04
    """Ratio points: straggler bound = highest measured ratio + straggler; None: no straggler bound."""
    step_time_cv: float | None = 0.04
    """CV points: step-time CV bound = highest measured CV + step_time_cv; None: no CV bound (a shared CPU's
    step-time jitter says nothing about the hardware)."""

    def __post_init__(self) -> None:
        if not 0 <= self.throughput < 1:
            raise ValueError(f"throughput margin must be a fraction in [0, 1), got {self.throughput}")
        if not 0 <= self.efficiency < 1:
            raise ValueError(f"efficiency margin must be in [0, 1) (fraction units: 0.03 = 3 points), got "
                             f"{self.efficiency}")
        if self.straggler is not None and not (0 <= self.straggler and math.isfinite(self.straggler)):
            raise ValueError(f"straggler margin must be >= 0 (ratio units: 0.04 on a ratio of 1.01 gives 1.05), got "
                             f"{self.straggler}")
        if self.step_time_cv is not None and not 0 <= self.step_time_cv <= 1:
            raise ValueError(f"step-time CV margin must be in [0, 1] (fraction units: 0.04 = 4 points), got "
                             f"{self.step_time_cv}")


@dataclass(frozen=True, kw_only=True, slots=True)
class CalibrationPlan:
    name: str
    """The new profile's name: the file is <output_dir>/<name>.toml."""
    device: Literal["cuda", "cpu"]
    models: tuple[str, ...]
    precisions: tuple[str, ...]
    gpu_counts: tuple[int, ...]
    """Sorted, and always holding 1: efficiency is measured against the 1-GPU run."""
    repeats: int
    batch_sizes: dict[str, int]
    """model -> per-GPU batch given by the user; models not in it get find-max-bs."""
    warmup_seconds: float
    measure_seconds: float
    timeout_s: float
    """Per launch, during calibration."""
    margins: Margins
    peak_tflops: dict[str, float] = field(default_factory=dict)
    """precision -> dense TFLOP/s per GPU (cuda)."""
    peak_tflops_source: str | None = None
    peak_tflops_given: bool = False
    """True when the peaks came from --peak-tflops (not copied from a matching profile)."""
    output_path: Path
    force: bool = False
    description: str | None = None
    records_dir: Path
    """Where the calibration's run records (runs/) and logs (logs/) go."""
    memory_fraction: float = 0.9
    max_batch: int | None = None
    """find-max-bs cap (required on cpu when a model has no --batch-size)."""
    batch_multiple: int = DEFAULT_BATCH_MULTIPLE
    command_line: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class BatchChoice:
    batch_size: int
    how: str
    """"given with --batch-size", or what find-max-bs measured."""


# ---------------------------------------------------------------------------------------------
# Measurements and bounds (pure)


@dataclass(frozen=True, kw_only=True, slots=True)
class CountMeasurement:
    """One model x precision at one GPU count, over the repeats (in repeat order)."""

    gpus: int
    throughput_per_gpu: tuple[float, ...]
    efficiency: tuple[float, ...]
    """Per repeat: per-GPU throughput here / at 1 GPU in the same repeat; empty at 1 GPU."""
    straggler_ratio_max: float | None
    step_time_cv_max: float
    ci95_rel_max: float | None
    launch_s_max: float

    @property
    def median(self) -> float:
        return statistics.median(self.throughput_per_gpu)

    @property
    def spread(self) -> float:
        """(max - min) / median of the per-GPU throughput over the repeats."""
        return (max(self.throughput_per_gpu) - min(self.throughput_per_gpu)) / self.median

    @property
    def efficiency_median(self) -> float | None:
        return statistics.median(self.efficiency) if self.efficiency else None

    @property
    def efficiency_spread(self) -> float | None:
        """max - min of the efficiency over the repeats, in fraction units (points / 100)."""
        return max(self.efficiency) - min(self.efficiency) if self.efficiency else None


@dataclass(frozen=True, kw_only=True, slots=True)
class CaseMeasurement:
    model: str
    precision: str
    batch: BatchChoice
    sample_unit: str
    counts: tuple[CountMeasurement, ...]
    """Sorted by GPU count; the first is 1 GPU."""


@dataclass(frozen=True, kw_only=True, slots=True)
class DerivedBounds:
    min_samples_per_sec_per_gpu: float
    min_weak_efficiency: dict[int, float]
    max_straggler_ratio: float | None
    max_step_time_cv: float | None
    notes: tuple[str, ...] = ()
    """Where a bound had to be clamped to the schema's range."""


def measure_case(model: str, precision: str, batch: BatchChoice,
                 records_by_count: dict[int, Sequence[RunRecord]]) -> CaseMeasurement:
    """The repeats of one model x precision, per GPU count; every record must be ok (checked by the caller)."""
    if 1 not in records_by_count:
        raise ValueError("the 1-GPU runs are needed: efficiency is measured against them")
    baseline = [r.throughput_per_gpu for r in records_by_count[1]]
    counts = []
    for gpus in sorted(records_by_count):
        records = records_by_count[gpus]
        if len(records) != len(baseline):
            raise ValueError(f"{model} {precision}: {len(records)} runs at {gpus} GPUs but {len(baseline)} at 1 GPU")
        throughput = tuple(r.throughput_per_gpu for r in records)
        stragglers = [r.straggler_ratio for r in records if r.straggler_ratio is not None]
        cis = [r.throughput_ci95_rel for r in records if r.throughput_ci95_rel is not None]
        counts.append(CountMeasurement(
            gpus=gpus, throughput_per_gpu=throughput,
            efficiency=tuple(t / b for t, b in zip(throughput, baseline)) if gpus > 1 else (),
            straggler_ratio_max=max(stragglers) if gpus > 1 and stragglers else None,
            step_time_cv_max=max(r.step_time_ms.cv for r in records if r.step_time_ms is not None),
            ci95_rel_max=max(cis) if cis else None,
            launch_s_max=max(r.phases_s.get("launch_total", 0.0) for r in records)))
    return CaseMeasurement(model=model, precision=precision, batch=batch,
                           sample_unit=records_by_count[1][0].sample_unit, counts=tuple(counts))


def _round_down(value: float, decimals: int) -> float:
    scale = 10**decimals
    return math.floor(round(value * scale, 6)) / scale


def _round_up(value: float, decimals: int) -> float:
    scale = 10**decimals
    return math.ceil(round(value * scale, 6)) / scale


def round_down_significant(value: float, digits: int = 3) -> float:
    """Rounded down to at least ``digits`` significant digits: 4176.63 -> 4176, 22.87 -> 22.8."""
    if value <= 0:
        raise ValueError(f"expected a positive value, got {value}")
    decimals = max(0, digits - 1 - math.floor(math.log10(value)))
    return _round_down(value, decimals)


def derive_bounds(case: CaseMeasurement, margins: Margins) -> DerivedBounds:
    """The case's bounds from its measurements, with the margins; raises CalibrationError when a margin
    leaves no valid bound."""
    notes = []
    lowest = min(case.counts, key=lambda c: c.median)
    throughput_bound = round_down_significant(lowest.median * (1 - margins.throughput))
    efficiency = {}
    for count in case.counts:
        if count.efficiency_median is None:
            continue
        bound = _round_down(count.efficiency_median - margins.efficiency, 3)
        if bound <= 0:
            raise CalibrationError(
                f"{case.model} {case.precision} at {count.gpus} GPUs: efficiency median {count.efficiency_median:.3f} "
                f"- margin {margins.efficiency} leaves no bound > 0; lower --efficiency-margin")
        if bound > 1:
            notes.append(f"efficiency at {count.gpus} GPUs: median {count.efficiency_median:.3f} - "
                         f"{margins.efficiency} > 1, bound set to 1.0 (the schema's maximum)")
            bound = 1.0
        efficiency[count.gpus] = bound
    stragglers = [c.straggler_ratio_max for c in case.counts if c.straggler_ratio_max is not None]
    straggler_bound = None
    if stragglers and margins.straggler is not None:
        straggler_bound = max(1.0, _round_up(max(stragglers) + margins.straggler, 3))
    cv_max = max(c.step_time_cv_max for c in case.counts)
    cv_bound = _round_up(cv_max + margins.step_time_cv, 3) if margins.step_time_cv is not None else None
    if cv_bound is not None and cv_bound > 1:
        notes.append(f"step-time CV: measured max {cv_max:.3f} + {margins.step_time_cv} > 1, bound set to 1.0 "
                     "(the schema's maximum): this node's step times are very noisy")
        cv_bound = 1.0
    if cv_bound is not None and cv_bound <= 0:
        cv_bound = 0.001
    return DerivedBounds(min_samples_per_sec_per_gpu=throughput_bound, min_weak_efficiency=efficiency,
                         max_straggler_ratio=straggler_bound, max_step_time_cv=cv_bound, notes=tuple(notes))


def spread_warnings(case: CaseMeasurement, margins: Margins) -> list[str]:
    """Where repeats disagree by more than the margin that is meant to absorb their disagreement."""
    warnings = []
    for count in case.counts:
        where = f"{case.model} {case.precision} at {count.gpus} GPU{'s' if count.gpus > 1 else ''}"
        if len(count.throughput_per_gpu) > 1 and count.spread > margins.throughput:
            runs = ", ".join(f"{t:,.1f}" for t in count.throughput_per_gpu)
            warnings.append(f"{where}: repeats disagree by {count.spread:.1%} (> throughput margin "
                            f"{margins.throughput:.0%}): {runs} {case.sample_unit}/s per GPU; the node is not "
                            "steady, and bounds from it may fail healthy nodes or pass slow ones")
        if (count.efficiency_spread is not None and len(count.efficiency) > 1
                and count.efficiency_spread > margins.efficiency):
            runs = ", ".join(f"{e:.3f}" for e in count.efficiency)
            warnings.append(f"{where}: weak-scaling efficiency differs by {count.efficiency_spread * 100:.1f} points "
                            f"between repeats (> efficiency margin {margins.efficiency * 100:.1f} points): {runs}")
    return warnings


# ---------------------------------------------------------------------------------------------
# Provenance and the TOML text (pure)


@dataclass(frozen=True, kw_only=True, slots=True)
class Provenance:
    started_at: str
    finished_at: str
    hosts: tuple[str, ...]
    device_name: str
    gpu_count: int
    memory_gib: float | None
    driver: str | None
    cuda: str | None
    nccl: str | None
    torch: str
    python: str | None
    harness: str
    command_line: str
    records_dir: str

    @property
    def date(self) -> str:
        return self.started_at[:10]

    @property
    def node(self) -> str:
        hosts = ", ".join(self.hosts) or "unknown host"
        if self.memory_gib is None:
            return f"host {hosts}, {self.device_name} (CPU ranks, gloo)"
        return f"host {hosts}, {self.gpu_count} x {self.device_name} ({self.memory_gib:.1f} GiB)"

    @property
    def software(self) -> str:
        parts = [f"driver {self.driver}" if self.driver else None, f"CUDA {self.cuda}" if self.cuda else None,
                 f"NCCL {self.nccl}" if self.nccl else None, f"torch {self.torch}",
                 f"Python {self.python}" if self.python else None, f"harness {self.harness}"]
        return ", ".join(p for p in parts if p)


def provenance(records: Sequence[RunRecord], hw: Hardware, plan: CalibrationPlan) -> Provenance:
    """From the run records' versions and hosts (what actually ran) and the detected hardware."""
    from harness import __version__

    def one(values) -> str | None:
        distinct = list(dict.fromkeys(v for v in values if v))
        return " / ".join(distinct) if distinct else None

    versions = [r.versions for r in records if r.versions is not None]
    cuda_run = plan.device == "cuda"
    return Provenance(
        started_at=min(r.started_at for r in records if r.started_at) if any(r.started_at for r in records)
        else datetime.now(timezone.utc).isoformat(timespec="seconds"),
        finished_at=max(r.finished_at for r in records if r.finished_at) if any(r.finished_at for r in records)
        else datetime.now(timezone.utc).isoformat(timespec="seconds"),
        hosts=tuple(dict.fromkeys(host for r in records for host in r.hosts)) or (hw.hostname,),
        device_name=one(r.device_name for r in records) or (hw.gpu_name if cuda_run else "cpu") or "unknown",
        gpu_count=hw.gpu_count if cuda_run else 0,
        memory_gib=min(gpu.memory_total_gib for gpu in hw.gpus) if cuda_run and hw.gpus else None,
        driver=one(v.driver for v in versions) or (hw.driver_version if cuda_run else None),
        cuda=one(v.cuda for v in versions) or hw.cuda_runtime_version,
        nccl=one(v.nccl for v in versions) or (hw.nccl_version if cuda_run else None),
        torch=one(v.torch for v in versions) or hw.torch_version,
        python=one(v.python for v in versions),
        harness=one(v.harness for v in versions) or __version__,
        command_line=plan.command_line, records_dir=str(plan.records_dir))


def _health_margins_text(m: Margins) -> str:
    straggler = f"straggler + {m.straggler:g}" if m.straggler is not None else "straggler not bounded"
    cv = f"step CV + {m.step_time_cv:g}" if m.step_time_cv is not None else "step CV not bounded"
    return f"{straggler}, {cv}"


def _margin_arg(value: float | None) -> str:
    return "off" if value is None else f"{value:g}"


def _margin_or_off(text: str) -> float | None:
    """argparse type: a number, or "off" for no bound."""
    if text.strip().lower() == "off":
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or off, got {text!r}") from None


def _toml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def _toml_number(value: float) -> str:
    if float(value).is_integer() and abs(value) >= 100:
        return str(int(value))
    return repr(float(value))


def _toml_count_table(table: dict[int, float]) -> str:
    return "{ " + ", ".join(f"{count} = {_toml_number(value)}" for count, value in sorted(table.items())) + " }"


def _toml_inline(table: dict[str, object]) -> str:
    items = []
    for key, value in table.items():
        shown = _toml_string(value) if isinstance(value, str) else _toml_number(value)
        items.append(f"{key} = {shown}")
    return "{ " + ", ".join(items) + " }"


def _with_comment(line: str, comment: str, column: int = 62) -> str:
    return f"{line.ljust(column)}# {comment}" if comment else line


def match_rule(hw: Hardware, device: str) -> dict[str, object]:
    """The [hardware] match of the detected hardware: its NVML name and memory ±10 %; {} on cpu."""
    if device == "cpu":
        return {}
    memory = min(gpu.memory_total_gib for gpu in hw.gpus)
    return {"gpu_name_contains": hw.gpu_name,
            "min_memory_gib": math.floor(memory * (1 - MEMORY_MATCH_TOLERANCE)),
            "max_memory_gib": math.ceil(memory * (1 + MEMORY_MATCH_TOLERANCE))}


def run_timeout_seconds(cases: Sequence[CaseMeasurement], warmup_seconds: float, measure_seconds: float) -> int:
    """3 x the longest launch seen, and at least warmup + measure + 60 s, rounded up to 10 s."""
    longest = max((c.launch_s_max for case in cases for c in case.counts), default=0.0)
    floor_s = warmup_seconds + measure_seconds + 60
    return int(math.ceil(max(3 * longest, floor_s) / 10) * 10)


def _per_count(values: Sequence[str]) -> str:
    return " / ".join(values)


def render_profile(plan: CalibrationPlan, hw: Hardware, cases: Sequence[CaseMeasurement],
                   bounds: dict[tuple[str, str], DerivedBounds], prov: Provenance, warnings: Sequence[str]) -> str:
    """The profile's TOML text: header (provenance, method, margins, warnings), tables, per-case comments."""
    m = plan.margins
    counts_text = "/".join(str(g) for g in plan.gpu_counts)
    lines = [
        f"# {plan.name}: made by `harness calibrate` on a node assumed healthy. Every bound below is",
        "# MEASURED on that node (not published): a slower node fails, a node like it passes.",
        "#",
        f"# Node:       {prov.node}",
        f"# Software:   {prov.software}",
        f"# When:       {prov.started_at} .. {prov.finished_at} (UTC)",
        f"# Command:    {prov.command_line}",
        f"# Records:    {prov.records_dir}/runs/*.json (`harness compare` reads them)",
        f"# Method:     weak scaling at {counts_text} {'GPUs' if plan.device == 'cuda' else 'CPU ranks (gloo)'}; "
        f"{plan.repeats} repeat{'s' if plan.repeats != 1 else ''} of the whole matrix, one after the other",
        f"#             (so slow drift hits every case alike); warmup >= {plan.warmup_seconds:g} s, measured window "
        f"{plan.measure_seconds:g} s.",
        "# Statistics: per case and GPU count the median of the repeats; spread = (max - min) / median;",
        "#             efficiency = per-GPU throughput at N / at 1 GPU within a repeat, then its median.",
        "# Bounds:     min_samples_per_sec_per_gpu = lowest median over the GPU counts x "
        f"(1 - {m.throughput:g}), rounded down",
        f"#             min_weak_efficiency         = median efficiency - {m.efficiency:g}, rounded down",
        "#             max_straggler_ratio         = " + (
            f"highest measured + {m.straggler:g}, rounded up" if m.straggler is not None
            else "not bounded (--straggler-margin off)"),
        "#             max_step_time_cv            = " + (
            f"highest measured + {m.step_time_cv:g}, rounded up" if m.step_time_cv is not None
            else "not bounded (--cv-margin off)"),
        "#             Strong scaling is not calibrated: add strong_global_batch_size and min_strong_efficiency",
        "#             by hand (thresholds/README.md) if the node should be held to it.",
    ]
    if warnings:
        lines.append("# WARNINGS during calibration (the repeats disagreed; see docs/calibration.md):")
        lines.extend(f"#   {warning}" for warning in warnings)
    else:
        lines.append("# Warnings:   none (every case's repeats agreed within the margins).")
    lines += ["", "schema_version = 1", "", "[hardware]", f"name = {_toml_string(plan.name)}"]
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
    timeout = run_timeout_seconds(cases, plan.warmup_seconds, plan.measure_seconds)
    lines += ["", "[run]",
              f"warmup_seconds = {_toml_number(plan.warmup_seconds)}",
              f"measure_seconds = {_toml_number(plan.measure_seconds)}",
              _with_comment(f"timeout_seconds = {timeout}", "3 x the longest calibration launch, >= warmup + measure "
                                                             "+ 60 s")]
    lines += ["", "[defaults]",
              f"gpu_counts = [{', '.join(str(g) for g in plan.gpu_counts)}]",
              f"models = [{', '.join(_toml_string(x) for x in plan.models)}]",
              f"precisions = [{', '.join(_toml_string(x) for x in plan.precisions)}]",
              "source = " + _toml_string(
                  f"measured by harness calibrate on {', '.join(prov.hosts)} {prov.date} ({prov.software}); "
                  f"{plan.repeats} repeats; per-case bounds, margins: throughput x (1 - {m.throughput:g}), "
                  f"efficiency - {m.efficiency:g}, {_health_margins_text(m)}")]
    for case in cases:
        b = bounds[(case.model, case.precision)]
        counts = case.counts
        unit = f"{case.sample_unit}/s per GPU"
        lines.append("")
        lines.append(f"# {case.model} {case.precision}, batch {case.batch.batch_size} per GPU ({case.batch.how}); "
                     f"{unit}, {plan.repeats} repeats:")
        for count in counts:
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
        lowest = min(counts, key=lambda c: c.median)
        lines.append(f"[models.{case.model}.{case.precision}]")
        lines.append(f"batch_size_per_gpu = {case.batch.batch_size}")
        lines.append(_with_comment(f"min_samples_per_sec_per_gpu = {_toml_number(b.min_samples_per_sec_per_gpu)}",
                                   f"{lowest.median:.1f} ({lowest.gpus} GPU{'s' if lowest.gpus > 1 else ''}) x "
                                   f"{1 - m.throughput:g}"))
        if b.min_weak_efficiency:
            medians = [f"{c.efficiency_median:.3f}" for c in counts if c.efficiency_median is not None]
            lines.append(_with_comment(f"min_weak_efficiency = {_toml_count_table(b.min_weak_efficiency)}",
                                       f"medians {_per_count(medians)} - {m.efficiency:g}"))
        if b.max_straggler_ratio is not None:
            highest = max(c.straggler_ratio_max for c in counts if c.straggler_ratio_max is not None)
            lines.append(_with_comment(f"max_straggler_ratio = {_toml_number(b.max_straggler_ratio)}",
                                       f"highest {highest:.3f} + {m.straggler:g}"))
        if b.max_step_time_cv is not None:
            highest_cv = max(c.step_time_cv_max for c in counts)
            lines.append(_with_comment(f"max_step_time_cv = {_toml_number(b.max_step_time_cv)}",
                                       f"highest {highest_cv:.4f} + {m.step_time_cv:g}"))
        medians = _per_count([f"{c.median:.1f}" for c in counts])
        spreads = _per_count([f"{c.spread:.1%}" for c in counts])
        gpus = "/".join(str(c.gpus) for c in counts)
        efficiency_text = ""
        if b.min_weak_efficiency:
            efficiency_text = "; weak efficiency medians " + _per_count(
                [f"{c.efficiency_median:.3f}" for c in counts if c.efficiency_median is not None])
        lines.append("source = " + _toml_string(
            f"measured by harness calibrate on {', '.join(prov.hosts)} {prov.date} ({prov.device_name}; "
            f"{prov.software}): {unit} medians of {plan.repeats} repeats {medians} at {gpus} GPUs (spread "
            f"{spreads}){efficiency_text}; batch {case.batch.batch_size} ({case.batch.how}); bounds: throughput x "
            f"(1 - {m.throughput:g}) of the lowest median, efficiency - {m.efficiency:g}, {_health_margins_text(m)}; "
            f"records {prov.records_dir}"))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Writing the file


def validate_profile_text(text: str, name: str):
    """The Profile the text loads as (harness.profile.schema.load_profile), or ThresholdError."""
    from harness.profile.schema import load_profile

    with tempfile.TemporaryDirectory(prefix="harness-calibrate-") as scratch:
        path = Path(scratch) / f"{name}.toml"
        path.write_text(text, encoding="utf-8")
        return load_profile(path)


def write_profile(text: str, path: Path, *, force: bool) -> None:
    """Validate, then write atomically; refuse to replace an existing file unless ``force``."""
    from harness.records import write_json_atomic
    from harness.profile.schema import ThresholdError

    try:
        validate_profile_text(text, path.stem)
    except ThresholdError as exc:  # a bug of ours, never the user's: say so and keep the text
        raise CalibrationError(f"the profile made from these measurements does not validate (a harness bug; please "
                               f"report it):\n{exc}\n--- the text ---\n{text}") from None
    if path.exists() and not force:
        raise CalibrationError(f"{path} exists; pass --force to replace it, or choose another --name")
    write_json_atomic(path, text)  # write-then-rename: any text, despite the name


# ---------------------------------------------------------------------------------------------
# Planning (validates everything before the first launch: a mistake found after an hour of runs
# costs an hour)


def _split_list(values: Sequence[str] | None) -> list[str]:
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]


def parse_batch_sizes(values: Sequence[str] | None) -> dict[str, int]:
    """``["resnet50=256", "vit_b_16=192,bert_large=128"]`` -> {model: batch}."""
    from harness.workloads.models import MODELS

    sizes = {}
    for item in _split_list(values):
        model, sep, batch = item.partition("=")
        if not sep or not batch.strip().isdigit() or int(batch) < 1:
            raise CalibrationError(f"--batch-size {item!r}: expected MODEL=BATCH with BATCH >= 1, e.g. resnet50=256")
        if model.strip() not in MODELS:
            raise CalibrationError(f"--batch-size {item!r}: unknown model {model.strip()!r}; known: "
                                   f"{', '.join(MODELS)}")
        sizes[model.strip()] = int(batch)
    return sizes


def parse_peak_tflops(text: str) -> dict[str, float]:
    """``"bf16=989,fp16=989"`` -> {precision: TFLOP/s}."""
    from harness.workloads.models import PRECISIONS

    peaks = {}
    for item in _split_list([text]):
        precision, sep, value = item.partition("=")
        precision = precision.strip()
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if not sep or precision not in PRECISIONS or not (number > 0 and math.isfinite(number)):
            raise CalibrationError(f"--peak-tflops {item!r}: expected PRECISION=TFLOPS with PRECISION one of "
                                   f"{', '.join(PRECISIONS)} and a dense per-GPU peak > 0, e.g. bf16=989,fp16=989")
        peaks[precision] = number
    return peaks


def _available_workers(hw: Hardware, device: str) -> int:
    if device == "cuda":
        return hw.gpu_count
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _default_gpu_counts(available: int, device: str) -> tuple[int, ...]:
    if device == "cpu":
        return tuple(g for g in (1, 2) if g <= available)
    counts, g = [], 1
    while g <= available:
        counts.append(g)
        g *= 2
    return tuple(counts)


def peaks_from_matching_profile(hw: Hardware, directories: Sequence[Path]) -> tuple[dict[str, float], str] | None:
    """The peak TFLOP/s of an existing profile that matches this hardware, with where they came from."""
    from harness.node.hardware import HardwareError, select_profile
    from harness.profile.schema import ThresholdError, load_profile

    profiles, seen = [], set()
    for directory in directories:
        for path in sorted(Path(directory).glob("*.toml")) if Path(directory).is_dir() else []:
            if path.resolve() in seen:
                continue
            seen.add(path.resolve())
            try:
                profiles.append(load_profile(path))
            except ThresholdError:
                continue  # an invalid file cannot lend its numbers
    try:
        chosen = select_profile(hw, [p for p in profiles if p.hardware.device == "cuda"])
    except HardwareError:
        return None
    if not chosen.peak_tflops:
        return None
    return dict(chosen.peak_tflops), f"copied from {chosen.path} (it matches this GPU): {chosen.peak_tflops_source}"


def plan_from_args(ns: argparse.Namespace, hw: Hardware, *, thresholds_dir: Path | None = None,
                   now: datetime | None = None) -> CalibrationPlan:
    """Check every argument against the hardware and the files; CalibrationError says what is wrong."""
    from harness.node.hardware import HardwareError, check_homogeneous
    from harness.workloads.models import MODELS, PRECISIONS
    from harness.profile.schema import default_thresholds_dir

    if not _NAME.fullmatch(ns.name or ""):
        raise CalibrationError(f"--name {ns.name!r}: use letters, digits, '.', '_' and '-' (it becomes the file name "
                               "<name>.toml and what --hardware names), e.g. b200-180gb")
    device = ns.device or hw.device
    if device == "cuda":
        if hw.device != "cuda":
            raise CalibrationError(f"--device cuda, but no GPU was detected ({hw.nvml_unavailable_reason})")
        try:
            check_homogeneous(hw)
        except HardwareError as exc:
            raise CalibrationError(str(exc)) from None
    default_models, default_precisions = DEFAULT_MATRIX[device]
    models = tuple(dict.fromkeys(_split_list(ns.models))) or default_models
    precisions = tuple(dict.fromkeys(_split_list(ns.precisions))) or default_precisions
    for model in models:
        if model not in MODELS:
            raise CalibrationError(f"--models {model}: unknown; known: {', '.join(MODELS)}")
    for precision in precisions:
        if precision not in PRECISIONS:
            raise CalibrationError(f"--precisions {precision}: unknown; known: {', '.join(PRECISIONS)}")
    available = _available_workers(hw, device)
    if ns.gpus:
        try:
            counts = sorted({int(text) for text in _split_list(ns.gpus)})
        except ValueError:
            raise CalibrationError(f"--gpus {','.join(ns.gpus)}: expected positive integers, e.g. 1,2,4,8") from None
        if not counts or counts[0] < 1:
            raise CalibrationError(f"--gpus {','.join(ns.gpus)}: expected positive integers, e.g. 1,2,4,8")
    else:
        counts = list(_default_gpu_counts(available, device))
    if 1 not in counts:
        raise CalibrationError(f"--gpus {','.join(map(str, counts))}: must include 1: scaling efficiency is measured "
                               "against the 1-GPU run")
    unit = "GPUs" if device == "cuda" else "CPU cores"
    if counts[-1] > available:
        raise CalibrationError(f"--gpus {counts[-1]}: this node has {available} {unit}; calibrate the counts it has "
                               "(the profile bounds only the counts it lists)")
    if ns.repeats < 1:
        raise CalibrationError(f"--repeats {ns.repeats}: at least 1 (3 or more to see the spread)")
    batch_sizes = parse_batch_sizes(ns.batch_size)
    stray = sorted(set(batch_sizes) - set(models))
    if stray:
        raise CalibrationError(f"--batch-size {', '.join(stray)}: not among the models calibrated "
                               f"({', '.join(models)})")
    if device == "cpu" and ns.max_batch is None and any(m not in batch_sizes for m in models):
        missing = ", ".join(m for m in models if m not in batch_sizes)
        raise CalibrationError(f"on cpu there is no device memory to fill: give --batch-size for {missing} "
                               "(e.g. --batch-size tiny_bert=16), or cap the search with --max-batch")
    try:
        margins = Margins(throughput=ns.throughput_margin, efficiency=ns.efficiency_margin,
                          straggler=ns.straggler_margin, step_time_cv=ns.cv_margin)
    except ValueError as exc:
        raise CalibrationError(str(exc)) from None
    for option, value in (("--warmup", ns.warmup), ("--measure", ns.measure), ("--timeout", ns.timeout)):
        if not value > 0:
            raise CalibrationError(f"{option} {value}: must be > 0 seconds")
    if not 0 < ns.memory_fraction <= 1:
        raise CalibrationError(f"--memory-fraction {ns.memory_fraction}: a fraction in (0, 1], e.g. 0.9")
    output_dir = Path(ns.output_dir) if ns.output_dir else default_thresholds_dir()
    output_path = output_dir / f"{ns.name}.toml"
    if output_path.exists() and not ns.force:
        raise CalibrationError(f"{output_path} exists; pass --force to replace it, or choose another --name")
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CalibrationError(f"--output-dir {output_dir}: cannot create it ({exc.strerror or exc}); "
                               "give a writable directory") from None
    peaks, peaks_source = {}, None
    if device == "cuda":
        if ns.peak_tflops:
            peaks = parse_peak_tflops(ns.peak_tflops)
            peaks_source = ns.peak_tflops_source
            if not peaks_source:
                raise CalibrationError("--peak-tflops needs --peak-tflops-source: cite the datasheet (dense figures, "
                                       "not 2:4 sparse), e.g. --peak-tflops-source 'NVIDIA B200 datasheet, dense'")
        else:
            found = peaks_from_matching_profile(hw, [thresholds_dir or default_thresholds_dir(), output_dir])
            if found is None:
                raise CalibrationError(
                    f"no existing profile matches {hw.gpu_name}, so its dense peak TFLOP/s (for MFU; required in a "
                    "cuda profile) must be given: --peak-tflops bf16=<T>,fp16=<T>[,fp32=<T>] --peak-tflops-source "
                    "'<datasheet>' (dense, not 2:4 sparse; shared/REFERENCE.md lists some)")
            peaks, peaks_source = found
        missing = [p for p in precisions if p not in peaks]
        if missing:
            raise CalibrationError(f"no peak TFLOP/s for {', '.join(missing)} ({peaks_source or '--peak-tflops'}); "
                                   f"add {', '.join(f'{p}=<T>' for p in missing)} to --peak-tflops")
    elif ns.peak_tflops:
        raise CalibrationError("--peak-tflops is for cuda profiles; a cpu profile reports no MFU")
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    records_dir = Path(ns.records_dir) if ns.records_dir else Path("reports") / f"calibration-{stamp}-{ns.name}"
    plan = CalibrationPlan(
        name=ns.name, device=device, models=models, precisions=precisions, gpu_counts=tuple(counts),
        repeats=ns.repeats, batch_sizes=batch_sizes, warmup_seconds=ns.warmup, measure_seconds=ns.measure,
        timeout_s=ns.timeout, margins=margins, peak_tflops=peaks, peak_tflops_source=peaks_source,
        peak_tflops_given=bool(ns.peak_tflops),
        output_path=output_path, force=ns.force, description=ns.description, records_dir=records_dir,
        memory_fraction=ns.memory_fraction, max_batch=ns.max_batch, batch_multiple=ns.batch_multiple,
        command_line="")
    return dataclasses.replace(plan, command_line=canonical_command(plan))


def canonical_command(plan: CalibrationPlan) -> str:
    """The command that repeats this calibration, every choice spelled out (defaults included)."""
    m = plan.margins
    parts = ["harness", "calibrate", "--name", plan.name, "--device", plan.device,
             "--models", *plan.models, "--precisions", *plan.precisions,
             "--gpus", ",".join(map(str, plan.gpu_counts)), "--repeats", str(plan.repeats)]
    if plan.batch_sizes:
        parts += ["--batch-size", *(f"{model}={batch}" for model, batch in plan.batch_sizes.items())]
    if any(model not in plan.batch_sizes for model in plan.models):
        parts += ["--memory-fraction", f"{plan.memory_fraction:g}", "--batch-multiple", str(plan.batch_multiple)]
        if plan.max_batch is not None:
            parts += ["--max-batch", str(plan.max_batch)]
    if plan.peak_tflops_given:
        parts += ["--peak-tflops", ",".join(f"{p}={v:g}" for p, v in plan.peak_tflops.items()),
                  "--peak-tflops-source", plan.peak_tflops_source or ""]
    parts += ["--warmup", f"{plan.warmup_seconds:g}", "--measure", f"{plan.measure_seconds:g}",
              "--throughput-margin", f"{m.throughput:g}", "--efficiency-margin", f"{m.efficiency:g}",
              "--straggler-margin", _margin_arg(m.straggler), "--cv-margin", _margin_arg(m.step_time_cv)]
    return shlex.join(parts)


# ---------------------------------------------------------------------------------------------
# Running (the I/O edge)

Launcher = Callable[..., "RunRecord"]
BatchFinder = Callable[..., "SearchResult"]


def choose_batches(plan: CalibrationPlan, find_batch: BatchFinder, echo: Callable[[str], None]) -> dict[
        tuple[str, str], BatchChoice]:
    """The per-GPU batch of every case: given, or the largest that fits (find-max-bs)."""
    from harness.tools.batchsize.search import SearchError, format_table, recommendation

    choices = {}
    for model in plan.models:
        for precision in plan.precisions:
            if model in plan.batch_sizes:
                choices[(model, precision)] = BatchChoice(batch_size=plan.batch_sizes[model],
                                                          how="given with --batch-size")
                continue
            echo(f"find-max-bs: {model} {precision} (fraction {plan.memory_fraction:g}, multiples of "
                 f"{plan.batch_multiple})")
            log_dir = plan.records_dir / "find-max-bs" / f"{model}-{precision}"
            try:
                result = find_batch(model=model, precision=precision, device_kind=plan.device,
                                    memory_fraction=plan.memory_fraction, start=plan.batch_multiple,
                                    max_batch=plan.max_batch, multiple_of=plan.batch_multiple, log_dir=log_dir)
            except SearchError as exc:
                raise CalibrationError(f"find-max-bs for {model} {precision} failed: {exc} (probe logs: {log_dir}/); "
                                       "no profile written") from None
            echo(format_table(result.probes))
            echo(recommendation(result, model, precision))
            if result.max_batch_size is None:
                raise CalibrationError(f"{recommendation(result, model, precision)}; no profile written")
            best = result.best
            if best is not None and best.limit_gib is not None:
                how = (f"find-max-bs: peak {best.result.peak_memory_gib:.1f} of "
                       f"{best.result.total_memory_gib:.1f} GiB, "
                       f"limit {plan.memory_fraction:g}")
            else:
                how = f"find-max-bs: capped by --max-batch {plan.max_batch}"
            choices[(model, precision)] = BatchChoice(batch_size=result.max_batch_size, how=how)
    return choices


def _spec(plan: CalibrationPlan, model: str, precision: str, gpus: int, batch: int) -> BenchmarkSpec:
    from harness.launch.run import BenchmarkSpec

    return BenchmarkSpec(model=model, precision=precision, gpus_per_node=gpus, scaling="weak",
                         batch_size_per_gpu=batch, device=plan.device, warmup_seconds=plan.warmup_seconds,
                         measure_seconds=plan.measure_seconds, timeout_s=plan.timeout_s,
                         peak_tflops=plan.peak_tflops.get(precision))


def run_matrix(plan: CalibrationPlan, batches: dict[tuple[str, str], BatchChoice], launcher: Launcher,
               echo: Callable[[str], None]) -> dict[tuple[str, str], dict[int, list[RunRecord]]]:
    """Every case ``repeats`` times, repeat by repeat; the first failed run stops everything."""
    from harness.records import write_record

    stamp = plan.records_dir.name
    results: dict[tuple[str, str], dict[int, list[RunRecord]]] = {}
    total = plan.repeats * len(plan.models) * len(plan.precisions) * len(plan.gpu_counts)
    done = 0
    for repeat in range(1, plan.repeats + 1):
        for model in plan.models:
            for precision in plan.precisions:
                batch = batches[(model, precision)].batch_size
                for gpus in plan.gpu_counts:
                    spec = _spec(plan, model, precision, gpus, batch)
                    label = f"{spec.case_id}-r{repeat}"
                    log_dir = plan.records_dir / "logs" / label
                    record = launcher(spec, log_dir, run_id=f"{stamp}-{label}")
                    write_record(plan.records_dir / "runs" / f"{label}.json", record)
                    done += 1
                    if not record.ok:
                        reason = record.failure.reason if record.failure else "no reason recorded"
                        raise CalibrationError(
                            f"{model} {precision} at {gpus} {'GPU' if gpus == 1 else 'GPUs'}, repeat {repeat}: "
                            f"{record.status}: {reason} (logs: {log_dir}/). No profile was written: bounds are never "
                            "made from failed runs. Calibrate on a healthy node, or fix the cause and run again.")
                    ci = f", CI95 +-{record.throughput_ci95_rel:.2%}" if record.throughput_ci95_rel is not None else ""
                    echo(f"[{done}/{total}] repeat {repeat}: {spec.case_id} batch {batch}: "
                         f"{record.throughput_per_gpu:,.1f} {record.sample_unit}/s per GPU{ci}")
                    results.setdefault((model, precision), {}).setdefault(gpus, []).append(record)
    return results


def format_measurements(cases: Sequence[CaseMeasurement]) -> str:
    """The spread of every case, for the terminal."""
    header = (f"{'case':28} {'GPUs':>4} {'median /s':>11} {'min .. max':>23} {'spread':>7} "
              f"{'efficiency (min .. max)':>24} {'straggler':>9} {'CV max':>7}")
    lines = [header, "-" * len(header)]
    for case in cases:
        label = f"{case.model} {case.precision} b{case.batch.batch_size}"
        for count in case.counts:
            low, high = min(count.throughput_per_gpu), max(count.throughput_per_gpu)
            efficiency = "—"
            if count.efficiency:
                efficiency = (f"{count.efficiency_median:.3f} ({min(count.efficiency):.3f} .. "
                              f"{max(count.efficiency):.3f})")
            straggler = f"{count.straggler_ratio_max:.3f}" if count.straggler_ratio_max is not None else "—"
            lines.append(f"{label:28} {count.gpus:>4} {count.median:>11,.1f} {f'{low:,.1f} .. {high:,.1f}':>23} "
                         f"{count.spread:>7.1%} {efficiency:>24} {straggler:>9} {count.step_time_cv_max:>7.2%}")
            label = ""
    return "\n".join(lines)


@dataclass(frozen=True, kw_only=True, slots=True)
class CalibrationOutcome:
    path: Path
    text: str
    cases: tuple[CaseMeasurement, ...]
    bounds: dict[tuple[str, str], DerivedBounds]
    warnings: tuple[str, ...]


def run_calibration(plan: CalibrationPlan, hw: Hardware, *, launcher: Launcher | None = None,
                    find_batch: BatchFinder | None = None,
                    echo: Callable[[str], None] = print) -> CalibrationOutcome:
    """Batches, the repeated matrix, the statistics, the validated profile written to plan.output_path."""
    if launcher is None:
        from harness.launch.run import run_benchmark as launcher
    if find_batch is None:
        from harness.tools.batchsize.probe import find_max_batch as find_batch
    batches = choose_batches(plan, find_batch, echo)
    by_case = run_matrix(plan, batches, launcher, echo)
    cases = tuple(measure_case(model, precision, batches[(model, precision)], by_case[(model, precision)])
                  for model in plan.models for precision in plan.precisions)
    bounds = {(case.model, case.precision): derive_bounds(case, plan.margins) for case in cases}
    warnings = [w for case in cases for w in spread_warnings(case, plan.margins)]
    if plan.repeats == 1:
        warnings.insert(0, "one repeat: no spread was measured, so nothing says the margins cover this node's noise; "
                           "use --repeats 3 or more")
    echo("")
    echo(format_measurements(cases))
    for warning in warnings:
        echo(f"WARNING: {warning}")
    for case in cases:
        for note in bounds[(case.model, case.precision)].notes:
            echo(f"note: {case.model} {case.precision}: {note}")
    records = [r for per_count in by_case.values() for runs in per_count.values() for r in runs]
    text = render_profile(plan, hw, cases, bounds, provenance(records, hw, plan), warnings)
    write_profile(text, plan.output_path, force=plan.force)
    return CalibrationOutcome(path=plan.output_path, text=text, cases=cases, bounds=bounds, warnings=tuple(warnings))


def selection_note(plan: CalibrationPlan, hw: Hardware) -> str:
    """Which profile automatic selection now picks on this hardware from the output directory."""
    from harness.node.hardware import HardwareError, select_profile
    from harness.profile.schema import ThresholdError, load_profile

    if plan.device != hw.device:
        return ""
    profiles = []
    for path in sorted(plan.output_path.parent.glob("*.toml")):
        try:
            profiles.append(load_profile(path))
        except ThresholdError:
            continue
    try:
        chosen = select_profile(hw, profiles)
    except HardwareError as exc:
        return f"WARNING: automatic profile selection on this node now fails: {exc}"
    if chosen.name != plan.name:
        return (f"note: on this node automatic selection still picks {chosen.name} ({chosen.path}); "
                f"use --hardware {plan.name} for the new one")
    return f"automatic selection on this node picks {plan.name}"


# ---------------------------------------------------------------------------------------------
# Command line


_DEFAULT_MARGINS = Margins()


def add_calibrate_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "calibrate", help="make a threshold profile from measurements on a known-good node",
        description="Run the weak-scaling matrix repeatedly on a node known to be healthy and write "
                    "thresholds/<name>.toml with bounds derived from the measured medians (docs/calibration.md).")
    p.add_argument("--name", required=True, help="the new profile's name, e.g. b200-180gb (the file is <name>.toml)")
    p.add_argument("--repeats", type=int, default=DEFAULT_REPEATS,
                   help=f"runs of the whole matrix (default {DEFAULT_REPEATS}); the median is used")
    p.add_argument("--models", nargs="+", metavar="M", help="models (default: resnet50 resnet152 vit_b_16 bert_large "
                                                            "on cuda, resnet18 tiny_bert on cpu)")
    p.add_argument("--precisions", nargs="+", metavar="P",
                   help="precisions (default: bf16 fp16 on cuda, fp32 bf16 on cpu)")
    p.add_argument("--gpus", nargs="+", metavar="N", help="GPU counts, e.g. 1,2,4,8 (default: 1 and the powers of two "
                                                          "up to the GPUs present; 1,2 on cpu); must include 1")
    p.add_argument("--batch-size", nargs="+", metavar="M=B", help="per-GPU batch per model, e.g. resnet50=256; models "
                                                                  "without one get find-max-bs")
    p.add_argument("--throughput-margin", type=float, default=_DEFAULT_MARGINS.throughput,
                   help="bound = lowest median x (1 - margin) (default 0.10)")
    p.add_argument("--efficiency-margin", type=float, default=_DEFAULT_MARGINS.efficiency,
                   help="bound = median efficiency - margin, in fraction units (default 0.03 = 3 points)")
    p.add_argument("--straggler-margin", type=_margin_or_off, default=_DEFAULT_MARGINS.straggler,
                   help="bound = highest straggler ratio + margin (default 0.04); off: no straggler bound")
    p.add_argument("--cv-margin", type=_margin_or_off, default=_DEFAULT_MARGINS.step_time_cv,
                   help="bound = highest step-time CV + margin (default 0.04); off: no CV bound")
    p.add_argument("--output-dir", help="where <name>.toml is written (default: the thresholds directory)")
    p.add_argument("--force", action="store_true", help="replace an existing <name>.toml")
    p.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda when a GPU is present, else cpu")
    p.add_argument("--warmup", type=float, default=5.0, help="minimum warmup seconds per launch (default 5); "
                                                             "written to the profile's [run]")
    p.add_argument("--measure", type=float, default=10.0, help="measured-window seconds per launch (default 10); "
                                                               "written to the profile's [run]")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per calibration launch (default 600)")
    p.add_argument("--peak-tflops", help="dense per-GPU peak TFLOP/s, e.g. bf16=2250,fp16=2250 (cuda; default: "
                                         "copied from an existing profile that matches the GPU)")
    p.add_argument("--peak-tflops-source", help="the datasheet the peaks come from (required with --peak-tflops)")
    p.add_argument("--description", help="the hardware in words (default: GPU name, memory, host, date)")
    p.add_argument("--memory-fraction", type=float, default=0.9,
                   help="find-max-bs: fraction of GPU memory (default 0.9)")
    p.add_argument("--max-batch", type=int, help="find-max-bs: largest batch probed (required on cpu without "
                                                 "--batch-size)")
    p.add_argument("--batch-multiple", type=int, default=DEFAULT_BATCH_MULTIPLE,
                   help=f"find-max-bs: batch sizes are multiples of this (default {DEFAULT_BATCH_MULTIPLE})")
    p.add_argument("--records-dir", help="where the run records and logs go (default: "
                                         "reports/calibration-<time>-<name>/)")
    p.add_argument("--thresholds-dir", help="where to look for a matching profile to copy peak TFLOP/s from "
                                            "(default: the thresholds directory)")
    return p


def cli_calibrate(ns: argparse.Namespace) -> int:
    """``harness calibrate``: 0 when the profile was written, 1 when calibration failed, 2 on bad arguments."""
    from harness.node.hardware import HardwareError, detect

    try:
        hw = detect()
        plan = plan_from_args(ns, hw, thresholds_dir=Path(ns.thresholds_dir) if ns.thresholds_dir else None)
    except (CalibrationError, HardwareError) as exc:
        print(f"harness calibrate: {exc}", file=sys.stderr)
        return 2
    launches = plan.repeats * len(plan.models) * len(plan.precisions) * len(plan.gpu_counts)
    print(f"calibrate {plan.name}: {len(plan.models)} models x {len(plan.precisions)} precisions x GPU counts "
          f"{', '.join(map(str, plan.gpu_counts))} on {plan.device}, {plan.repeats} repeats = {launches} launches "
          f"(warmup >= {plan.warmup_seconds:g} s, window {plan.measure_seconds:g} s); records in {plan.records_dir}/")
    try:
        outcome = run_calibration(plan, hw)
    except CalibrationError as exc:
        print(f"harness calibrate: {exc}", file=sys.stderr)
        return 1
    print(f"\nwrote {outcome.path} (validated){' with WARNINGS (see above)' if outcome.warnings else ''}")
    note = selection_note(plan, hw)
    if note:
        print(note)
    from harness.profile.schema import default_thresholds_dir

    extra = ""
    if plan.output_path.parent.resolve() != default_thresholds_dir().resolve():
        extra = f" --harness-thresholds-dir={plan.output_path.parent}"
    print(f'use it: make acceptance ARGS="--hardware {plan.name}{extra}"')
    return 0
