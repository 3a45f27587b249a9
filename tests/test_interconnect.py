"""Interconnect: the busbw arithmetic, the correctness check, the checks against the profile, the
topology read through a fake NVML, the acceptance test through pytester, and (``slow``) a real
all-reduce sweep on two gloo ranks."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pynvml
import pytest
import torch

from harness.kinds.interconnect.checks import allreduce_checks, pcie_under_load, topology_checks
from harness.kinds.interconnect.params import allreduce_widths
from harness.kinds.interconnect.launch import AllReduceRun, run_allreduce
from harness.kinds.components.launch import ComponentsRun
from harness.launch.command import prepare_launch
from harness.launch.spec import LaunchSettings
from harness.node.hardware import GpuInfo
from harness.node.cpu_features import runs_in_virtual_machine
from harness.node.topology import read_topology, why_no_nvlink
from harness.kinds.interconnect.params import allreduce_params
from harness.kinds.interconnect.runner import InterconnectRuns
from harness.kinds.interconnect.bounds import INTERCONNECT_BOUNDS, TOPOLOGY_BOUNDS, InterconnectBounds, TopologyBounds
from harness.kinds.interconnect import worker as interconnect
from harness.kinds.interconnect.worker import check_allreduce, expected_sum, fill_pattern, pattern_values
from harness.kinds.interconnect.busbw import bus_bandwidth_gbps, default_max_bytes, iterations_for, message_sizes
from harness.kinds.interconnect.plan import AllReducePlan
from harness.kinds.interconnect.spec import AllReduceSpec
from harness.workloads.plan import read_plan
from harness.workloads.units import GIB, MIB
from harness.results.job import Failure
from support.fake_nvml import UUIDS, FakeGpu, FakeNvml
from support.profiles import cpu_test_profile, profile_stub
from support.sampling import drive

pytest_plugins = ["pytester"]
REPO = Path(__file__).resolve().parent.parent


# --- busbw (nccl-tests definition) -----------------------------------------------------------


def test_algbw_is_bytes_over_time_and_busbw_scales_by_2_n_minus_1_over_n():
    algbw, busbw = bus_bandwidth_gbps(GIB, 0.010, 4)
    assert algbw == pytest.approx(107.374182, rel=1e-6)  # 1 GiB = 1.073741824e9 bytes, in 10 ms
    assert busbw == pytest.approx(algbw * 2 * 3 / 4)
    assert bus_bandwidth_gbps(GIB, 0.010, 2)[1] == pytest.approx(algbw)  # 2(n-1)/n = 1 at two ranks
    assert bus_bandwidth_gbps(GIB, 0.010, 8)[1] == pytest.approx(algbw * 1.75)
    assert bus_bandwidth_gbps(GIB, 0.010, 1)[1] == 0.0  # one rank moves nothing over a link


def test_the_published_h200_figure_round_trips():
    # 4 x H200, 8 GiB at 363 GB/s busbw (shared/REFERENCE.md) is 8 GiB in 35.5 ms.
    seconds = 8 * GIB / (363e9 * 4 / (2 * 3))
    assert bus_bandwidth_gbps(8 * GIB, seconds, 4)[1] == pytest.approx(363.0)


@pytest.mark.parametrize(("size", "seconds", "world"), [(GIB, 0.0, 4), (GIB, -1.0, 4), (GIB, 1.0, 0)])
def test_impossible_inputs_are_refused(size, seconds, world):
    with pytest.raises(ValueError):
        bus_bandwidth_gbps(size, seconds, world)


# --- the correctness check -------------------------------------------------------------------


def _all_reduced(elements: int, world: int, *, skip_rank: int | None = None) -> torch.Tensor:
    """What a correct all-reduce (sum) of every rank's pattern leaves in each rank's buffer."""
    total = torch.zeros(elements, dtype=torch.float32)
    for rank in range(world):
        if rank != skip_rank:
            buffer = torch.empty(elements, dtype=torch.float32)
            fill_pattern(torch, buffer, rank)
            total += buffer
    return total


@pytest.mark.parametrize("world", [2, 4, 8])
def test_a_correct_sum_passes_exactly(world):
    assert check_allreduce(torch, _all_reduced(5000, world), world).ok


def test_one_wrong_element_is_found_with_its_index_and_values():
    reduced = _all_reduced(5000, 4)
    expected = float(reduced[1234])
    reduced[1234] += 1.0
    result = check_allreduce(torch, reduced, 4)
    assert (result.mismatches, result.first_bad_index, result.got, result.expected) == (1, 1234, expected + 1, expected)
    assert "element 1,234, is" in result.describe()


def test_a_missing_rank_and_a_misplaced_chunk_are_both_caught():
    assert check_allreduce(torch, _all_reduced(4096, 4, skip_rank=2), 4).mismatches == 4096
    reduced = _all_reduced(4096, 4)
    swapped = torch.cat([reduced[2048:], reduced[:2048]])  # chunks of a ring landing at the wrong offset
    assert check_allreduce(torch, swapped, 4).mismatches > 4000


def test_the_pattern_sums_exactly_in_float32_up_to_8_ranks():
    index_max = interconnect.PATTERN_PERIOD - 1
    largest = index_max * 8 + interconnect.RANK_STRIDE * 8 * 7 // 2
    assert largest < 2**24  # every partial sum is an integer float32 holds exactly
    assert torch.equal(expected_sum(torch, 0, 10, 1, "cpu"), pattern_values(torch, 0, 10, 0, "cpu"))


def test_chunked_fill_and_check_cover_the_whole_buffer(monkeypatch):
    monkeypatch.setattr(interconnect, "CHECK_CHUNK_ELEMENTS", 1000)
    reduced = _all_reduced(4500, 2)
    assert check_allreduce(torch, reduced, 2).ok
    reduced[4499] = -1.0
    assert check_allreduce(torch, reduced, 2).first_bad_index == 4499


# --- the sweep -------------------------------------------------------------------------------


def test_message_sizes_double_up_to_the_maximum():
    assert message_sizes(MIB, 8 * MIB) == [MIB, 2 * MIB, 4 * MIB, 8 * MIB]
    assert message_sizes(64 * 1024, 4 * MIB, 4) == [64 * 1024, 256 * 1024, MIB, 4 * MIB]
    with pytest.raises(ValueError):
        message_sizes(8 * MIB, MIB)


@pytest.mark.parametrize(("device", "memory_gib", "expected"), [
    ("cuda", 140.4, 8 * GIB),   # H200: up to 8 GiB, where the published figure was taken
    ("cuda", 79.2, 8 * GIB),    # H100 80 GB
    ("cuda", 39.4, 4 * GIB),    # A100 40 GB
    ("cuda", 15.8, 1 * GIB),    # V100 16 GB
    ("cuda", None, 1 * GIB),
    ("cpu", None, 4 * MIB),
])
def test_the_largest_message_fits_the_gpu(device, memory_gib, expected):
    assert default_max_bytes(device, memory_gib) == expected


def test_iterations_aim_at_the_target_time_within_limits():
    assert iterations_for(0.01, 0.2) == 20
    assert iterations_for(1.0, 0.2) == 5
    assert iterations_for(1e-7, 0.2) == 200


def test_spec_is_validated_and_the_command_runs_our_module(tmp_path):
    spec = AllReduceSpec(launch=LaunchSettings(gpus_per_node=4))
    command = prepare_launch(spec, tmp_path, "rid")
    assert command[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert "--nproc-per-node=4" in command
    assert command[command.index("-m", 3) + 1] == "harness.kinds.interconnect.worker"
    assert command[-2:] == ["--plan", str(tmp_path / "plan.json")]
    assert read_plan(tmp_path / "plan.json", AllReducePlan).max_bytes == 8 * GIB
    with pytest.raises(ValueError, match="device"):
        AllReduceSpec(launch=LaunchSettings(gpus_per_node=2, device="tpu"))
    with pytest.raises(ValueError, match="min_bytes <= max_bytes"):
        AllReduceSpec(min_bytes=GIB, max_bytes=MIB, launch=LaunchSettings(gpus_per_node=2))


# --- checks ----------------------------------------------------------------------------------

BOUNDS = InterconnectBounds(min_allreduce_busbw_gbps={4: 326.0, 8: 330.0}, source="cited x 0.90")


def _run(gpus=4, busbw=355.0, correct=True, status="ok", **changes) -> AllReduceRun:
    rows = [{"size_bytes": size, "busbw_gbps": busbw * size / (8 * GIB), "algbw_gbps": 1.0, "time_us": 1.0,
             "correct": True, "mismatches": 0} for size in (MIB, GIB)]
    rows.append({"size_bytes": 8 * GIB, "busbw_gbps": busbw, "algbw_gbps": 1.0, "time_us": 1.0, "correct": correct,
                 "mismatches": 0 if correct else 17, "rank0_check": None if correct else "17 elements differ"})
    return AllReduceRun(gpus=gpus, run_id="r", status=status, rows=rows, **changes)


def _by_name(checks):
    return {c.name: c for c in checks}


def test_busbw_at_the_largest_message_is_held_against_the_bound_for_its_gpu_count():
    checks = _by_name(allreduce_checks(_run(busbw=355.0), BOUNDS, missing_note="n/a"))
    bandwidth = checks["all-reduce bus bandwidth at 8 GiB"]
    assert bandwidth.passed is True and bandwidth.measured == 355.0 and bandwidth.bound == 326.0
    slow = _by_name(allreduce_checks(_run(busbw=300.0), BOUNDS,
                                     missing_note="n/a"))["all-reduce bus bandwidth at 8 GiB"]
    assert slow.passed is False
    assert slow.describe("h200, all-reduce, 4 GPUs") == ("all-reduce bus bandwidth at 8 GiB 300.0 GB/s < 326.0 GB/s "
                                                         "(h200, all-reduce, 4 GPUs)")
    assert checks["all-reduce results correct"].passed is True


def test_a_gpu_count_without_a_bound_is_measured_not_passed():
    check = _by_name(allreduce_checks(_run(gpus=2), BOUNDS, missing_note="n/a"))["all-reduce bus bandwidth at 8 GiB"]
    assert check.passed is None and check.measured == 355.0 and "no bound for 2 GPUs" in check.note
    no_section = _by_name(allreduce_checks(_run(), None, missing_note="n/a"))["all-reduce bus bandwidth at 8 GiB"]
    assert no_section.passed is None and "no [interconnect] section" in no_section.note


def test_a_wrong_sum_fails_whatever_the_speed():
    checks = allreduce_checks(_run(busbw=999.0, correct=False, status="invalid"), BOUNDS, missing_note="n/a")
    assert [c.name for c in checks] == ["all-reduce sweep completed", "all-reduce results correct"]
    assert checks[1].passed is False
    assert "8 GiB: 17 wrong elements over all ranks (17 elements differ)" in checks[1].note


def test_a_failed_sweep_is_one_failed_check_with_the_reason():
    run = AllReduceRun(gpus=4, run_id="r", status="timeout", failure=Failure(reason="rank 2 ... hung"))
    checks = allreduce_checks(run, BOUNDS, missing_note="n/a")
    assert len(checks) == 1 and checks[0].passed is False and checks[0].note == "rank 2 ... hung"


def test_throttling_or_ecc_during_the_sweep_fails_it(tmp_path):
    nvml = FakeNvml([FakeGpu(uuid=UUIDS[i]) for i in range(4)])

    def during(i):
        nvml.gpus[3].ecc_uncorrected = 1 if i > 2 else 0

    run = _run(telemetry=drive(nvml, tmp_path, gpus=4, during=during))
    ecc = _by_name(allreduce_checks(run, BOUNDS, missing_note="n/a"))["no new ECC errors"]
    assert ecc.passed is False and f"GPU 3 ({UUIDS[3]}): 0 new corrected, 1 new uncorrected" in ecc.note


# --- topology --------------------------------------------------------------------------------


def _gpus(count):
    return [GpuInfo(index=i, name="NVIDIA H200", uuid=UUIDS[i], memory_total_gib=140.4, pci_bus_id=f"0000:{i}:00.0")
            for i in range(count)]


H200_TOPOLOGY = TopologyBounds(nvlinks_per_gpu=18, p2p_all_pairs=True, pcie_generation=5, pcie_width=16,
                               source="HGX H200")


def test_topology_is_read_from_nvml_links_pairs_and_pcie():
    nvml = FakeNvml([FakeGpu(uuid=UUIDS[i], pcie_gen=1) for i in range(4)])  # idle links downtrain
    nvml.gpus[2].nvlinks = 16
    nvml.p2p[(1, 3)] = pynvml.NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED
    topology = read_topology(_gpus(4), nvml)
    assert [g["nvlinks_active"] for g in topology["gpus"]] == [18, 18, 16, 18]
    assert topology["gpus"][0]["nvlinks_reported"] == 18
    assert (topology["gpus"][0]["pcie_gen_idle"], topology["gpus"][0]["pcie_gen_max"]) == (1, 5)
    assert topology["p2p_read"]["0-1"] == "ok" and topology["p2p_read"]["1-3"] == "ioh topology not supported"
    assert len(topology["p2p_read"]) == 6
    assert nvml.calls[0] == "nvmlInit" and nvml.calls[-1] == "nvmlShutdown"


def test_each_topology_miss_names_the_gpu_or_the_pair(tmp_path):
    nvml = FakeNvml([FakeGpu(uuid=UUIDS[i]) for i in range(4)])
    nvml.gpus[2].nvlinks = 16
    nvml.p2p[(1, 3)] = pynvml.NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED
    topology = read_topology(_gpus(4), nvml)
    loaded_nvml = FakeNvml([FakeGpu(uuid=UUIDS[i]) for i in range(4)])
    loaded_nvml.gpus[0].pcie_width = 8
    loaded = pcie_under_load(drive(loaded_nvml, tmp_path, gpus=4))
    checks = _by_name(topology_checks(topology, H200_TOPOLOGY, loaded, load_note="n/a"))
    links = checks["NVLink links up per GPU"]
    assert links.passed is False and links.measured == 16 and links.note == f"GPU 2 ({UUIDS[2]}): 16 up"
    p2p = checks["peer-to-peer access between every GPU pair"]
    assert p2p.passed is False and p2p.note == f"GPU 1 ({UUIDS[1]}) ↔ GPU 3 ({UUIDS[3]}): ioh topology not supported"
    assert checks["PCIe link generation under load"].passed is True
    width = checks["PCIe link width under load"]
    assert width.passed is False and width.note == f"GPU 0 ({UUIDS[0]}): x8 (the slot allows x16)"
    assert [[(loc.gpu_index, loc.gpu_uuid) for loc in c.locations] for c in (links, p2p, width)] == [
        [(2, UUIDS[2])], [(1, UUIDS[1]), (3, UUIDS[3])], [(0, UUIDS[0])]]


def _topology_session(monkeypatch, gpus=4):
    """The session's interconnect runs on a fake 4-GPU node, NVML faked, no sweep allowed to launch."""
    monkeypatch.setattr("harness.kinds.interconnect.runner.read_topology",
                        lambda infos: read_topology(infos, FakeNvml([FakeGpu(uuid=UUIDS[i], pcie_gen=1)
                                                                     for i in range(gpus)])))
    ctx = SimpleNamespace(hardware=SimpleNamespace(gpu_count=gpus, gpus=_gpus(gpus)), telemetry_note=lambda: "n/a",
                          profile=profile_stub("h200", {TOPOLOGY_BOUNDS: H200_TOPOLOGY}))
    runs = InterconnectRuns(ctx=ctx)
    monkeypatch.setattr(runs, "sweep", lambda n: pytest.fail(f"the topology launched a {n}-GPU all-reduce"))
    return runs


