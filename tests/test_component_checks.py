"""Component checks: the FLOP and byte arithmetic, NUMA facts from sysfs, the timed loops on CPU
tensors (the peer matrix with CPU tensors standing in for GPUs), the checks, the [components]
profile section, and one real launch on a CPU rank (slow)."""

import json
from pathlib import Path

import pytest

from harness.kinds.components import checks
from harness.kinds.components.launch import CPU_SIZES, ComponentsSpec, run_components
from harness.launch.spec import LaunchSettings
from harness.kinds.components.bounds import ComponentBounds
from harness.kinds.shipped import load_shipped_profiles
from harness.profile.load import ThresholdError
from harness.results.location import Location
from harness.kinds.components import arith
from harness.kinds.components.bounds import COMPONENTS_BOUNDS
from support.profiles import cpu_test_profile

UUID = "GPU-8d1c0f2a"


# --- arithmetic ---------------------------------------------------------------------------------


def test_gemm_tflops_counts_two_flops_per_multiply_add():
    # The lead's probe: 50 products of 8192^3 in 73.66 ms is 746.4 TFLOP/s.
    assert arith.gemm_flops(2) == 16
    assert arith.gemm_tflops(8192, 50, 0.07366) == pytest.approx(746.4, rel=1e-3)


def test_copy_bandwidth_counts_read_and_write_and_a_transfer_once():
    gib4 = 4 << 30
    assert arith.moved_gbps(gib4, 20, 2 * gib4 * 20 / 3031e9, touches=2) == pytest.approx(3031)
    assert arith.moved_gbps(1 << 30, 10, 0.2) == pytest.approx(53.687, rel=1e-4)


def test_median_and_iterations():
    assert arith.median([3.0, 1.0, 2.0]) == 2.0
    assert arith.median([4.0, 1.0, 2.0, 3.0]) == 2.5
    assert arith.iterations_for(0.01, 1.0) == 100
    assert arith.iterations_for(5.0, 1.0) == 3
    assert arith.iterations_for(0.0, 1.0, at_least=7) == 7


def test_cpulist_and_bus_id():
    assert arith.parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    with pytest.raises(ValueError, match="x-2"):
        arith.parse_cpulist("x-2")
    assert arith.sysfs_bus_id("00000000:1B:00.0") == "0000:1b:00.0"


def test_numa_node_from_sysfs_known_unknown_and_missing(tmp_path):
    for bus, text in (("0000:1b:00.0", "1\n"), ("0000:2b:00.0", "-1\n")):
        (tmp_path / "pci" / bus).mkdir(parents=True)
        (tmp_path / "pci" / bus / "numa_node").write_text(text)
    (tmp_path / "nodes" / "node1").mkdir(parents=True)
    (tmp_path / "nodes" / "node1" / "cpulist").write_text("56-111\n")
    assert arith.numa_node_of("00000000:1B:00.0", tmp_path / "pci") == (1, "")
    node, why = arith.numa_node_of("00000000:2B:00.0", tmp_path / "pci")
    assert node is None and "says -1" in why
    node, why = arith.numa_node_of("00000000:3B:00.0", tmp_path / "pci")
    assert node is None and "unreadable" in why
    assert arith.node_cpus(1, tmp_path / "nodes") == (list(range(56, 112)), "")
    assert arith.node_cpus(2, tmp_path / "nodes")[0] == []


# --- the timed loops on CPU tensors -------------------------------------------------------------


def test_loops_on_cpu_tensors_give_positive_figures_and_every_ordered_pair():
    torch = pytest.importorskip("torch")
    from harness.kinds.components import kernels

    cpu = torch.device("cpu")
    gemm = kernels.gemm(torch, cpu, "fp32", 64, warmup_s=0.01, measure_s=0.05, block_s=0.01)
    assert gemm["tflops"] > 0 and gemm["tflops"] == arith.median(gemm["blocks"])
    memory = kernels.hbm(torch, cpu, 1 << 20, 0.05)
    assert memory["copy"]["gbps"] > 0 and memory["rmw"]["gbps"] > 0
    labels = [{"index": i, "uuid": f"GPU-{i}"} for i in range(3)]
    rows = kernels.peer_matrix(torch, [cpu] * 3, labels, lambda a, b: (a, b) != (2, 0), nbytes=1 << 16,
                               latency_bytes=4, seconds=0.02)
    assert [(r["src"]["index"], r["dst"]["index"]) for r in rows] == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
    assert all(r["gbps"] > 0 and r["latency_us"] > 0 for r in rows)
    assert [r["p2p"] for r in rows].count(False) == 1


# --- checks ---------------------------------------------------------------------------------------


def bounds(**values):
    return ComponentBounds(source="measured on a healthy node", **values)


