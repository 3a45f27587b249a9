"""Hardware detection against the fake NVML of tests/support (no GPU needed)."""

from __future__ import annotations

import json

import pynvml
import pytest

from harness.node import nvml as nvml_module
from harness.node.hardware import (
    GpuInfo,
    Hardware,
    HardwareError,
    cuda_version_text,
    describe,
    detect,
    format_nccl_version,
    visible_nvml_indices,
)
from support.fake_nvml import UUIDS as H200_UUIDS
from support.fake_nvml import FakeGpu, FakeNvml, fake_nvml
from support.hardware import make_hardware

A100_80GB_MEMORY_BYTES = 85899345920  # 80.0 GiB


def h200_node(count: int = 4) -> FakeNvml:
    return fake_nvml(count)


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
    assert nvml.lifecycle == ["nvmlInit", "nvmlShutdown"]


def test_decodes_bytes_from_old_pynvml() -> None:
    nvml = FakeNvml(
        gpus=[FakeGpu(name=b"NVIDIA A100-SXM4-80GB", uuid=b"GPU-abc", memory_total_bytes=A100_80GB_MEMORY_BYTES,
                      bus_id=b"00000000:07:00.0")],
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
    assert nvml.lifecycle == ["nvmlInit", "nvmlShutdown"]


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
    assert nvml.lifecycle == ["nvmlInit", "nvmlShutdown"]


def test_nvml_init_failure_falls_back_to_cpu_with_reason() -> None:
    nvml = FakeNvml(gpus=[], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)

    hw = detect(nvml)

    assert hw.device == "cpu"
    assert hw.gpus == ()
    assert hw.gpu_name is None
    assert hw.nvml_unavailable_reason == "nvmlInit failed: Driver Not Loaded"
    assert hw.driver_version is None
    assert hw.nvml_gpu_count is None
    # Shutting down an NVML that never started would itself fail with "Uninitialized".
    assert nvml.lifecycle == ["nvmlInit"]


def test_missing_pynvml_module_falls_back_to_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvml_module, "PYNVML", None)  # as when `import pynvml` failed
    monkeypatch.setattr(nvml_module, "PYNVML_IMPORT_ERROR", "No module named 'pynvml'")

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
    assert nvml.lifecycle == ["nvmlInit", "nvmlShutdown"]


def test_a_lost_gpu_left_out_by_index_does_not_stop_detection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,3")
    nvml = h200_node()
    nvml.lost_gpu_indices = {2}

    assert [gpu.index for gpu in detect(nvml).gpus] == [0, 1, 3]


def test_missing_cuda_driver_version_is_not_fatal() -> None:
    nvml = h200_node()

    def unsupported() -> int:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)

    nvml.nvmlSystemGetCudaDriverVersion = unsupported  # type: ignore[method-assign]

    assert detect(nvml).cuda_driver_version is None


def test_a_lost_gpu_while_resolving_uuids_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-1111")
    nvml = h200_node()
    nvml.lost_gpu_indices = {3}

    with pytest.raises(HardwareError) as excinfo:
        detect(nvml)

    assert str(excinfo.value) == (
        "NVML could not read the GPU UUIDs needed to resolve CUDA_VISIBLE_DEVICES=GPU-1111: GPU is lost"
    )
    assert nvml.lifecycle == ["nvmlInit", "nvmlShutdown"]


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
