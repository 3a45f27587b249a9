"""NVIDIA hardware present whether or not CUDA or NVML can use it (harness/node/presence.py), and the
one message that stops a node whose GPUs cannot be used; fake sysfs and /dev trees, no GPU needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.node.hardware import Hardware, TorchCuda, check_torch_cuda, detect
from harness.node.presence import (
    NvidiaPresence,
    find_nvidia_presence,
    normal_bus_id,
    nvidia_device_files,
    nvidia_pci_gpus,
    unusable_gpus_message,
)
from support.fake_nvml import FakeNvml, fake_nvml
from support.hardware import make_hardware

H100_3D = ("0x10de", "0x030200")


def make_tree(root: Path, *, devices: tuple[str, ...] = (), pci: dict[str, tuple[str, str]] | None = None) -> Path:
    """``root`` with /dev/<devices> and /sys/bus/pci/devices/<bus id>/{vendor,class}."""
    (root / "dev").mkdir(parents=True, exist_ok=True)
    for name in devices:
        (root / "dev" / name).write_text("")
    pci_dir = root / "sys" / "bus" / "pci" / "devices"
    pci_dir.mkdir(parents=True, exist_ok=True)
    for bus_id, (vendor, pci_class) in (pci or {}).items():
        (pci_dir / bus_id).mkdir()
        (pci_dir / bus_id / "vendor").write_text(vendor + "\n")
        (pci_dir / bus_id / "class").write_text(pci_class + "\n")
    return root


def nowhere(name: str) -> None:
    return None


@pytest.fixture(autouse=True)
def no_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


NOTHING = NvidiaPresence(device_files=(), pci_gpus=(), nvidia_smi=None)
ONE_GPU = NvidiaPresence(device_files=("/dev/nvidia0",), pci_gpus=("0000:00:06.0",), nvidia_smi="/usr/bin/nvidia-smi")


# ---------------------------------------------------------------------------------------------
# The readers


def test_device_files_are_the_numbered_ones_in_gpu_order(tmp_path: Path) -> None:
    root = make_tree(tmp_path, devices=("nvidiactl", "nvidia-uvm", "nvidia10", "nvidia2", "nvidia0", "nvidia-caps"))
    assert nvidia_device_files(root) == ("/dev/nvidia0", "/dev/nvidia2", "/dev/nvidia10")


def test_no_dev_directory_means_no_device_files(tmp_path: Path) -> None:
    assert nvidia_device_files(tmp_path / "missing") == ()


def test_pci_gpus_are_nvidia_display_and_3d_controllers_only(tmp_path: Path) -> None:
    root = make_tree(tmp_path, pci={
        "0000:18:00.0": H100_3D,
        "0000:2a:00.0": ("0x10de", "0x030000"),  # VGA compatible controller
        "0000:2a:00.1": ("0x10de", "0x040300"),  # the GPU's HD audio function
        "0000:07:00.0": ("0x10de", "0x068000"),  # NVSwitch: a bridge, not a GPU
        "0000:03:00.0": ("0x1a03", "0x030000"),  # the BMC's ASPEED VGA
        "0000:4b:00.0": ("0x15b3", "0x020700"),  # a Mellanox NIC
    })
    assert nvidia_pci_gpus(root) == ("0000:18:00.0", "0000:2a:00.0")


def test_a_pci_function_whose_identity_cannot_be_read_is_not_a_gpu(tmp_path: Path) -> None:
    root = make_tree(tmp_path, pci={"0000:18:00.0": ("garbage", "0x030200")})
    (root / "sys/bus/pci/devices/0000:19:00.0").mkdir()  # no vendor file at all
    assert nvidia_pci_gpus(root) == ()


def test_unreadable_sysfs_is_unknown_not_empty(tmp_path: Path) -> None:
    assert nvidia_pci_gpus(tmp_path) is None


def test_presence_combines_device_files_pci_and_nvidia_smi(tmp_path: Path) -> None:
    root = make_tree(tmp_path, devices=("nvidia0",), pci={"0000:00:06.0": H100_3D})
    presence = find_nvidia_presence(root, which=lambda name: f"/usr/bin/{name}")
    assert presence == ONE_GPU
    assert presence.found
    assert presence.describe() == ("/dev/nvidia0; 1 NVIDIA GPU on the PCI bus (0000:00:06.0); "
                                   "nvidia-smi at /usr/bin/nvidia-smi")


def test_any_one_sign_is_presence(tmp_path: Path) -> None:
    assert find_nvidia_presence(make_tree(tmp_path), which=lambda name: "/usr/bin/nvidia-smi").found
    assert not find_nvidia_presence(make_tree(tmp_path), which=nowhere).found
    assert not NOTHING.found
    assert NOTHING.describe() == "no NVIDIA device file, PCI GPU or nvidia-smi"


@pytest.mark.parametrize(("bus_id", "normal"), [
    ("00000000:18:00.0", "0000:18:00.0"),  # NVML
    ("0000:18:00.0", "0000:18:00.0"),      # sysfs
    ("00000001:DF:00.0", "0001:df:00.0"),
    ("18:00.0", "18:00.0"),
])
def test_bus_ids_of_nvml_and_sysfs_compare_equal(bus_id: str, normal: str) -> None:
    assert normal_bus_id(bus_id) == normal


# ---------------------------------------------------------------------------------------------
# torch against NVML (detect)


def test_torch_seeing_the_gpus_nvml_sees_keeps_them() -> None:
    hw = detect(fake_nvml(2), torch_cuda=lambda: TorchCuda(available=True, device_count=2))
    assert hw.device == "cuda" and hw.gpu_count == 2 and hw.torch_cuda_problem is None


def test_a_driver_older_than_torchs_cuda_is_a_cpu_hardware_saying_so() -> None:
    nvml = fake_nvml(2)
    nvml.cuda_driver_version = 12020
    warning = "CUDA initialization: The NVIDIA driver on your system is too old (found version 12020)."
    hw = detect(nvml, torch_cuda=lambda: TorchCuda(available=False, device_count=0, warning=warning))
    assert hw.device == "cpu" and hw.gpus == ()
    assert hw.nvml_gpu_count == 2
    assert [gpu.index for gpu in hw.hidden_gpus] == [0, 1]  # still named, for the messages
    reason = hw.nvml_unavailable_reason
    assert reason == hw.torch_cuda_problem
    assert "supports CUDA up to 12.2, older than the CUDA" in reason
    assert "too old (found version 12020)" in reason
    assert "update the NVIDIA driver" in reason


def test_a_cpu_only_torch_on_a_gpu_node_says_so() -> None:
    hw = check_torch_cuda(_node_with_torch_cuda(None), TorchCuda(available=False, device_count=0))
    assert hw.device == "cpu"
    assert "is a CPU-only build (torch.version.cuda is None)" in (hw.torch_cuda_problem or "")


def test_cuda_failing_with_a_new_enough_driver_quotes_torch() -> None:
    hw = check_torch_cuda(_node_with_torch_cuda("12.8"),
                          TorchCuda(available=False, device_count=0, warning="CUDA unknown error"))
    assert "torch sees no CUDA device although NVML sees 1 GPU(s) (torch said: CUDA unknown error)" in (
        hw.torch_cuda_problem or "")


def test_torch_counting_other_gpus_than_nvml_stops_detection() -> None:
    from harness.node.hardware import HardwareError

    with pytest.raises(HardwareError, match=r"torch sees 1 CUDA device\(s\) but NVML sees 2 visible GPU\(s\)"):
        detect(fake_nvml(2), torch_cuda=lambda: TorchCuda(available=True, device_count=1))


def test_a_fake_nvml_alone_does_not_ask_the_real_torch() -> None:
    # The fake describes a node this process's torch cannot see: comparing them would mean nothing.
    assert detect(fake_nvml(2)).device == "cuda"


def _node_with_torch_cuda(torch_cuda_version: str | None) -> Hardware:
    hw = make_hardware(("NVIDIA H100 80GB HBM3", 79.2))
    fields = {name: getattr(hw, name) for name in Hardware.__dataclass_fields__}
    return Hardware(**{**fields, "cuda_runtime_version": torch_cuda_version, "nvml_gpu_count": 1})


# ---------------------------------------------------------------------------------------------
# The message that stops the session


def test_no_message_where_gpus_are_usable_or_no_nvidia_hardware_is_found() -> None:
    assert unusable_gpus_message(make_hardware(("NVIDIA H200", 140.4)), ONE_GPU) is None
    assert unusable_gpus_message(make_hardware(), NOTHING) is None


def test_a_container_without_gpus_gets_the_container_fixes() -> None:
    hw = make_hardware(reason="nvmlInit failed: NVML Shared Library Not Found")
    presence = NvidiaPresence(device_files=(), pci_gpus=("0000:18:00.0",), nvidia_smi=None)
    message = unusable_gpus_message(hw, presence) or ""
    assert message.startswith("NVIDIA hardware is present (1 NVIDIA GPU on the PCI bus (0000:18:00.0)), but no GPU "
                              "can be used: nvmlInit failed: NVML Shared Library Not Found.")
    assert "docker run --gpus all" in message and "apptainer exec --nv" in message
    assert message.endswith("pass --hardware cpu.")
    assert "Traceback" not in message


def test_device_files_without_nvml_point_at_the_driver_libraries() -> None:
    message = unusable_gpus_message(make_hardware(reason="nvmlInit failed: Driver Not Loaded"), ONE_GPU,
                                    cpu_option="--device cpu") or ""
    assert "Driver Not Loaded" in message
    assert "NVML cannot be used" in message and "`nvidia-smi` works" in message
    assert message.endswith("pass --device cpu.")


def test_cuda_visible_devices_hiding_every_gpu_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    hw = detect(fake_nvml(2))
    message = unusable_gpus_message(hw, ONE_GPU) or ""
    assert "CUDA_VISIBLE_DEVICES='' hides every one of the 2 GPUs NVML sees" in message


def test_the_torch_problem_carries_its_own_fix() -> None:
    hw = check_torch_cuda(_node_with_torch_cuda(None), TorchCuda(available=False, device_count=0))
    message = unusable_gpus_message(hw, ONE_GPU) or ""
    assert "CPU-only build" in message and "https://pytorch.org/get-started/locally/" in message
    assert "Run `nvidia-smi`" not in message  # the generic hint is only for causes not known


# ---------------------------------------------------------------------------------------------
# harness run: the message once, before any launch


@pytest.fixture
def no_launch(monkeypatch: pytest.MonkeyPatch) -> list:
    launched: list = []
    monkeypatch.setattr("harness.launch.benchmark.run_benchmark", lambda *args, **kwargs: launched.append(args))
    return launched


def test_harness_run_on_unusable_gpus_says_why_once_and_launches_nothing(monkeypatch, tmp_path, capsys, no_launch):
    from harness.cli import main

    monkeypatch.setattr("harness.node.presence.SYSTEM_ROOT",
                        make_tree(tmp_path, devices=("nvidia0",), pci={"0000:00:06.0": H100_3D}))
    not_loaded = make_hardware(reason="nvmlInit failed: Driver Not Loaded")
    monkeypatch.setattr("harness.node.hardware.detect", lambda: not_loaded)
    assert main(["run", "--model", "tiny_bert", "--batch-size", "2", "--output", str(tmp_path / "run.json")]) == 4
    errors = capsys.readouterr().err
    assert errors.count("NVIDIA hardware is present") == 1
    assert "nvmlInit failed: Driver Not Loaded" in errors and "pass --device cpu" in errors
    assert no_launch == []


def test_harness_run_device_cuda_without_any_gpu_is_a_usage_error(monkeypatch, tmp_path, capsys, no_launch):
    from harness.cli import main

    monkeypatch.setattr("harness.node.hardware.detect", lambda: make_hardware())
    assert main(["run", "--model", "tiny_bert", "--batch-size", "2", "--device", "cuda",
                 "--output", str(tmp_path / "run.json")]) == 4
    assert "--device cuda: this machine has no usable GPU (nvmlInit failed" in capsys.readouterr().err
    assert no_launch == []


def test_a_driver_holding_none_of_the_pci_gpus_points_at_dmesg() -> None:
    hw = detect(FakeNvml(gpus=[]))
    message = unusable_gpus_message(hw, ONE_GPU) or ""
    assert "NVML works but sees no GPU on this node" in message
    assert "holds none of the GPUs on the PCI bus (0000:00:06.0)" in message and "RmInitAdapter failed" in message


def test_a_torch_problem_with_some_gpus_listed_is_not_blamed_on_cuda_visible_devices(monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    hw = detect(fake_nvml(2), torch_cuda=lambda: TorchCuda(available=False, device_count=0))
    message = unusable_gpus_message(hw, ONE_GPU) or ""
    assert "torch sees no CUDA device although NVML sees 2 GPU(s)" in message
    assert "hides every one" not in message