def test_the_topology_reads_pcie_under_the_component_launchs_load_without_an_all_reduce(monkeypatch, tmp_path):
    """Quick level: no all-reduce launch; the links are read in the GEMM window the component tests ran."""
    runs = _topology_session(monkeypatch)
    load = ComponentsRun(run_id="c", status="ok",
                         telemetry=drive(FakeNvml([FakeGpu(uuid=UUIDS[i]) for i in range(4)]), tmp_path, gpus=4))
    result = runs.run_topology(load, "the component launch's GEMM window")
    checks = _by_name(result.checks)
    assert checks["PCIe link generation under load"].passed is True  # Gen5 under load, Gen1 idle (above)
    assert checks["PCIe link width under load"].measured == 16.0
    assert runs.topology["pcie_load"] == "the component launch's GEMM window" and runs.sweeps == {}


def test_a_component_launch_that_failed_leaves_pcie_not_evaluated_saying_which(monkeypatch):
    runs = _topology_session(monkeypatch)
    load = ComponentsRun(run_id="c", status="failed", failure=Failure(reason="rank 1 died"))
    checks = _by_name(runs.run_topology(load, "the component launch's GEMM window").checks)
    width = checks["PCIe link width under load"]
    assert width.passed is None
    assert width.note == "no PCIe reading under load (the component launch's GEMM window): rank 1 died"
    assert checks["NVLink links up per GPU"].passed is True


