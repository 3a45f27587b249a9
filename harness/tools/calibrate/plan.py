"""What to calibrate: the command line checked against the hardware and the files -> ``CalibrationPlan``.

Everything is validated before the first launch: a mistake found after an hour of runs costs an hour.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
import shlex
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal, Sequence

from harness.files import refuse_special_output
from harness.node.hardware import Hardware, HardwareError
from harness.node.presence import DeviceChoiceError, choose_device
from harness.profile.match import check_homogeneous, select_profile
from harness.profile.bounds import Profile
from harness.kinds.shipped import load_shipped_profile
from harness.profile.load import ThresholdError, default_thresholds_dir
from harness.tools.batchsize.search import DEFAULT_MEMORY_FRACTION
from harness.tools.calibrate import CalibrationError
from harness.tools.calibrate.bounds import Margins
from harness.tools.calibrate.options import DEFAULT_BATCH_MULTIPLE, DEFAULT_MATRIX
from harness.catalog import MODELS, PRECISIONS

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


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
    memory_fraction: float = DEFAULT_MEMORY_FRACTION
    max_batch: int | None = None
    """find-max-bs cap (required on cpu when a model has no --batch-size)."""
    batch_multiple: int = DEFAULT_BATCH_MULTIPLE
    independent_gpus: int = 1
    """On how many GPUs (CPU ranks) the 1-GPU case runs at once, each training its own model, as the acceptance
    suite runs it (harness/plugin/specs.py): every GPU of the node; on cpu the largest count calibrated."""
    components: bool = False
    """Also measure the component benchmarks and write [components] (--components)."""
    command_line: str = ""

    @property
    def launches(self) -> int:
        """How many benchmark launches the matrix makes over all repeats."""
        return self.repeats * len(self.models) * len(self.precisions) * len(self.gpu_counts)


def _split_list(values: Sequence[str] | None) -> list[str]:
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]


def parse_batch_sizes(values: Sequence[str] | None) -> dict[str, int]:
    """``["resnet50=256", "vit_b_16=192,bert_large=128"]`` -> {model: batch}."""
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


def valid_profiles(directories: Sequence[Path]) -> list[Profile]:
    """Every profile in these directories that loads, each file once; an invalid file is passed over."""
    profiles, seen = [], set()
    for directory in directories:
        for path in sorted(Path(directory).glob("*.toml")) if Path(directory).is_dir() else []:
            if path.resolve() in seen:
                continue
            seen.add(path.resolve())
            try:
                profiles.append(load_shipped_profile(path))
            except ThresholdError:
                continue  # an invalid file can neither lend its numbers nor be selected
    return profiles


def peaks_from_matching_profile(hw: Hardware, directories: Sequence[Path]) -> tuple[dict[str, float], str] | None:
    """The peak TFLOP/s of an existing profile that matches this hardware, with where they came from."""
    try:
        chosen = select_profile(hw, [p for p in valid_profiles(directories) if p.hardware.device == "cuda"])
    except HardwareError:
        return None
    if not chosen.peak_tflops:
        return None
    return dict(chosen.peak_tflops), f"copied from {chosen.path} (it matches this GPU): {chosen.peak_tflops_source}"


def _device(ns: argparse.Namespace, hw: Hardware) -> Literal["cuda", "cpu"]:
    """--device, else cuda where a GPU is usable and cpu where no NVIDIA hardware is; a node showing NVIDIA
    GPUs that cannot be used is refused (harness/node/presence.py): a quiet CPU calibration there would
    write a CPU profile for a GPU node."""
    try:
        device = choose_device(ns.device, hw)
    except DeviceChoiceError as exc:
        raise CalibrationError(str(exc)) from None
    if device == "cuda":
        try:
            check_homogeneous(hw)
        except HardwareError as exc:
            raise CalibrationError(str(exc)) from None
    return device


def _matrix(ns: argparse.Namespace, device: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The models and precisions: given, or the device's default matrix; each one known."""
    default_models, default_precisions = DEFAULT_MATRIX[device]
    models = tuple(dict.fromkeys(_split_list(ns.models))) or default_models
    precisions = tuple(dict.fromkeys(_split_list(ns.precisions))) or default_precisions
    for model in models:
        if model not in MODELS:
            raise CalibrationError(f"--models {model}: unknown; known: {', '.join(MODELS)}")
    for precision in precisions:
        if precision not in PRECISIONS:
            raise CalibrationError(f"--precisions {precision}: unknown; known: {', '.join(PRECISIONS)}")
    return models, precisions


