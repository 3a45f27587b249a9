"""Records x bounds -> checks: sanity before performance, messages measured vs bound with units."""

import dataclasses

import pytest

from harness.results.job import Failure
from harness.profile.bounds import CaseBounds
from harness.checks.straggler import name_straggler
from harness.results.check import Check
from harness.checks.telemetry_checks import telemetry_checks
from harness.kinds.ddp_scaling.checks import failed_checks, strong_scaling_checks, weak_scaling_checks
from harness.results.location import Location
from test_records import full_record

BOUNDS = CaseBounds(model="resnet152", precision="bf16", batch_size_per_gpu=256, source="measured X",
                    min_samples_per_sec_per_gpu={1: 2000.0}, min_weak_efficiency={2: 0.97, 4: 0.96},
                    strong_global_batch_size=512, min_strong_efficiency={4: 0.8},
                    max_straggler_ratio={2: 1.05, 4: 1.05}, max_step_time_cv={1: 0.05, 2: 0.05, 4: 0.05},
                    min_gpu_utilization_pct={1: 90.0, 2: 90.0, 4: 90.0})


def record(world_size=4, per_gpu=2100.0, **changes):
    return full_record(model="resnet152", world_size=world_size, throughput_per_gpu=per_gpu,
                       throughput_total=per_gpu * world_size, **changes)


def by_name(checks):
    return {c.name: c for c in checks}


def test_weak_scaling_passes_and_computes_efficiency_against_the_baseline():
    checks = by_name(weak_scaling_checks(record(4, 2100.0), record(1, 2150.0), BOUNDS, telemetry_note="n/a"))
    assert checks["weak-scaling efficiency"].measured == pytest.approx(2100 / 2150)
    assert checks["weak-scaling efficiency"].passed
    assert checks["straggler ratio (slowest/fastest rank)"].passed
    # Under DDP the per-GPU rate is the efficiency's numerator: a 1-GPU floor is not stretched to 4 GPUs.
    assert "per-GPU throughput" not in checks


def test_failure_message_names_measured_bound_and_context():
    checks = weak_scaling_checks(record(4, 1900.0), record(1, 2100.0), BOUNDS, telemetry_note="n/a")
    lines = [c.describe("h200, resnet152 bf16, 4 GPUs") for c in failed_checks(checks)]
    assert "weak-scaling efficiency 0.905 < 0.960 (h200, resnet152 bf16, 4 GPUs)" in lines
    assert not any(line.startswith("per-GPU throughput") for line in lines)
    alone = weak_scaling_checks(record(1, 1900.0, per_rank=()), None, BOUNDS, telemetry_note="n/a")
    assert [c.describe("h200, resnet152 bf16, 1 GPU") for c in failed_checks(alone)] == [
        "per-GPU throughput 1,900.0 images/s < 2,000.0 images/s (h200, resnet152 bf16, 1 GPU)"]


def test_telemetry_check_is_not_evaluated_never_passed():
    checks = by_name(weak_scaling_checks(record(1), None, BOUNDS, telemetry_note="no NVML on a CPU run"))
    util = checks["mean GPU utilization"]
    assert util.passed is None
    assert "not evaluated — no NVML on a CPU run" in util.describe("cpu")
    assert util not in failed_checks(list(checks.values()))


def test_single_gpu_has_no_efficiency_or_straggler_check():
    names = by_name(weak_scaling_checks(record(1), None, BOUNDS, telemetry_note="n/a"))
    assert "weak-scaling efficiency" not in names
    assert "straggler ratio (slowest/fastest rank)" not in names


def test_a_multi_node_case_says_its_efficiency_bound_was_measured_on_one_node():
    two_nodes = weak_scaling_checks(record(4, 1900.0, nodes=2), record(1, 2100.0), BOUNDS, telemetry_note="n/a")
    line = next(c for c in two_nodes if c.key == "weak_efficiency").describe("h200, resnet152 bf16, 2x2 GPUs")
    assert line == ("weak-scaling efficiency 0.905 < 0.960: 2 nodes: judged against the profile's bound for 4 GPUs, "
                    "measured on one node (the profile has no multi-node bound) (h200, resnet152 bf16, 2x2 GPUs)")
    one_node = weak_scaling_checks(record(4, 1900.0), record(1, 2100.0), BOUNDS, telemetry_note="n/a")
    assert next(c for c in one_node if c.key == "weak_efficiency").note == ""


