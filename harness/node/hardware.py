"""What this node is: its GPUs, driver, CUDA, NCCL and torch versions.

``detect()`` asks NVML (through ``pynvml``, the ``nvidia-ml-py`` package) which GPUs the node has,
restricted to those ``CUDA_VISIBLE_DEVICES`` lets CUDA see, because those are the GPUs the
benchmarks will run on. Nothing is probed at import time: importing this module is side-effect
free on login nodes and CPU-only CI boxes.

Which threshold profile signs the node off is harness/profile/match.py; which processes already
hold its GPUs is harness/node/processes.py.
"""

from __future__ import annotations

import os
import socket
import warnings
from dataclasses import asdict, dataclass
from typing import Any, Callable, Literal, Sequence


from harness.node.nvml import GIB_BYTES, installed_pynvml, nvml_text

Device = Literal["cuda", "cpu"]


class HardwareError(Exception):
    """A hardware fact that stops the run; ``str(err)`` is the message shown to the user."""


@dataclass(frozen=True, kw_only=True, slots=True)
class GpuInfo:
    index: int
    """Physical NVML index (the ``nvidia-smi`` order), even when ``CUDA_VISIBLE_DEVICES`` renumbers
    the GPUs for CUDA."""
    name: str
    uuid: str
    memory_total_gib: float
    """Total memory in GiB, rounded to 0.1 GiB so that the figure compared with a profile's bounds
    is the one printed in messages."""
    pci_bus_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Hardware:
    hostname: str
    device: Device
    """``cuda`` when at least one GPU is visible; ``cpu`` otherwise (the gloo profile)."""
    gpus: tuple[GpuInfo, ...]
    """The GPUs visible to CUDA, in CUDA's order."""
    driver_version: str | None
    cuda_driver_version: str | None
    """Highest CUDA version the driver supports, e.g. ``"13.0"``."""
    cuda_runtime_version: str | None
    """CUDA version torch was built with (``torch.version.cuda``)."""
    nccl_version: str | None
    torch_version: str
    nvml_unavailable_reason: str | None
    """Why no GPU is used, when ``device == "cpu"``."""
    cuda_visible_devices: str | None = None
    """``CUDA_VISIBLE_DEVICES`` as it was set (``None``: unset), so a report shows which GPUs ran."""
    nvml_gpu_count: int | None = None
    """GPUs NVML sees on the node, visible or not (``None``: NVML unusable), so a report can say
    "4 of 8 GPUs" when a scheduler hands out part of a node."""
    hidden_gpus: tuple[GpuInfo, ...] = ()
    """GPUs NVML sees that ``CUDA_VISIBLE_DEVICES`` leaves out, so the node-shape check can name them
    (read best effort: one NVML cannot read is only counted in ``nvml_gpu_count``)."""
    torch_cuda_problem: str | None = None
    """Why torch's CUDA cannot use the GPUs NVML sees (a CPU-only torch, a driver older than torch's
    CUDA, CUDA failing to initialise), with what to do; None: none found, or torch was not asked."""

    def __post_init__(self) -> None:
        if self.device not in ("cuda", "cpu"):
            raise ValueError(f"Hardware.device must be 'cuda' or 'cpu', got {self.device!r}")
        if self.device == "cuda" and not self.gpus:
            raise ValueError("Hardware.gpus must hold at least one GPU when device is 'cuda'")
        if self.device == "cpu" and self.gpus:
            raise ValueError(f"Hardware.gpus must be empty when device is 'cpu', got {len(self.gpus)} GPUs")

    @property
    def gpu_count(self) -> int:
        return len(self.gpus)

    @property
    def gpu_names(self) -> tuple[str, ...]:
        """Distinct GPU model names, in GPU order."""
        return tuple(dict.fromkeys(gpu.name for gpu in self.gpus))

    @property
    def gpu_name(self) -> str | None:
        """The GPU model; on a mixed node the first one (``check_homogeneous`` rejects those)."""
        return self.gpus[0].name if self.gpus else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form for the report, with the derived ``gpu_count`` and ``gpu_name``."""
        data = asdict(self)
        data["gpus"] = [dict(gpu) for gpu in data["gpus"]]
        data["hidden_gpus"] = [dict(gpu) for gpu in data["hidden_gpus"]]
        data["gpu_count"] = self.gpu_count
        data["gpu_name"] = self.gpu_name
        return data


# ---------------------------------------------------------------------------------------------
# Detection (the I/O edge)


def detect(nvml: Any = None, torch_cuda: Callable[[], TorchCuda] | None = None) -> Hardware:
    """Describe this node. ``nvml`` is the ``pynvml`` module by default; tests pass a fake.

    NVML missing, failing to initialise, or seeing no GPU gives a ``cpu`` Hardware with the reason
    recorded; so does torch's CUDA failing to use the GPUs NVML sees (``torch_cuda``: what torch sees,
    read from torch by default when ``nvml`` is the real module; a fake NVML describes a node the real
    torch cannot see, so with one torch is asked only when ``torch_cuda`` is given). Whether such a
    node may run on CPU is session start's question (harness/node/presence.py). Raises HardwareError
    when NVML works but cannot read a visible GPU (a lost GPU is a finding, not a reason to fall back
    to CPU), when torch counts other GPUs than NVML, or when ``CUDA_VISIBLE_DEVICES`` names MIG instances.
    """
    # Late: the launcher side (plugin, profiles, reports) must import without torch; only
    # detection reads torch's build facts.
    import torch

    cuda_visible_devices = os.environ.get("CUDA_VISIBLE_DEVICES")
    common = dict(
        hostname=socket.gethostname(),
        cuda_runtime_version=torch.version.cuda,
        nccl_version=nccl_version_text(),
        torch_version=torch.__version__,
        cuda_visible_devices=cuda_visible_devices,
    )
    if nvml is None:
        torch_cuda = torch_cuda or read_torch_cuda
        try:
            nvml = installed_pynvml()
        except ImportError as err:
            reason = f"the pynvml module cannot be imported ({err}); install nvidia-ml-py"
            return _cpu_hardware(reason, driver_version=None, cuda_driver_version=None, **common)

    try:
        nvml.nvmlInit()
    except nvml.NVMLError as err:
        return _cpu_hardware(f"nvmlInit failed: {err}", driver_version=None,
                             cuda_driver_version=None, **common)
    try:
        hw = _detect_with_nvml(nvml, cuda_visible_devices, common)
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass  # Detection is complete; a failed shutdown leaves nothing for us to undo.
    if hw.device == "cpu" or torch_cuda is None:
        return hw
    return check_torch_cuda(hw, torch_cuda())


def _detect_with_nvml(nvml: Any, cuda_visible_devices: str | None, common: dict[str, Any]) -> Hardware:
    # Versions are informational: a driver too old for a query must not stop detection.
    driver_version = _optional_nvml(nvml, lambda: nvml_text(nvml.nvmlSystemGetDriverVersion()))
    cuda_driver_version = _optional_nvml(nvml, lambda: cuda_version_text(nvml.nvmlSystemGetCudaDriverVersion()))
    try:
        nvml_gpu_count = int(nvml.nvmlDeviceGetCount())
    except nvml.NVMLError as err:
        raise HardwareError(f"NVML initialised but could not count the GPUs: {err}") from err

    try:
        visible = nvml_visible_indices(nvml, cuda_visible_devices, nvml_gpu_count)
    except nvml.NVMLError as err:
        raise HardwareError(
            f"NVML could not read the GPU UUIDs needed to resolve CUDA_VISIBLE_DEVICES="
            f"{cuda_visible_devices}: {err}"
        ) from err
    gpus = tuple(read_gpu(nvml, index) for index in visible)
    hidden = tuple(gpu for index in range(nvml_gpu_count) if index not in visible
                   and (gpu := _read_hidden_gpu(nvml, index)) is not None)
    if not gpus:
        if nvml_gpu_count == 0:
            reason = "NVML works but sees no GPU on this node"
        else:
            reason = (
                f"CUDA_VISIBLE_DEVICES={cuda_visible_devices!r} leaves none of the {nvml_gpu_count} GPUs "
                "NVML sees visible (CUDA stops at an empty, negative or unknown entry; a repeated one "
                "hides them all)"
            )
        return _cpu_hardware(reason, driver_version=driver_version, cuda_driver_version=cuda_driver_version,
                             nvml_gpu_count=nvml_gpu_count, hidden_gpus=hidden, **common)
    return Hardware(
        device="cuda",
        gpus=gpus,
        driver_version=driver_version,
        cuda_driver_version=cuda_driver_version,
        nvml_unavailable_reason=None,
        nvml_gpu_count=nvml_gpu_count,
        hidden_gpus=hidden,
        **common,
    )


def nvml_visible_indices(nvml: Any, cuda_visible_devices: str | None, nvml_gpu_count: int) -> tuple[int, ...]:
    """``visible_nvml_indices`` with the UUIDs read through an initialised ``nvml``; raises nvml.NVMLError."""

    def uuid_of(index: int) -> str:
        return nvml_text(nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(index)))

    return visible_nvml_indices(cuda_visible_devices, nvml_gpu_count, uuid_of)


def read_gpu(nvml: Any, index: int) -> GpuInfo:
    """GPU ``index`` as NVML (initialised) describes it; HardwareError, saying what to do, when it cannot."""
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        return GpuInfo(
            index=index,
            name=nvml_text(nvml.nvmlDeviceGetName(handle)),
            uuid=nvml_text(nvml.nvmlDeviceGetUUID(handle)),
            memory_total_gib=round(nvml.nvmlDeviceGetMemoryInfo(handle).total / GIB_BYTES, 1),
            pci_bus_id=nvml_text(nvml.nvmlDeviceGetPciInfo(handle).busId),
        )
    except nvml.NVMLError as err:
        raise HardwareError(
            f"NVML could not read GPU {index}: {err}. A GPU the driver cannot query fails "
            f"sign-off: look for Xid errors in `dmesg` and run `nvidia-smi -q -i {index}`, or leave it "
            "out with CUDA_VISIBLE_DEVICES to test the others."
        ) from err


def _read_hidden_gpu(nvml: Any, index: int) -> GpuInfo | None:
    try:
        return read_gpu(nvml, index)
    except HardwareError:
        return None  # a GPU the run will not use does not stop detection; the shape check counts it


def _optional_nvml(nvml: Any, query: Callable[[], str]) -> str | None:
    try:
        return query()
    except nvml.NVMLError:
        return None


def _cpu_hardware(reason: str, **fields: Any) -> Hardware:
    return Hardware(device="cpu", gpus=(), nvml_unavailable_reason=reason, **fields)


@dataclass(frozen=True, kw_only=True, slots=True)
class TorchCuda:
    """What torch's CUDA sees in this process: the launches' ranks will see the same."""

    available: bool
    """``torch.cuda.is_available()``."""
    device_count: int
    """``torch.cuda.device_count()`` where available, else 0."""
    warning: str | None = None
    """What torch warned while initialising CUDA (e.g. "The NVIDIA driver on your system is too old")."""


def read_torch_cuda() -> TorchCuda:
    """Ask torch. ``is_available`` initialises the CUDA driver API (cuInit) but makes no context on any
    GPU, so this process holds no GPU memory and shows in no GPU's process list."""
    import torch  # late, as in detect()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        available = bool(torch.cuda.is_available())
        count = int(torch.cuda.device_count()) if available else 0
    warning = " ".join(str(item.message).strip() for item in caught) or None
    return TorchCuda(available=available, device_count=count, warning=warning)