def _gpu_counts(ns: argparse.Namespace, hw: Hardware, device: str) -> tuple[int, ...]:
    """The GPU counts: given, or 1 and the powers of two the node has; always holding 1."""
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
    return tuple(counts)


def _batch_sizes(ns: argparse.Namespace, device: str, models: tuple[str, ...]) -> dict[str, int]:
    """The --batch-size given per model; on cpu every other model needs the --max-batch search cap."""
    batch_sizes = parse_batch_sizes(ns.batch_size)
    stray = sorted(set(batch_sizes) - set(models))
    if stray:
        raise CalibrationError(f"--batch-size {', '.join(stray)}: not among the models calibrated "
                               f"({', '.join(models)})")
    if device == "cpu" and ns.max_batch is None and any(m not in batch_sizes for m in models):
        missing = ", ".join(m for m in models if m not in batch_sizes)
        raise CalibrationError(f"on cpu there is no device memory to fill: give --batch-size for {missing} "
                               "(e.g. --batch-size tiny_bert=16), or cap the search with --max-batch")
    return batch_sizes


def _margins(ns: argparse.Namespace) -> Margins:
    try:
        return Margins(throughput=ns.throughput_margin, efficiency=ns.efficiency_margin,
                       straggler_factor=ns.straggler_factor, step_time_cv=ns.cv_margin)
    except ValueError as exc:
        raise CalibrationError(str(exc)) from None


def _check_seconds_and_fraction(ns: argparse.Namespace) -> None:
    for option, value in (("--warmup", ns.warmup), ("--measure", ns.measure), ("--timeout", ns.timeout)):
        if not value > 0:
            raise CalibrationError(f"{option} {value}: must be > 0 seconds")
    if not 0 < ns.memory_fraction <= 1:
        raise CalibrationError(f"--memory-fraction {ns.memory_fraction}: a fraction in (0, 1], e.g. 0.9")


def _output_path(ns: argparse.Namespace) -> Path:
    """<output dir>/<name>.toml, refused when it exists (without --force); the directory is created."""
    output_dir = Path(ns.output_dir) if ns.output_dir else default_thresholds_dir()
    output_path = output_dir / f"{ns.name}.toml"
    if output_path.exists() and not ns.force:
        raise CalibrationError(f"{output_path} exists; pass --force to replace it, or choose another --name")
    try:
        refuse_special_output(output_path, "--output-dir")
    except OSError as exc:
        raise CalibrationError(str(exc)) from None
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CalibrationError(f"--output-dir {output_dir}: cannot create it ({exc.strerror or exc}); "
                               "give a writable directory") from None
    try:
        with tempfile.TemporaryFile(dir=output_dir):
            pass  # before an hour of measuring, not after it: the profile must be writable there
    except OSError as exc:
        raise CalibrationError(f"--output-dir {output_dir}: cannot write files there ({exc.strerror or exc}); "
                               "give a writable directory; nothing was measured") from None
    return output_path


