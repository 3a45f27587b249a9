"""The session verdict (harness/checks/session.py): every rule, pure, with profiles as shipped."""

from pathlib import Path
import dataclasses
from types import SimpleNamespace

import pytest

from harness.checks.session import (CPU_SELF_CHECK, NOT_A_SIGN_OFF, SessionFacts, SelectedTest, directness, from_dict,
                                    judge_session)
from harness.exitcodes import EXIT_INCOMPLETE
from harness.kinds.components.bounds import COMPONENTS_BOUNDS
from harness.kinds.shipped import JOBS
from support.jobs import required_tests
from harness.plugin.outcomes import _synchronised
from harness.plugin.results import CaseResult
from harness.kinds.shipped import load_shipped_profile
from harness.results.location import Location
from test_records import full_record

THRESHOLDS = Path(__file__).resolve().parent.parent / "thresholds"


@pytest.fixture(scope="module")
def cpu_profile():
    return load_shipped_profile(THRESHOLDS / "cpu.toml")


@pytest.fixture(scope="module")
def h200_profile():
    return load_shipped_profile(THRESHOLDS / "h200.toml")


def passed(name, **kw):
    return SelectedTest(name=name, outcome="passed", **kw)


def check(key, passed_, note="", *locations):
    return {"key": key, "passed": passed_, "note": note, "locations": [loc.to_dict() for loc in locations]}


def gpu(index, uuid=None, **more):
    return Location(gpu_index=index, gpu_uuid=uuid, **more)


def facts(required, **kw):
    return SessionFacts(required=tuple(required), **{"jobs": JOBS, **kw})


# --- what the profile requires of this node ---------------------------------------------------------

def test_required_cases_stop_at_the_node_shape(h200_profile):
    two = required_tests(h200_profile, 2)
    eight = required_tests(h200_profile, 8)
    assert "test_weak_scaling[resnet50-bf16-2gpu]" in two and "test_weak_scaling[resnet50-bf16-4gpu]" not in two
    assert "test_weak_scaling[resnet50-bf16-8gpu]" in eight
    assert "test_allreduce_bus_bandwidth[2gpu]" in two and "test_allreduce_bus_bandwidth[1gpu]" not in two
    assert [n for n in eight if n.startswith("test_gpu_state")] == [f"test_gpu_state[gpu{i}]" for i in range(8)]
    assert "test_node_shape" in two and "test_topology" in two


def test_levels_decide_which_kinds_of_test_are_required(h200_profile):
    quick = required_tests(h200_profile, 4, level="quick")
    standard = required_tests(h200_profile, 4)
    long = required_tests(h200_profile, 4, level="long")
    assert not [n for n in quick if "scaling[" in n or "allreduce" in n]
    assert "test_node_shape" in quick and "test_gpu_state[gpu3]" in quick
    assert set(quick) < set(standard) and "test_allreduce_bus_bandwidth[4gpu]" in standard
    # one sweep, the widest (harness.kinds.interconnect.params.allreduce_widths): the plugin runs the same one alone
    assert [n for n in standard if n.startswith("test_allreduce")] == ["test_allreduce_bus_bandwidth[4gpu]"]
    assert set(long) - set(standard) == {"test_soak"}


def test_component_tests_are_required_where_the_profile_bounds_components(h200_profile, cpu_profile):
    def with_components(profile, **peer):
        components = SimpleNamespace(**{"min_peer_gbps": None, "max_peer_latency_us": None, **peer})
        return dataclasses.replace(profile, tables={**profile.tables, COMPONENTS_BOUNDS.name: components})

    without = dataclasses.replace(h200_profile, tables={name: table for name, table in h200_profile.tables.items()
                                                        if name != COMPONENTS_BOUNDS.name})
    assert not [n for n in required_tests(without, 2) if n.startswith("test_gemm")]
    unbounded_peers = required_tests(with_components(h200_profile), 2, level="quick")
    assert {"test_gemm[gpu1]", "test_host_link[gpu0]"} <= set(unbounded_peers)
    assert not [n for n in unbounded_peers if n.startswith("test_peer_copy")]  # no peer bound: shown, not required
    gpu = required_tests(with_components(h200_profile, min_peer_gbps=300.0), 2, level="quick")
    assert {"test_peer_copy[gpu0-gpu1]", "test_peer_copy[gpu1-gpu0]"} <= set(gpu)
    cpu = required_tests(with_components(cpu_profile), 2, level="quick")
    assert cpu == ["test_gemm[cpu0]", "test_memory_bandwidth[cpu0]"]