def rank(**figures):
    return {"rank": 3, "gpu_index": 3, "gpu_uuid": UUID, **figures}


def test_gemm_below_its_bound_fails_naming_the_gpu_and_the_fraction_of_peak():
    figures = {"bf16": {"tflops": 600.0, "n": 8192, "first_warmup_block": 740.0}, "tf32": {"tflops": 380.0}}
    found = checks.gemm_checks(rank(gemm=figures), ("bf16", "tf32"),
                               bounds(min_gemm_tflops={"bf16": 650.0}, datasheet_tflops={"tf32": 494.7}),
                               {"bf16": 989.0}, no_bounds="none")
    bf16, tf32 = found
    assert (bf16.key, bf16.passed, bf16.measured, bf16.bound) == ("gemm_bf16", False, 600.0, 650.0)
    assert f"GPU 3 ({UUID})" in bf16.note and "60.7% of the datasheet 989" in bf16.note
    assert bf16.locations == tf32.locations == (Location(gpu_index=3, gpu_uuid=UUID, rank=3),)
    assert tf32.passed is None and "no gemm_tf32 bound" in tf32.note and "76.8% of the datasheet 494.7" in tf32.note


def test_without_a_components_section_nothing_is_passed():
    found = checks.gemm_checks(rank(gemm={"bf16": {"tflops": 700.0}}), ("bf16",), None, {},
                               no_bounds="profile h100-80gb has no [components] bound")
    assert found[0].passed is None
    assert found[0].note.startswith("not evaluated: profile h100-80gb has no [components] bound")
    assert all(c.passed is None for c in checks.hbm_checks(rank(), None, no_bounds="x"))


def test_memory_bandwidth_pass_and_fail():
    figures = {"copy": {"gbps": 3031.0}, "rmw": {"gbps": 2500.0}}
    copy, rmw = checks.hbm_checks(rank(hbm=figures), bounds(min_hbm_copy_gbps=2900.0, min_hbm_rmw_gbps=2900.0,
                                                            datasheet_hbm_gbps=3350.0), no_bounds="x")
    assert (copy.key, copy.passed, rmw.key, rmw.passed) == ("hbm_copy", True, "hbm_rmw", False)
    assert "90.5% of the datasheet 3350" in copy.note


def test_host_link_judges_both_directions_alone_and_together_and_the_numa_binding():
    host = {"alone": {"h2d": {"gbps": 54.5}, "d2h": {"gbps": 20.0}},
            "concurrent": {"h2d": {"gbps": 50.0}, "d2h": {"gbps": 50.0}}}
    found = checks.host_link_checks(rank(host_link=host, numa_node=1, bound=True, cpu_affinity=[56, 57, 58, 60],
                                         binding_note="bound to NUMA node 1's CPUs"),
                                    bounds(min_h2d_gbps=49.0, min_d2h_gbps=49.0), no_bounds="x", gpus_at_once=4)
    by_key = {c.key: c for c in found}
    assert by_key["h2d_alone"].passed is True and by_key["d2h_alone"].passed is False
    assert "NUMA node 1" in by_key["d2h_alone"].note and UUID in by_key["d2h_alone"].note
    assert by_key["h2d_concurrent"].passed is None  # no concurrent bound in these bounds
    assert by_key["numa_binding"].passed is True and "CPUs 56-58,60" in by_key["numa_binding"].note


def test_the_concurrent_host_link_is_judged_only_at_the_gpu_count_it_was_measured_at():
    """Issue 27: 4 healthy H200s at once gave 37-41 GB/s each against a bound measured on one GPU alone (49.7)."""
    host = {"alone": {"h2d": {"gbps": 55.0}, "d2h": {"gbps": 55.0}},
            "concurrent": {"h2d": {"gbps": 38.0}, "d2h": {"gbps": 31.0}}}
    measured_alone = bounds(min_h2d_concurrent_gbps={1: 49.7}, min_d2h_concurrent_gbps={1: 49.7})
    four = {c.key: c for c in checks.host_link_checks(rank(host_link=host), measured_alone, no_bounds="x",
                                                      gpus_at_once=4)}
    assert four["h2d_concurrent"].passed is None and four["d2h_concurrent"].passed is None
    assert four["h2d_concurrent"].note.startswith("not evaluated: no min_h2d_concurrent_gbps bound measured for 4 "
                                                  "GPUs at once (the profile has it for 1)")
    measured_at_four = bounds(min_h2d_concurrent_gbps={4: 34.5}, min_d2h_concurrent_gbps={4: 26.6})
    judged = {c.key: c for c in checks.host_link_checks(rank(host_link=host), measured_at_four, no_bounds="x",
                                                        gpus_at_once=4)}
    assert judged["h2d_concurrent"].passed is True and judged["d2h_concurrent"].passed is True
    slow = {"alone": host["alone"], "concurrent": {"h2d": {"gbps": 20.0}, "d2h": {"gbps": 31.0}}}
    assert {c.key: c for c in checks.host_link_checks(rank(host_link=slow), measured_at_four, no_bounds="x",
                                                      gpus_at_once=4)}["h2d_concurrent"].passed is False


