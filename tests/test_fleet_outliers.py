"""harness.fleet.outliers (pure): median, MAD, robust z-scores and the outlier rule."""

from __future__ import annotations

import math

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
    # MAD 0.01: a node 1 % off is 60 robust standard deviations away, but only 1 % from the median.
    tight = {f"n{i}": 100.0 + (i % 3) * 0.01 for i in range(9)} | {"odd": 99.0}
    found = spread(tight, "higher")
    assert abs(found.deviations["odd"].robust_z) > 3.5 and found.outliers == {}
    assert set(spread(tight, "higher", OutlierRule(min_relative=0.005)).outliers) == {"odd"}


def test_a_mad_of_zero_gives_an_infinite_z_and_the_relative_floor_decides():
    found = spread({"a": 10.0, "b": 10.0, "c": 10.0, "d": 10.1, "e": 9.0}, "higher")
    assert found.mad == 0
    assert math.isinf(found.deviations["e"].robust_z) and found.deviations["e"].robust_z < 0
    assert set(found.outliers) == {"e"}, "d is 1 % off (under the floor), e 10 %"
    assert robust_z(10.0, 10.0, 0.0) == 0.0


def test_fewer_than_three_values_flag_nothing():
    assert spread({"a": 100.0, "b": 50.0}, "higher").outliers == {}


def test_a_median_of_zero_has_no_relative_distance_and_z_alone_decides():
    found = spread({"a": 0.0, "b": 0.0, "c": 0.0, "d": 0.0, "e": 3.0}, "lower")
    assert found.deviations["e"].relative is None and set(found.outliers) == {"e"}
    assert describe("e", found.deviations["e"], "errors") == "e: 3 errors against a fleet median of 0"


def test_non_finite_values_are_left_out_and_no_values_is_none():
    assert spread({"a": math.nan, "b": math.inf}, "higher") is None
    assert spread({"a": 1.0, "b": math.nan}, "higher").count == 1


@pytest.mark.parametrize("fields, says", [({"z_threshold": 0}, "z_threshold"), ({"min_relative": 1.5}, "min_relative"),
                                          ({"min_count": 2}, "min_count")])
def test_a_rule_out_of_range_says_which_field(fields, says):
    with pytest.raises(ValueError, match=says):
        OutlierRule(**fields)