def test_cpu_profile_requires_no_gpu_tests_and_no_bf16_without_native_bf16(cpu_profile):
    emulated = required_tests(cpu_profile, 2, native_bf16=None)
    native = required_tests(cpu_profile, 2, native_bf16="amx_bf16")
    assert not [n for n in emulated if "bf16" in n] and [n for n in native if "bf16" in n]
    assert not [n for n in emulated if n.startswith(("test_node_shape", "test_gpu_state", "test_topology"))]
    assert "test_weak_scaling[tiny_bert-fp32-1gpu]" in emulated


def test_strong_cases_are_required_only_where_the_profile_bounds_them(h200_profile):
    names = required_tests(h200_profile, 8)
    for name in (n for n in names if n.startswith("test_strong_scaling")):
        model, precision, gpus = name.split("[")[1].rstrip("]").split("-")
        assert int(gpus[:-3]) in h200_profile.bounds(model, precision).min_strong_efficiency


# --- the rules --------------------------------------------------------------------------------------

REQUIRED = ["test_weak_scaling[a-fp32-1gpu]", "test_weak_scaling[a-fp32-2gpu]", "test_node_shape"]


def test_every_required_case_passed_is_a_full_pass_and_exit_0():
    verdict = judge_session([passed(n, must_run=False) for n in REQUIRED], facts(REQUIRED))
    assert (verdict.verdict, verdict.scope, verdict.exit_code, verdict.sign_off) == ("PASS", "full", 0, True)
    assert verdict.headline == "PASS — full: 3 profile cases of this node"


def test_a_failed_check_fails_the_session_even_when_interrupted():
    tests = [passed(REQUIRED[0]),
             SelectedTest(name=REQUIRED[1], outcome="failed", checks=(check("throughput_per_gpu", False),)),
             SelectedTest(name=REQUIRED[2], outcome="interrupted")]
    verdict = judge_session(tests, facts(REQUIRED, interrupted=True, pytest_exit=2))
    assert (verdict.verdict, verdict.exit_code) == ("FAIL", 1)


@pytest.mark.parametrize("outcome", ["error", "failed"])
def test_a_failed_or_errored_test_without_a_failed_check_fails(outcome):
    tests = [passed(REQUIRED[0]), passed(REQUIRED[2]),
             SelectedTest(name=REQUIRED[1], outcome=outcome, reason="RuntimeError: boom")]
    verdict = judge_session(tests, facts(REQUIRED))
    assert verdict.verdict == "FAIL" and verdict.causes[0].key == f"test_{'error' if outcome == 'error' else 'failed'}"


def test_a_required_case_skipped_for_missing_gpus_is_incomplete_never_pass():
    tests = [passed(REQUIRED[0]), passed(REQUIRED[2]),
             SelectedTest(name=REQUIRED[1], outcome="skipped", reason="needs 2 GPUs; this node has 1")]
    verdict = judge_session(tests, facts(REQUIRED))
    assert (verdict.verdict, verdict.exit_code) == ("INCOMPLETE", EXIT_INCOMPLETE)
    assert verdict.not_run == ({"name": REQUIRED[1], "outcome": "skipped", "reason": "needs 2 GPUs; this node has 1"},)
    assert "needs 2 GPUs" in verdict.headline


