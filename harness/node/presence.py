"""Is NVIDIA hardware here, whether or not CUDA or NVML can use it?

``detect()`` (harness/node/hardware.py) says which GPUs NVML and torch can use; a node where that is
none may still hold NVIDIA GPUs: a container started without ``--gpus all``, Apptainer without
``--nv``, a driver too old for torch's CUDA, NVML failing. Signing such a node off on the cpu
profile would be a false PASS, so session start asks this module what the machine shows on its own:
the driver's device files (``/dev/nvidia0``...), NVIDIA display or 3D controllers on the PCI bus
(sysfs, readable without any driver) and ``nvidia-smi`` on PATH. ``unusable_gpus_message`` turns a
present-but-unusable node into the one message that stops the session (or ``harness run``).

Every reader takes the root it reads under and the ``which`` it looks with, so tests build a fake
tree in a temporary directory.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal

from harness.node.hardware import Hardware

NVIDIA_PCI_VENDOR = 0x10DE
GPU_PCI_CLASSES = (0x0300, 0x0302)
"""PCI base class + subclass of a VGA compatible controller and a 3D controller (data-center GPUs
are 3D controllers); an NVSwitch (0x0680) or a GPU's audio function (0x0403) is not a GPU."""
_DEVICE_FILE = re.compile(r"nvidia(\d+)")

Which = Callable[[str], "str | None"]

SYSTEM_ROOT = Path("/")
"""Where ``find_nvidia_presence`` looks by default; tests/conftest.py points it (and SYSTEM_WHICH) at
nothing, so the plugin's CPU-session tests run the same on a GPU host."""
SYSTEM_WHICH: Which = shutil.which


@dataclass(frozen=True, kw_only=True, slots=True)
class NvidiaPresence:
    """What this machine shows of NVIDIA GPUs without asking the driver."""

    device_files: tuple[str, ...]
    """``/dev/nvidiaN`` files (one per GPU the driver made, or the container was given), sorted by N."""
    pci_gpus: tuple[str, ...] | None
    """PCI bus ids (``0000:18:00.0``) of NVIDIA display/3D controllers; None: sysfs cannot be read."""
    nvidia_smi: str | None
    """Where ``nvidia-smi`` is on PATH; None: not there."""

    @property
    def found(self) -> bool:
        return bool(self.device_files or self.pci_gpus or self.nvidia_smi)

    def describe(self) -> str:
        """``/dev/nvidia0, /dev/nvidia1; 2 NVIDIA GPUs on the PCI bus (0000:18:00.0, ...); nvidia-smi at ...``."""
        seen = []
        if self.device_files:
            seen.append(", ".join(self.device_files))
        if self.pci_gpus:
            count = len(self.pci_gpus)
            seen.append(f"{count} NVIDIA GPU{'s' if count != 1 else ''} on the PCI bus ({', '.join(self.pci_gpus)})")
        if self.nvidia_smi:
            seen.append(f"nvidia-smi at {self.nvidia_smi}")
        return "; ".join(seen) if seen else "no NVIDIA device file, PCI GPU or nvidia-smi"

    def to_dict(self) -> dict:
        return {"device_files": list(self.device_files), "nvidia_smi": self.nvidia_smi,
                "pci_gpus": list(self.pci_gpus) if self.pci_gpus is not None else None}


def nvidia_device_files(root: Path = Path("/")) -> tuple[str, ...]:
    """``/dev/nvidia[0-9]*`` under ``root``, in GPU-number order (nvidiactl and nvidia-uvm are not GPUs)."""
    dev = root / "dev"
    try:
        names = [entry.name for entry in dev.iterdir()]
    except OSError:
        return ()
    numbered = sorted((int(match.group(1)), name) for name in names if (match := _DEVICE_FILE.fullmatch(name)))
    return tuple(f"/dev/{name}" for _, name in numbered)


def nvidia_pci_gpus(root: Path = Path("/")) -> tuple[str, ...] | None:
    """Bus ids of the NVIDIA GPUs in ``root``/sys/bus/pci/devices, sorted; None where that cannot be read."""
    devices = root / "sys" / "bus" / "pci" / "devices"
    try:
        entries = sorted(devices.iterdir())
    except OSError:
        return None
    return tuple(entry.name for entry in entries if _is_nvidia_gpu(entry))


def _is_nvidia_gpu(device: Path) -> bool:
    try:
        vendor = int((device / "vendor").read_text().strip(), 16)
        pci_class = int((device / "class").read_text().strip(), 16)
    except (OSError, ValueError):
        return False  # a function whose identity cannot be read is not counted as a GPU
    return vendor == NVIDIA_PCI_VENDOR and pci_class >> 8 in GPU_PCI_CLASSES