def test_missing_bound_for_a_gpu_count_is_reported_not_passed():
    check = by_name(weak_scaling_checks(record(8), record(1), BOUNDS, telemetry_note="n/a"))["weak-scaling efficiency"]
    assert check.passed is None
    assert check.note == "not evaluated: no bound measured for 8 GPUs"


def test_an_efficiency_fitted_on_nodes_of_another_size_is_not_evaluated():
    """Its 1-GPU reference ran on every GPU of a 4-GPU node at once; on a 2-GPU node it runs on 2: another
    shape of reference, so another shape of efficiency (issue 27: a bound holds for the shape it was measured on)."""
    from harness.profile.kinds import Reference

    fitted = Reference(ref=0.98, tol=0.02, hosts=3, runs=5, node_gpus=4)
    bounds = dataclasses.replace(BOUNDS, min_weak_efficiency={4: fitted.limit(True)},
                                 references={"min_weak_efficiency": {4: fitted}})
    on_two = record(1, 2150.0)  # full_record's reference ran on 2 GPUs at once
    assert len(on_two.per_rank) == 2
    check = by_name(weak_scaling_checks(record(4, 2100.0), on_two, bounds, telemetry_note="n/a"))[
        "weak-scaling efficiency"]
    assert check.passed is None and check.note == (
        "not evaluated: no min_weak_efficiency bound measured for 4 GPUs with the 1-GPU reference on 2 GPUs at "
        "once (the profile's was measured with it on 4: nodes of 4 GPUs)")
    ranks = tuple(dataclasses.replace(on_two.per_rank[0], rank=r, gpu_index=r) for r in range(4))
    on_four = dataclasses.replace(on_two, per_rank=ranks)
    check = by_name(weak_scaling_checks(record(4, 2100.0), on_four, bounds, telemetry_note="n/a"))[
        "weak-scaling efficiency"]
    assert check.passed is True and "over this kind's reference" not in check.note
    assert "under this kind's reference 0.98 (3 hosts, 5 runs)" in check.note


def test_failed_baseline_leaves_efficiency_not_evaluated():
    baseline = record(1, status="failed", failure=Failure(reason="rank 0 was killed by SIGKILL"))
    check = by_name(weak_scaling_checks(record(4), baseline, BOUNDS, telemetry_note="n/a"))["weak-scaling efficiency"]
    assert check.passed is None
    assert "rank 0 was killed by SIGKILL" in check.note


def test_a_crashed_run_fails_on_sanity_alone():
    crashed = record(4, status="failed", failure=Failure(reason="rank 2 (host a, GPU 2) was killed by SIGKILL"))
    checks = weak_scaling_checks(crashed, record(1), BOUNDS, telemetry_note="n/a")
    assert [c.name for c in checks] == ["run completed"]
    assert "rank 2 (host a, GPU 2) was killed by SIGKILL" in checks[0].describe("ctx")


def test_non_finite_loss_fails_whatever_the_speed():
    fast_but_nan = record(4, per_gpu=99999.0, status="invalid", loss_finite=False,
                          failure=Failure(reason="non-finite loss on rank(s) [0]"))
    failed = failed_checks(weak_scaling_checks(fast_but_nan, record(1), BOUNDS, telemetry_note="n/a"))
    assert [c.name for c in failed] == ["loss finite"]


def test_straggler_and_jitter_bounds():
    slow = record(4, straggler_ratio=1.2,
                  step_time_ms=dataclasses.replace(full_record().step_time_ms, cv=0.2))
    failed = {c.name for c in failed_checks(weak_scaling_checks(slow, record(1), BOUNDS, telemetry_note="n/a"))}
    assert failed == {"straggler ratio (slowest/fastest rank)", "step-time CV"}