def test_the_headline_names_each_reason_once_with_how_many_tests_it_kept_from_running():
    """A 4 x H200 calibration session's headline repeated "not evaluated: no min_samples_per_sec_per_gpu bound measured
    for 4 GPUs (the profile has it for 1)" for each test it named; now each reason is said once, after its first test
    and how many more it kept, at most two reasons, then an ellipsis."""
    names = [f"test_weak_scaling[m{i}-bf16-2gpu]" for i in range(4)] + ["test_allreduce_bus_bandwidth[2gpu]",
                                                                         "test_gpu_state[gpu1]"]
    reasons = ["needs 2 GPUs; this node has 1"] * 4 + ["no bound", "not visible"]
    tests = [SelectedTest(name=name, outcome="skipped", reason=reason)
             for name, reason in zip(names, reasons, strict=True)]
    verdict = judge_session(tests, facts(names))
    assert verdict.headline.startswith(
        "INCOMPLETE — full: 6 profile cases of this node; 6 that had to run did not: test_weak_scaling[m0-bf16-2gpu] "
        "and 3 more (needs 2 GPUs; this node has 1), test_allreduce_bus_bandwidth[2gpu] (no bound), …")
    assert verdict.headline.count("needs 2 GPUs") == 1


def test_a_node_of_a_shape_no_bound_was_measured_for_is_told_how_to_get_one():
    """A 1-GPU node under a profile fitted on nodes of 4: its cases are "not evaluated", and the headline says what
    makes them judged (a fit for this node size), where a case skipped for another reason gets no such hint."""
    from harness.profile.bounds import CaseBounds
    from harness.checks.shapes import UNMEASURED_SHAPE_HINT, bound_for

    bounds = CaseBounds(model="resnet50", precision="bf16", batch_size_per_gpu=256, source="test",
                        min_samples_per_sec_per_gpu={4: 3800.0})
    limit, why = bound_for(bounds, "min_samples_per_sec_per_gpu", 1, " at once")
    assert limit is None and why == ("not evaluated: no min_samples_per_sec_per_gpu bound measured for 1 GPU at once "
                                     "(the profile has it for 4)")
    unmeasured = [passed(REQUIRED[0]), passed(REQUIRED[2]),
                  SelectedTest(name=REQUIRED[1], outcome="skipped", reason=why)]
    verdict = judge_session(unmeasured, facts(REQUIRED))
    assert verdict.verdict == "INCOMPLETE" and verdict.headline.endswith(UNMEASURED_SHAPE_HINT)
    other = [*unmeasured[:2], SelectedTest(name=REQUIRED[1], outcome="skipped", reason="needs 2 GPUs; this node has 1")]
    assert UNMEASURED_SHAPE_HINT not in judge_session(other, facts(REQUIRED)).headline


def test_a_required_case_not_collected_without_narrowing_is_incomplete():
    verdict = judge_session([passed(REQUIRED[0]), passed(REQUIRED[2])], facts(REQUIRED))
    assert verdict.verdict == "INCOMPLETE" and verdict.not_run[0]["name"] == REQUIRED[1]
    assert verdict.not_run[0]["reason"].startswith("not collected")


def test_a_gpu_state_case_missing_for_a_lost_gpu_names_it():
    required = ["test_gpu_state[gpu0]", "test_gpu_state[gpu1]"]
    verdict = judge_session([passed(required[0])], facts(required, option_narrowing=("--models resnet50",)))
    assert verdict.verdict == "INCOMPLETE" and "not visible" in verdict.not_run[0]["reason"]


def test_narrowing_the_matrix_is_a_partial_pass_and_never_a_sign_off():
    verdict = judge_session([passed(REQUIRED[0]), passed(REQUIRED[2])],
                            facts(REQUIRED, option_narrowing=("--gpus 1",)))
    assert (verdict.verdict, verdict.scope, verdict.exit_code) == ("PASS", "partial: 2 of 3 profile cases", 0)
    assert not verdict.sign_off and verdict.headline.endswith(NOT_A_SIGN_OFF)
    assert verdict.headline.startswith("PASS — partial: 2 of 3 profile cases")


