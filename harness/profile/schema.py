"""Threshold profiles: the per-hardware pass/fail bounds, read from TOML and validated up front.

A profile is one file, ``thresholds/<name>.toml`` (format: thresholds/README.md). It is checked
completely before any benchmark runs, because a typo found after an hour of 8-GPU runs costs an
hour: every problem in a file becomes one line naming the file, the key path, the value and what
is allowed, and all of a file's problems are raised together as one ``ThresholdError``.

The schema is declared once, as tables of ``Field`` specs below (``TOP_LEVEL_FIELDS`` and the
section tables it nests). Adding a key is one ``Field(...)`` line there, plus the dataclass field
that carries it to the verdict; the generic checker does the rest (type, range, unknown keys,
missing keys). Rules that relate two keys (name vs file name, divisibility, matrix coverage) are
the small ``_check_*`` functions after the generic checker.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Literal, Mapping, Sequence

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

from harness.catalog import MODELS, PRECISIONS

SCHEMA_VERSION = 1

__all__ = [
    "SCHEMA_VERSION",
    "CaseBounds",
    "HardwareMatch",
    "InterconnectBounds",
    "Profile",
    "RunSettings",
    "SoakBounds",
    "ThresholdError",
    "TopologyBounds",
    "cli_check",
    "default_thresholds_dir",
    "load_profile",
    "load_profiles",
]


class ThresholdError(Exception):
    """One or more threshold files cannot be used. ``str(err)`` is the whole user-facing message,
    one line per problem, each line starting with the file it is about."""

    def __init__(self, path: str | os.PathLike[str], problems: Sequence[str]):
        super().__init__("\n".join(problems))
        self.path = Path(path)
        """The file, or the directory for ``load_profiles``."""
        self.problems = list(problems)

    def __reduce__(self):
        # The default pickling replays ``args`` (the joined text) into __init__, which wants two.
        return (type(self), (self.path, self.problems))


# ---------------------------------------------------------------------------------------------
# What a loaded profile is


@dataclass(frozen=True, kw_only=True, slots=True)
class HardwareMatch:
    """How the harness recognises the hardware a profile is for (used by hardware.select_profile)."""

    device: Literal["cuda", "cpu"]
    gpu_name_contains: str | None = None
    """Case-insensitive fragment of the GPU name as NVML reports it, e.g. "A100-SXM4"; None on cpu."""
    min_memory_gib: float | None = None
    """Smallest GPU memory (GiB, 1024³ bytes) the profile accepts; tells 40 GB from 80 GB parts."""
    max_memory_gib: float | None = None
    """Largest GPU memory (GiB) the profile accepts."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CaseBounds:
    """The bounds of one model x precision, already merged with [defaults] (the case's value wins)."""

    model: str
    """Key of harness.catalog.MODELS."""
    precision: str
    """One of harness.catalog.PRECISIONS."""
    batch_size_per_gpu: int
    """Samples per GPU per step in the weak-scaling runs."""
    source: str
    """Where the numbers came from: a measurement (who, where, when) or a cited publication."""
    min_samples_per_sec_per_gpu: float | None = None
    """Lowest acceptable throughput per GPU, samples/s (images/s or sequences/s)."""
    min_weak_efficiency: dict[int, float] = field(default_factory=dict)
    """GPU count -> lowest acceptable per-GPU throughput at that count / at 1 GPU, a fraction in (0, 1]."""
    strong_global_batch_size: int | None = None
    """Global batch of the strong-scaling runs (split evenly over the GPUs); None: no strong runs."""
    min_strong_efficiency: dict[int, float] = field(default_factory=dict)
    """GPU count -> lowest acceptable speedup / GPU count at a fixed global batch, a fraction in (0, 1]."""
    min_gpu_utilization_pct: float | None = None
    """Lowest acceptable mean GPU utilization during the measured window, percent (0..100)."""
    min_power_fraction_of_limit: float | None = None
    """Lowest acceptable mean power draw as a fraction of the enforced power limit, in (0, 1]."""
    max_temperature_c: float | None = None
    """Highest acceptable GPU temperature, degrees Celsius."""
    max_straggler_ratio: float | None = None
    """Highest acceptable slowest-rank / fastest-rank compute step time, >= 1."""
    max_step_time_cv: float | None = None
    """Highest acceptable coefficient of variation (stdev / mean) of step time, a fraction > 0."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunSettings:
    """How long each benchmark launch warms up, measures, and may take in total."""

    warmup_seconds: float = 5.0
    """Untimed steps first: cuDNN autotuning, allocator growth, clocks ramping up."""
    measure_seconds: float = 10.0
    """Length of the timed window; with ci_target, the least it lasts."""
    ci_target: float = 0.0
    """Adaptive window: stop once the 95 % CI half-width of throughput is at most this (0.01 = ±1 %);
    0 = a fixed window of measure_seconds."""
    max_measure_seconds: float | None = None
    """Adaptive window: the longest it lasts, whatever the CI."""
    timeout_seconds: float = 600.0
    """Wall-clock limit of one launch, start-up included; past it the launch is killed and fails."""


@dataclass(frozen=True, kw_only=True, slots=True)
class InterconnectBounds:
    """Collective-communication bounds, measured as nccl-tests does."""

    min_allreduce_busbw_gbps: dict[int, float]
    """GPU count -> lowest acceptable all-reduce bus bandwidth, GB/s (10⁹ bytes/s, nccl-tests busbw)."""
    source: str


@dataclass(frozen=True, kw_only=True, slots=True)
class TopologyBounds:
    """Expected GPU wiring; a missing link is a hardware fault the throughput checks may not show."""

    nvlinks_per_gpu: int | None = None
    """Active NVLink links per GPU."""
    p2p_all_pairs: bool | None = None
    """Whether every GPU pair must support peer-to-peer access."""
    pcie_generation: int | None = None
    """Expected current PCIe link generation of each GPU (under load: links downtrain when idle)."""
    pcie_width: int | None = None
    """Expected PCIe link width (lanes) of each GPU."""
    source: str


@dataclass(frozen=True, kw_only=True, slots=True)
class SoakBounds:
    """Bounds of a long run: does the node hold its speed once hot?"""

    max_throughput_decay: float
    """Largest acceptable slowdown of the last window vs the first, a fraction in (0, 1)."""
    source: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Profile:
    """One validated threshold file."""

    name: str
    """The file stem, e.g. "a100-80gb"; what --hardware names."""
    path: Path
    """The file it was read from, as given."""
    sha256: str
    """SHA-256 of the file's bytes, so a report pins exactly which thresholds were applied."""
    description: str
    hardware: HardwareMatch
    peak_tflops: dict[str, float] = field(default_factory=dict)
    """Precision -> dense (not 2:4 sparse) peak TFLOP/s per GPU, for MFU; may be empty on cpu."""
    peak_tflops_source: str | None = None
    gpu_counts: tuple[int, ...]
    """GPU counts of the default matrix."""
    models: tuple[str, ...]
    """Models of the default matrix."""
    precisions: tuple[str, ...]
    """Precisions of the default matrix."""
    run: RunSettings = field(default_factory=RunSettings)
    cases: dict[tuple[str, str], CaseBounds]
    """(model, precision) -> bounds; includes cases outside the default matrix."""
    interconnect: InterconnectBounds | None = None
    topology: TopologyBounds | None = None
    soak: SoakBounds | None = None
    raw: dict = field(default_factory=dict)
    """The parsed TOML as read, for the report's "thresholds applied" section."""

    def bounds(self, model: str, precision: str) -> CaseBounds | None:
        """The bounds for ``model`` x ``precision``, or None when the profile has no such case."""
        return self.cases.get((model, precision))


