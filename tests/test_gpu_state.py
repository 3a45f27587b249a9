"""GPU state through NVML: the snapshot (harness/node/gpu_state.py) against the fake NVML, the checks
(harness/kinds/gpu_state/checks.py) against the shipped profiles' [gpu_state], and the plugin's runner
(harness/plugin/gpu_state.py). The healthy case is the lead's probe of a 1 x H100 VM: it must pass."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from harness.checks.gpu_state import GpuStateInput, clock_setting_windows
from harness.kinds.gpu_state.checks import gpu_state_checks
from harness.node.gpu_state import read_gpu_state, read_gpu_states
from harness.node.hardware import GpuInfo
from harness.kinds.shipped import JOBS
from harness.kinds.gpu_state.params import gpu_state_params
from harness.plugin.cases import NO_GPU
from harness.plugin.gpu_state import GpuStateWatcher
from harness.plugin.levels import order_by_jobs
from harness.kinds.gpu_state.bounds import GpuStateBounds
from harness.kinds.shipped import load_shipped_profile
from harness.profile.load import ThresholdError
from harness.kinds.gpu_state.bounds import GPU_STATE_KEYS
from harness.results.location import Location
from harness.kinds.gpu_state.bounds import GPU_STATE_BOUNDS
from support.hardware import make_hardware
from support.jobs import OTHER_TESTS_JOB
from support.gpu_state import check_gpu
from support.fake_nvml import HOPPER_VM_UNSUPPORTED, UUIDS, fake_nvml
from support.profiles import cpu_test_profile, profile_stub

pytest_plugins = ["pytester"]

THRESHOLDS = Path(__file__).resolve().parents[1] / "thresholds"
_H100 = load_shipped_profile(THRESHOLDS / "h100-80gb.toml").table(GPU_STATE_BOUNDS)
assert _H100 is not None
H100: GpuStateBounds = _H100
STRICT = GpuStateBounds(require_ecc=True, source="test")


def snapshot(nvml, index: int = 0) -> dict:
    return read_gpu_state(nvml, index, index=index, uuid=UUIDS[index], now=1000.0).to_dict()


def judge(start_nvml, end_nvml=None, bounds=H100, **extra) -> dict:
    gpu = GpuStateInput(index=0, uuid=UUIDS[0], start=snapshot(start_nvml), end=snapshot(end_nvml or start_nvml),
                        **extra)
    checks = gpu_state_checks(gpu, bounds)
    return {c.key: c for c in checks}


def h100_vm(**changes):
    return fake_nvml(1, unsupported=set(HOPPER_VM_UNSUPPORTED), **changes)


def test_the_probed_healthy_h100_passes_with_its_unsupported_queries_said():
    checks = judge(h100_vm())
    assert list(checks) == list(GPU_STATE_KEYS)
    assert [k for k, c in checks.items() if c.passed is False] == []
    assert checks["retired_pages"].passed is None and "allowed by [gpu_state] allow_unsupported" in \
        checks["retired_pages"].note
    assert checks["nvlink_errors"].passed is None and "NVML shows no NVLink" in checks["nvlink_errors"].note
    assert all(c.passed for k, c in checks.items() if k not in ("retired_pages", "nvlink_errors"))
    assert all(c.kind == "health" and c.source for c in checks.values())


def test_a_power_cap_fails_stating_both_limits():
    check = judge(h100_vm(), h100_vm(limit_mw=500_000))["power_limit"]
    assert check.passed is False
    assert f"GPU 0 ({UUIDS[0]}): enforced power limit 500 W < default 700 W at session end" in check.note
    assert check.measured == 500.0 and check.bound == 700.0


@pytest.mark.parametrize("change, expected", [
    ({"app_clock_mhz": {"sm": 1410, "mem": 2619}}, "SM applications clock 1410 MHz < default 1980 MHz (max 1980 MHz)"),
    ({"app_clock_mhz": {"sm": 1980, "mem": 1593}}, "MEM applications clock 1593 MHz < default 2619 MHz"),
    ({"gpc_offset_mhz": -200}, "GPC clock offset -200 MHz"),
])
def test_clocks_set_low_fail_stating_both(change, expected):
    check = judge(h100_vm(**change))["clocks"]
    assert check.passed is False and expected in check.note and UUIDS[0] in check.note


def test_default_applications_clocks_below_max_are_healthy():
    # V100: default applications clocks (1312 MHz) sit below the boost maximum (1530 MHz) by design.
    v100 = fake_nvml(1, app_clock_mhz={"sm": 1312, "mem": 877}, default_app_clock_mhz={"sm": 1312, "mem": 877},
                     max_clock_mhz={"sm": 1530, "mem": 877, "graphics": 1530})
    assert judge(v100)["clocks"].passed is True


def test_a_clock_setting_holding_the_gpu_below_its_default_under_load_fails_the_clocks_check():
    where = "h100-80gb, resnet50 bf16, 1 GPU: 140 of 150 samples"
    locked = judge(h100_vm(), clock_setting_windows=[{"where": where, "min_sm_clock_mhz": 1005.0}])["clocks"]
    assert locked.passed is False and where in locked.note
    assert '"applications clocks setting" held the SM clock at 1,005 MHz < default 1980 MHz' in locked.note
    at_default = judge(h100_vm(), clock_setting_windows=[{"where": where, "min_sm_clock_mhz": 1980.0}])["clocks"]
    assert at_default.passed is True


def test_the_clock_setting_windows_come_from_the_case_telemetry():
    track = {"uuid": UUIDS[0], "samples": 150, "clock_events": {"applications clocks setting": 140},
             "reduced": {"sm_clock_mhz": 1005.0}}
    other = {"uuid": UUIDS[1], "samples": 150, "clock_events": {"sw power cap": 150}, "reduced": {}}
    result = SimpleNamespace(context="h100-80gb, resnet50 bf16, 2 GPUs",
                             record=SimpleNamespace(telemetry={"status": "ok", "gpus": [track, other]}))
    assert clock_setting_windows([result, SimpleNamespace(name="allreduce")], UUIDS[0]) == [
        {"where": "h100-80gb, resnet50 bf16, 2 GPUs: 140 of 150 samples", "min_sm_clock_mhz": 1005.0}]
    assert clock_setting_windows([result], UUIDS[1]) == []


def test_ecc_off_fails_where_required_and_a_pending_change_is_noted():
    off = judge(h100_vm(ecc_mode=(0, 1)))["ecc_mode"]
    assert off.passed is False and "ECC disabled" in off.note and "pending differs" in off.note
    relaxed = GpuStateBounds(require_ecc=False, allow_unsupported=H100.allow_unsupported, source="test")
    assert judge(h100_vm(ecc_mode=(0, 0)), bounds=relaxed)["ecc_mode"].passed is True


def test_pending_page_retirement_fails_with_the_counts():
    gpu = fake_nvml(1, retired_pages_pending=1, retired_pages={"dbe": [0x1000, 0x2000], "sbe": []})
    check = judge(gpu)["retired_pages"]
    assert check.passed is False and "page retirement pending" in check.note and "2 retired for DBE" in check.note


def test_an_unsupported_query_fails_unless_the_profile_allows_it():
    check = judge(h100_vm(), bounds=STRICT)["retired_pages"]
    assert check.passed is False
    assert "does not allow that" in check.note and 'add "retired_pages" to allow_unsupported' in check.note
    no_section = judge(h100_vm(), bounds=None)["retired_pages"]
    assert no_section.passed is None and "no [gpu_state] section" in no_section.note


@pytest.mark.parametrize("rows, expected", [((0, 1, 1, 0), "row remapping pending"),
                                             ((0, 0, 0, 1), "row remapping failed")])
def test_row_remapping_pending_or_failed_fails(rows, expected):
    check = judge(h100_vm(), h100_vm(remapped_rows=rows))["remapped_rows"]
    assert check.passed is False and expected in check.note


def test_rising_uncorrectable_ecc_fails():
    check = judge(h100_vm(), h100_vm(ecc_uncorrected_aggregate=2))["ecc_uncorrected"]
    assert check.passed is False and check.measured == 2.0 and "0 at session start, 2 at session end" in check.note


def test_nvlink_counters_rising_beyond_the_bound_fail_naming_gpu_and_link():
    bounded = GpuStateBounds(require_ecc=True, max_nvlink_error_growth=5, source="test")
    end = fake_nvml(1, nvlink_errors={(3, pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT): 40})
    check = judge(fake_nvml(1), end, bounds=bounded)["nvlink_errors"]
    assert check.passed is False and f"GPU 0 ({UUIDS[0]}): link 3 crc_flit errors +40 > 5 allowed" in check.note
    assert check.locations == (Location(gpu_index=0, gpu_uuid=UUIDS[0], link=3),)
    small = fake_nvml(1, nvlink_errors={(3, pynvml.NVML_NVLINK_ERROR_DL_REPLAY): 2})
    assert judge(fake_nvml(1), small, bounds=bounded)["nvlink_errors"].passed is True
    unbounded = judge(fake_nvml(1), end, bounds=STRICT)["nvlink_errors"]
    assert unbounded.passed is None and "max_nvlink_error_growth" in unbounded.note


def test_a_link_that_goes_down_fails_and_missing_nvlink_needs_the_profile_s_word():
    check = judge(fake_nvml(1), fake_nvml(1, nvlinks=17), bounds=STRICT)["nvlink_errors"]
    assert check.passed is False and "link 17 went down during the session" in check.note
    assert [location.link for location in check.locations] == [17]


def test_every_gpu_state_check_names_its_gpu_and_an_xid_its_number():
    event = {"xid": 79, "meaning": "GPU has fallen off the bus", "time": 1000.0}
    checks = judge(h100_vm(), node="gpu02", xid_events=[event])
    gpu = Location(node="gpu02", gpu_index=0, gpu_uuid=UUIDS[0])
    assert {key: c.locations for key, c in checks.items() if key != "xid_events"} == {
        key: (gpu,) for key in checks if key != "xid_events"}
    assert checks["xid_events"].passed is False
    assert checks["xid_events"].locations == (Location(node="gpu02", gpu_index=0, gpu_uuid=UUIDS[0], xid=79,
                                                       detail="GPU has fallen off the bus"),)
    assert checks["xid_events"].locations[0].text() == (f"XID 79 (GPU has fallen off the bus) on GPU 0 of node gpu02 "
                                                        f"(UUID {UUIDS[0]})")
    assert judge(h100_vm(), bounds=STRICT)["nvlink_errors"].passed is False


def test_a_failing_read_is_a_reading_not_a_crash_and_fails_its_check(monkeypatch):
    nvml = h100_vm()

    def lost(handle):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)

    monkeypatch.setattr(nvml, "nvmlDeviceGetEnforcedPowerLimit", lost, raising=False)
    state = snapshot(nvml)
    assert state["readings"]["enforced_power_limit_w"]["status"] == "error"
    assert state["readings"]["retired_pages_pending"]["status"] == "unsupported"
    check = judge(nvml)["power_limit"]
    assert check.passed is False and "NVML could not read the enforced or default power limit" in check.note


def test_snapshots_without_nvml_say_why():
    states, why = read_gpu_states([SimpleNamespace(index=0, uuid=UUIDS[0])],
                                  fake_nvml(0).__class__([], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED))
    assert states == [] and why is not None and "NVML is not available" in why


def test_every_shipped_gpu_profile_has_a_gpu_state_section():
    for path in sorted(THRESHOLDS.glob("*.toml")):
        profile = load_shipped_profile(path)
        if profile.hardware.device == "cuda":
            bounds = profile.table(GPU_STATE_BOUNDS)
            assert bounds is not None and bounds.require_ecc, path.name
            assert set(bounds.allow_unsupported) <= set(GPU_STATE_KEYS)


def test_an_unknown_check_in_allow_unsupported_is_refused(tmp_path):
    path = tmp_path / "cpu-test.toml"
    path.write_text(cpu_test_profile(sections='[gpu_state]\nrequire_ecc = true\nallow_unsupported = ["xid"]\n'
                                              'source = "t"'))
    with pytest.raises(ThresholdError, match="gpu_state.allow_unsupported"):
        load_shipped_profile(path)


# ---------------------------------------------------------------------------------------------
# The plugin's runner and the ordering


def _ctx(device: str = "cuda", gpus: int = 2) -> Any:
    hardware = SimpleNamespace(gpus=tuple(GpuInfo(index=i, name="NVIDIA H100 80GB HBM3", uuid=UUIDS[i],
                                                  memory_total_gib=79.6, pci_bus_id=f"0:{i}") for i in range(gpus)))
    profile = profile_stub("h100-80gb", {GPU_STATE_BOUNDS: H100})
    return SimpleNamespace(device=device, hardware=hardware, profile=profile, allocation=None)


def test_the_runner_judges_each_gpu_start_against_end():
    nvml = fake_nvml(2, unsupported=set(HOPPER_VM_UNSUPPORTED))
    runner = GpuStateWatcher(ctx=_ctx())
    runner.start(nvml)
    nvml.gpus[1].limit_mw = 450_000
    healthy, capped = check_gpu(runner, 0, nvml=nvml), check_gpu(runner, 1, nvml=nvml)
    runner.stop()
    assert healthy.failed == [] and healthy.name == "gpu-state-gpu0"
    assert [c.key for c in capped.failed] == ["power_limit"] and UUIDS[1] in capped.failure_message()
    assert capped.to_dict()["gpu_state"]["xid_watch"] == "ok"
    runner.watcher.failure = "waiting for XID events failed: Unknown Error"  # type: ignore[union-attr]
    stopped = check_gpu(runner, 0, nvml=nvml).checks[6]
    assert stopped.key == "xid_events" and stopped.passed is False and "waiting for XID events failed" in stopped.note
    assert nvml.lifecycle.count("nvmlInit") == nvml.lifecycle.count("nvmlShutdown") == 3
    summary = runner.summary()
    assert summary is not None and summary["end"][1]["readings"]["enforced_power_limit_w"]["value"] == 450.0


def test_on_cpu_the_test_is_skipped_with_the_reason_and_nothing_is_read():
    ctx = _ctx(device="cpu", gpus=0)
    [param] = gpu_state_params(ctx)
    assert param.id == "no-gpu" and param.marks[0].kwargs["reason"] == NO_GPU == "no GPU on a CPU run"
    runner = GpuStateWatcher(ctx=ctx)
    runner.start(fake_nvml(0))
    assert runner.watcher is None and runner.summary() is None
    assert [p.id for p in gpu_state_params(_ctx())] == ["gpu0", "gpu1"]


def test_the_gpu_state_tests_run_after_every_benchmark_and_the_node_shape_first():
    """The jobs' ``order`` (harness/kinds/gpu_state/job.py "last", node_shape "first"); the rest keep their order."""
    items = [SimpleNamespace(name=name, originalname=name.split("[")[0]) for name in (
        "test_gpu_state[gpu0]", "test_weak_scaling[a]", "test_gpu_state[gpu1]", "test_allreduce_bus_bandwidth[2gpu]",
        "test_node_shape", "test_gemm[gpu0]")]
    order_by_jobs(items, JOBS)  # type: ignore[arg-type]
    assert [i.name for i in items] == ["test_node_shape", "test_weak_scaling[a]", "test_allreduce_bus_bandwidth[2gpu]",
                                       "test_gemm[gpu0]", "test_gpu_state[gpu0]", "test_gpu_state[gpu1]"]