def test_the_all_reduce_runs_once_on_the_widest_count_the_node_holds():
    assert allreduce_widths([1, 2, 4, 8], 4) == [4] and allreduce_widths([2, 4], 2) == [2]
    assert allreduce_widths([1, 8], 4) == [] and allreduce_widths([1], 8) == []
    ctx = SimpleNamespace(profile=profile_stub("h200", {INTERCONNECT_BOUNDS: BOUNDS}, gpu_counts=[1, 2, 4, 8]),
                          options=SimpleNamespace(calibration=False, gpus=None), available_gpus=4,
                          core_unit="GPUs", rank_unit="GPU")
    params = {p.id: [m.kwargs["reason"] for m in p.marks] for p in allreduce_params(ctx)}
    assert params == {"2gpu": ["not measured: the all-reduce runs once, on 4 GPUs, whose ring crosses every link "
                               "a 2-GPU sweep would"], "4gpu": [], "8gpu": ["needs 8 GPUs; this node has 4"]}


def test_pcie_without_a_reading_under_load_is_not_evaluated():
    topology = read_topology(_gpus(2), FakeNvml([FakeGpu(uuid=UUIDS[i], pcie_gen=1) for i in range(2)]))
    checks = _by_name(topology_checks(topology, H200_TOPOLOGY, {}, load_note="no PCIe reading under load: CPU"))
    assert checks["PCIe link generation under load"].passed is None
    assert checks["PCIe link generation under load"].note == "no PCIe reading under load: CPU"
    assert checks["NVLink links up per GPU"].passed is True


