"""Node shape: the GPUs a node must have usable (harness/node/shape.py), the [node] profile section,
--expect-gpus, and acceptance/test_node.py in sessions on a fake NVML node and on CPU ranks."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.node.hardware import TorchCuda, detect
from harness.node.presence import NvidiaPresence
from harness.kinds.node_shape.checks import node_shape_checks
from harness.node.shape import ExpectedGpus, expected_gpus
from harness.kinds.shipped import load_shipped_profile
from harness.profile.load import ThresholdError
from harness.results.location import Location
from support.fake_nvml import UUIDS, fake_nvml
from support.profiles import cpu_test_profile
from test_plugin import suite  # noqa: F401 - a fixture this module's sessions start from

pytest_plugins = ["pytester"]

ACCEPTANCE = Path(__file__).resolve().parent.parent / "acceptance"


def pci(count: int) -> NvidiaPresence:
    """What the fake NVML's node shows on the PCI bus: ``count`` GPUs from bus 0x18 on."""
    return NvidiaPresence(device_files=tuple(f"/dev/nvidia{i}" for i in range(count)),
                          pci_gpus=tuple(f"0000:{0x18 + i:02x}:00.0" for i in range(count)), nvidia_smi=None)


@pytest.fixture
def four_h200(monkeypatch: pytest.MonkeyPatch):
    """detect() of a 4 x H200 node with CUDA_VISIBLE_DEVICES as given (None: unset)."""
    def make(cuda_visible_devices: str | None = None):
        if cuda_visible_devices is None:
            monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        else:
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", cuda_visible_devices)
        return detect(fake_nvml(4))
    return make


def expect(hw, presence, *, stated=None, slurm=None, env=None, shapes=(1, 2, 4, 8), device="cuda"):
    return expected_gpus(device=device, stated=stated, slurm_gpus=slurm, env=env or {}, hw=hw, presence=presence,
                         shapes=shapes, profile_name="h200")


# ---------------------------------------------------------------------------------------------
# The expected count


def test_a_whole_node_is_expected_at_its_own_shape(four_h200) -> None:
    expected = expect(four_h200(), pci(4))
    assert expected == ExpectedGpus(count=4, stated=False,
                                    source="profile h200 [node] gpus_per_node = [1, 2, 4, 8]; this node shows NVML 4, "
                                           "PCI 4")


def test_a_node_short_of_a_shape_is_expected_at_the_next_shape(four_h200) -> None:
    assert expect(four_h200(), pci(4), shapes=(8,)).count == 8
    assert expect(four_h200(), pci(3), shapes=(1, 2, 8)).count == 8


def test_a_gpu_on_the_pci_bus_that_nvml_lost_still_counts(four_h200) -> None:
    assert expect(four_h200(), pci(5)).count == 8  # 5 shown: the node is an 8-GPU node missing some


def test_stated_counts_win_in_order(four_h200) -> None:
    hw = four_h200()
    assert expect(hw, pci(4), stated=2, slurm=3) == ExpectedGpus(count=2, source="--expect-gpus 2", stated=True)
    slurm = expect(hw, pci(4), slurm=3, env={"SLURM_JOB_GPUS": "0,1,2"})
    assert slurm == ExpectedGpus(count=3, stated=True,
                                 source="the Slurm allocation: 3 GPUs on this node (SLURM_JOB_GPUS=0,1,2)")


def test_a_slurm_job_without_gpus_states_nothing(four_h200) -> None:
    assert not expect(four_h200(), pci(4), slurm=0).stated


def test_without_a_node_section_the_nodes_own_count_is_expected(four_h200) -> None:
    expected = expect(four_h200("0,1"), pci(4), shapes=None)
    assert expected is not None and expected.count == 4 and "has no [node] gpus_per_node" in expected.source


def test_the_cpu_profile_expects_only_what_is_stated(four_h200) -> None:
    hw = four_h200()
    assert expect(hw, pci(0), device="cpu") is None
    assert expect(hw, pci(0), device="cpu", slurm=4, env={"SLURM_GPUS_ON_NODE": "4"}) is None
    assert expect(hw, pci(0), device="cpu", stated=2) == ExpectedGpus(count=2, source="--expect-gpus 2", stated=True)