def _peaks(ns: argparse.Namespace, hw: Hardware, device: str, precisions: tuple[str, ...],
           directories: Sequence[Path]) -> tuple[dict[str, float], str | None]:
    """The dense peak TFLOP/s per precision (cuda: given with a source, or copied from a matching profile)."""
    if device != "cuda":
        if ns.peak_tflops:
            raise CalibrationError("--peak-tflops is for cuda profiles; a cpu profile reports no MFU")
        return {}, None
    if ns.peak_tflops:
        peaks = parse_peak_tflops(ns.peak_tflops)
        peaks_source = ns.peak_tflops_source
        if not peaks_source:
            raise CalibrationError("--peak-tflops needs --peak-tflops-source: cite the datasheet (dense figures, "
                                   "not 2:4 sparse), e.g. --peak-tflops-source 'NVIDIA B200 datasheet, dense'")
    else:
        found = peaks_from_matching_profile(hw, directories)
        if found is None:
            raise CalibrationError(
                f"no existing profile matches {hw.gpu_name}, so its dense peak TFLOP/s (for MFU; required in a "
                "cuda profile) must be given: --peak-tflops bf16=<T>,fp16=<T>[,fp32=<T>] --peak-tflops-source "
                "'<datasheet>' (dense, not 2:4 sparse; docs/references.md lists some)")
        peaks, peaks_source = found
    missing = [p for p in precisions if p not in peaks]
    if missing:
        raise CalibrationError(f"no peak TFLOP/s for {', '.join(missing)} ({peaks_source or '--peak-tflops'}); "
                               f"add {', '.join(f'{p}=<T>' for p in missing)} to --peak-tflops")
    return peaks, peaks_source


def plan_from_args(ns: argparse.Namespace, hw: Hardware, *, thresholds_dir: Path | None = None,
                   now: datetime | None = None) -> CalibrationPlan:
    """Check every argument against the hardware and the files; CalibrationError says what is wrong."""
    if not _NAME.fullmatch(ns.name or ""):
        raise CalibrationError(f"--name {ns.name!r}: use letters, digits, '.', '_' and '-' (it becomes the file name "
                               "<name>.toml and what --hardware names), e.g. b200-180gb")
    device = _device(ns, hw)
    models, precisions = _matrix(ns, device)
    counts = _gpu_counts(ns, hw, device)
    if ns.repeats < 1:
        raise CalibrationError(f"--repeats {ns.repeats}: at least 1 (3 or more to see the spread)")
    batch_sizes = _batch_sizes(ns, device, models)
    margins = _margins(ns)
    _check_seconds_and_fraction(ns)
    output_path = _output_path(ns)
    peaks, peaks_source = _peaks(ns, hw, device, precisions,
                                 [thresholds_dir or default_thresholds_dir(), output_path.parent])
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    records_dir = Path(ns.records_dir) if ns.records_dir else Path("reports") / f"calibration-{stamp}-{ns.name}"
    plan = CalibrationPlan(
        name=ns.name, device=device, models=models, precisions=precisions, gpu_counts=counts,
        repeats=ns.repeats, batch_sizes=batch_sizes, warmup_seconds=ns.warmup, measure_seconds=ns.measure,
        timeout_s=ns.timeout, margins=margins, peak_tflops=peaks, peak_tflops_source=peaks_source,
        peak_tflops_given=bool(ns.peak_tflops),
        output_path=output_path, force=ns.force, description=ns.description, records_dir=records_dir,
        memory_fraction=ns.memory_fraction, max_batch=ns.max_batch, batch_multiple=ns.batch_multiple,
        independent_gpus=hw.gpu_count if device == "cuda" else counts[-1], components=ns.components,
        command_line="")
    return dataclasses.replace(plan, command_line=canonical_command(plan))


def _margin_arg(value: float | None) -> str:
    return "off" if value is None else f"{value:g}"


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
    if plan.components:
        parts.append("--components")
    parts += ["--warmup", f"{plan.warmup_seconds:g}", "--measure", f"{plan.measure_seconds:g}",
              "--throughput-margin", f"{m.throughput:g}", "--efficiency-margin", f"{m.efficiency:g}",
              "--straggler-factor", _margin_arg(m.straggler_factor), "--cv-margin", _margin_arg(m.step_time_cv)]
    return shlex.join(parts)
