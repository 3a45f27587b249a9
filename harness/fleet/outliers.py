"""Robust outliers among a fleet's values of one figure: the median and the median absolute
deviation (MAD), which one slow node cannot drag the way it drags a mean and a standard deviation.

Pure. A value's robust z-score is ``(x - median) / scale``, where ``scale`` estimates the standard
deviation of the fleet's values (see ``robust_scale``). A value is an outlier when both hold:

- its robust z-score is at least ``z_threshold`` (3.5, the cut-off of Iglewicz and Hoaglin's
  modified z-score) in size, and
- it is at least ``min_relative`` (2 %) away from the median, so that a fleet of near-identical
  nodes (a tiny MAD) does not flag differences nobody would act on.

Fewer than ``min_count`` (3) values have no fleet median worth the name: nothing is flagged.

The scale is 1.4826 × MAD (1.4826 × MAD estimates the standard deviation of normal data), but
never less than ``min_relative × |median| / z_threshold``: the spread at which a value exactly
``min_relative`` from the median is exactly ``z_threshold`` away. When more than half the values
are equal the MAD is 0 (the "exact fit" property every robust scale estimator has), and without a
floor any other value would be infinitely far; with it, the score stays finite and agrees with the
flag, and the two conditions above flag exactly what they flagged without it (below the floor,
``|z| >= z_threshold`` and ``|relative| >= min_relative`` are the same condition). Flooring the MAD
is what cmapR's ``robust_zscore(x, min_mad=...)`` does with an absolute floor (Bioconductor, the
Connectivity Map's R package: https://bioconductor.org/packages/cmapR, man/robust_zscore.Rd); ours
is relative to the median, so it needs no unit. A median of 0 (error counts) gives no floor: a MAD
of 0 there falls back to 1.253314 × the mean absolute deviation around the median, as IBM's
modified z-score does (IBM Cognos Analytics 11.1, "Modified z score": "If MAD does equal 0 ...
divide by 1.253314*MeanAD"; https://www.ibm.com/docs/en/cognos-analytics/11.1.0?topic=terms-modified-z-score),
which is 0 only when every value is equal (every z is then 0). With n values of which one is apart,
that z is n / 1.2533 at most: below 3.5 for n < 5, so 3 or 4 values around a median of 0 flag
nothing this way (their checks' bounds, 0 errors, judge them).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Generic, Hashable, Literal, Mapping, TypeVar

from harness.fleet.facts import Direction

MAD_TO_SIGMA = 1.4826
"""1 / Φ⁻¹(3/4): the MAD of normal data times this is its standard deviation."""
MEAN_AD_TO_SIGMA = 1.253314
"""√(π/2): the mean absolute deviation of normal data times this is its standard deviation."""
Z_THRESHOLD = 3.5
MIN_RELATIVE = 0.02
MIN_COUNT = 3

Label = TypeVar("Label", bound=Hashable)
ScaleBasis = Literal["mad", "floor", "mean_ad", "none"]
"""What the scale is: 1.4826 × MAD; the relative floor; 1.253314 × mean absolute deviation (MAD 0
around a median of 0); none (every value equal)."""


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
    """(value - median) / scale: always finite (0 when every value is equal)."""
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
    scale: float
    """The standard deviation the robust z-scores divide by, in the figure's unit (0: all equal)."""
    scale_basis: ScaleBasis
    count: int
    deviations: dict[Label, Deviation]

    @property
    def outliers(self) -> dict[Label, Deviation]:
        return {label: d for label, d in self.deviations.items() if d.outlier}


def median_absolute_deviation(values: list[float], center: float) -> float:
    return statistics.median(abs(v - center) for v in values)


def robust_scale(values: list[float], center: float, mad: float,
                 rule: OutlierRule = DEFAULT_RULE) -> tuple[float, ScaleBasis]:
    """The fleet's standard deviation as the z-scores use it, and what it is (module docstring)."""
    from_mad = MAD_TO_SIGMA * mad
    floor = rule.min_relative * abs(center) / rule.z_threshold
    if from_mad > 0 or floor > 0:
        return (from_mad, "mad") if from_mad >= floor else (floor, "floor")
    from_mean_ad = MEAN_AD_TO_SIGMA * statistics.fmean(abs(v - center) for v in values)
    return (from_mean_ad, "mean_ad") if from_mean_ad > 0 else (0.0, "none")


def robust_z(value: float, median: float, scale: float) -> float:
    """(value - median) / scale; a scale of 0 means every value equals the median, so 0."""
    difference = value - median
    if scale > 0:
        return difference / scale
    if difference == 0:
        return 0.0
    raise ValueError(f"a scale of {scale} leaves {value} (median {median}) no finite z-score")


def spread(values: Mapping[Label, float], direction: Direction,
           rule: OutlierRule = DEFAULT_RULE) -> Spread[Label] | None:
    """Each value against the median of all; None for no values. Non-finite values are left out."""
    finite = {label: v for label, v in values.items() if math.isfinite(v)}
    if not finite:
        return None
    numbers = list(finite.values())
    center = statistics.median(numbers)
    mad = median_absolute_deviation(numbers, center)
    scale, basis = robust_scale(numbers, center, mad, rule)
    judged = len(numbers) >= rule.min_count
    deviations = {}
    for label, value in finite.items():
        z = robust_z(value, center, scale)
        relative = (value - center) / abs(center) if center != 0 else None
        far = relative is None or abs(relative) >= rule.min_relative
        worse = (direction == "higher" and value < center) or (direction == "lower" and value > center)
        deviations[label] = Deviation(value=value, relative=relative, robust_z=z, worse=worse,
                                      outlier=judged and abs(z) >= rule.z_threshold and far)
    return Spread(median=center, mad=mad, scale=scale, scale_basis=basis,
                  count=len(numbers), deviations=deviations)


def describe(who: str, deviation: Deviation, unit: str = "") -> str:
    """``node17 GPU 3: 4.1 % below the fleet median``."""
    if deviation.relative is None:
        amount = f"{deviation.value:g}{' ' + unit if unit else ''} against a fleet median of 0"
        return f"{who}: {amount}"
    return f"{who}: {abs(deviation.relative) * 100:.1f} % {deviation.side} the fleet median"