def test_a_keyword_selection_is_partial():
    verdict = judge_session([passed(REQUIRED[0])], facts(REQUIRED, selection_narrowing=("-k 1gpu",),
                                                         collected=frozenset(REQUIRED)))
    assert verdict.verdict == "PASS" and verdict.scope == "partial: 1 of 3 profile cases"


def test_a_keyword_selection_does_not_hide_a_required_test_the_node_never_collected():
    """``-k resnet50`` on a node that lost GPU 1: test_gpu_state[gpu1] was never collected, not deselected."""
    required = ["test_weak_scaling[a-fp32-1gpu]", "test_gpu_state[gpu0]", "test_gpu_state[gpu1]"]
    verdict = judge_session([passed(required[1])], facts(required, selection_narrowing=("-k gpu_state",),
                                                         collected=frozenset(required[:2])))
    assert verdict.verdict == "INCOMPLETE" and [n["name"] for n in verdict.not_run] == ["test_gpu_state[gpu1]"]


def test_node_ids_on_the_command_line_are_partial():
    verdict = judge_session([passed(REQUIRED[0])], facts(REQUIRED, partial_collection=True,
                                                         selection_narrowing=("acceptance/test_scaling.py",)))
    assert verdict.verdict == "PASS" and verdict.scope == "partial: 1 of 3 profile cases"


def test_a_verdict_that_could_not_be_made_is_incomplete_with_exit_3():
    from harness.checks.session import unjudged

    verdict = unjudged("KeyError: 'x'")
    assert (verdict.verdict, verdict.exit_code) == ("INCOMPLETE", 3) and "KeyError" in verdict.headline


def test_a_narrowing_that_keeps_every_required_case_is_full():
    verdict = judge_session([passed(n) for n in REQUIRED], facts(REQUIRED, option_narrowing=("--gpus 1,2",)))
    assert verdict.scope == "full" and verdict.sign_off


def test_a_case_asked_beyond_the_node_that_was_skipped_is_incomplete():
    """``--gpus 8`` on a smaller node: nothing required was selected, and the case asked for did not run."""
    tests = [SelectedTest(name="test_weak_scaling[a-fp32-8gpu]", outcome="skipped", must_run=True,
                         reason="needs 8 CPU cores; this node has 2")]
    verdict = judge_session(tests, facts(REQUIRED, option_narrowing=("--gpus 8",)))
    assert (verdict.verdict, verdict.scope) == ("INCOMPLETE", "partial: 0 of 3 profile cases")
    assert verdict.exit_code != 0


def test_nothing_judged_is_incomplete():
    tests = [SelectedTest(name="test_soak", outcome="skipped", reason="no --soak")]
    verdict = judge_session(tests, facts([], selection_narrowing=("-k soak",), collected=frozenset({"test_soak"})))
    assert verdict.verdict == "INCOMPLETE" and "no test was judged" in verdict.headline


def test_an_interrupted_session_is_incomplete_with_pytests_exit_2():
    tests = [passed(REQUIRED[0]), SelectedTest(name=REQUIRED[1], outcome="interrupted"),
             SelectedTest(name=REQUIRED[2], outcome="not run")]
    verdict = judge_session(tests, facts(REQUIRED, interrupted=True, pytest_exit=2))
    assert (verdict.verdict, verdict.exit_code) == ("INCOMPLETE", 2)
    assert [n["outcome"] for n in verdict.not_run] == ["interrupted", "not run"]
    assert verdict.counts["interrupted"] == 1


@pytest.mark.parametrize("pytest_exit", [3, 5])
def test_incomplete_keeps_pytests_internal_error_and_no_tests_codes(pytest_exit):
    verdict = judge_session([], facts(REQUIRED, pytest_exit=pytest_exit))
    assert (verdict.verdict, verdict.exit_code) == ("INCOMPLETE", pytest_exit)


def test_a_quick_level_pass_is_a_health_check_never_a_sign_off():
    verdict = judge_session([passed(REQUIRED[2])], facts([REQUIRED[2]], level="quick"))
    assert (verdict.verdict, verdict.scope, verdict.sign_off) == ("PASS", "full", False)
    assert verdict.headline == ("PASS — full: 1 profile case of this node at level quick; "
                                "a health check without the DDP matrix, not a node sign-off")