def test_numa_binding_unknown_is_not_evaluated_and_a_failed_binding_fails():
    unknown = checks.numa_binding_check(rank(numa_node=None, binding_note="not bound: sysfs says -1",
                                             cpu_affinity=[0, 1]))
    assert unknown.passed is None and "sysfs says -1" in unknown.note
    failed = checks.numa_binding_check(rank(numa_node=0, bound=False, binding_note="not bound: no CPU"))
    assert failed.passed is False


def pair(src, dst, gbps, latency_us=8.0, p2p=True):
    return {"src": {"index": src, "uuid": f"GPU-{src}"}, "dst": {"index": dst, "uuid": f"GPU-{dst}"},
            "gbps": gbps, "latency_us": latency_us, "p2p": p2p}


def test_peer_checks_name_the_pair_and_the_slowest_pair_of_the_node():
    pairs = [pair(0, 1, 390.0), pair(1, 0, 385.0), pair(0, 2, 120.0, latency_us=30.0, p2p=False), pair(2, 0, 389.0)]
    ok_bw, ok_latency = checks.peer_checks(pairs, 0, 1, bounds(min_peer_gbps=300.0, max_peer_latency_us=20.0),
                                           no_bounds="x")
    assert ok_bw.passed is True and "slowest pair of the node: GPU 0 (GPU-0) -> GPU 2 (GPU-2) 120.0" in ok_bw.note
    slow_bw, slow_latency = checks.peer_checks(pairs, 0, 2, bounds(min_peer_gbps=300.0, max_peer_latency_us=20.0),
                                               no_bounds="x")
    assert slow_bw.passed is False and "no peer access" in slow_bw.note
    assert slow_bw.locations == slow_latency.locations == (Location(gpu_index=0, gpu_uuid="GPU-0"),
                                                           Location(gpu_index=2, gpu_uuid="GPU-2"))
    assert (ok_latency.passed, slow_latency.passed, slow_latency.comparison) == (True, False, "<=")
    missing = checks.peer_checks(pairs, 1, 2, None, no_bounds="x")
    assert missing[0].kind == "sanity" and missing[0].passed is False and "GPU 1 -> GPU 2" in missing[0].note


def test_a_failed_launch_is_a_failed_sanity_check():
    assert checks.completed_check("timeout", "the launch exceeded its 600 s limit").passed is False
    assert checks.completed_check("ok", "").passed is True


# --- the [components] profile section -------------------------------------------------------------


def test_components_section_loads_and_bad_keys_are_named(tmp_path):
    good = cpu_test_profile(sections='[components]\nmin_gemm_tflops = { fp32 = 0.001 }\nmin_hbm_copy_gbps = 1.5\n'
                                     'source = "measured"')
    (tmp_path / "cpu-test.toml").write_text(good)
    profile = next(p for p in load_shipped_profiles(tmp_path) if p.name == "cpu-test")
    assert profile.table(COMPONENTS_BOUNDS) == ComponentBounds(min_gemm_tflops={"fp32": 0.001}, min_hbm_copy_gbps=1.5,
                                                 source="measured")
    (tmp_path / "cpu-test.toml").write_text(good.replace("fp32 = 0.001", "fp64 = 0.001").replace("1.5", "-1"))
    with pytest.raises(ThresholdError) as error:
        load_shipped_profiles(tmp_path)
    assert "components.min_gemm_tflops.fp64" in str(error.value)
    assert "allowed keys here: bf16, fp16, tf32, fp32" in str(error.value)
    assert "components.min_hbm_copy_gbps" in str(error.value) and "must be > 0 GB/s" in str(error.value)


def test_shipped_profiles_load_with_their_components():
    from harness.profile.load import default_thresholds_dir

    profiles = {p.name: p for p in load_shipped_profiles(default_thresholds_dir())}
    cpu = profiles["cpu"].table(COMPONENTS_BOUNDS)
    assert cpu is not None and set(cpu.min_gemm_tflops) == {"fp32"} and cpu.min_hbm_copy_gbps
    assert cpu.min_h2d_gbps is None and cpu.min_peer_gbps is None  # no host link or peer on a CPU run


# --- one real launch (CPU rank) -----------------------------------------------------------------