# ---------------------------------------------------------------------------------------------
# The checks


def checks_of(hw, presence, *, stated=None, shapes=(1, 2, 4, 8)):
    expected = expect(hw, presence, stated=stated, shapes=shapes)
    return {check.key: check for check in node_shape_checks(expected, hw=hw, presence=presence, usable=hw.gpu_count,
                                                             shapes=shapes, profile_name="h200", unit="GPUs")}


def test_a_whole_healthy_node_passes(four_h200) -> None:
    checks = checks_of(four_h200(), pci(4))
    assert checks["gpu_count"].passed is True and checks["gpu_count"].measured == 4.0
    assert checks["gpu_count"].kind == "health" and checks["gpu_count"].comparison == ">="
    assert checks["node_shape"].passed is True


def test_a_gpu_hidden_by_cuda_visible_devices_fails_naming_it(four_h200) -> None:
    check = checks_of(four_h200("0,1,2"), pci(4))["gpu_count"]
    assert check.passed is False
    assert (check.measured, check.bound) == (3.0, 4.0)
    assert f"hidden by CUDA_VISIBLE_DEVICES='0,1,2': GPU 3 {UUIDS[3]} (PCI 00000000:1B:00.0)" in check.note
    assert f"NVML sees 4 GPU(s); usable: GPU 0 {UUIDS[0]} (PCI 00000000:18:00.0), GPU 1" in check.note
    assert "state it with --expect-gpus N" in check.note
    assert check.locations == (Location(gpu_index=3, gpu_uuid=UUIDS[3], detail="hidden by CUDA_VISIBLE_DEVICES"),)


def test_a_stated_partial_node_passes_with_the_rest_hidden(four_h200) -> None:
    checks = checks_of(four_h200("0,1,2"), pci(4), stated=3)
    assert checks["gpu_count"].passed is True
    assert "node_shape" not in checks  # the node's own size is not judged when a part of it was stated


def test_a_gpu_only_on_the_pci_bus_fails_naming_its_bus_id(four_h200) -> None:
    presence = NvidiaPresence(device_files=(), pci_gpus=(*(pci(4).pci_gpus or ()), "0000:df:00.0"), nvidia_smi=None)
    check = checks_of(four_h200(), presence, shapes=(8,))["gpu_count"]
    assert check.passed is False and check.bound == 8.0
    assert "on the PCI bus but not seen by NVML: 0000:df:00.0" in check.note
    # A node of 8 showing 4: the indices with no GPU are named (NVML cannot say which bus is which).
    assert [(loc.gpu_index, loc.detail) for loc in check.locations] == [(i, "not seen by NVML") for i in range(4, 8)]
    assert "missing GPU 4, 5, 6, 7 (not seen by NVML)" in check.note


def test_more_gpus_than_any_shape_fail_the_node_shape(four_h200) -> None:
    checks = checks_of(four_h200(), pci(4), shapes=(1, 2))
    assert checks["gpu_count"].passed is True
    assert checks["node_shape"].passed is False
    assert "more than any node shape profile h200 describes" in checks["node_shape"].note


def test_on_cpu_without_a_stated_count_the_check_says_why_it_is_not_evaluated(four_h200) -> None:
    [check] = node_shape_checks(None, hw=four_h200(), presence=None, usable=2, shapes=None, profile_name="cpu",
                                unit="ranks")
    assert check.key == "gpu_count" and check.passed is None
    assert "harness self-check on CPU ranks, not a GPU sign-off" in check.note


# ---------------------------------------------------------------------------------------------
# [node] in a profile

NODE_SECTION = '[node]\ngpus_per_node = {shapes}\nsource = "DGX H200 datasheet"\n'