# ---------------------------------------------------------------------------------------------
# Problem reporting

KeyPath = tuple  # of str (table keys), int (GPU counts) and _Index (array positions)

_ABSENT = object()
"""A key that is not in the file (distinct from any TOML value)."""
_INVALID = object()
"""What a check returns for a value it has reported as a problem."""

_MAX_SHOWN_CHARS = 80
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


class _Index(int):
    """A position in a TOML array; shown as ``[i]`` in a key path, unlike a GPU-count key."""


@dataclass(slots=True)
class _Report:
    """The problems found in one file, each already formatted as its final line."""

    label: str
    """The file as the user gave it: messages should name what they typed."""
    lines: list[str] = field(default_factory=list)

    def add(self, where: KeyPath, complaint: str, value: Any = _ABSENT) -> None:
        subject = _key_path(where)
        if value is not _ABSENT:
            subject = f"{subject} = {_shown(value)}"
        self.lines.append(f"{self.label}: {subject}: {complaint}" if subject else f"{self.label}: {complaint}")


def _key_path(where: KeyPath) -> str:
    text = ""
    for part in where:
        if isinstance(part, _Index):
            text += f"[{int(part)}]"
            continue
        part = str(part)
        shown = part if _BARE_KEY.fullmatch(part) else json.dumps(part, ensure_ascii=False)
        text = f"{text}.{shown}" if text else shown
    return text


def _toml_repr(value: Any) -> str:
    """``value`` as it would be written in TOML: the user should recognise what they typed."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (int, float)):
        return repr(value)  # nan, inf and 1e+20 are valid TOML as Python writes them
    if isinstance(value, list):
        return "[" + ", ".join(_toml_repr(item) for item in value) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = ", ".join(f"{_key_path((key,))} = {_toml_repr(item)}" for key, item in value.items())
        return "{ " + items + " }"
    if hasattr(value, "isoformat"):  # TOML dates and times
        return value.isoformat()
    return str(value)


def _shown(value: Any) -> str:
    text = _toml_repr(value)
    return text if len(text) <= _MAX_SHOWN_CHARS else text[: _MAX_SHOWN_CHARS - 3] + "..."


def _toml_type(value: Any) -> str:
    """The TOML name of a parsed value's type (bool first: it is an int to Python)."""
    for python_type, toml_name in ((bool, "boolean"), (str, "string"), (int, "integer"), (float, "float"),
                                   (list, "array"), (dict, "table")):
        if isinstance(value, python_type):
            return toml_name
    return type(value).__name__  # datetime, date, time


