"""Hardware detection and profile selection, against a fake NVML (no GPU needed)."""

from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.node import hardware
from harness.node.hardware import (
    GpuInfo,
    Hardware,
    HardwareError,
    check_homogeneous,
    cuda_version_text,
    describe,
    detect,
    format_nccl_version,
    select_profile,
    visible_nvml_indices,
)

H200_MEMORY_BYTES = 150754820096  # what NVML reports for an H200 SXM: 140.4 GiB
A100_80GB_MEMORY_BYTES = 85899345920  # 80.0 GiB
H200_UUIDS = tuple(f"GPU-{digit * 8}-aaaa-bbbb-cccc-{digit * 12}" for digit in "1234")


# ---------------------------------------------------------------------------------------------
# A fake of the pynvml module


class FakeNVMLError(Exception):
    pass


@dataclass
class FakeGpu:
    name: str | bytes
    uuid: str | bytes
    memory_total_bytes: int
    bus_id: str | bytes


@dataclass
class FakeNvml:
    gpus: list[FakeGpu]
    init_error: str | None = None
    driver_version: str | bytes = "580.65.06"
    cuda_driver_version: int = 13000
    lost_gpu_indices: set[int] = field(default_factory=set)
    calls: list[str] = field(default_factory=list)

    NVMLError = FakeNVMLError

    def nvmlInit(self) -> None:
        self.calls.append("init")
        if self.init_error is not None:
            raise FakeNVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.calls.append("shutdown")

    def nvmlSystemGetDriverVersion(self) -> str | bytes:
        return self.driver_version

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return self.cuda_driver_version

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if index in self.lost_gpu_indices:
            raise FakeNVMLError("GPU is lost")
        return index

    def nvmlDeviceGetName(self, handle: int) -> str | bytes:
        return self.gpus[handle].name

    def nvmlDeviceGetUUID(self, handle: int) -> str | bytes:
        return self.gpus[handle].uuid

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        total = self.gpus[handle].memory_total_bytes
        return SimpleNamespace(total=total, free=total, used=0)

    def nvmlDeviceGetPciInfo(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(busId=self.gpus[handle].bus_id)


def h200_node(count: int = 4) -> FakeNvml:
    return FakeNvml(
        gpus=[
            FakeGpu("NVIDIA H200", H200_UUIDS[index], H200_MEMORY_BYTES, f"00000000:{0x18 + index:02X}:00.0")
            for index in range(count)
        ]
    )


@pytest.fixture(autouse=True)
def no_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


# ---------------------------------------------------------------------------------------------
# detect()


def test_detects_four_h200_with_memory_in_gib() -> None:
    nvml = h200_node()

    hw = detect(nvml)

    assert hw.device == "cuda"
    assert hw.gpu_count == 4
    assert hw.gpu_name == "NVIDIA H200"
    assert hw.gpu_names == ("NVIDIA H200",)
    assert [gpu.index for gpu in hw.gpus] == [0, 1, 2, 3]
    assert hw.gpus[0] == GpuInfo(
        index=0, name="NVIDIA H200", uuid=H200_UUIDS[0], memory_total_gib=140.4, pci_bus_id="00000000:18:00.0"
    )
    assert hw.driver_version == "580.65.06"
    assert hw.cuda_driver_version == "13.0"
    assert hw.nvml_unavailable_reason is None
    assert hw.nvml_gpu_count == 4
    assert hw.cuda_visible_devices is None
    assert nvml.calls == ["init", "shutdown"]


def test_decodes_bytes_from_old_pynvml() -> None:
    nvml = FakeNvml(
        gpus=[FakeGpu(b"NVIDIA A100-SXM4-80GB", b"GPU-abc", A100_80GB_MEMORY_BYTES, b"00000000:07:00.0")],
        driver_version=b"535.183.01",
        cuda_driver_version=12020,
    )

    hw = detect(nvml)

    assert hw.gpus[0].name == "NVIDIA A100-SXM4-80GB"
    assert hw.gpus[0].uuid == "GPU-abc"
    assert hw.gpus[0].pci_bus_id == "00000000:07:00.0"
    assert hw.gpus[0].memory_total_gib == 80.0
    assert hw.driver_version == "535.183.01"
    assert hw.cuda_driver_version == "12.2"


def test_cuda_visible_devices_by_index_keeps_physical_indices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")

    hw = detect(h200_node())

    assert [gpu.index for gpu in hw.gpus] == [3, 1]
    assert [gpu.uuid for gpu in hw.gpus] == [H200_UUIDS[3], H200_UUIDS[1]]
    assert hw.cuda_visible_devices == "3,1"
    assert hw.nvml_gpu_count == 4


def test_cuda_visible_devices_by_uuid_and_uuid_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{H200_UUIDS[2]},GPU-4444")

    hw = detect(h200_node())

    assert [gpu.index for gpu in hw.gpus] == [2, 3]


def test_empty_cuda_visible_devices_means_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    nvml = h200_node()

    hw = detect(nvml)

    assert hw.device == "cpu"
    assert hw.gpus == ()
    assert hw.nvml_unavailable_reason == (
        "CUDA_VISIBLE_DEVICES='' leaves none of the 4 GPUs NVML sees visible (CUDA stops at an empty, "
        "negative or unknown entry; a repeated one hides them all)"
    )
    assert hw.driver_version == "580.65.06"  # NVML worked, so the driver facts are still reported
    assert nvml.calls == ["init", "shutdown"]


@pytest.mark.parametrize(
    ("cuda_visible_devices", "expected"),
    [
        (None, (0, 1, 2, 3)),
        ("", ()),
        ("-1", ()),
        ("NoDevFiles", ()),
        ("0, 2", (0, 2)),
        ("0,1,7,2", (0, 1)),  # out of range: CUDA stops there
        ("1,-1,2", (1,)),
        ("1gpu,2", (1, 2)),  # CUDA reads entries with strtoul
        ("1,1", ()),  # a repeated GPU hides every GPU
        ("GPU-1111,GPU-2222", (0, 1)),
        ("GPU-3333,0", (2,)),  # the first entry picks UUID mode; an index then stops the list
        ("GPU-,GPU-1111", ()),  # "GPU-" prefixes every UUID: ambiguous
        ("GPU-9999", ()),
        ("GPU-2222,GPU-22222222-aaaa", ()),  # the same GPU twice
    ],
)
def test_visible_nvml_indices_mirror_cuda(cuda_visible_devices: str | None, expected: tuple[int, ...]) -> None:
    assert visible_nvml_indices(cuda_visible_devices, 4, H200_UUIDS.__getitem__) == expected


def test_visible_nvml_indices_reads_uuids_only_for_uuid_lists() -> None:
    def uuid_of(index: int) -> str:
        raise AssertionError("index lists must not query UUIDs (a lost GPU could not answer)")

    assert visible_nvml_indices("0,1", 4, uuid_of) == (0, 1)


def test_mig_instances_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-5c89852c-d268-c3f3-1b07-005d5ae1dc3f")
    nvml = h200_node()

    with pytest.raises(HardwareError) as excinfo:
        detect(nvml)

    assert str(excinfo.value) == (
        "CUDA_VISIBLE_DEVICES=MIG-5c89852c-d268-c3f3-1b07-005d5ae1dc3f selects MIG instances; a node is "
        "signed off on whole GPUs. Disable MIG mode or give the run whole GPUs."
    )
    assert nvml.calls == ["init", "shutdown"]


def test_nvml_init_failure_falls_back_to_cpu_with_reason() -> None:
    nvml = FakeNvml(gpus=[], init_error="Driver Not Loaded")

    hw = detect(nvml)

    assert hw.device == "cpu"
    assert hw.gpus == ()
    assert hw.gpu_name is None
    assert hw.nvml_unavailable_reason == "nvmlInit failed: Driver Not Loaded"
    assert hw.driver_version is None
    assert hw.nvml_gpu_count is None
    # Shutting down an NVML that never started would itself fail with "Uninitialized".
    assert nvml.calls == ["init"]


def test_missing_pynvml_module_falls_back_to_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError

    hw = detect()

    assert hw.device == "cpu"
    assert hw.nvml_unavailable_reason is not None
    assert hw.nvml_unavailable_reason.startswith("the pynvml module cannot be imported")
    assert hw.nvml_unavailable_reason.endswith("; install nvidia-ml-py")


def test_zero_devices_falls_back_to_cpu() -> None:
    hw = detect(FakeNvml(gpus=[]))

    assert hw.device == "cpu"
    assert hw.nvml_unavailable_reason == "NVML works but sees no GPU on this node"
    assert hw.nvml_gpu_count == 0


def test_lost_gpu_is_an_error_not_a_cpu_fallback() -> None:
    nvml = h200_node()
    nvml.lost_gpu_indices = {2}

    with pytest.raises(HardwareError) as excinfo:
        detect(nvml)

    assert str(excinfo.value) == (
        "NVML could not read GPU 2: GPU is lost. A GPU the driver cannot query fails sign-off: look for "
        "Xid errors in `dmesg` and run `nvidia-smi -q -i 2`, or leave it out with CUDA_VISIBLE_DEVICES to "
        "test the others."
    )
    assert nvml.calls == ["init", "shutdown"]


def test_a_lost_gpu_left_out_by_index_does_not_stop_detection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,3")
    nvml = h200_node()
    nvml.lost_gpu_indices = {2}

    assert [gpu.index for gpu in detect(nvml).gpus] == [0, 1, 3]


def test_missing_cuda_driver_version_is_not_fatal() -> None:
    nvml = h200_node()

    def unsupported() -> int:
        raise FakeNVMLError("Function Not Found")

    nvml.nvmlSystemGetCudaDriverVersion = unsupported  # type: ignore[method-assign]

    assert detect(nvml).cuda_driver_version is None


def test_real_pynvml_on_a_machine_without_gpu_gives_cpu() -> None:
    hw = detect()

    if hw.device == "cuda":
        pytest.skip("this machine has a visible NVIDIA GPU")
    assert hw.gpus == ()
    assert hw.nvml_unavailable_reason


@pytest.mark.parametrize(("nvml_value", "text"), [(13000, "13.0"), (12080, "12.8"), (11020, "11.2")])
def test_cuda_version_text(nvml_value: int, text: str) -> None:
    assert cuda_version_text(nvml_value) == text


@pytest.mark.parametrize(
    ("torch_value", "text"),
    [((2, 27, 3), "2.27.3"), ((2, 21, 5, "+cuda12.4"), "2.21.5+cuda12.4"), (21805, "2.18.5"), (2708, "2.7.8")],
)
def test_format_nccl_version(torch_value: int | tuple, text: str) -> None:
    assert format_nccl_version(torch_value) == text


# ---------------------------------------------------------------------------------------------
# Hardware


def make_hardware(*gpus: tuple[str, float], reason: str | None = None) -> Hardware:
    return Hardware(
        hostname="node01",
        device="cuda" if gpus else "cpu",
        gpus=tuple(
            GpuInfo(index=index, name=name, uuid=f"GPU-{index}", memory_total_gib=memory_gib,
                    pci_bus_id=f"00000000:{index:02X}:00.0")
            for index, (name, memory_gib) in enumerate(gpus)
        ),
        driver_version="580.65.06" if gpus else None,
        cuda_driver_version="13.0" if gpus else None,
        cuda_runtime_version="13.2",
        nccl_version="2.27.3",
        torch_version="2.15.0",
        nvml_unavailable_reason=None if gpus else (reason or "nvmlInit failed: NVML Shared Library Not Found"),
    )


def test_to_dict_is_json_and_carries_derived_fields() -> None:
    hw = detect(h200_node(2))

    data = json.loads(json.dumps(hw.to_dict()))

    assert data["device"] == "cuda"
    assert data["gpu_count"] == 2
    assert data["gpu_name"] == "NVIDIA H200"
    assert data["gpus"][1] == {
        "index": 1, "name": "NVIDIA H200", "uuid": H200_UUIDS[1], "memory_total_gib": 140.4,
        "pci_bus_id": "00000000:19:00.0",
    }


def test_gpu_names_are_distinct_in_order() -> None:
    hw = make_hardware(("B", 80.0), ("A", 80.0), ("B", 80.0))

    assert hw.gpu_names == ("B", "A")


def test_hardware_rejects_inconsistent_device() -> None:
    with pytest.raises(ValueError, match="Hardware.gpus must hold at least one GPU when device is 'cuda'"):
        Hardware(hostname="n", device="cuda", gpus=(), driver_version=None, cuda_driver_version=None,
                 cuda_runtime_version=None, nccl_version=None, torch_version="2.15.0",
                 nvml_unavailable_reason=None)


def test_describe_lists_every_gpu_and_the_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    hw = detect(h200_node())

    text = describe(hw)

    lines = text.splitlines()
    assert lines[0] == f"host: {hw.hostname}"
    assert lines[1] == "GPUs: 2 x NVIDIA H200 (2 of 4 visible through CUDA_VISIBLE_DEVICES=0,1)"
    assert lines[2] == f"  GPU 0: NVIDIA H200, 140.4 GiB, {H200_UUIDS[0]}, PCI 00000000:18:00.0"
    assert lines[3] == f"  GPU 1: NVIDIA H200, 140.4 GiB, {H200_UUIDS[1]}, PCI 00000000:19:00.0"
    assert "NVIDIA driver: 580.65.06" in lines
    assert f"CUDA: driver supports 13.0, torch built with {hw.cuda_runtime_version or 'unknown'}" in lines
    assert f"torch: {hw.torch_version}" in lines


def test_describe_cpu_says_why() -> None:
    text = describe(make_hardware())

    assert "GPUs: none, running on CPU (nvmlInit failed: NVML Shared Library Not Found)" in text.splitlines()
    assert "NVIDIA driver: unknown" in text.splitlines()


# ---------------------------------------------------------------------------------------------
# check_homogeneous / select_profile


def profile(name: str, device: str = "cuda", contains: str | None = None,
            min_gib: float | None = None, max_gib: float | None = None) -> SimpleNamespace:
    """A stand-in for harness.profile.bounds.Profile with only the attributes selection reads."""
    return SimpleNamespace(
        name=name,
        path=Path(f"thresholds/{name}.toml"),
        hardware=SimpleNamespace(device=device, gpu_name_contains=contains,
                                 min_memory_gib=min_gib, max_memory_gib=max_gib),
    )


SHIPPED = [
    profile("a100-40gb", contains="A100", max_gib=50),
    profile("a100-80gb", contains="A100", min_gib=70),
    profile("cpu", device="cpu"),
    profile("h200", contains="H200", min_gib=130),
]


def test_mixed_models_are_refused_with_the_indices_of_the_common_model() -> None:
    hw = make_hardware(("NVIDIA H200", 140.4), ("NVIDIA A100-SXM4-80GB", 80.0), ("NVIDIA H200", 140.4))

    with pytest.raises(HardwareError) as excinfo:
        check_homogeneous(hw)

    assert str(excinfo.value) == (
        "several GPU models on this node: 0: NVIDIA H200, 1: NVIDIA A100-SXM4-80GB, 2: NVIDIA H200; DDP runs "
        "at the speed of the slowest GPU, so the node cannot be signed off as one. Restrict the run to one "
        "model with CUDA_VISIBLE_DEVICES=0,2 (with CUDA_DEVICE_ORDER=PCI_BUS_ID, so that these nvidia-smi "
        "indices mean the same GPUs to CUDA)."
    )


def test_one_model_is_homogeneous() -> None:
    check_homogeneous(make_hardware(("NVIDIA H200", 140.4), ("NVIDIA H200", 140.4)))


def test_select_profile_refuses_mixed_models() -> None:
    hw = make_hardware(("NVIDIA H200", 140.4), ("NVIDIA A100-SXM4-80GB", 80.0))

    with pytest.raises(HardwareError, match="^several GPU models on this node"):
        select_profile(hw, SHIPPED)


@pytest.mark.parametrize(
    ("gpu_name", "memory_gib", "expected"),
    [
        ("NVIDIA H200", 140.4, "h200"),
        ("NVIDIA A100-SXM4-80GB", 80.0, "a100-80gb"),
        ("NVIDIA A100-SXM4-40GB", 40.0, "a100-40gb"),
        ("nvidia a100-pcie-80gb", 79.2, "a100-80gb"),  # the name fragment matches case-insensitively
    ],
)
def test_select_profile_by_name_and_memory(gpu_name: str, memory_gib: float, expected: str) -> None:
    hw = make_hardware((gpu_name, memory_gib), (gpu_name, memory_gib))

    assert select_profile(hw, SHIPPED).name == expected


def test_memory_bounds_are_inclusive() -> None:
    profiles = [profile("exact", contains="X", min_gib=80, max_gib=80)]

    assert select_profile(make_hardware(("X", 80.0)), profiles).name == "exact"


def test_longest_name_fragment_wins() -> None:
    profiles = [profile("h200", contains="H200", min_gib=130), profile("h200-nvl", contains="H200 NVL")]

    assert select_profile(make_hardware(("NVIDIA H200 NVL", 140.4)), profiles).name == "h200-nvl"
    assert select_profile(make_hardware(("NVIDIA H200", 140.4)), profiles).name == "h200"


def test_a_memory_bound_beats_none_when_the_fragments_tie() -> None:
    profiles = [profile("any-h100", contains="H100"), profile("h100-80gb", contains="H100", min_gib=70)]

    assert select_profile(make_hardware(("NVIDIA H100 80GB HBM3", 79.6)), profiles).name == "h100-80gb"


def test_equally_specific_matches_are_an_error_naming_them() -> None:
    profiles = [profile("h200", contains="H200", min_gib=130), profile("h200-lab", contains="h200", min_gib=100)]

    with pytest.raises(HardwareError) as excinfo:
        select_profile(make_hardware(("NVIDIA H200", 140.4)), profiles)

    assert str(excinfo.value) == (
        "2 threshold profiles match this hardware (1 x NVIDIA H200 (140.4 GiB)) equally well: "
        f"h200 (H200, >= 130 GiB) from {Path('thresholds/h200.toml')}, "
        f"h200-lab (h200, >= 100 GiB) from {Path('thresholds/h200-lab.toml')}. "
        "Make their [hardware] match rules distinct, or pass --hardware NAME to pick one."
    )


def test_unknown_hardware_lists_known_profiles_and_how_to_calibrate() -> None:
    hw = make_hardware(*[("NVIDIA B200", 180.0)] * 4)

    with pytest.raises(HardwareError) as excinfo:
        select_profile(hw, SHIPPED)

    assert str(excinfo.value) == (
        "no threshold profile matches this hardware: 4 x NVIDIA B200 (180.0 GiB). Known profiles: "
        "a100-40gb (A100, <= 50 GiB), a100-80gb (A100, >= 70 GiB), cpu, h200 (H200, >= 130 GiB). "
        "Make one on a known-good node with `harness calibrate --name <new-profile>` (see "
        "docs/calibration.md), or pass --hardware NAME to use an existing profile deliberately."
    )


def test_memory_outside_every_bound_is_unknown_hardware() -> None:
    with pytest.raises(HardwareError, match=r"^no threshold profile matches this hardware: 1 x NVIDIA A100"):
        select_profile(make_hardware(("NVIDIA A100 60GB", 60.0)), SHIPPED)


def test_override_picks_the_named_profile_whatever_the_hardware() -> None:
    hw = make_hardware(("NVIDIA B200", 180.0))

    assert select_profile(hw, SHIPPED, override="h200").name == "h200"


def test_override_with_unknown_name_lists_known_names() -> None:
    with pytest.raises(HardwareError) as excinfo:
        select_profile(make_hardware(("NVIDIA H200", 140.4)), SHIPPED, override="h300")

    assert str(excinfo.value) == (
        "no threshold profile named 'h300' (--hardware). Known profiles: a100-40gb, a100-80gb, cpu, h200."
    )


def test_cpu_selects_the_cpu_profile() -> None:
    assert select_profile(make_hardware(), SHIPPED).name == "cpu"


def test_cpu_without_a_cpu_profile_says_why_there_is_no_gpu() -> None:
    with pytest.raises(HardwareError) as excinfo:
        select_profile(make_hardware(), [profile("h200", contains="H200")])

    assert str(excinfo.value).startswith(
        "no threshold profile matches this hardware: no GPU (nvmlInit failed: NVML Shared Library Not Found). "
        "Known profiles: h200 (H200). Make one"
    )


# ---------------------------------------------------------------------------------------------
# cli_detect


class FakeThresholdError(Exception):
    pass


@pytest.fixture
def fake_thresholds(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """Stands in for harness.profile.load so these tests do not depend on the threshold files."""
    module = types.ModuleType("harness.profile.load")
    module.ThresholdError = FakeThresholdError  # type: ignore[attr-defined]
    module.default_thresholds_dir = lambda: Path("/shipped/thresholds")  # type: ignore[attr-defined]
    module.loaded_from = []  # type: ignore[attr-defined]

    def load_profiles(directory: Path) -> list[SimpleNamespace]:
        module.loaded_from.append(Path(directory))  # type: ignore[attr-defined]
        return SHIPPED

    module.load_profiles = load_profiles  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "harness.profile.load", module)
    import harness.profile

    monkeypatch.setattr(harness.profile, "load", module)
    return module


def test_cli_detect_prints_hardware_and_profile(
    fake_thresholds: types.ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hw = make_hardware(("NVIDIA H200", 140.4))
    monkeypatch.setattr(hardware, "detect", lambda: hw)

    assert hardware.cli_detect(None, None) == 0

    out = capsys.readouterr().out
    assert out == describe(hw) + f"\nprofile: h200 ({Path('thresholds/h200.toml')})\n"
    assert fake_thresholds.loaded_from == [Path("/shipped/thresholds")]


def test_cli_detect_uses_the_given_thresholds_dir_and_override(
    fake_thresholds: types.ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(hardware, "detect", lambda: make_hardware())

    assert hardware.cli_detect("a100-80gb", "/site/thresholds") == 0

    assert capsys.readouterr().out.endswith(f"profile: a100-80gb ({Path('thresholds/a100-80gb.toml')})\n")
    assert fake_thresholds.loaded_from == [Path("/site/thresholds")]


def test_cli_detect_reports_a_selection_error_without_traceback(
    fake_thresholds: types.ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(hardware, "detect", lambda: make_hardware(("NVIDIA B200", 180.0)))

    assert hardware.cli_detect(None, None) == 1

    captured = capsys.readouterr()
    assert captured.out.startswith("host: node01\n")
    assert "profile:" not in captured.out
    assert captured.err.startswith("error: no threshold profile matches this hardware: 1 x NVIDIA B200")
    assert "Traceback" not in captured.err


def test_cli_detect_reports_a_threshold_file_error(
    fake_thresholds: types.ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(directory: Path) -> list[SimpleNamespace]:
        raise FakeThresholdError("thresholds/h200.toml: [defaults] max_straggler_ratio must be >= 1, got 0.9")

    monkeypatch.setattr(fake_thresholds, "load_profiles", broken)
    monkeypatch.setattr(hardware, "detect", lambda: make_hardware())

    assert hardware.cli_detect(None, None) == 1

    assert capsys.readouterr().err == (
        "error: thresholds/h200.toml: [defaults] max_straggler_ratio must be >= 1, got 0.9\n"
    )


def test_cli_detect_reports_a_detection_error(
    fake_thresholds: types.ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def lost_gpu() -> Hardware:
        raise HardwareError("NVML could not read GPU 2: GPU is lost.")

    monkeypatch.setattr(hardware, "detect", lost_gpu)

    assert hardware.cli_detect(None, None) == 1

    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "error: NVML could not read GPU 2: GPU is lost.\n"


def test_a_lost_gpu_while_resolving_uuids_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-1111")
    nvml = h200_node()
    nvml.lost_gpu_indices = {3}

    with pytest.raises(HardwareError) as excinfo:
        detect(nvml)

    assert str(excinfo.value) == (
        "NVML could not read the GPU UUIDs needed to resolve CUDA_VISIBLE_DEVICES=GPU-1111: GPU is lost"
    )
    assert nvml.calls == ["init", "shutdown"]


def test_cli_detect_with_the_real_thresholds_module_reports_a_missing_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("harness.profile.load", reason="harness/profile/load.py is not written yet")
    missing = tmp_path / "no-such-dir"

    assert hardware.cli_detect(None, str(missing)) == 1

    captured = capsys.readouterr()
    assert captured.out.startswith("host: ")
    assert captured.err.startswith("error: ")
    assert str(missing) in captured.err
    assert "Traceback" not in captured.err
