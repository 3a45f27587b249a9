"""The value kinds of the threshold-file schema (harness/profile/schema.py): each checks one value's
type and its Field's range rule, reports every problem with its key path, and returns the converted
value or INVALID. ``Field`` (one key of a table) lives here with its kinds and rules, so that this module and
schema.py, which holds the tables of keys, import in one direction only."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable

from harness.profile.problems import INVALID, ArrayIndex, KeyPath, ProblemReport, toml_type

@dataclass(frozen=True, slots=True)
class Rule:
    """A range check on a value of the right type, and the words a user reads when it fails."""

    accepts: Callable[[Any], bool]
    allowed: str


Kind = Callable[[Any, KeyPath, ProblemReport, "Field"], Any]
"""Checks one value's type (and its Field's rule), reports problems, returns the converted value
or INVALID."""


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
    formerly: tuple[str, ...] = ()
    """Names the key had in the first design sketch (docs), which a hand-written file may still use: such a key is
    refused, pointing to this one."""


def _apply(rule: Rule | None, value: Any, where: KeyPath, report: ProblemReport) -> Any:
    if rule is None or rule.accepts(value):
        return value
    report.add(where, rule.allowed, value)
    return INVALID


def wrong_type(value: Any, expected: str, where: KeyPath, report: ProblemReport, hint: str = "") -> Any:
    report.add(where, f"expected {expected}, got {toml_type(value)}{hint}", value)
    return INVALID


def _looks_like_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _string(value: Any, where: KeyPath, report: ProblemReport, spec: Field) -> Any:
    if not isinstance(value, str):
        return wrong_type(value, "a string", where, report)
    return _apply(spec.rule, value, where, report)


def _integer(value: Any, where: KeyPath, report: ProblemReport, spec: Field) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return _apply(spec.rule, value, where, report)
    hint = ""
    if isinstance(value, float) and value.is_integer():
        hint = f"; write {int(value)}, without a decimal point"
    elif isinstance(value, str) and value.strip().isdigit():
        hint = "; remove the quotes"
    return wrong_type(value, "an integer", where, report, hint)


def number(value: Any, where: KeyPath, report: ProblemReport, spec: Field) -> Any:
    if isinstance(value, bool):
        return wrong_type(value, "a number", where, report, " (true/false is not a number)")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            report.add(where, "expected a finite number", value)
            return INVALID
        # The rule sees the value as written, so a message shows "101", not "101.0".
        checked = _apply(spec.rule, value, where, report)
        return checked if checked is INVALID else float(checked)
    hint = "; remove the quotes" if isinstance(value, str) and _looks_like_number(value) else ""
    return wrong_type(value, "a number", where, report, hint)


def _boolean(value: Any, where: KeyPath, report: ProblemReport, spec: Field) -> Any:
    if isinstance(value, bool):
        return value
    hint = "; remove the quotes" if isinstance(value, str) and value in ("true", "false") else ""
    return wrong_type(value, "a boolean (true or false)", where, report, hint)


def _array_of(element: Kind, noun: str) -> Kind:
    """An array of ``noun``s, non-empty, each checked by ``element`` and listed once; a tuple."""

    def check(value: Any, where: KeyPath, report: ProblemReport, spec: Field) -> Any:
        if not isinstance(value, list):
            return wrong_type(value, f"an array of {noun}s", where, report)
        if not value:
            report.add(where, f"must list at least one {noun}", value)
            return INVALID
        items: list[Any] = []
        for index, item in enumerate(value):
            item_where = (*where, ArrayIndex(index))
            converted = element(item, item_where, report, spec)
            if converted is INVALID:
                continue
            if converted in items:
                report.add(item_where, f"repeats an earlier entry; list each {noun} once", item)
                continue
            items.append(converted)
        return tuple(items) if len(items) == len(value) else INVALID

    return check


KeyParser = Callable[[str, Any, KeyPath, ProblemReport], Any]
"""Checks one table key (the value beside it is shown in a problem), returns the converted key or INVALID."""


def keyed_table(element: Kind, expected: str, parse_key: KeyParser) -> Kind:
    """A table whose keys ``parse_key`` converts, each value checked by ``element``; all valid or INVALID."""

    def check(value: Any, where: KeyPath, report: ProblemReport, spec: Field) -> Any:
        if not isinstance(value, dict):
            return wrong_type(value, expected, where, report)
        converted_by_key: dict[Any, Any] = {}
        valid = True
        for raw_key, item in value.items():
            key = parse_key(raw_key, item, where, report)
            converted = INVALID if key is INVALID else element(item, (*where, key), report, spec)
            if converted is INVALID:
                valid = False
            else:
                converted_by_key[key] = converted
        return converted_by_key if valid else INVALID

    return check


_GPU_COUNT_TABLE_EXAMPLE = "{ 2 = ..., 8 = ... }"


def _gpu_count_key_from(least: int, why: str, example: str) -> Callable[[str, Any, KeyPath, ProblemReport], Any]:
    """A GPU-count key: a plain integer >= ``least``."""

    def parse(key: str, item: Any, where: KeyPath, report: ProblemReport) -> Any:
        if not (key.isascii() and key.isdigit()) or key != str(int(key)):
            report.add((*where, key), f"GPU-count key {json.dumps(key)} is not a plain integer; expected an "
                       f"integer GPU count >= {least}, e.g. {example}", item)
            return INVALID
        gpu_count = int(key)
        if gpu_count < least:
            report.add((*where, gpu_count), f"GPU count {gpu_count} is out of range; GPU-count keys here are "
                       f"integers >= {least} ({why})", item)
            return INVALID
        return gpu_count

    return parse


_gpu_count_key = _gpu_count_key_from(2, "a single GPU has nothing to scale or all-reduce against",
                                     _GPU_COUNT_TABLE_EXAMPLE)


@dataclass(frozen=True, slots=True)
class Reference:
    """A bound written as a reference and a tolerance (ReFrame's (ref, lower, upper)), fitted across hosts:
    ``ref`` the figure a healthy node of the kind shows, ``tol`` the fraction a node may fall short of it
    (a ``min_`` bound) or exceed it (a ``max_`` bound), and how the fit was made."""

    ref: float
    tol: float
    hosts: int | None = None
    runs: int | None = None
    spread: float | None = None
    """(highest - lowest) / ref of the per-host medians the fit saw."""
    node_gpus: int | None = None
    """An efficiency's: how many GPUs its 1-GPU reference ran on at once when it was fitted (every GPU of the
    node, one launch per node). A node of another size runs its reference at another concurrency, so the
    bound is not its shape: not evaluated there. None: not recorded (then judged on any node)."""

    def limit(self, lower_is_worse: bool) -> float:
        return self.ref * (1 - self.tol) if lower_is_worse else self.ref * (1 + self.tol)


_REFERENCE_KEYS = {"ref": "the reference figure", "tol": "the tolerance, a fraction in [0, 1)",
                   "hosts": "hosts the fit used", "runs": "sessions the fit used",
                   "spread": "(highest - lowest) / ref of the per-host medians",
                   "node_gpus": "an efficiency's: the GPUs its 1-GPU reference ran on at once (the node's)"}


def _reference(value: dict, where: KeyPath, report: ProblemReport, spec: Field) -> Any:
    """``{ ref = R, tol = T[, hosts = H, runs = N, spread = S, node_gpus = G] }``: checked, the bound it gives
    range-checked."""
    unknown = sorted(set(value) - set(_REFERENCE_KEYS))
    for key in unknown:
        report.add((*where, key), f"unknown key; a reference bound has {', '.join(_REFERENCE_KEYS)}", value[key])
    missing = [key for key in ("ref", "tol") if key not in value]
    for key in missing:
        report.add((*where, key), f"required key is missing: {_REFERENCE_KEYS[key]}")
    if unknown or missing:
        return INVALID
    numbers = {}
    for key in _REFERENCE_KEYS:
        if key not in value:
            continue
        item = value[key]
        if isinstance(item, bool) or not isinstance(item, (int, float)) or not math.isfinite(item):
            return wrong_type(item, "a finite number", (*where, key), report)
        numbers[key] = item
    node_gpus = numbers.get("node_gpus")
    if node_gpus is not None and (node_gpus != int(node_gpus) or node_gpus < 1):
        report.add((*where, "node_gpus"), "must be a whole number of GPUs >= 1", node_gpus)
        return INVALID
    lower_is_worse = not spec.key.startswith("max_")
    # A min_ bound falls short of its reference by a fraction below 1; a max_ bound (a CV of 1 %) may allow
    # several times its reference.
    if not (0 <= numbers["tol"] < 1 if lower_is_worse else 0 <= numbers["tol"] <= 100):
        report.add((*where, "tol"), "must be a fraction in [0, 1) for a min_ bound (0.03 for 3 %, not 3), "
                   "in [0, 100] for a max_ bound", numbers["tol"])
        return INVALID
    reference = Reference(ref=float(numbers["ref"]), tol=float(numbers["tol"]),
                          hosts=int(numbers["hosts"]) if "hosts" in numbers else None,
                          runs=int(numbers["runs"]) if "runs" in numbers else None,
                          spread=float(numbers["spread"]) if "spread" in numbers else None,
                          node_gpus=int(numbers["node_gpus"]) if "node_gpus" in numbers else None)
    if _apply(spec.rule, reference.limit(lower_is_worse), where, report) is INVALID:
        return INVALID
    return reference


def bound_value(value: Any, where: KeyPath, report: ProblemReport, spec: Field) -> Any:
    """A bound: a number, or a reference table (``Reference``) the loader turns into one."""
    if isinstance(value, dict):
        return _reference(value, where, report, spec)
    return number(value, where, report, spec)


def _gpu_count_table(element: Kind, parse_key: KeyParser = _gpu_count_key,
                     example: str = _GPU_COUNT_TABLE_EXAMPLE, hint: str = "") -> Kind:
    """A table keyed by GPU count; int keys, ascending."""
    keyed = keyed_table(element, f"a table of GPU count = value, e.g. {example}{hint}", parse_key)

    def check(value: Any, where: KeyPath, report: ProblemReport, spec: Field) -> Any:
        converted = keyed(value, where, report, spec)
        return converted if converted is INVALID else dict(sorted(converted.items()))

    return check


_AT_ONCE_EXAMPLE = "{ 4 = ... }"
_AT_ONCE_HINT = ("; the key is how many GPUs were measured at once: a bound holds only for the GPU count it "
                 "was measured on (a 1-GPU figure is not stretched to 4)")

STRING: Kind = _string
INTEGER: Kind = _integer
NUMBER: Kind = number
BOOLEAN: Kind = _boolean
STRING_ARRAY: Kind = _array_of(_string, "string")
GPU_COUNT_ARRAY: Kind = _array_of(_integer, "GPU count")
FRACTION_BY_GPU_COUNT: Kind = _gpu_count_table(bound_value)
BOUND_BY_GPU_COUNT: Kind = _gpu_count_table(bound_value)
"""GPU count (>= 2) -> a bound (a number or a reference) of the GPUs together: the all-reduce bus bandwidth."""
BOUND_BY_GPUS_AT_ONCE: Kind = _gpu_count_table(
    bound_value, _gpu_count_key_from(1, "GPUs measured at once", _AT_ONCE_EXAMPLE), _AT_ONCE_EXAMPLE, _AT_ONCE_HINT)
"""GPUs measured at once (>= 1) -> a bound (a number or a reference): health, rates, the concurrent host link."""
BOUND_BY_GPUS_TOGETHER: Kind = _gpu_count_table(
    bound_value, _gpu_count_key_from(2, "a figure between GPUs needs two", _GPU_COUNT_TABLE_EXAMPLE),
    _GPU_COUNT_TABLE_EXAMPLE, _AT_ONCE_HINT)
"""GPU count (>= 2) -> a bound of a figure between GPUs: straggler ratio, GPU uniformity."""