def test_a_gpu_without_nvlink_fails_an_nvlink_profile():
    topology = read_topology(_gpus(2), FakeNvml([FakeGpu(uuid=UUIDS[0]),
                                                 FakeGpu(uuid=UUIDS[1], unsupported={"nvmlDeviceGetNvLinkState"})]))
    check = _by_name(topology_checks(topology, H200_TOPOLOGY, {}, load_note="n/a"))["NVLink links up per GPU"]
    assert check.passed is False and f"GPU 1 ({UUIDS[1]}): NVML reports no NVLink (Not Supported)" in check.note


def _without_nvlink(count: int, *, virtualized: bool | None, name: str = "NVIDIA H200") -> dict:
    gpus = [GpuInfo(index=i, name=name, uuid=UUIDS[i], memory_total_gib=140.4, pci_bus_id=f"0000:{i}:00.0")
            for i in range(count)]
    nvml = FakeNvml([FakeGpu(uuid=UUIDS[i], name=name, unsupported={"nvmlDeviceGetNvLinkState"})
                     for i in range(count)])
    return read_topology(gpus, nvml, virtualized=virtualized)


MULTI_GPU_NVLINK = TopologyBounds(nvlinks_per_gpu=18, nvlink_when="multi_gpu", source="HGX H200")


def test_one_gpu_in_a_vm_without_nvlink_does_not_apply_where_the_profile_asks_nvlink_only_between_peers():
    check = _by_name(topology_checks(_without_nvlink(1, virtualized=True), MULTI_GPU_NVLINK, {},
                                     load_note="n/a"))["NVLink links up per GPU"]
    assert check.passed is None
    assert check.note.startswith("does not apply: one GPU on this node has no peer to link to")
    assert "virtual machine" in check.note and f"GPU 0 ({UUIDS[0]})" in check.note