@pytest.mark.slow
def test_a_cpu_launch_measures_gemm_and_memory(tmp_path):
    spec = ComponentsSpec(launch=LaunchSettings(gpus_per_node=1, device="cpu", timeout_s=120), sizes=CPU_SIZES,
                          parts=("gemm", "hbm"))
    run = run_components(spec, tmp_path, run_id="components-test")
    assert run.status == "ok", run.failure
    figures = run.rank_of_gpu(0)
    assert figures["gemm"]["fp32"]["tflops"] > 0 and figures["hbm"]["copy"]["gbps"] > 0
    assert "host_link" not in figures and run.result["peer"] is None
    assert json.loads((tmp_path / "components.json").read_text())["ranks"][0]["binding_note"] == "not bound: a CPU run"


# --- the plan and the NUMA binding ---------------------------------------------------------------


def placement(node, note=""):
    from harness.kinds.components.plan import GpuPlacement

    return GpuPlacement(local_rank=0, pci_bus_id="00000000:1B:00.0", numa_node=node, numa_node_note=note)


def test_the_plan_travels_whole(tmp_path):
    from harness.kinds.components.launch import GPU_SIZES
    from harness.kinds.components.plan import read_components_plan, write_components_plan

    spec = ComponentsSpec(launch=LaunchSettings(gpus_per_node=1), sizes=GPU_SIZES, placements=(placement(1),))
    plan = spec.plan(tmp_path, "run-1")
    write_components_plan(tmp_path / "plan.json", plan)
    assert read_components_plan(tmp_path / "plan.json") == plan
    (tmp_path / "plan.json").write_text("{}")
    with pytest.raises(SystemExit, match="not a readable ComponentsPlan"):
        read_components_plan(tmp_path / "plan.json")


def test_the_launch_runs_the_kinds_worker_under_the_name_it_reports():
    """torchrun runs ``python -m`` the spec's worker module; the worker names itself the same in a bad plan's
    error (plan_argument), so a module moved without its strings fails here, not on a node."""
    import importlib.util

    from harness.kinds.components import worker

    assert ComponentsSpec.worker_module == worker.MODULE == "harness.kinds.components.worker"
    assert importlib.util.find_spec(ComponentsSpec.worker_module) is not None


def test_a_spec_refuses_unknown_parts_and_dtypes():
    with pytest.raises(ValueError, match="parts"):
        ComponentsSpec(launch=LaunchSettings(gpus_per_node=1), sizes=CPU_SIZES, parts=("gemm", "disk"))


def test_a_rank_binds_to_its_gpus_numa_node_and_says_when_it_cannot(monkeypatch):
    from harness.kinds.components.launch import GPU_SIZES
    from harness.kinds.components import worker

    pinned = []
    monkeypatch.setattr(worker.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(worker.os, "sched_setaffinity", lambda pid, cpus: pinned.append(sorted(cpus)))
    monkeypatch.setattr(worker, "node_cpus", lambda node: ([2, 3, 4, 5], ""))

    def plan(*placements):
        return ComponentsSpec(launch=LaunchSettings(gpus_per_node=1), sizes=GPU_SIZES,
                              placements=placements).plan(Path("/tmp"), "r")

    bound = worker.bind_to_numa_node(plan(placement(1)), 0)
    assert bound["bound"] and bound["cpu_affinity"] == [2, 3] and pinned == [[2, 3]]
    unknown = worker.bind_to_numa_node(plan(placement(None, "sysfs says -1")), 0)
    assert not unknown["bound"] and "sysfs says -1" in unknown["binding_note"]
    assert unknown["cpu_affinity"] == [0, 1, 2, 3]
    monkeypatch.setattr(worker, "node_cpus", lambda node: ([8, 9], ""))
    outside = worker.bind_to_numa_node(plan(placement(1)), 0)
    assert outside["numa_node"] == 1 and not outside["bound"]
    assert "no CPU this process may use" in outside["binding_note"]


def test_a_gpus_figures_are_found_by_uuid_first():
    from harness.kinds.components.launch import ComponentsRun

    ranks = [{"rank": 0, "gpu_index": None, "gpu_uuid": "GPU-b"}, {"rank": 1, "gpu_index": None, "gpu_uuid": "GPU-a"}]
    run = ComponentsRun(run_id="r", status="ok", result={"ranks": ranks})
    assert run.rank_of_gpu(2, "GPU-a")["rank"] == 1  # CUDA_VISIBLE_DEVICES by UUID: no index to match
    assert run.rank_of_gpu(0, "GPU-z") is None  # a GPU no rank ran on is not taken for rank 0
    cpu = ComponentsRun(run_id="r", status="ok", result={"ranks": [{"rank": 0, "gpu_index": None, "gpu_uuid": None}]})
    assert cpu.rank_of_gpu(0)["rank"] == 0