def check_torch_cuda(hw: Hardware, torch_cuda: TorchCuda) -> Hardware:
    """``hw`` as NVML saw it, unless torch cannot use those GPUs: then a ``cpu`` Hardware saying why
    (session start refuses it, harness/node/presence.py); HardwareError when torch counts other GPUs."""
    problem = _torch_cuda_problem(hw, torch_cuda)
    if problem is not None:
        facts = {name: getattr(hw, name) for name in ("hostname", "driver_version", "cuda_driver_version",
                                                      "cuda_runtime_version", "nccl_version", "torch_version",
                                                      "cuda_visible_devices", "nvml_gpu_count")}
        return _cpu_hardware(problem, torch_cuda_problem=problem, hidden_gpus=hw.hidden_gpus + hw.gpus, **facts)
    if torch_cuda.device_count != hw.gpu_count:
        raise HardwareError(
            f"torch sees {torch_cuda.device_count} CUDA device(s) but NVML sees {hw.gpu_count} visible GPU(s) "
            f"({', '.join(f'{gpu.index}: {gpu.uuid}' for gpu in hw.gpus)}; CUDA_VISIBLE_DEVICES="
            f"{hw.cuda_visible_devices if hw.cuda_visible_devices is not None else 'unset'}): a GPU CUDA cannot "
            "initialise would leave ranks without a device. Run `nvidia-smi -q` and look for Xid errors in "
            "`dmesg`; the benchmarks were not started.")
    return hw