def test_several_gpus_without_nvlink_fail_and_say_which_kind_of_node_it_is():
    check = _by_name(topology_checks(_without_nvlink(2, virtualized=True), MULTI_GPU_NVLINK, {},
                                     load_note="n/a"))["NVLink links up per GPU"]
    assert check.passed is False
    assert "The node failed: this node has several GPUs, so [topology] requires NVLink" in check.note
    assert "virtual machine" in check.note and f"GPU 1 ({UUIDS[1]})" in check.note


def test_one_gpu_without_nvlink_fails_where_the_profile_requires_nvlink_always():
    check = _by_name(topology_checks(_without_nvlink(1, virtualized=False), H200_TOPOLOGY, {},
                                     load_note="n/a"))["NVLink links up per GPU"]
    assert check.passed is False
    assert "bare metal should have NVLink" in check.note and 'nvlink_when = "always"' in check.note


@pytest.mark.parametrize(("name", "virtualized", "says"), [
    ("NVIDIA H100 PCIe", True, "is a PCIe card: it has no NVLink"),
    ("NVIDIA H200 NVL", False, "NVLink comes from a bridge"),
    ("NVIDIA H100 80GB HBM3", True, "virtual machine"),
    ("NVIDIA H100 80GB HBM3", False, "bare metal should have NVLink"),
    ("NVIDIA H100 80GB HBM3", None, "unknown"),
])
def test_why_a_gpu_shows_no_nvlink(name, virtualized, says):
    assert says in why_no_nvlink(name, virtualized)


