"""Confirm before a FAIL, never best-of-N (issue 27 item 4): which verdicts are in doubt, and how the
re-measures decide them (harness/checks/confirm.py)."""

from __future__ import annotations

import pytest

from harness.checks import confirm
from harness.checks.verdict import weak_scaling_checks
from harness.profile.bounds import CaseBounds

from test_records import full_record

BOUNDS = CaseBounds(model="resnet50", precision="bf16", batch_size_per_gpu=256, source="fitted",
                    min_weak_efficiency={2: 0.95})


def case(per_gpu: float, *, ci: float = 0.002, stop: str = "CI target"):
    record = full_record(throughput_per_gpu=per_gpu, throughput_total=2 * per_gpu, throughput_ci95_rel=ci,
                         settings={"measure_stop_reason": stop})
    reference = full_record(world_size=1, throughput_per_gpu=1000.0, throughput_total=1000.0,
                            throughput_ci95_rel=0.001)
    checks = weak_scaling_checks(record, reference, BOUNDS, telemetry_note="n/a")
    return confirm.Attempt(record=record, baseline=reference, checks=checks)


def efficiency(attempt):
    return next(c for c in attempt.checks if c.key == "weak_efficiency")


def test_a_clear_miss_on_a_settled_window_fails_at_once():
    first = case(900.0)  # 0.900 against 0.95: 5 % under, far beyond a 0.3 % noise
    assert efficiency(first).passed is False
    assert confirm.doubted_key(first.checks, first.record, first.baseline) is None


def test_a_miss_within_the_noise_is_in_doubt():
    first = case(948.0, ci=0.004)  # 0.948: 0.2 % under, inside CI 0.4 % + reference 0.1 %
    assert efficiency(first).passed is False
    assert confirm.doubted_key(first.checks, first.record, first.baseline) == "weak_efficiency"


def test_a_calibration_session_re_measures_nothing_not_even_a_case_in_doubt():
    """--harness-calibration: calibrate-fit fits each case's first figure and skips re-measures."""
    for first in (case(948.0, ci=0.004), case(900.0, stop="max time")):
        assert confirm.doubted_key(first.checks, first.record, first.baseline) == "weak_efficiency"
        assert confirm.doubted_key(first.checks, first.record, first.baseline, calibration=True) is None


def test_a_miss_on_an_unsettled_window_is_in_doubt_however_far():
    first = case(900.0, stop="max time")
    assert confirm.doubted_key(first.checks, first.record, first.baseline) == "weak_efficiency"


def test_a_direct_cause_is_never_re_measured():
    first = case(948.0, ci=0.004)
    failed_run = full_record(status="failed")
    checks = weak_scaling_checks(failed_run, first.baseline, BOUNDS, telemetry_note="n/a")
    assert confirm.direct_failure(checks)
    assert confirm.doubted_key(checks, failed_run, first.baseline) is None


def test_two_clear_misses_agree_and_fail_confirmed_2_of_2():
    attempts = [case(948.0, ci=0.004), case(930.0)]
    assert confirm.agree(attempts, "weak_efficiency")
    chosen, checks = confirm.decide(attempts, "weak_efficiency")
    check = next(c for c in checks if c.key == "weak_efficiency")
    assert check.passed is False and check.note.startswith("FAIL, confirmed 2 of 2")
    assert chosen is attempts[1]  # of two that agree, the worse stands: never the best


def test_the_median_of_three_decides_never_the_best():
    attempts = [case(948.0, ci=0.004), case(965.0), case(952.0)]
    chosen, checks = confirm.decide(attempts, "weak_efficiency")
    assert chosen is attempts[2]  # 0.952, the middle: not 0.965
    check = next(c for c in checks if c.key == "weak_efficiency")
    assert check.passed is True and check.note.startswith("passed on re-measure, 1 of 3 missed")


def test_a_case_that_never_settles_is_not_judged_host_too_noisy():
    attempts = [case(951.0, ci=0.03, stop="max time") for _ in range(3)]
    _, checks = confirm.decide(attempts, "weak_efficiency")
    check = next(c for c in checks if c.key == "weak_efficiency")
    assert check.passed is None
    assert check.note.startswith("not evaluated: host too noisy to sign off (CI ±3.1% on windows that never settled")