def _torch_cuda_problem(hw: Hardware, torch_cuda: TorchCuda) -> str | None:
    if hw.cuda_runtime_version is None:
        return (f"torch {hw.torch_version} is a CPU-only build (torch.version.cuda is None); install a CUDA build "
                f"of torch for the driver's CUDA {hw.cuda_driver_version or ''} (https://pytorch.org/get-started/"
                "locally/)")
    if torch_cuda.available:
        return None
    said = f" (torch said: {torch_cuda.warning})" if torch_cuda.warning else ""
    if _version_tuple(hw.cuda_driver_version) < _version_tuple(hw.cuda_runtime_version):
        return (f"the driver {hw.driver_version} supports CUDA up to {hw.cuda_driver_version}, older than the CUDA "
                f"{hw.cuda_runtime_version} torch {hw.torch_version} was built with{said}; update the NVIDIA driver, "
                f"or install a torch build for CUDA {hw.cuda_driver_version} or older "
                "(https://pytorch.org/get-started/locally/)")
    return (f"torch sees no CUDA device although NVML sees {hw.gpu_count} GPU(s){said}; check that "
            "`python -c \"import torch; print(torch.cuda.is_available())\"` prints True here")


def _version_tuple(text: str | None) -> tuple[int, ...]:
    """``"12.8"`` -> (12, 8); unknown -> above every real version, so an unknown driver CUDA is never
    claimed to be the older one."""
    if text is None:
        return (10**6,)
    try:
        return tuple(int(part) for part in text.split("."))
    except ValueError:
        return (10**6,)