def test_the_hypervisor_flag_is_read_from_cpuinfo():
    assert runs_in_virtual_machine("processor: 0\nflags\t: fpu vme hypervisor avx2\n") is True
    assert runs_in_virtual_machine("processor: 0\nflags\t: fpu vme avx2\n") is False
    assert runs_in_virtual_machine("processor: 0\nFeatures\t: fp asimd bf16\n") is None


# --- the acceptance test through the plugin (fake sweep) -------------------------------------

PROFILE = cpu_test_profile(
    sections="[interconnect]\nmin_allreduce_busbw_gbps = {{ 2 = {bound} }}\nsource = \"test busbw\"")


class FakeSweep:
    def __init__(self, busbw: float):
        self.busbw = busbw
        self.specs = []
        self.started = []

    def __call__(self, spec, run_dir, *, run_id, started=None):
        self.specs.append(spec)
        self.started.append(started)
        rows = [{"size_bytes": size, "busbw_gbps": self.busbw, "algbw_gbps": self.busbw, "time_us": 10.0,
                 "correct": True, "mismatches": 0}
                for size in message_sizes(spec.min_bytes, spec.max_bytes, spec.factor)]
        return AllReduceRun(gpus=spec.world_size, run_id=run_id, status="ok", rows=rows,
                            telemetry={"status": "unavailable", "reason": "a CPU run (gloo) has no GPU to sample"})


@pytest.fixture
def interconnect_suite(pytester, monkeypatch, tmp_path):
    thresholds = tmp_path / "thresholds"
    thresholds.mkdir()
    pytester.makeini("[pytest]\nharness_acceptance = true\n")
    pytester.makepyfile(test_accept_interconnect=(REPO / "acceptance" / "test_interconnect.py").read_text())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")

    def run(busbw: float, bound: float | None, *args):
        sweep = FakeSweep(busbw)
        monkeypatch.setattr("harness.kinds.interconnect.launch.run_allreduce", sweep)
        profile = PROFILE.format(bound=bound)
        if bound is None:
            profile = profile[:profile.index("[interconnect]")]
        (thresholds / "cpu-test.toml").write_text(profile)
        result = pytester.runpytest(f"--harness-thresholds-dir={thresholds}", "-p", "no:cacheprovider", "-rs", *args)
        return result, sweep

    return run


def test_allreduce_cases_come_from_the_gpu_counts_and_pass_against_the_bound(interconnect_suite, pytester):
    result, sweep = interconnect_suite(0.8, 0.1, "-v")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["*test_allreduce_bus_bandwidth?2gpu? PASSED*", "*needs 64 CPU cores*",
                                 "*no GPU topology on a CPU run*"])
    assert [(s.world_size, s.device, s.max_bytes) for s in sweep.specs] == [(2, "cpu", 4 * MIB)]
    report = json.loads((pytester.path / "reports" / "latest" / "report.json").read_text())
    rows = report["harness"]["interconnect"]["allreduce"]
    assert rows[-1] == {"gpus": 2, "size_bytes": 4 * MIB, "busbw_gbps": 0.8, "algbw_gbps": 0.8, "time_us": 10.0,
                        "correct": True}
    test = next(t for t in report["tests"] if "2gpu" in t["nodeid"])
    assert {c["name"]: c["passed"] for c in test["metadata"]["harness"]["checks"]}["all-reduce bus bandwidth at 4 MiB"]
    html = (pytester.path / "reports" / "latest" / "report.html").read_text()
    assert "all-reduce bus bandwidth (GB/s)" in html and "2 GPUs bound" in html


