"""A check: one figure against one bound (or one rule), with where it failed, as every stage reads it.

On the ground floor (it imports nothing else of the harness but ``Location``), so the judges of each
kind (training cases, the telemetry of a window, components, GPU state, the node's shape) share the
type without importing each other, and the node's probes can say what they found as checks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from harness.results.location import Location

CheckKind = Literal["sanity", "performance", "health"]


_NOT_KEY_CHARACTERS = re.compile(r"[^a-z0-9]+")
_KEY = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*")


def key_of(name: str) -> str:
    """The snake_case slug of a check's name: ``per-GPU throughput`` -> ``per_gpu_throughput``."""
    return _NOT_KEY_CHARACTERS.sub("_", name.lower()).strip("_")


@dataclass(frozen=True, kw_only=True, slots=True)
class Check:
    name: str
    kind: CheckKind
    measured: float | None
    bound: float | None
    unit: str
    comparison: Literal[">=", "<=", "=="]
    passed: bool | None
    """None: not evaluated (see ``note``)."""
    note: str = ""
    source: str = ""
    """Where the bound came from (the profile entry's stated source)."""
    key: str = ""
    """Stable machine name (snake_case), what the report and compare match checks by; empty: the
    slug of ``name``. Give one explicitly where the name may change (wording, a size in it)."""
    locations: tuple[Location, ...] = ()
    """Where it was judged or failed, as data (the GPUs, pids, XIDs, links, ranks its note names); the
    session verdict and the report read these, never the note. Empty: the run or node as a whole."""

    def __post_init__(self) -> None:
        if not self.key:
            object.__setattr__(self, "key", key_of(self.name))
        if not _KEY.fullmatch(self.key):
            raise ValueError(f"check key {self.key!r} (of {self.name!r}) must be snake_case: lower-case letters, "
                             "digits and single underscores, starting with a letter")

    @property
    def evaluated(self) -> bool:
        return self.passed is not None

    def describe(self, context: str) -> str:
        """One line, e.g. ``weak-scaling efficiency 0.912 < 0.960 (h200, resnet152 bf16, 4 GPUs)``."""
        if self.passed is None:
            return f"{self.name}: not evaluated — {self.note} ({context})"
        if self.measured is None or self.bound is None:
            outcome = "ok" if self.passed else "FAILED"
            return f"{self.name}: {outcome}{' — ' + self.note if self.note else ''} ({context})"
        holds = self.passed
        shown = {">=": ">=" if holds else "<", "<=": "<=" if holds else ">",
                 "==": "==" if holds else "!="}[self.comparison]
        unit = f" {self.unit}" if self.unit else ""
        where = f": {self.note}" if self.note else ""  # e.g. which GPU missed, for per-GPU checks
        return f"{self.name} {_fmt(self.measured)}{unit} {shown} {_fmt(self.bound)}{unit}{where} ({context})"

    def to_dict(self) -> dict:
        return {"key": self.key, "name": self.name, "kind": self.kind, "measured": self.measured, "bound": self.bound,
                "unit": self.unit, "comparison": self.comparison, "passed": self.passed, "note": self.note,
                "source": self.source, "locations": [location.to_dict() for location in self.locations]}


def _fmt(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:,.1f}"
    return f"{value:.3f}"
