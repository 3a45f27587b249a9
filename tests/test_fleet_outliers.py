"""harness.fleet.outliers (pure): median, MAD, robust z-scores and the outlier rule."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from harness.fleet.outliers import OutlierRule, describe, median_absolute_deviation, robust_z, spread

FLEET = {f"n{i:02d}": v for i, v in enumerate([100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8, 100.1])}


def test_median_and_mad():
    assert median_absolute_deviation([1, 2, 3, 4, 100], 3) == 1
    found = spread(FLEET, "higher")
    assert found.median == pytest.approx(100.05) and found.count == 8
    assert found.mad == pytest.approx(0.35)  # |x - 100.05| sorted: .05 .05 .15 .25 | .45 .55 .95 1.05


def test_one_slow_node_is_an_outlier_named_with_its_distance_and_side():
    found = spread(FLEET | {"n17": 95.9}, "higher")
    assert set(found.outliers) == {"n17"}
    deviation = found.deviations["n17"]
    assert deviation.worse and deviation.side == "below"
    assert (found.median, found.mad) == (pytest.approx(100.0), pytest.approx(0.5))  # 0 .1 .2 .2 [.5] .5 1 1 4.1
    assert found.scale_basis == "mad" and found.scale == pytest.approx(1.4826 * 0.5)
    assert deviation.robust_z == pytest.approx((95.9 - 100.0) / (1.4826 * 0.5))
    assert describe("n17 GPU 3", deviation) == "n17 GPU 3: 4.1 % below the fleet median"


def test_the_slow_node_does_not_drag_the_reference_as_a_mean_would():
    with_slow = spread(FLEET | {"n17": 10.0}, "higher")
    assert with_slow.median == pytest.approx(100.0) and set(with_slow.outliers) == {"n17"}


def test_an_outlier_on_the_better_side_is_flagged_but_not_worse():
    found = spread(FLEET | {"n17": 104.0}, "higher")
    assert set(found.outliers) == {"n17"} and not found.deviations["n17"].worse
    assert found.deviations["n17"].side == "above"


def test_lower_is_better_turns_the_worse_side_around():
    found = spread({"a": 1.00, "b": 1.01, "c": 1.00, "d": 1.005, "e": 1.20}, "lower")
    assert set(found.outliers) == {"e"} and found.deviations["e"].worse


def test_either_direction_has_no_worse_side():
    found = spread({"a": 650.0, "b": 652.0, "c": 649.0, "d": 651.0, "e": 500.0}, "either")
    assert set(found.outliers) == {"e"} and not found.deviations["e"].worse


def test_a_tight_fleet_does_not_flag_differences_under_the_relative_floor():
    # MAD 0.01: a node 1 % off would be 67 robust standard deviations away from 1.4826 x MAD, but the
    # scale is floored at 2 % of the median / 3.5, so its score (1.75) says what the flag says: no.
    tight = {f"n{i}": 100.0 + (i % 3) * 0.01 for i in range(9)} | {"odd": 99.0}
    found = spread(tight, "higher")
    assert found.scale_basis == "floor" and found.scale == pytest.approx(0.02 * 100.01 / 3.5)
    assert found.deviations["odd"].robust_z == pytest.approx(-1.01 / (0.02 * 100.01 / 3.5))
    assert found.outliers == {}
    assert set(spread(tight, "higher", OutlierRule(min_relative=0.005)).outliers) == {"odd"}


def test_identical_nodes_have_a_z_of_zero_and_no_outlier():
    for median in (4640.7, 0.0):
        found = spread({f"n{i}": median for i in range(12)}, "higher")
        assert found.outliers == {} and {d.robust_z for d in found.deviations.values()} == {0.0}
    assert spread({f"n{i}": 0.0 for i in range(5)}, "lower").scale_basis == "none"


@pytest.mark.parametrize("count", [3, 4, 8, 96])
def test_one_slow_node_among_identical_ones_is_flagged_with_a_finite_explained_score(count):
    # More than half the values equal: the MAD is 0 (the exact-fit property); the scale is the floor.
    values = {f"n{i:02d}": 4640.7 for i in range(count - 1)} | {"slow": 4640.7 * 0.9}
    found = spread(values, "higher")
    assert found.mad == 0 and found.scale_basis == "floor"
    assert found.scale == pytest.approx(0.02 * 4640.7 / 3.5)
    slow = found.deviations["slow"]
    assert set(found.outliers) == {"slow"} and slow.worse
    assert math.isfinite(slow.robust_z) and slow.robust_z == pytest.approx(-0.10 * 3.5 / 0.02)  # -17.5
    assert describe("slow", slow) == "slow: 10.0 % below the fleet median"


def test_a_mad_of_zero_leaves_the_relative_floor_to_decide_with_finite_scores():
    found = spread({"a": 10.0, "b": 10.0, "c": 10.0, "d": 10.1, "e": 9.0}, "higher")
    assert found.mad == 0
    assert all(math.isfinite(d.robust_z) for d in found.deviations.values())
    assert found.deviations["d"].robust_z == pytest.approx(1.75)
    assert found.deviations["e"].robust_z == pytest.approx(-17.5)
    assert set(found.outliers) == {"e"}, "d is 1 % off (under the floor), e 10 %"


def test_a_robust_z_needs_a_scale_unless_the_value_is_the_median():
    assert robust_z(10.0, 10.0, 0.0) == 0.0
    assert robust_z(7.0, 10.0, 2.0) == -1.5
    with pytest.raises(ValueError, match="no finite z-score"):
        robust_z(11.0, 10.0, 0.0)


def _flagged_as_before(values: dict[str, float], rule: OutlierRule) -> set[str]:
    """The rule as it stood with an infinite z for a MAD of 0 (before the scale had a floor)."""
    numbers = list(values.values())
    center = statistics.median(numbers)
    mad = median_absolute_deviation(numbers, center)
    flagged = set()
    for label, value in values.items():
        z = (value - center) / (1.4826 * mad) if mad else (0.0 if value == center else math.inf)
        if len(numbers) >= rule.min_count and abs(z) >= rule.z_threshold \
                and abs(value - center) >= rule.min_relative * abs(center):
            flagged.add(label)
    return flagged


def test_the_floor_changes_scores_never_flags_where_the_median_is_not_zero():
    """No weakening: on quantised fleets (clocks, temperatures, counts) and noisy ones alike, the
    floored scale flags exactly what the infinite-z rule flagged, with every score finite."""
    rng = random.Random(20261124)
    rule = OutlierRule()
    for trial in range(3000):
        count = rng.randint(3, 20)
        base = rng.choice([1980.0, 71.0, 4640.7, 0.957])
        if trial % 2:
            values = {f"n{i}": base + rng.choice([0, 0, 0, 1, -1, -5, 30]) * base / 200 for i in range(count)}
        else:
            values = {f"n{i}": base * rng.gauss(1, 0.01) for i in range(count)}
        found = spread(values, "higher", rule)
        assert all(math.isfinite(d.robust_z) for d in found.deviations.values())
        assert set(found.outliers) == _flagged_as_before(values, rule), values
        for deviation in found.deviations.values():
            assert deviation.outlier == (abs(deviation.robust_z) >= rule.z_threshold), "the score agrees with the flag"


def test_fewer_than_three_values_flag_nothing():
    assert spread({"a": 100.0, "b": 50.0}, "higher").outliers == {}


def test_a_median_of_zero_has_no_relative_distance_and_falls_back_to_the_mean_absolute_deviation():
    # No relative floor around 0 (error counts): a MAD of 0 falls back to 1.253314 x the mean
    # absolute deviation (IBM's modified z-score): 3 / (1.253314 * 0.6) = 3.99.
    found = spread({"a": 0.0, "b": 0.0, "c": 0.0, "d": 0.0, "e": 3.0}, "lower")
    assert found.scale_basis == "mean_ad" and found.scale == pytest.approx(1.253314 * 0.6)
    assert found.deviations["e"].relative is None and set(found.outliers) == {"e"}
    assert found.deviations["e"].robust_z == pytest.approx(3 / (1.253314 * 0.6))
    assert describe("e", found.deviations["e"], "errors") == "e: 3 errors against a fleet median of 0"
    # One value apart among n reaches n / 1.2533 at most: with 3 or 4 values it is not flagged (its
    # check's bound, 0 errors, fails it anyway).
    assert spread({"a": 0.0, "b": 0.0, "c": 3.0}, "lower").outliers == {}


def test_non_finite_values_are_left_out_and_no_values_is_none():
    assert spread({"a": math.nan, "b": math.inf}, "higher") is None
    assert spread({"a": 1.0, "b": math.nan}, "higher").count == 1


@pytest.mark.parametrize("fields, says", [({"z_threshold": 0}, "z_threshold"), ({"min_relative": 1.5}, "min_relative"),
                                          ({"min_count": 2}, "min_count")])
def test_a_rule_out_of_range_says_which_field(fields, says):
    with pytest.raises(ValueError, match=says):
        OutlierRule(**fields)