def gpu_test_profile(node: str = "") -> str:
    """The shared CPU test profile as a cuda profile, "gpu-test", for H200s; ``node`` a [node] section."""
    text = cpu_test_profile(sections=node).replace('name = "cpu-test"', 'name = "gpu-test"')
    return text.replace('device = "cpu"', 'device = "cuda"\nmatch = { gpu_name_contains = "H200" }\n'
                        'peak_tflops = { bf16 = 989 }\npeak_tflops_source = "datasheet"')


def test_node_section_loads_sorted(tmp_path: Path) -> None:
    path = tmp_path / "gpu-test.toml"
    path.write_text(gpu_test_profile(NODE_SECTION.format(shapes="[8, 4]")))
    node = load_shipped_profile(path).node
    assert node is not None and node.gpus_per_node == (4, 8) and node.source == "DGX H200 datasheet"
    assert node.to_dict() == {"gpus_per_node": [4, 8], "source": "DGX H200 datasheet"}


@pytest.mark.parametrize(("shapes", "problem"), [
    ("[0]", "gpus_per_node[0] = 0: must be >= 1 (GPUs)"),
    ("[8, 8]", "gpus_per_node[1] = 8: repeats an earlier entry"),
    ("[]", "gpus_per_node = []: must list at least one GPU count"),
    ('"8"', "expected an array of GPU counts"),
])
def test_bad_node_shapes_are_refused_naming_the_key(tmp_path: Path, shapes: str, problem: str) -> None:
    path = tmp_path / "gpu-test.toml"
    path.write_text(gpu_test_profile(NODE_SECTION.format(shapes=shapes)))
    with pytest.raises(ThresholdError) as caught:
        load_shipped_profile(path)
    assert problem in str(caught.value)


def test_a_cpu_profile_has_no_node_section(tmp_path: Path) -> None:
    path = tmp_path / "cpu-test.toml"
    path.write_text(cpu_test_profile(sections=NODE_SECTION.format(shapes="[8]")))
    with pytest.raises(ThresholdError, match=r"node.gpus_per_node = \[8\]: a cpu profile has no GPUs per node"):
        load_shipped_profile(path)


def test_every_shipped_gpu_profile_passes_the_lent_machines() -> None:
    from harness.kinds.shipped import load_shipped_profiles
    from harness.profile.load import default_thresholds_dir

    profiles = {profile.name: profile for profile in load_shipped_profiles(default_thresholds_dir())}
    for name in ("h200", "h100-80gb", "a100-80gb", "v100-16gb"):
        node = profiles[name].node
        assert node is not None and "docs/references.md#node-shapes" in node.source
        assert {1, 2, 4, 8} <= set(node.gpus_per_node), name  # lent 1 x H100, 1/2/4 x H200 VMs; HGX boards
    assert profiles["cpu"].node is None


# ---------------------------------------------------------------------------------------------
# Sessions: no silent CPU fallback, and acceptance/test_node.py first


@pytest.fixture
def session(request, pytester, monkeypatch):
    """test_plugin's session (a fake launcher, profile cpu-test) with acceptance/test_node.py beside it."""
    run = request.getfixturevalue("suite")
    pytester.makepyfile(test_node=(ACCEPTANCE / "test_node.py").read_text())
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    for name in ("SLURM_JOB_ID", "SLURM_JOBID"):
        monkeypatch.delenv(name, raising=False)
    return run