def test_a_calibration_session_is_never_a_sign_off_and_says_so():
    passing = judge_session([passed(n) for n in REQUIRED], facts(REQUIRED, calibration=True))
    assert (passing.verdict, passing.scope, passing.sign_off) == ("PASS", "full", False)
    assert passing.headline.endswith("; a calibration run (--harness-calibration): first measurements for harness "
                                     "calibrate-fit, not a node sign-off")
    failing = judge_session([SelectedTest(name=REQUIRED[0], outcome="failed")], facts(REQUIRED, calibration=True))
    assert failing.verdict == "FAIL" and "a calibration run" in failing.headline


def test_the_cpu_profile_says_self_check_in_every_verdict_line():
    for tests in ([passed("test_weak_scaling[a-fp32-1gpu]")],
                  [SelectedTest(name="test_weak_scaling[a-fp32-1gpu]", outcome="failed")]):
        verdict = judge_session(tests, facts(["test_weak_scaling[a-fp32-1gpu]"], cpu=True))
        assert CPU_SELF_CHECK in verdict.headline and not verdict.sign_off


def test_overrides_are_shown_beside_the_verdict():
    override = {"name": "NCCL_P2P_DISABLE", "value": "1", "effect": "no NVLink peer access"}
    verdict = judge_session([passed(n) for n in REQUIRED], facts(REQUIRED, overrides=(override,)))
    assert "overrides: NCCL_P2P_DISABLE=1" in verdict.headline
    assert verdict.to_dict()["overrides"] == [override]


# --- failures grouped by cause ------------------------------------------------------------------------

def test_failures_of_one_key_on_one_gpu_are_one_cause_naming_it():
    note = "GPU 2 (UUID GPU-1b2c3d4e-aaaa) 1,801.0 images/s < 1,970.0"
    tests = [SelectedTest(name=f"test_weak_scaling[m{i}-bf16-1gpu]", outcome="failed",
                         checks=(check("throughput_per_gpu", False, note, gpu(2, "GPU-1b2c3d4e-aaaa")),
                                 check("weak_efficiency", True)))
             for i in range(3)]
    verdict = judge_session(tests, facts([]))
    assert [c.text() for c in verdict.causes] == ["throughput_per_gpu ×3, all on GPU 2 (UUID GPU-1b2c3d4e-aaaa)"]
    assert "throughput_per_gpu ×3, all on GPU 2" in verdict.headline
    assert verdict.to_dict()["causes"][0]["locations"] == [{"gpu_index": 2, "gpu_uuid": "GPU-1b2c3d4e-aaaa"}]


def test_causes_on_several_entities_count_each():
    first = (check("foreign_processes", False, "", gpu(0, pid=4242, detail="python")),)
    second = (check("foreign_processes", False, "", gpu(1, pid=77, detail="stress")),
              check("xid_events", False, "", gpu(1, xid=79, detail="GPU fell off the bus")))
    tests = [SelectedTest(name="t1", outcome="failed", checks=first),
             SelectedTest(name="t2", outcome="failed", checks=second)]
    causes = {c.key: c.text() for c in judge_session(tests, facts([])).causes}
    assert causes == {"foreign_processes": ("foreign_processes ×2, on pid 4242 (python) on GPU 0 ×1, "
                                            "pid 77 (stress) on GPU 1 ×1"),
                      "xid_events": "xid_events ×1, on XID 79 (GPU fell off the bus) on GPU 1"}


def test_a_note_alone_names_no_place():
    """Where a check failed is its locations; the prose of its note is never read for one."""
    tests = [SelectedTest(name="t", outcome="failed", checks=(check("clocks", False, "GPU 5 (GPU-ee55): low"),))]
    assert judge_session(tests, facts([])).causes[0].text() == "clocks ×1 (t)"