def visible_nvml_indices(
    cuda_visible_devices: str | None, nvml_gpu_count: int, uuid_of: Callable[[int], str]
) -> tuple[int, ...]:
    """NVML indices of the GPUs CUDA will use, in CUDA's order.

    Mirrors how the CUDA driver reads the variable (as ``torch.cuda._parse_visible_devices`` does):
    unset means all; the first entry decides between integer indices and ``GPU-`` UUID prefixes;
    parsing stops at the first entry that is negative, out of range, not of that kind, or an
    ambiguous UUID prefix; a repeated GPU makes the whole list empty. Integer indices are taken as
    NVML (PCI bus) order, which is CUDA's order when ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` and on any
    node of one GPU model. ``uuid_of`` is only called when the list holds UUIDs.
    """
    if cuda_visible_devices is None:
        return tuple(range(nvml_gpu_count))
    entries = cuda_visible_devices.split(",")
    if cuda_visible_devices.startswith("MIG-"):
        raise HardwareError(
            f"CUDA_VISIBLE_DEVICES={cuda_visible_devices} selects MIG instances; a node is signed off "
            "on whole GPUs. Disable MIG mode or give the run whole GPUs."
        )
    if cuda_visible_devices.startswith("GPU-"):
        uuids = [uuid_of(index).lower() for index in range(nvml_gpu_count)]
        resolved = (_index_by_uuid_prefix(entry, uuids) for entry in entries)
    else:
        resolved = (_index_by_number(entry, nvml_gpu_count) for entry in entries)
    visible: list[int] = []
    for index in resolved:
        if index is None:
            break
        if index in visible:
            return ()
        visible.append(index)
    return tuple(visible)