def test_the_straggler_check_names_its_slowest_and_fastest_gpu():
    slow = record(4, straggler_ratio=1.2)  # full_record's straggler: rank 1 (GPU 1) slowest, rank 0 fastest
    checks = name_straggler(weak_scaling_checks(slow, record(1), BOUNDS, telemetry_note="n/a"), slow)
    straggler = {c.key: c for c in checks}["straggler_ratio"]
    assert straggler.passed is False
    assert straggler.note == "slowest: GPU 1 (GPU-1), rank 1; fastest: GPU 0 (GPU-0), rank 0"
    assert straggler.locations == (Location(gpu_index=1, gpu_uuid="GPU-1", rank=1, detail="slowest"),
                                   Location(gpu_index=0, gpu_uuid="GPU-0", rank=0, detail="fastest", blamed=False))
    assert [c for c in checks if c.key != "straggler_ratio"] == [
        c for c in weak_scaling_checks(slow, record(1), BOUNDS, telemetry_note="n/a") if c.key != "straggler_ratio"]


def test_per_gpu_telemetry_checks_locate_the_gpus_that_missed():
    def gpu(index, util, reasons=(), ecc=0):
        reduced = {"util_pct": util, "clock_event_reasons": list(reasons), "ecc_corrected": ecc, "ecc_uncorrected": 0}
        return {"index": index, "uuid": f"GPU-{index}", "reduced": reduced,
                "process_checks": 3, "foreign_processes": [], "samples": 10, "clock_events": {}}
    telemetry = {"status": "ok", "gpus": [gpu(0, 99.0), gpu(1, 50.0, ["hw slowdown"]), gpu(2, 98.0, ecc=2)]}
    checks = {c.key: c for c in telemetry_checks(telemetry, min_gpu_utilization_pct=90.0, missing_note="n/a")}
    assert [(c.passed, [loc.gpu_index for loc in c.locations]) for c in
            (checks["gpu_utilization"], checks["throttling"], checks["ecc_errors"])] == [
        (False, [1]), (False, [1]), (False, [2])]
    assert checks["gpu_utilization"].to_dict()["locations"] == [{"gpu_index": 1, "gpu_uuid": "GPU-1"}]


def test_strong_scaling_speedup_and_efficiency():
    # global batch fixed: total throughput 4 GPUs 7000/s vs 1 GPU 2000/s -> speedup 3.5, efficiency 0.875
    n = full_record(world_size=4, scaling="strong", throughput_total=7000.0, throughput_per_gpu=1750.0)
    one = full_record(world_size=1, scaling="strong", throughput_total=2000.0, throughput_per_gpu=2000.0)
    check = by_name(strong_scaling_checks(n, one, BOUNDS, telemetry_note="n/a"))["strong-scaling efficiency"]
    assert check.measured == pytest.approx(0.875)
    assert check.passed
    slow = dataclasses.replace(n, throughput_total=5000.0)
    check = by_name(strong_scaling_checks(slow, one, BOUNDS, telemetry_note="n/a"))["strong-scaling efficiency"]
    assert check.describe("ctx") == "strong-scaling efficiency 0.625 < 0.800 (ctx)"


def test_every_check_has_a_stable_key_that_does_not_follow_its_wording():
    checks = weak_scaling_checks(record(4), record(1), BOUNDS, telemetry_note="n/a")
    assert [c.key for c in checks] == ["run_completed", "loss_finite", "weak_efficiency",
                                       "straggler_ratio", "step_time_cv", "gpu_utilization", "throttling",
                                       "ecc_errors", "foreign_processes"]
    assert all(c.to_dict()["key"] == c.key for c in checks)
    n = full_record(world_size=4, scaling="strong", throughput_total=7000.0, throughput_per_gpu=1750.0)
    one = full_record(world_size=1, scaling="strong", throughput_total=2000.0, throughput_per_gpu=2000.0)
    assert "strong_efficiency" in {c.key for c in strong_scaling_checks(n, one, BOUNDS, telemetry_note="n/a")}


def test_a_check_without_a_key_is_keyed_by_the_slug_of_its_name():
    check = Check(name="All-reduce bus bandwidth at 4 MiB", kind="performance", measured=1.0, bound=None, unit="GB/s",
                  comparison=">=", passed=None)
    assert check.key == "all_reduce_bus_bandwidth_at_4_mib"
    with pytest.raises(ValueError, match="must be snake_case"):
        Check(key="Bus-BW", name="x", kind="health", measured=None, bound=None, unit="", comparison="==", passed=None)