def test_a_foreign_process_heads_the_causes_and_a_ddp_symptom_is_put_on_its_gpu():
    """Seen on 4 x H200: a foreign matmul on GPU 2 during a DDP case. Every rank waits for GPU 2, so the
    throughput check lists GPU 0 first; the headline must name GPU 2 and the pid, not GPU 0."""
    ranks = [gpu(i, f"GPU-{i}{i}", rank=i) for i in range(4)]
    ddp = SelectedTest(name="test_weak_scaling[resnet50-fp16-4gpu]", outcome="failed", synchronised=True, checks=(
        check("throughput_per_gpu", False, "slowest: GPU 0 (GPU-00) 1,801.0 images/s", *ranks),
        check("gpu_utilization", False, "GPU 0 80 %, GPU 1 81 %, GPU 3 79 %", ranks[0], ranks[1], ranks[3]),
        check("weak_efficiency", False, "0.61 < 0.95"),
        check("foreign_processes", False, "GPU 2 (GPU-22): pid 4242 (python3, 10,240 MiB, …)",
              gpu(2, "GPU-22", pid=4242, detail="python3"))))
    others = [SelectedTest(name=f"test_weak_scaling[m{i}-fp16-4gpu]", outcome="failed", synchronised=True,
                           checks=(check("step_time_cv", False), check("power_fraction_of_limit", False, "", ranks[0])))
              for i in range(3)]
    verdict = judge_session([*others, ddp], facts([]))
    assert [c.key for c in verdict.causes][0] == "foreign_processes"
    assert verdict.headline.startswith("FAIL — full: 0 profile cases of this node; foreign_processes ×1, on pid 4242 "
                                       "(python3) on GPU 2 (UUID GPU-22)")
    causes = {c.key: c for c in verdict.causes}
    assert causes["throughput_per_gpu"].text() == "throughput_per_gpu ×1, on GPU 2 (UUID GPU-22)"
    assert causes["gpu_utilization"].locations == (gpu(2, "GPU-22"),)
    assert causes["weak_efficiency"].text() == "weak_efficiency ×1, on GPU 2 (UUID GPU-22)"
    # In the DDP cases without a direct cause the symptom is the node's, not GPU 0's.
    assert causes["power_fraction_of_limit"].where == () and causes["power_fraction_of_limit"].count == 3
    assert "GPU 0" not in verdict.headline


def test_a_ddp_symptom_without_a_direct_cause_is_the_nodes():
    ranks = [gpu(i, rank=i) for i in range(2)]
    ddp = SelectedTest(name="test_weak_scaling[m-fp16-2gpu]", outcome="failed", synchronised=True,
                       checks=(check("throughput_per_gpu", False, "slowest: GPU 0", *ranks),))
    alone = SelectedTest(name="test_weak_scaling[m-fp16-1gpu]", outcome="failed",
                         checks=(check("throughput_per_gpu", False, "slowest: GPU 1", ranks[1]),))
    causes = judge_session([ddp], facts([])).causes
    assert causes[0].text() == "throughput_per_gpu ×1 (test_weak_scaling[m-fp16-2gpu])"
    assert judge_session([alone], facts([])).causes[0].text() == "throughput_per_gpu ×1, on GPU 1"


def test_in_a_run_where_each_gpu_works_alone_a_symptom_stays_on_its_own_gpu():
    """As main's harness selftest read on 4 x H100 (2026-11-27): the foreign load on GPU 0 of the 1-GPU case,
    headlined "throughput_per_gpu ×1, on GPU 0 …; step_time_cv ×1 (…); 2 more causes", the pid cut off."""
    alone = SelectedTest(name="test_weak_scaling[resnet50-fp16-1gpu]", outcome="failed", checks=(
        check("throughput_per_gpu", False, "", gpu(0, "GPU-99", rank=0)),
        check("gpu_uniformity", False, "", gpu(0, "GPU-99", rank=0)),
        check("step_time_cv", False),
        check("power_fraction_of_limit", False, "", gpu(1, "GPU-7a")),
        check("foreign_processes", False, "", gpu(0, "GPU-99", pid=959, detail="python3"))))
    verdict = judge_session([alone], facts([]))
    assert [c.key for c in verdict.causes] == ["foreign_processes", "gpu_uniformity", "throughput_per_gpu",
                                               "step_time_cv", "power_fraction_of_limit"]
    assert "foreign_processes ×1, on pid 959 (python3) on GPU 0 (UUID GPU-99)" in verdict.headline
    assert {c.key: c.where for c in verdict.causes}["power_fraction_of_limit"] == ("GPU 1 (UUID GPU-7a) ×1",)


