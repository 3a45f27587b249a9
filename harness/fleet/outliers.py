"""Robust outliers among a fleet's values of one figure: the median and the median absolute
deviation (MAD), which one slow node cannot drag the way it drags a mean and a standard deviation.

Pure. A value is an outlier when both hold:

- its robust z-score ``|x - median| / (1.4826 * MAD)`` is at least ``z_threshold`` (3.5, the
  cut-off of Iglewicz and Hoaglin's modified z-score; 1.4826 * MAD estimates the standard
  deviation of normally distributed values), and
- it is at least ``min_relative`` (2 %) away from the median, so that a fleet of near-identical
  nodes (a tiny MAD) does not flag differences nobody would act on.

Fewer than ``min_count`` (3) values have no fleet median worth the name: nothing is flagged.
When more than half the values are equal the MAD is 0, and any other value has an infinite
z-score: then only the relative distance decides.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Generic, Hashable, Mapping, TypeVar

from harness.fleet.facts import Direction

MAD_TO_SIGMA = 1.4826
"""1 / Φ⁻¹(3/4): the MAD of normal data times this is its standard deviation."""
Z_THRESHOLD = 3.5
MIN_RELATIVE = 0.02
MIN_COUNT = 3

Label = TypeVar("Label", bound=Hashable)


@dataclass(frozen=True, kw_only=True, slots=True)
class OutlierRule:
    z_threshold: float = Z_THRESHOLD
    min_relative: float = MIN_RELATIVE
    min_count: int = MIN_COUNT

    def __post_init__(self) -> None:
        if not self.z_threshold > 0:
            raise ValueError(f"z_threshold must be > 0, not {self.z_threshold}")
        if not 0 <= self.min_relative < 1:
            raise ValueError(f"min_relative must be a fraction in [0, 1), not {self.min_relative}")
        if self.min_count < 3:
            raise ValueError(f"min_count must be >= 3 (a median of two is their mean), not {self.min_count}")


DEFAULT_RULE = OutlierRule()


@dataclass(frozen=True, kw_only=True, slots=True)
class Deviation:
    value: float
    relative: float | None
    """(value - median) / |median|; None when the median is 0."""
    robust_z: float
    """(value - median) / (1.4826 * MAD); ±inf when the MAD is 0 and the value differs."""
    outlier: bool
    worse: bool
    """On the worse side of the median for the figure's direction (never, for "either")."""

    @property
    def side(self) -> str:
        return "above" if self.robust_z > 0 else "below" if self.robust_z < 0 else "at"


@dataclass(frozen=True, kw_only=True, slots=True)
class Spread(Generic[Label]):
    median: float
    mad: float
    count: int
    deviations: dict[Label, Deviation]

    @property
    def outliers(self) -> dict[Label, Deviation]:
        return {label: d for label, d in self.deviations.items() if d.outlier}


def median_absolute_deviation(values: list[float], center: float) -> float:
    return statistics.median(abs(v - center) for v in values)


def robust_z(value: float, median: float, mad: float) -> float:
    difference = value - median
    if mad == 0:
        return 0.0 if difference == 0 else math.copysign(math.inf, difference)
    return difference / (MAD_TO_SIGMA * mad)


def spread(values: Mapping[Label, float], direction: Direction,
           rule: OutlierRule = DEFAULT_RULE) -> Spread[Label] | None:
    """Each value against the median of all; None for no values. Non-finite values are left out."""
    finite = {label: v for label, v in values.items() if math.isfinite(v)}
    if not finite:
        return None
    numbers = list(finite.values())
    center = statistics.median(numbers)
    mad = median_absolute_deviation(numbers, center)
    judged = len(numbers) >= rule.min_count
    deviations = {}
    for label, value in finite.items():
        z = robust_z(value, center, mad)
        relative = (value - center) / abs(center) if center != 0 else None
        far = relative is None or abs(relative) >= rule.min_relative
        worse = (direction == "higher" and value < center) or (direction == "lower" and value > center)
        deviations[label] = Deviation(value=value, relative=relative, robust_z=z, worse=worse,
                                      outlier=judged and abs(z) >= rule.z_threshold and far)
    return Spread(median=center, mad=mad, count=len(numbers), deviations=deviations)


def describe(who: str, deviation: Deviation, unit: str = "") -> str:
    """``node17 GPU 3: 4.1 % below the fleet median``."""
    if deviation.relative is None:
        amount = f"{deviation.value:g}{' ' + unit if unit else ''} against a fleet median of 0"
        return f"{who}: {amount}"
    return f"{who}: {abs(deviation.relative) * 100:.1f} % {deviation.side} the fleet median"