def find_nvidia_presence(root: Path | None = None, which: Which | None = None) -> NvidiaPresence:
    """What ``root`` shows of NVIDIA GPUs, ``nvidia-smi`` looked up with ``which`` (default: the machine's)."""
    root, which = root or SYSTEM_ROOT, which or SYSTEM_WHICH
    return NvidiaPresence(device_files=nvidia_device_files(root), pci_gpus=nvidia_pci_gpus(root),
                          nvidia_smi=which("nvidia-smi"))


def normal_bus_id(bus_id: str) -> str:
    """NVML's ``00000000:18:00.0`` and sysfs' ``0000:18:00.0`` as one spelling: ``0000:18:00.0``."""
    text = bus_id.strip().lower()
    domain, separator, rest = text.partition(":")
    if separator and rest.count(":") == 1 and all(c in "0123456789abcdef" for c in domain) and domain:
        return f"{int(domain, 16):04x}:{rest}"
    return text


# ---------------------------------------------------------------------------------------------
# The message that stops a session on a node whose GPUs cannot be used


def unusable_gpus_message(hw: Hardware, presence: NvidiaPresence, cpu_option: str = "--hardware cpu",
                          more_fixes: tuple[str, ...] = ()) -> str | None:
    """Why this node, which shows NVIDIA hardware, gives no usable GPU, and how to fix it; None when
    GPUs are usable or none is present. ``cpu_option`` is how the command asks for CPU ranks on purpose;
    ``more_fixes`` are causes the caller knows of (a Slurm job given no GPUs)."""
    if hw.device == "cuda" or not presence.found:
        return None
    lines = [f"NVIDIA hardware is present ({presence.describe()}), but no GPU can be used: "
             f"{hw.nvml_unavailable_reason}.", *_fixes(hw, presence), *(f"- {fix}" for fix in more_fixes),
             "No benchmark was started: a GPU node is never judged on CPU ranks. To run the harness self-check "
             f"on CPU ranks on purpose, pass {cpu_option}."]
    return "\n".join(lines)


def _fixes(hw: Hardware, presence: NvidiaPresence) -> list[str]:
    """What to do, for each cause the facts point to."""
    fixes = []
    if hw.torch_cuda_problem is None and hw.cuda_visible_devices is not None and hw.nvml_gpu_count:
        fixes.append(f"- CUDA_VISIBLE_DEVICES={hw.cuda_visible_devices!r} hides every one of the {hw.nvml_gpu_count} "
                     "GPUs NVML sees: unset it, or list the GPUs to test (e.g. CUDA_VISIBLE_DEVICES=0,1).")
    if hw.driver_version is None and not presence.device_files:
        fixes.append("- In a container the GPUs were not passed in: start it with `docker run --gpus all` "
                     "(or `--runtime nvidia`, Kubernetes `nvidia.com/gpu` limits), or `apptainer exec --nv` / "
                     "`singularity exec --nv`.")
    elif hw.driver_version is None:
        fixes.append("- NVML cannot be used (the library that ships with the driver): in a container start it with "
                     "`docker run --gpus all` or `apptainer exec --nv` so the driver's libraries are mounted; on "
                     "the host check that `nvidia-smi` works and the nvidia kernel module is loaded.")
    if hw.nvml_gpu_count == 0 and presence.pci_gpus:
        fixes.append(f"- The driver runs but holds none of the GPUs on the PCI bus ({', '.join(presence.pci_gpus)}): "
                     "look for `RmInitAdapter failed` or Xid errors in `dmesg`, and check that `lspci -k` shows the "
                     "nvidia driver in use for them.")
    if not fixes and hw.torch_cuda_problem is None:
        fixes.append("- Run `nvidia-smi` and `python -c \"import torch; print(torch.cuda.is_available())\"` here: "
                     "both must see the GPUs.")
    return fixes


# ---------------------------------------------------------------------------------------------
# The device a command runs on: never a quiet CPU run on a node whose GPUs cannot be used


class DeviceChoiceError(Exception):
    """The device asked for (or the default) cannot be used here; the message says why and what to do."""


def choose_device(asked: str | None, hw: Hardware, presence: NvidiaPresence | None = None, *,
                  cpu_option: str = "--device cpu") -> Literal["cuda", "cpu"]:
    """``asked`` (``--device``), else cuda where a GPU is usable and cpu where no NVIDIA hardware is.

    A node that shows NVIDIA hardware none of which CUDA or NVML can use is refused (DeviceChoiceError with
    ``unusable_gpus_message``), unless cpu was asked for on purpose: a command measuring there would
    measure CPU ranks and call it the node. ``presence`` defaults to what the machine shows."""
    if asked == "cpu":
        return "cpu"
    if hw.device == "cuda":
        return "cuda"
    message = unusable_gpus_message(hw, presence or find_nvidia_presence(), cpu_option=cpu_option)
    if message is not None:
        raise DeviceChoiceError(message)
    if asked == "cuda":
        raise DeviceChoiceError(f"--device cuda: this machine has no usable GPU ({hw.nvml_unavailable_reason}); "
                                f"run on a GPU node, or pass {cpu_option} for CPU ranks")
    return "cpu"
