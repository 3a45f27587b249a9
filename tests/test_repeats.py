"""--repeats: one figure from N runs of a case, by the stated rule."""

import pytest

from harness.records import RunRecord
from harness.checks.repeats import combine, repeat_estimate


def _record(run_id, per_gpu, status="ok"):
    return RunRecord(run_id=run_id, model="resnet50", precision="bf16", scaling="weak", world_size=2, nodes=1,
                     device_kind="cuda", batch_size_per_gpu=256, global_batch_size=512, status=status,
                     throughput_per_gpu=per_gpu, throughput_total=None if per_gpu is None else per_gpu * 2)


def test_fewer_than_five_repeats_take_the_median():
    assert repeat_estimate([3.0, 1.0, 2.0]) == (2.0, "median of 3")


def test_five_or_more_drop_the_best_and_the_worst_then_average():
    figure, rule = repeat_estimate([100.0, 1.0, 10.0, 11.0, 12.0])
    assert figure == pytest.approx(11.0)
    assert rule == "mean of 3 after dropping the best and the worst of 5"


def test_the_combined_record_is_the_run_nearest_the_figure_with_every_run_kept():
    combined = combine([_record("a", 10.0), _record("b", 30.0), _record("c", 21.0)])
    assert combined.run_id == "c"
    assert combined.throughput_per_gpu == 21.0 and combined.throughput_total == 42.0
    repeats = combined.settings["repeats"]
    assert [run["run_id"] for run in repeats["runs"]] == ["a", "b", "c"]
    assert repeats["spread_rel"] == pytest.approx(20.0 / 21.0)


def test_one_failed_repeat_fails_the_case():
    combined = combine([_record("a", 10.0), _record("b", None, status="failed"), _record("c", 11.0)])
    assert combined.status == "failed" and combined.run_id == "b"
    assert combined.settings["repeats"]["rule"] == "repeat 2 of 3 did not succeed"


def test_nothing_to_combine_is_an_error():
    with pytest.raises(ValueError, match="no repeats"):
        repeat_estimate([])