# ---------------------------------------------------------------------------------------------
# The declarative schema: Field specs, their kinds, and range rules


@dataclass(frozen=True, slots=True)
class Rule:
    """A range check on a value of the right type, and the words a user reads when it fails."""

    accepts: Callable[[Any], bool]
    allowed: str


Kind = Callable[[Any, KeyPath, _Report, "Field"], Any]
"""Checks one value's type (and its Field's rule), reports problems, returns the converted value
or _INVALID."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Field:
    """One key of a table in the threshold file."""

    key: str
    kind: Kind
    doc: str
    """What the key means, with its unit; quoted when the key is missing."""
    required: bool = False
    rule: Rule | None = None
    """Range check; for arrays and GPU-count tables it applies to each element."""
    fields: tuple["Field", ...] = ()
    """The keys of a nested table (kind TABLE)."""
    inherit: bool = False
    """A case bound that [defaults] may set for every case."""


def _apply(rule: Rule | None, value: Any, where: KeyPath, report: _Report) -> Any:
    if rule is None or rule.accepts(value):
        return value
    report.add(where, rule.allowed, value)
    return _INVALID


def _wrong_type(value: Any, expected: str, where: KeyPath, report: _Report, hint: str = "") -> Any:
    report.add(where, f"expected {expected}, got {_toml_type(value)}{hint}", value)
    return _INVALID


def _looks_like_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _string(value: Any, where: KeyPath, report: _Report, spec: Field) -> Any:
    if not isinstance(value, str):
        return _wrong_type(value, "a string", where, report)
    return _apply(spec.rule, value, where, report)


def _integer(value: Any, where: KeyPath, report: _Report, spec: Field) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return _apply(spec.rule, value, where, report)
    hint = ""
    if isinstance(value, float) and value.is_integer():
        hint = f"; write {int(value)}, without a decimal point"
    elif isinstance(value, str) and value.strip().isdigit():
        hint = "; remove the quotes"
    return _wrong_type(value, "an integer", where, report, hint)


def _number(value: Any, where: KeyPath, report: _Report, spec: Field) -> Any:
    if isinstance(value, bool):
        return _wrong_type(value, "a number", where, report, " (true/false is not a number)")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            report.add(where, "expected a finite number", value)
            return _INVALID
        # The rule sees the value as written, so a message shows "101", not "101.0".
        checked = _apply(spec.rule, value, where, report)
        return checked if checked is _INVALID else float(checked)
    hint = "; remove the quotes" if isinstance(value, str) and _looks_like_number(value) else ""
    return _wrong_type(value, "a number", where, report, hint)


def _boolean(value: Any, where: KeyPath, report: _Report, spec: Field) -> Any:
    if isinstance(value, bool):
        return value
    hint = "; remove the quotes" if isinstance(value, str) and value in ("true", "false") else ""
    return _wrong_type(value, "a boolean (true or false)", where, report, hint)


def _array_of(element: Kind, noun: str) -> Kind:
    """An array of ``noun``s, non-empty, each checked by ``element`` and listed once; a tuple."""

    def check(value: Any, where: KeyPath, report: _Report, spec: Field) -> Any:
        if not isinstance(value, list):
            return _wrong_type(value, f"an array of {noun}s", where, report)
        if not value:
            report.add(where, f"must list at least one {noun}", value)
            return _INVALID
        items: list[Any] = []
        for index, item in enumerate(value):
            item_where = (*where, _Index(index))
            converted = element(item, item_where, report, spec)
            if converted is _INVALID:
                continue
            if converted in items:
                report.add(item_where, f"repeats an earlier entry; list each {noun} once", item)
                continue
            items.append(converted)
        return tuple(items) if len(items) == len(value) else _INVALID

    return check


_GPU_COUNT_TABLE_EXAMPLE = "{ 2 = ..., 8 = ... }"


def _gpu_count_table(element: Kind) -> Kind:
    """A table keyed by GPU count (>= 2: nothing scales or all-reduces on one GPU); int keys."""

    def check(value: Any, where: KeyPath, report: _Report, spec: Field) -> Any:
        if not isinstance(value, dict):
            return _wrong_type(value, f"a table of GPU count = value, e.g. {_GPU_COUNT_TABLE_EXAMPLE}", where, report)
        converted_by_count: dict[int, Any] = {}
        valid = True
        for key, item in value.items():
            if not (key.isascii() and key.isdigit()) or key != str(int(key)):
                report.add((*where, key), f"GPU-count key {json.dumps(key)} is not a plain integer; expected an "
                           f"integer GPU count >= 2, e.g. {_GPU_COUNT_TABLE_EXAMPLE}", item)
                valid = False
                continue
            gpu_count = int(key)
            if gpu_count < 2:
                report.add((*where, gpu_count), f"GPU count {gpu_count} is out of range; GPU-count keys here are "
                           "integers >= 2 (a single GPU has nothing to scale or all-reduce against)", item)
                valid = False
                continue
            converted = element(item, (*where, gpu_count), report, spec)
            if converted is _INVALID:
                valid = False
            else:
                converted_by_count[gpu_count] = converted
        return dict(sorted(converted_by_count.items())) if valid else _INVALID

    return check


def _precision_table(element: Kind) -> Kind:
    """A table keyed by precision (harness.catalog.PRECISIONS)."""

    def check(value: Any, where: KeyPath, report: _Report, spec: Field) -> Any:
        if not isinstance(value, dict):
            example = ", ".join(f"{precision} = ..." for precision in PRECISIONS)
            return _wrong_type(value, f"a table of precision = value, e.g. {{ {example} }}", where, report)
        converted_by_precision: dict[str, Any] = {}
        valid = True
        for precision, item in value.items():
            if precision not in PRECISIONS:
                report.add((*where, precision), _unknown(precision, PRECISIONS, noun="precision"))
                valid = False
                continue
            converted = element(item, (*where, precision), report, spec)
            if converted is _INVALID:
                valid = False
            else:
                converted_by_precision[precision] = converted
        return converted_by_precision if valid else _INVALID

    return check


def _table(value: Any, where: KeyPath, report: _Report, spec: Field) -> Any:
    if not isinstance(value, dict):
        return _wrong_type(value, "a table", where, report)
    return _check_table(value, spec.fields, where, report)


def _cases(value: Any, where: KeyPath, report: _Report, spec: Field) -> Any:
    """``[models.<model>.<precision>]`` tables -> {(model, precision): checked case table}."""
    if not isinstance(value, dict):
        return _wrong_type(value, "a table of [models.<model>.<precision>] cases", where, report,
                           "; the models of the default matrix are listed in [defaults] models")
    cases: dict[tuple[str, str], dict[str, Any]] = {}
    for model, by_precision in value.items():
        if model not in MODELS:
            report.add((*where, model), _unknown(model, MODELS, noun="model"))
            continue
        if not isinstance(by_precision, dict):
            _wrong_type(by_precision, f"a table of precisions, e.g. [models.{model}.fp16]", (*where, model), report)
            continue
        for precision, case in by_precision.items():
            case_where = (*where, model, precision)
            if precision not in PRECISIONS:
                report.add(case_where, _unknown(precision, PRECISIONS, noun="precision")
                           + f"; a case is a [models.{model}.<precision>] table")
                continue
            if not isinstance(case, dict):
                _wrong_type(case, "a table of bounds", case_where, report)
                continue
            cases[(model, precision)] = _check_table(case, CASE_FIELDS, case_where, report)
    return cases


STRING: Kind = _string
INTEGER: Kind = _integer
NUMBER: Kind = _number
BOOLEAN: Kind = _boolean
TABLE: Kind = _table
CASES: Kind = _cases
STRING_ARRAY: Kind = _array_of(_string, "string")
GPU_COUNT_ARRAY: Kind = _array_of(_integer, "GPU count")
FRACTION_BY_GPU_COUNT: Kind = _gpu_count_table(_number)
NUMBER_BY_GPU_COUNT: Kind = _gpu_count_table(_number)
NUMBER_BY_PRECISION: Kind = _precision_table(_number)


def _greater_than(low: float, unit: str = "") -> Rule:
    return Rule(lambda value: value > low, f"must be > {low:g}{unit}")


def _at_least(low: float, unit: str = "") -> Rule:
    return Rule(lambda value: value >= low, f"must be >= {low:g}{unit}")


def _between(low: float, high: float, unit: str = "") -> Rule:
    return Rule(lambda value: low <= value <= high, f"must be between {low:g} and {high:g}{unit}")


def _one_of(choices: Sequence[Any]) -> Rule:
    return Rule(lambda value: value in choices, "must be one of " + ", ".join(_toml_repr(c) for c in choices))


_NOT_EMPTY = Rule(lambda text: text.strip() != "", "must not be empty")
_SOURCE_DOC = "where the numbers came from: a measurement (who, which node, when) or a cited publication"
# 96 % written as 96 is the mistake this catches; a bound above 1 could never pass.
_EFFICIENCY = Rule(lambda value: 0 < value <= 1, "an efficiency is a fraction in (0, 1]; use 0.96, not 96")
_KNOWN_MODEL = Rule(lambda name: name in MODELS, "unknown model; known models: " + ", ".join(MODELS))
_KNOWN_PRECISION = Rule(lambda name: name in PRECISIONS, "unknown precision; known precisions: " + ", ".join(PRECISIONS))


HARDWARE_MATCH_FIELDS = (
    Field(key="gpu_name_contains", kind=STRING, rule=_NOT_EMPTY, doc="case-insensitive fragment of the GPU name as NVML reports it, e.g. \"H200\""),
    Field(key="min_memory_gib", kind=NUMBER, rule=_greater_than(0, " GiB"), doc="smallest GPU memory accepted, GiB (1024^3 bytes)"),
    Field(key="max_memory_gib", kind=NUMBER, rule=_greater_than(0, " GiB"), doc="largest GPU memory accepted, GiB (1024^3 bytes)"),
)

HARDWARE_FIELDS = (
    Field(key="name", kind=STRING, required=True, rule=_NOT_EMPTY, doc="the profile name, equal to the file name without .toml"),
    Field(key="description", kind=STRING, required=True, rule=_NOT_EMPTY, doc="the hardware in words, for the report"),
    Field(key="device", kind=STRING, required=True, rule=_one_of(("cuda", "cpu")), doc="\"cuda\" or \"cpu\""),
    Field(key="match", kind=TABLE, fields=HARDWARE_MATCH_FIELDS, doc="how the harness recognises this hardware"),
    Field(key="peak_tflops", kind=NUMBER_BY_PRECISION, rule=_greater_than(0, " TFLOP/s"), doc="precision -> dense peak TFLOP/s per GPU, for MFU"),
    Field(key="peak_tflops_source", kind=STRING, rule=_NOT_EMPTY, doc="where the peak_tflops figures come from"),
)

RUN_FIELDS = (
    Field(key="warmup_seconds", kind=NUMBER, rule=_at_least(0, " s"), doc="untimed warmup per launch, seconds"),
    Field(key="measure_seconds", kind=NUMBER, rule=_greater_than(0, " s"), doc="timed window per launch, seconds"),
    Field(key="timeout_seconds", kind=NUMBER, rule=_greater_than(0, " s"), doc="wall-clock limit per launch, seconds"),
    Field(key="ci_target", kind=NUMBER, rule=Rule(lambda v: 0 <= v < 1, "must be a fraction in [0, 1): 0.01 for ±1 %, not 1; 0 for a fixed window"), doc="adaptive window: stop at this relative 95 % CI half-width of throughput (0.01 = ±1 %); 0 = fixed window"),
    Field(key="max_measure_seconds", kind=NUMBER, rule=_greater_than(0, " s"), doc="adaptive window: the longest measured window, seconds"),
)

CASE_FIELDS = (
    Field(key="batch_size_per_gpu", kind=INTEGER, required=True, rule=_at_least(1, " (samples per GPU per step)"), doc="samples per GPU per step of the weak-scaling runs"),
    Field(key="min_samples_per_sec_per_gpu", kind=NUMBER, rule=_greater_than(0, " (samples/s per GPU)"), doc="lowest throughput per GPU, samples/s"),
    Field(key="min_weak_efficiency", kind=FRACTION_BY_GPU_COUNT, rule=_EFFICIENCY, inherit=True, doc="GPU count -> lowest weak-scaling efficiency, a fraction"),
    Field(key="strong_global_batch_size", kind=INTEGER, rule=_at_least(1, " (samples per step, all GPUs)"), doc="global batch of the strong-scaling runs"),
    Field(key="min_strong_efficiency", kind=FRACTION_BY_GPU_COUNT, rule=_EFFICIENCY, doc="GPU count -> lowest strong-scaling efficiency, a fraction"),
    Field(key="min_gpu_utilization_pct", kind=NUMBER, rule=_between(0, 100, " (percent)"), inherit=True, doc="lowest mean GPU utilization, percent"),
    Field(key="min_power_fraction_of_limit", kind=NUMBER, rule=Rule(lambda v: 0 < v <= 1, "must be a fraction in (0, 1] of the power limit; use 0.5, not 50"), inherit=True, doc="lowest mean power / power limit, a fraction"),
    Field(key="max_temperature_c", kind=NUMBER, rule=Rule(lambda v: 0 < v <= 150, "must be between 0 and 150 (degrees Celsius)"), inherit=True, doc="highest GPU temperature, degrees Celsius"),
    Field(key="max_straggler_ratio", kind=NUMBER, rule=_at_least(1, " (slowest rank / fastest rank)"), inherit=True, doc="highest slowest/fastest rank step-time ratio"),
    Field(key="max_step_time_cv", kind=NUMBER, rule=Rule(lambda v: 0 < v <= 1, "must be a fraction in (0, 1]; use 0.05 for 5 %, not 5"), inherit=True, doc="highest step-time coefficient of variation, a fraction"),
    Field(key="source", kind=STRING, required=True, rule=_NOT_EMPTY, doc=_SOURCE_DOC),
)

DEFAULTS_FIELDS = (
    Field(key="gpu_counts", kind=GPU_COUNT_ARRAY, required=True, rule=_at_least(1, " (GPUs)"), doc="GPU counts of the default matrix, e.g. [1, 2, 4, 8]"),
    Field(key="models", kind=STRING_ARRAY, required=True, rule=_KNOWN_MODEL, doc="models of the default matrix"),
    Field(key="precisions", kind=STRING_ARRAY, required=True, rule=_KNOWN_PRECISION, doc="precisions of the default matrix"),
    *(spec for spec in CASE_FIELDS if spec.inherit),
    Field(key="source", kind=STRING, required=True, rule=_NOT_EMPTY, doc=_SOURCE_DOC),
)

INTERCONNECT_FIELDS = (
    Field(key="min_allreduce_busbw_gbps", kind=NUMBER_BY_GPU_COUNT, required=True, rule=_greater_than(0, " GB/s"), doc="GPU count -> lowest all-reduce bus bandwidth, GB/s (10^9 bytes/s)"),
    Field(key="source", kind=STRING, required=True, rule=_NOT_EMPTY, doc=_SOURCE_DOC),
)

TOPOLOGY_FIELDS = (
    Field(key="nvlinks_per_gpu", kind=INTEGER, rule=_at_least(0, " (links)"), doc="active NVLink links per GPU"),
    Field(key="p2p_all_pairs", kind=BOOLEAN, doc="every GPU pair supports peer-to-peer access"),
    Field(key="pcie_generation", kind=INTEGER, rule=_between(1, 7), doc="PCIe link generation of each GPU under load"),
    Field(key="pcie_width", kind=INTEGER, rule=_one_of((1, 2, 4, 8, 16)), doc="PCIe link width (lanes) of each GPU"),
    Field(key="source", kind=STRING, required=True, rule=_NOT_EMPTY, doc=_SOURCE_DOC),
)

SOAK_FIELDS = (
    Field(key="max_throughput_decay", kind=NUMBER, required=True, rule=Rule(lambda v: 0 < v < 1, "must be a fraction in (0, 1); use 0.03 for 3 %, not 3"), doc="largest slowdown of the last window vs the first, a fraction"),
    Field(key="source", kind=STRING, required=True, rule=_NOT_EMPTY, doc=_SOURCE_DOC),
)

TOP_LEVEL_FIELDS = (
    Field(key="schema_version", kind=INTEGER, required=True, rule=_one_of((SCHEMA_VERSION,)), doc=f"the file format version, {SCHEMA_VERSION}"),
    Field(key="hardware", kind=TABLE, required=True, fields=HARDWARE_FIELDS, doc="[hardware]: what the profile is for"),
    Field(key="run", kind=TABLE, fields=RUN_FIELDS, doc="[run]: launch durations"),
    Field(key="defaults", kind=TABLE, required=True, fields=DEFAULTS_FIELDS, doc="[defaults]: the default matrix and bounds shared by every case"),
    Field(key="models", kind=CASES, required=True, doc="[models.<model>.<precision>] tables, one per case"),
    Field(key="interconnect", kind=TABLE, fields=INTERCONNECT_FIELDS, doc="[interconnect]: all-reduce bounds"),
    Field(key="topology", kind=TABLE, fields=TOPOLOGY_FIELDS, doc="[topology]: expected GPU wiring"),
    Field(key="soak", kind=TABLE, fields=SOAK_FIELDS, doc="[soak]: long-run bounds"),
)

SECTIONS: dict[str, tuple[Field, ...]] = {
    "the top level": TOP_LEVEL_FIELDS,
    "[hardware]": HARDWARE_FIELDS,
    "hardware.match": HARDWARE_MATCH_FIELDS,
    "[run]": RUN_FIELDS,
    "[defaults]": DEFAULTS_FIELDS,
    "[models.<model>.<precision>]": CASE_FIELDS,
    "[interconnect]": INTERCONNECT_FIELDS,
    "[topology]": TOPOLOGY_FIELDS,
    "[soak]": SOAK_FIELDS,
}
"""Every table of the schema, by how the README and error messages name it."""

_RENAMED_KEYS = {
    # Names from the first design sketch (docs), which a hand-written file may still use.
    "min_throughput_per_gpu": "min_samples_per_sec_per_gpu",
    "min_allreduce_busbw": "min_allreduce_busbw_gbps",
}


def _unknown(key: str, allowed: Iterable[str], *, noun: str = "key", fields: Sequence[Field] = ()) -> str:
    """'unknown key; allowed keys here: ...', plus the likeliest intended key or where it belongs."""
    allowed = list(allowed)
    listing = f"allowed {noun}s here" if noun == "key" else f"known {noun}s"
    text = f"unknown {noun}; {listing}: {', '.join(allowed)}"
    intended = _RENAMED_KEYS.get(key)
    if intended not in allowed:
        close = difflib.get_close_matches(key, allowed, n=1)
        intended = close[0] if close else None
    if intended is not None:
        return f"{text}; did you mean {intended}?"
    homes = [section for section, specs in SECTIONS.items()
             if specs is not fields and any(spec.key == key for spec in specs)]
    if homes and fields:
        return f"{text}; {key} belongs in {' or '.join(homes)}"
    return text


def _check_table(table: Mapping[str, Any], fields: Sequence[Field], where: KeyPath, report: _Report) -> dict[str, Any]:
    """Type- and range-check every key of ``table`` against ``fields``; the valid values, converted."""
    spec_by_key = {spec.key: spec for spec in fields}
    checked: dict[str, Any] = {}
    for key, value in table.items():
        spec = spec_by_key.get(key)
        if spec is None:
            report.add((*where, key), _unknown(key, spec_by_key, fields=fields))
            continue
        converted = spec.kind(value, (*where, key), report, spec)
        if converted is not _INVALID:
            checked[key] = converted
    for spec in fields:
        if spec.required and spec.key not in table:
            what = "table" if spec.kind in (TABLE, CASES) else "key"
            report.add((*where, spec.key), f"required {what} is missing: {spec.doc}")
    return checked


# ---------------------------------------------------------------------------------------------
# Rules that relate several keys. Each sees the raw tables (to tell "absent" from "invalid", which
# was reported already) and the checked values.


def _table_at(raw: Mapping[str, Any], *keys: str) -> Mapping[str, Any] | None:
    """The raw table at ``keys``; {} when absent; None when something on the way is not a table."""
    table: Any = raw
    for key in keys:
        table = table.get(key, {})
        if not isinstance(table, dict):
            return None
    return table


def _check_name(checked: Mapping[str, Any], stem: str, report: _Report) -> None:
    name = checked.get("hardware", {}).get("name")
    if name is not None and name != stem:
        report.add(("hardware", "name"), f"must equal the file name without .toml ({json.dumps(stem)}); "
                   "rename the file or change the name", name)


def _check_hardware(raw: Mapping[str, Any], checked: Mapping[str, Any], report: _Report) -> None:
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


def _check_peak_per_precision(raw: Mapping[str, Any], checked: Mapping[str, Any], report: _Report) -> None:
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


def _check_matrix_cases(raw: Mapping[str, Any], checked: Mapping[str, Any], report: _Report) -> None:
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


def _check_strong_scaling(checked: Mapping[str, Any], report: _Report) -> None:
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


def _check_run(raw: Mapping[str, Any], checked: Mapping[str, Any], report: _Report) -> None:
    run = checked.get("run", {})
    defaults = RunSettings()
    measure = run.get("measure_seconds", defaults.measure_seconds)
    if "max_measure_seconds" in run and run["max_measure_seconds"] < measure:
        report.add(("run", "max_measure_seconds"), f"must be at least measure_seconds ({measure:g} s), the least "
                   "an adaptive window lasts", raw["run"]["max_measure_seconds"])
    if "timeout_seconds" not in run:
        return
    busy_seconds = run.get("warmup_seconds", defaults.warmup_seconds) + run.get("measure_seconds", defaults.measure_seconds)
    if run["timeout_seconds"] <= busy_seconds:
        report.add(("run", "timeout_seconds"), f"must exceed warmup_seconds + measure_seconds ({busy_seconds:g} s), "
                   "with room for start-up and model build", raw["run"]["timeout_seconds"])


# ---------------------------------------------------------------------------------------------
# Building the dataclasses from checked values


def _case_bounds(model: str, precision: str, case: Mapping[str, Any], defaults: Mapping[str, Any]) -> CaseBounds:
    inherited = {spec.key: defaults[spec.key] for spec in CASE_FIELDS
                 if spec.inherit and spec.key in defaults and spec.key not in case}
    source = case["source"]
    if inherited:
        source = f"{source}; {', '.join(inherited)} from [defaults]: {defaults['source']}"
    own = {key: value for key, value in case.items() if key != "source"}
    return CaseBounds(model=model, precision=precision, source=source, **inherited, **own)


def _build_profile(path: Path, data: bytes, raw: dict, checked: Mapping[str, Any]) -> Profile:
    hardware = checked["hardware"]
    defaults = checked["defaults"]
    cases = {key: _case_bounds(*key, case, defaults) for key, case in checked["models"].items()}
    optional_sections = {
        name: (cls(**checked[name]) if name in checked else None)
        for name, cls in (("interconnect", InterconnectBounds), ("topology", TopologyBounds), ("soak", SoakBounds))
    }
    return Profile(
        name=hardware["name"],
        path=path,
        sha256=hashlib.sha256(data).hexdigest(),
        description=hardware["description"],
        hardware=HardwareMatch(device=hardware["device"], **hardware.get("match", {})),
        peak_tflops=hardware.get("peak_tflops", {}),
        peak_tflops_source=hardware.get("peak_tflops_source"),
        gpu_counts=tuple(sorted(defaults["gpu_counts"])),
        models=defaults["models"],
        precisions=defaults["precisions"],
        run=RunSettings(**checked.get("run", {})),
        cases=cases,
        raw=raw,
        **optional_sections,
    )


# ---------------------------------------------------------------------------------------------
# I/O edge


def _parse(path: Path, report: _Report) -> tuple[bytes, dict] | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        report.add((), "no such file")
        return None
    except IsADirectoryError:
        report.add((), "is a directory, not a threshold file; use load_profiles for a directory")
        return None
    except OSError as err:
        report.add((), f"cannot read the file: {err.strerror or err}")
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        report.add((), f"not UTF-8 text (bad byte at offset {err.start}); TOML files must be UTF-8")
        return None
    try:
        return data, tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        # tomllib's message ends "(at line L, column C)", which is what the user needs.
        report.add((), f"invalid TOML: {err}; fix the syntax there (TOML reference: https://toml.io/en/v1.0.0)")
        return None


def load_profile(path: str | os.PathLike[str]) -> Profile:
    """Read and validate one threshold file; raise ThresholdError listing all its problems."""
    path = Path(path)
    report = _Report(label=str(path))
    parsed = _parse(path, report)
    if parsed is None:
        raise ThresholdError(path, report.lines)
    data, raw = parsed
    version = raw.get("schema_version", _ABSENT)
    if isinstance(version, int) and not isinstance(version, bool) and version != SCHEMA_VERSION:
        # A file of another version would drown this one fact in unknown-key noise.
        report.add(("schema_version",), f"this harness reads schema_version = {SCHEMA_VERSION} only; use the harness "
                   "version that wrote the file, or convert it (thresholds/README.md)", version)
        raise ThresholdError(path, report.lines)
    checked = _check_table(raw, TOP_LEVEL_FIELDS, (), report)
    _check_name(checked, path.stem, report)
    _check_hardware(raw, checked, report)
    _check_peak_per_precision(raw, checked, report)
    _check_matrix_cases(raw, checked, report)
    _check_strong_scaling(checked, report)
    _check_run(raw, checked, report)
    if report.lines:
        raise ThresholdError(path, report.lines)
    return _build_profile(path, data, raw, checked)


def load_profiles(directory: str | os.PathLike[str]) -> list[Profile]:
    """Every ``*.toml`` in ``directory``, sorted by name; ThresholdError lists every bad file's problems."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ThresholdError(directory, [f"{directory}: not a directory of threshold files; set "
                                         "HARNESS_THRESHOLDS_DIR or pass an existing directory"])
    profiles: list[Profile] = []
    problems: list[str] = []
    for path in sorted(directory.glob("*.toml")):
        try:
            profiles.append(load_profile(path))
        except ThresholdError as err:
            problems.extend(err.problems)
    if problems:
        raise ThresholdError(directory, problems)
    return sorted(profiles, key=lambda profile: profile.name)