def test_the_sweep_of_every_planned_count_starts_with_the_session_where_asked(interconnect_suite, monkeypatch):
    """Issue 28: ~9 s of a 14 s sweep was start-up; started at collection, in the directory and under the run id the
    sweep will use, it imports while the component launch measures, and the sweep takes it."""
    from harness.launch import prestart

    started = []

    def start_early(launch, command, run_dir, run_id):
        started.append(prestart.Started(launch=launch, command=command, run_dir=run_dir, run_id=run_id,
                                        process=None))  # type: ignore[arg-type] - never run: the sweep is a fake
        return started[-1]

    monkeypatch.setattr(prestart, "start_early", start_early)
    result, sweep = interconnect_suite(0.8, 0.1, "--harness-prestart", "on")
    result.assert_outcomes(passed=1, skipped=2)
    assert sweep.started == started and len(started) == 1  # the widest count the node holds: 2 ranks
    early = started[0]
    assert early.run_dir.name == "allreduce-2gpu" and early.run_id.endswith("-allreduce-2gpu")
    assert "--nproc-per-node=2" in early.command and early.command[-1] == str(early.run_dir / "plan.json")
    result, sweep = interconnect_suite(0.8, 0.1)  # auto: not on CPU ranks, whose imports would share their cores
    assert sweep.started == [None] and len(started) == 1


def test_a_slow_interconnect_fails_with_measured_vs_bound(interconnect_suite):
    result, _ = interconnect_suite(0.05, 0.1)
    result.assert_outcomes(failed=1, skipped=2)
    result.stdout.fnmatch_lines(
        ["*all-reduce bus bandwidth at 4 MiB 0.050 GB/s < 0.100 GB/s (cpu-test, all-reduce, 2 ranks)*"])


def test_a_profile_without_an_interconnect_section_runs_no_sweep(interconnect_suite):
    result, sweep = interconnect_suite(0.8, None)
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*profile cpu-test has no ?interconnect? section*"])
    assert sweep.specs == []


def test_a_calibration_session_measures_the_all_reduce_a_profile_has_no_bound_for(interconnect_suite, pytester):
    """--harness-calibration: the sweep runs and its figure is recorded, not evaluated (calibrate-fit fits the
    kind's first [interconnect] bound from it), and the session is never a sign-off."""
    result, sweep = interconnect_suite(0.8, None, "--harness-calibration", "-v")
    result.assert_outcomes(skipped=3)  # the all-reduce: measured, not evaluated; 64 cores; no GPU topology
    result.stdout.fnmatch_lines(["*SKIPPED*not evaluated: the profile has no ?interconnect? section*"])
    assert [s.world_size for s in sweep.specs] == [2]
    summary = json.loads((pytester.path / "reports" / "latest" / "session.json").read_text())
    [result_2gpu] = [r for name, r in summary["results"].items() if "allreduce_bus_bandwidth[2gpu]" in name]
    assert {c["key"]: (c["measured"], c["passed"]) for c in result_2gpu["checks"]}["allreduce_busbw"] == (0.8, None)
    verdict = summary["session_verdict"]
    assert not verdict["sign_off"] and "a calibration run (--harness-calibration)" in verdict["headline"]


# --- a real sweep on two gloo ranks ----------------------------------------------------------


@pytest.mark.slow
def test_a_real_gloo_sweep_measures_checks_and_cleans_up(tmp_path, assert_no_process_left):
    spec = AllReduceSpec(min_bytes=64 * 1024, max_bytes=1 * MIB, factor=4, target_seconds=0.05,
                         launch=LaunchSettings(gpus_per_node=2, device="cpu", timeout_s=120))
    run = run_allreduce(spec, tmp_path / "run", run_id="allreduce-gloo-test")
    assert_no_process_left("allreduce-gloo-test")
    assert run.status == "ok", run.failure
    assert [r["size_bytes"] for r in run.rows] == [64 * 1024, 256 * 1024, MIB]
    assert all(r["correct"] and r["mismatches"] == 0 for r in run.rows)
    for row in run.rows:
        algbw, busbw = bus_bandwidth_gbps(row["size_bytes"], row["time_us"] / 1e6, 2)
        assert row["busbw_gbps"] == pytest.approx(busbw) and busbw > 0
        assert row["slowest_time_us"] >= row["time_us"] * 0.999
    assert run.result["backend"] == "gloo" and len(run.result["ranks"]) == 2
    assert run.telemetry == {"status": "unavailable", "reason": "a CPU run (gloo) has no GPU to sample",
                             "period_s": 0.1}
    checks = _by_name(allreduce_checks(run, InterconnectBounds(min_allreduce_busbw_gbps={2: 0.001}, source="t"),
                                       missing_note="n/a"))
    assert checks["all-reduce bus bandwidth at 1 MiB"].passed is True
    assert checks["no new ECC errors"].passed is None
    phases = [json.loads(p.read_text())["phase"] for p in (tmp_path / "run").glob("rank*.phase")]
    assert phases == ["done", "done"]