# ---------------------------------------------------------------------------------------------
# A whole acceptance session on a (fake) H100, through pytester


GPU_STATE_TEST = (Path(__file__).resolve().parents[1] / "acceptance" / "test_gpu_state.py").read_text()


@pytest.fixture
def h100_session(pytester, monkeypatch, tmp_path):
    """An acceptance session on one fake H100 (detection and NVML faked) with the shipped h100-80gb profile."""
    hardware = make_hardware(("NVIDIA H100 80GB HBM3", 79.6))
    nvml = fake_nvml(1, uuid=hardware.gpus[0].uuid, unsupported=set(HOPPER_VM_UNSUPPORTED))
    monkeypatch.setattr("harness.plugin.session.detect", lambda: hardware)
    monkeypatch.setattr("harness.node.gpu_state.installed_pynvml", lambda: nvml)
    monkeypatch.setattr("harness.node.nvml.installed_pynvml", lambda: nvml)  # the XID watcher's (init_nvml)
    monkeypatch.setattr("harness.plugin.session.gpu_processes", lambda gpus: [])
    thresholds = tmp_path / "thresholds"
    thresholds.mkdir()
    (thresholds / "h100-80gb.toml").write_text((THRESHOLDS / "h100-80gb.toml").read_text())
    pytester.makeini("[pytest]\nharness_acceptance = true\n")
    pytester.makepyfile(test_a_gpu_state=GPU_STATE_TEST, test_b_other="def test_other():\n    pass\n")
    pytester.makeconftest(OTHER_TESTS_JOB)

    def run(*args):
        return pytester.runpytest(f"--harness-thresholds-dir={thresholds}", "-p", "no:cacheprovider", "-v", *args)

    return run, nvml, pytester.path