def default_thresholds_dir() -> Path:
    """$HARNESS_THRESHOLDS_DIR, else the thresholds/ next to the package (a source checkout), else ./thresholds."""
    from_env = os.environ.get("HARNESS_THRESHOLDS_DIR")
    if from_env:
        return Path(from_env)
    beside_package = Path(__file__).resolve().parents[2] / "thresholds"
    if beside_package.is_dir():
        return beside_package
    return Path("thresholds")


def _files_to_check(paths: Sequence[str]) -> tuple[list[Path], str]:
    """The files named (directories expand to their *.toml), and where they were looked for."""
    if not paths:
        directory = default_thresholds_dir()
        return sorted(directory.glob("*.toml")), str(directory)
    files: list[Path] = []
    for given in paths:
        path = Path(given)
        files.extend(sorted(path.glob("*.toml")) if path.is_dir() else [path])
    return files, ", ".join(paths)


def cli_check(paths: list[str]) -> int:
    """``harness thresholds check [FILES]``: 0 when every file is valid, 1 when any is not, 2 when none was found."""
    files, searched = _files_to_check(paths)
    if not files:
        print(f"harness thresholds check: no threshold files (*.toml) found in {searched}; pass files or a "
              "directory, or set HARNESS_THRESHOLDS_DIR", file=sys.stderr)
        return 2
    bad_files = 0
    for path in files:
        try:
            profile = load_profile(path)
        except ThresholdError as err:
            bad_files += 1
            print(err, file=sys.stderr)
            continue
        case_count = len(profile.cases)
        print(f"ok  {path}  ({case_count} case{'' if case_count == 1 else 's'})")
    if bad_files:
        print(f"problems in {bad_files} of {len(files)} threshold files (format: thresholds/README.md)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(cli_check(sys.argv[1:]))