def _index_by_number(entry: str, nvml_gpu_count: int) -> int | None:
    # CUDA reads each entry with strtoul, so "1gpu" counts as 1; a leading sign is allowed.
    text = entry.strip()
    digits_end = 1 if text[:1] in ("+", "-") else 0
    while digits_end < len(text) and text[digits_end].isdigit():
        digits_end += 1
    try:
        index = int(text[:digits_end])
    except ValueError:
        return None
    return index if 0 <= index < nvml_gpu_count else None


def _index_by_uuid_prefix(entry: str, uuids: Sequence[str]) -> int | None:
    if not entry.startswith("GPU-"):
        return None
    matches = [index for index, uuid in enumerate(uuids) if uuid.startswith(entry.lower())]
    return matches[0] if len(matches) == 1 else None


def cuda_version_text(cuda_version: int) -> str:
    """NVML's CUDA version integer (1000 × major + 10 × minor, e.g. 12080) as ``"12.8"``."""
    return f"{cuda_version // 1000}.{cuda_version % 1000 // 10}"


def nccl_version_text() -> str | None:
    """The NCCL version torch links against, or None when torch has no NCCL (CPU builds)."""
    import torch.cuda.nccl  # late, as in detect()

    try:
        # Reads a compiled-in constant: it does not initialise CUDA.
        return format_nccl_version(torch.cuda.nccl.version())
    except (AttributeError, RuntimeError):
        return None


def format_nccl_version(version: int | tuple[Any, ...]) -> str:
    """``(2, 27, 3)`` or ``(2, 27, 3, "suffix")`` (torch >= 2.1), or the older encoded integer."""
    if isinstance(version, tuple):
        numbers = ".".join(str(part) for part in version[:3])
        return numbers + "".join(str(part) for part in version[3:])
    # NCCL encodes major*10000 + minor*100 + patch from 2.9 on, major*1000 + minor*100 + patch before.
    major, rest = divmod(version, 10000) if version >= 10000 else divmod(version, 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


# ---------------------------------------------------------------------------------------------
# Human output


def describe(hw: Hardware) -> str:
    """A multi-line summary for ``harness detect`` and the report header."""
    lines = [f"host: {hw.hostname}"]
    if hw.device == "cpu":
        lines.append(f"GPUs: none, running on CPU ({hw.nvml_unavailable_reason})")
    else:
        scope = ""
        if hw.cuda_visible_devices is not None:
            of_total = f" of {hw.nvml_gpu_count}" if hw.nvml_gpu_count is not None else ""
            scope = f" ({hw.gpu_count}{of_total} visible through CUDA_VISIBLE_DEVICES={hw.cuda_visible_devices})"
        lines.append(f"GPUs: {hw.gpu_count} x {' + '.join(hw.gpu_names)}{scope}")
        lines.extend(
            f"  GPU {gpu.index}: {gpu.name}, {gpu.memory_total_gib:.1f} GiB, {gpu.uuid}, PCI {gpu.pci_bus_id}"
            for gpu in hw.gpus
        )
    lines.append(f"NVIDIA driver: {_or_unknown(hw.driver_version)}")
    lines.append(
        f"CUDA: driver supports {_or_unknown(hw.cuda_driver_version)}, "
        f"torch built with {_or_unknown(hw.cuda_runtime_version)}"
    )
    lines.append(f"NCCL: {_or_unknown(hw.nccl_version)}")
    lines.append(f"torch: {hw.torch_version}")
    return "\n".join(lines)


def _or_unknown(value: str | None) -> str:
    return value if value is not None else "unknown"