def nvidia_machine(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    """This machine shows an H100 on the PCI bus and /dev/nvidia0; NVML (the real one, here) cannot be used."""
    from test_node_presence import H100_3D, make_tree

    monkeypatch.setattr("harness.node.presence.SYSTEM_ROOT",
                        make_tree(root, devices=("nvidia0", "nvidiactl"), pci={"0000:00:06.0": H100_3D}))


def test_nvidia_hardware_that_cannot_be_used_stops_the_session_once(session, monkeypatch, tmp_path):
    run, launcher, _ = session
    nvidia_machine(monkeypatch, tmp_path / "machine")
    result = run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = result.stderr.str()
    assert errors.count("NVIDIA hardware is present (/dev/nvidia0; 1 NVIDIA GPU on the PCI bus (0000:00:06.0))") == 1
    assert "pass --hardware cpu" in errors and "Traceback" not in errors
    assert launcher.calls == []


def test_the_cpu_self_check_runs_on_such_a_machine_when_asked(session, monkeypatch, tmp_path):
    run, launcher, _ = session
    nvidia_machine(monkeypatch, tmp_path / "machine")
    run("--hardware", "cpu-test").assert_outcomes(passed=3, skipped=1)
    assert launcher.calls


def test_a_gpu_profile_named_on_a_node_without_usable_gpus_stops(session, tmp_path):
    run, launcher, thresholds = session
    (thresholds / "gpu-test.toml").write_text(gpu_test_profile())
    result = run("--hardware", "gpu-test")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--hardware gpu-test is a GPU profile, but this node has no usable GPU*"])
    assert launcher.calls == []


def test_node_shape_runs_first_and_on_cpu_is_not_evaluated_saying_why(session, pytester):
    import json

    run, _, _ = session
    result = run("-v")
    result.assert_outcomes(passed=3, skipped=1)
    lines = [line for line in result.stdout.lines if " PASSED" in line or " SKIPPED" in line]
    assert "test_node.py::test_node_shape PASSED" in lines[0]
    summary = json.loads((pytester.path / "reports" / "latest" / "session.json").read_text())
    [node] = [result for nodeid, result in summary["results"].items() if nodeid.endswith("test_node_shape")]
    [check] = node["checks"]
    assert check["key"] == "gpu_count" and check["passed"] is None
    assert "not a GPU sign-off" in check["note"]


def test_expect_gpus_on_cpu_holds_the_ranks_to_it(session):
    run, _, _ = session
    result = run("--expect-gpus", "100000", "-k", "node_shape")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*usable ranks * ranks < 100,000.0 ranks: this process may use * CPU cores, one per "
                                 "rank; 100000 ranks expected (--expect-gpus 100000)*"])


def test_expect_gpus_must_be_a_count(session):
    run, launcher, _ = session
    result = run("--expect-gpus", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--expect-gpus 0: expected the number of GPUs the node has, >= 1*"])


@pytest.fixture
def gpu_session(session, monkeypatch):
    """The session on a fake 4 x H200 node (NVML and torch agreeing), profile gpu-test of 4-GPU nodes."""
    run, launcher, thresholds = session
    (thresholds / "gpu-test.toml").write_text(gpu_test_profile(NODE_SECTION.format(shapes="[4]")))
    monkeypatch.setattr("harness.plugin.session.detect", lambda: detect(
        fake_nvml(4), torch_cuda=lambda: TorchCuda(available=True, device_count=len(visible_list()))))
    monkeypatch.setattr("harness.plugin.session.gpu_processes", lambda gpus: [])
    return run


def visible_list() -> list[str]:
    import os

    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    return ["0", "1", "2", "3"] if value is None else [part for part in value.split(",") if part]


def test_a_gpu_hidden_without_a_stated_partial_node_fails_the_node_shape(gpu_session, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    result = gpu_session("-k", "node_shape")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*usable GPUs 3.000 GPUs < 4.000 GPUs*hidden by CUDA_VISIBLE_DEVICES='0,1,2': "
                                 f"GPU 3 {UUIDS[3]} (PCI 00000000:1B:00.0)*"])


def test_a_stated_partial_node_passes(gpu_session, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    gpu_session("-k", "node_shape", "--expect-gpus", "3").assert_outcomes(passed=1)


def test_the_whole_node_passes(gpu_session):
    gpu_session("-k", "node_shape").assert_outcomes(passed=1)


def test_a_slurm_job_given_no_gpus_is_told_how_to_ask_for_them(session, monkeypatch, tmp_path):
    run, launcher, _ = session
    nvidia_machine(monkeypatch, tmp_path / "machine")
    for name, value in {"SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "vm", "SLURM_JOB_NUM_NODES": "1"}.items():
        monkeypatch.setenv(name, value)
    for name in ("SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "SLURM_GPUS"):
        monkeypatch.delenv(name, raising=False)
    result = run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*- This Slurm job (77) was given no GPUs: submit it with --gpus-per-node=N*"])
    assert launcher.calls == []
