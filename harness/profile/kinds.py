"""The value kinds of the threshold-file schema (harness/profile/schema.py): each checks one value's
type and its Field's range rule, reports every problem with its key path, and returns the converted
value or INVALID. Split from schema.py so that the schema module holds the tables of keys."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from harness.profile.problems import INVALID, ArrayIndex, KeyPath, ProblemReport, toml_type

if TYPE_CHECKING:
    from harness.profile.schema import Field

@dataclass(frozen=True, slots=True)
class Rule:
    """A range check on a value of the right type, and the words a user reads when it fails."""

    accepts: Callable[[Any], bool]
    allowed: str


Kind = Callable[[Any, KeyPath, ProblemReport, "Field"], Any]
"""Checks one value's type (and its Field's rule), reports problems, returns the converted value
or INVALID."""


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


def _gpu_count_key(key: str, item: Any, where: KeyPath, report: ProblemReport) -> Any:
    if not (key.isascii() and key.isdigit()) or key != str(int(key)):
        report.add((*where, key), f"GPU-count key {json.dumps(key)} is not a plain integer; expected an "
                   f"integer GPU count >= 2, e.g. {_GPU_COUNT_TABLE_EXAMPLE}", item)
        return INVALID
    gpu_count = int(key)
    if gpu_count < 2:
        report.add((*where, gpu_count), f"GPU count {gpu_count} is out of range; GPU-count keys here are "
                   "integers >= 2 (a single GPU has nothing to scale or all-reduce against)", item)
        return INVALID
    return gpu_count


def _gpu_count_table(element: Kind) -> Kind:
    """A table keyed by GPU count (>= 2: nothing scales or all-reduces on one GPU); int keys, ascending."""
    keyed = keyed_table(element, f"a table of GPU count = value, e.g. {_GPU_COUNT_TABLE_EXAMPLE}", _gpu_count_key)

    def check(value: Any, where: KeyPath, report: ProblemReport, spec: Field) -> Any:
        converted = keyed(value, where, report, spec)
        return converted if converted is INVALID else dict(sorted(converted.items()))

    return check


STRING: Kind = _string
INTEGER: Kind = _integer
NUMBER: Kind = number
BOOLEAN: Kind = _boolean
STRING_ARRAY: Kind = _array_of(_string, "string")
GPU_COUNT_ARRAY: Kind = _array_of(_integer, "GPU count")
FRACTION_BY_GPU_COUNT: Kind = _gpu_count_table(number)
NUMBER_BY_GPU_COUNT: Kind = _gpu_count_table(number)