def test_a_hidden_gpu_is_named_in_the_headline():
    """Seen on 4 x H200 and on 4 x H100 (main's harness selftest, 2026-11-27): CUDA_VISIBLE_DEVICES=0,1,2
    headlined "gpu_count ×1, on GPU 0 (UUID …)"."""
    shape = SelectedTest(name="test_node_shape", outcome="failed", checks=(
        check("gpu_count", False, "3 usable, 4 expected; usable: GPU 0 GPU-00 …; hidden by CUDA_VISIBLE_DEVICES: "
              "GPU 3 GPU-33", gpu(3, "GPU-33", detail="hidden by CUDA_VISIBLE_DEVICES")),))
    verdict = judge_session([shape], facts([]))
    assert "gpu_count ×1, on GPU 3 (UUID GPU-33), hidden by CUDA_VISIBLE_DEVICES" in verdict.headline


def test_every_direct_cause_is_in_the_headline_and_symptoms_come_last():
    symptoms = [SelectedTest(name=f"t{i}", outcome="failed", checks=(check(key, False),) * (5 - i))
                for i, key in enumerate(("throughput_per_gpu", "gpu_utilization", "weak_efficiency",
                                         "step_time_cv"))]
    direct = [SelectedTest(name=f"d{i}", outcome="failed", checks=(check(key, False, "", gpu(i)),))
              for i, key in enumerate(("straggler_ratio", "throttling", "xid_events", "foreign_processes"))]
    verdict = judge_session([*symptoms, *direct], facts([]))
    assert [c.key for c in verdict.causes][:4] == ["foreign_processes", "xid_events", "throttling",
                                                    "straggler_ratio"]
    assert "; ".join(c.text() for c in verdict.causes[:4]) in verdict.headline
    assert verdict.headline.endswith(
        "; 4 more causes: throughput_per_gpu, gpu_utilization, weak_efficiency, step_time_cv")
    assert directness("gemm_bf16") < directness("throughput_per_gpu")


def test_a_stragglers_fastest_gpu_is_named_but_not_blamed():
    straggler = check("straggler_ratio", False, "GPU 3 slowest, GPU 0 fastest", gpu(3, detail="slowest"),
                      gpu(0, detail="fastest", blamed=False))
    ddp = SelectedTest(name="t", outcome="failed", synchronised=True,
                       checks=(straggler, check("throughput_per_gpu", False, "", gpu(0), gpu(3))))
    causes = {c.key: c.text() for c in judge_session([ddp], facts([])).causes}
    assert causes == {"straggler_ratio": "straggler_ratio ×1, on GPU 3, slowest",
                      "throughput_per_gpu": "throughput_per_gpu ×1, on GPU 3"}


def test_a_stored_verdict_is_read_back_and_a_damaged_one_is_not_recorded():
    verdict = judge_session([passed(n) for n in REQUIRED], facts(REQUIRED)).to_dict()
    assert from_dict(verdict) == verdict
    assert from_dict({"verdict": "MAYBE"}) is None and from_dict(None) is None


def test_a_ddp_case_s_result_is_synchronised_and_an_independent_run_is_not():
    def result(**record):
        return CaseResult(case=SimpleNamespace(), record=full_record(**record), checks=[],  # type: ignore[arg-type]
                          baseline_run_id=None, context="", log_dir=Path("."))

    assert _synchronised(result(world_size=4)) is True
    assert _synchronised(result(world_size=1, independent=True)) is False
    assert _synchronised(result(world_size=4, independent=True)) is False
    assert _synchronised(None) is False