def _session_json(root: Path) -> dict:
    [path] = list(root.rglob("session.json"))
    return json.loads(path.read_text())


def test_a_healthy_gpu_passes_its_state_test_after_every_other_test(h100_session):
    run, nvml, root = h100_session
    result = run()
    result.assert_outcomes(passed=2)
    lines = [line for line in result.outlines if "::test_" in line and ("PASSED" in line or "FAILED" in line)]
    assert "test_other" in lines[0] and "test_gpu_state[gpu0]" in lines[1]
    session = _session_json(root)
    [(nodeid, state)] = [(k, v) for k, v in session["results"].items() if "test_gpu_state" in k]
    assert nodeid.endswith("test_gpu_state[gpu0]")
    assert [c["key"] for c in state["checks"]] == list(GPU_STATE_KEYS)
    assert session["gpu_state"]["xid"]["status"] == {"GPU-0": "ok"}
    assert nvml.lifecycle.count("nvmlInit") == nvml.lifecycle.count("nvmlShutdown")
    [report] = list(root.rglob("report.html"))
    assert "test_gpu_state[gpu0]" in report.read_text() or "gpu-state-gpu0" in report.read_text()


def test_a_capped_gpu_fails_its_state_test_naming_both_limits(h100_session):
    run, nvml, _ = h100_session
    nvml.gpus[0].limit_mw = 400_000
    result = run()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*enforced power limit 400 W < default 700 W at session start*"])