@pytest.mark.parametrize("per_gpu", [1000.0, 960.0])
def test_a_clear_pass_needs_no_re_measure_even_unsettled(per_gpu):
    first = case(per_gpu, ci=0.005, stop="max time")
    assert efficiency(first).passed is True
    assert confirm.doubted_key(first.checks, first.record, first.baseline) is None


def test_a_multi_node_case_is_re_measured_in_a_launch_of_its_own_after_its_reference():
    """A launch holds one shape of job: grouping a 2-node case with its 1-node reference was refused
    ("the cases of one launch must share nodes"), erroring the very case that was in doubt."""
    from types import SimpleNamespace

    from harness.cases import CaseId
    from harness.plugin.launching import CaseLauncher

    launcher = CaseLauncher(ctx=None)  # type: ignore[arg-type] - only spec_for and run_launch are used
    launcher.spec_for = lambda case, gpus=None: SimpleNamespace(  # type: ignore[method-assign]
        case_id=case.key, nodes=case.nodes)
    launches: list[list[str]] = []

    def run_launch(runs):
        launches.append([name for name, _ in runs])
        return [full_record(run_id=name) for name, _ in runs]

    launcher.run_launch = run_launch  # type: ignore[method-assign]
    record, reference = launcher.remeasure(CaseId(model="tiny_bert", precision="fp32", gpus=1, nodes=2), 1)
    assert launches == [["tiny_bert-fp32-weak-1gpu-confirm1-for-1gpu"], ["tiny_bert-fp32-weak-2x1gpu-confirm1"]]
    assert (record.run_id, reference.run_id) == ("tiny_bert-fp32-weak-2x1gpu-confirm1",
                                                 "tiny_bert-fp32-weak-1gpu-confirm1-for-1gpu")
    launches.clear()
    launcher.remeasure(CaseId(model="tiny_bert", precision="fp32", gpus=2), 1)
    assert launches == [["tiny_bert-fp32-weak-1gpu-confirm1-for-2gpu", "tiny_bert-fp32-weak-2gpu-confirm1"]]


def attempt_of(cv: float, efficiency: float):
    """An attempt whose step-time CV (bound 0.05) and efficiency (bound 0.95) are as given."""
    from harness.results.check import Check

    def check(key: str, measured: float, bound: float, comparison: str) -> Check:
        passed = measured <= bound if comparison == "<=" else measured >= bound
        return Check(key=key, name=key, kind="performance", measured=measured, bound=bound, unit="",
                     comparison=comparison, passed=passed)  # type: ignore[arg-type]

    return confirm.Attempt(record=full_record(), baseline=None, checks=[
        check("step_time_cv", cv, 0.05, "<="), check("weak_efficiency", efficiency, 0.95, ">=")])


def test_every_re_measured_check_is_decided_by_its_own_median_never_by_one_attempt():
    """Seen on the 2-node CPU test: the step-time CV was in doubt, and a figure that missed only in the CV's
    median attempt failed the case "confirmed 1 of 3"."""
    attempts = [attempt_of(0.040, 0.960), attempt_of(0.052, 0.940), attempt_of(0.060, 0.961)]
    chosen, checks = confirm.decide(attempts, "step_time_cv")
    assert chosen is attempts[1]  # the CV's median: 0.052, a miss
    cv, efficiency = checks
    assert cv.passed is False and cv.note.startswith("FAIL, confirmed 2 of 3")
    assert efficiency.passed is True and efficiency.measured == 0.960  # its own median, not the CV's attempt
    assert efficiency.note.startswith("passed on re-measure, 1 of 3 missed")
    # ... and a check that missed in two of three fails, whichever attempt the doubted key's median is.
    attempts = [attempt_of(0.040, 0.940), attempt_of(0.045, 0.960), attempt_of(0.060, 0.941)]
    _, (_, efficiency) = confirm.decide(attempts, "step_time_cv")
    assert efficiency.passed is False and efficiency.note.startswith("FAIL, confirmed 2 of 3")
    # Two attempts that disagree on any re-measured check are not enough: a third decides.
    assert not confirm.agree([attempt_of(0.040, 0.960), attempt_of(0.041, 0.940)], "step_time_cv")
    assert confirm.agree([attempt_of(0.040, 0.960), attempt_of(0.041, 0.962)], "step_time_cv")
