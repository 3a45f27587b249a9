"""What this node is, and which threshold profile signs it off.

``detect()`` asks NVML (through ``pynvml``, the ``nvidia-ml-py`` package) which GPUs the node has,
restricted to those ``CUDA_VISIBLE_DEVICES`` lets CUDA see, because those are the GPUs the
benchmarks will run on. Nothing is probed at import time: importing this module must stay cheap
and side-effect free on login nodes and CPU-only CI boxes.

``select_profile()`` matches the detected hardware against the ``[hardware] match`` rules of the
threshold files. Facts about GPU models (peak FLOP/s, expected throughput, which names mean what)
live in those files, never in ``if/elif`` ladders here.
"""

from __future__ import annotations

import os
import socket
import sys
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal, Sequence

import torch

if TYPE_CHECKING:
    from harness.profile.bounds import Profile

GIB_BYTES = 1024**3
"""GiB is 1024³ bytes (NVML reports bytes; GB would be 1000³)."""

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
        data["gpu_count"] = self.gpu_count
        data["gpu_name"] = self.gpu_name
        return data


# ---------------------------------------------------------------------------------------------
# Detection (the I/O edge)


def detect(nvml: Any = None) -> Hardware:
    """Describe this node. ``nvml`` is the ``pynvml`` module by default; tests pass a fake.

    NVML missing, failing to initialise, or seeing no GPU gives a ``cpu`` Hardware with the reason
    recorded. Raises HardwareError when NVML works but cannot read a visible GPU (a lost GPU is a
    finding, not a reason to fall back to CPU) or when ``CUDA_VISIBLE_DEVICES`` names MIG instances.
    """
    cuda_visible_devices = os.environ.get("CUDA_VISIBLE_DEVICES")
    common = dict(
        hostname=socket.gethostname(),
        cuda_runtime_version=torch.version.cuda,
        nccl_version=nccl_version_text(),
        torch_version=torch.__version__,
        cuda_visible_devices=cuda_visible_devices,
    )
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError as err:
            reason = f"the pynvml module cannot be imported ({err}); install nvidia-ml-py"
            return _cpu_hardware(reason, driver_version=None, cuda_driver_version=None, **common)

    try:
        nvml.nvmlInit()
    except nvml.NVMLError as err:
        return _cpu_hardware(f"nvmlInit failed: {err}", driver_version=None,
                             cuda_driver_version=None, **common)
    try:
        return _detect_with_nvml(nvml, cuda_visible_devices, common)
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass  # Detection is complete; a failed shutdown leaves nothing for us to undo.


def _detect_with_nvml(nvml: Any, cuda_visible_devices: str | None, common: dict[str, Any]) -> Hardware:
    # Versions are informational: a driver too old for a query must not stop detection.
    driver_version = _optional_nvml(nvml, lambda: _text(nvml.nvmlSystemGetDriverVersion()))
    cuda_driver_version = _optional_nvml(nvml, lambda: cuda_version_text(nvml.nvmlSystemGetCudaDriverVersion()))
    try:
        nvml_gpu_count = int(nvml.nvmlDeviceGetCount())
    except nvml.NVMLError as err:
        raise HardwareError(f"NVML initialised but could not count the GPUs: {err}") from err

    def uuid_of(index: int) -> str:
        return _text(nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(index)))

    try:
        visible = visible_nvml_indices(cuda_visible_devices, nvml_gpu_count, uuid_of)
    except nvml.NVMLError as err:
        raise HardwareError(
            f"NVML could not read the GPU UUIDs needed to resolve CUDA_VISIBLE_DEVICES="
            f"{cuda_visible_devices}: {err}"
        ) from err
    gpus = tuple(_read_gpu(nvml, index) for index in visible)
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
                             nvml_gpu_count=nvml_gpu_count, **common)
    return Hardware(
        device="cuda",
        gpus=gpus,
        driver_version=driver_version,
        cuda_driver_version=cuda_driver_version,
        nvml_unavailable_reason=None,
        nvml_gpu_count=nvml_gpu_count,
        **common,
    )


def _read_gpu(nvml: Any, index: int) -> GpuInfo:
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        return GpuInfo(
            index=index,
            name=_text(nvml.nvmlDeviceGetName(handle)),
            uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
            memory_total_gib=round(nvml.nvmlDeviceGetMemoryInfo(handle).total / GIB_BYTES, 1),
            pci_bus_id=_text(nvml.nvmlDeviceGetPciInfo(handle).busId),
        )
    except nvml.NVMLError as err:
        raise HardwareError(
            f"NVML could not read GPU {index}: {err}. A GPU the driver cannot query fails "
            f"sign-off: look for Xid errors in `dmesg` and run `nvidia-smi -q -i {index}`, or leave it "
            "out with CUDA_VISIBLE_DEVICES to test the others."
        ) from err


@dataclass(frozen=True, kw_only=True, slots=True)
class GpuProcess:
    """A process holding a CUDA context on a GPU, as NVML reports it."""

    gpu_index: int
    gpu_uuid: str
    pid: int
    name: str
    used_memory_mib: float | None

    def describe(self) -> str:
        memory = f", {self.used_memory_mib:,.0f} MiB" if self.used_memory_mib is not None else ""
        return f"GPU {self.gpu_index} ({self.gpu_uuid}): pid {self.pid} ({self.name}{memory})"


def gpu_processes(gpus: Sequence[GpuInfo], nvml: Any = None) -> list[GpuProcess]:
    """Compute and graphics processes on these GPUs, before a benchmark starts.

    A GPU shared with a foreign job trains slower and its numbers would be wrong, so a busy GPU
    stops the run instead of producing a verdict. Our own launches leave nothing behind (the
    launcher kills every process it started), and the pytest process never opens a CUDA context,
    so anything found here is foreign. NVML unavailable: an empty list (nothing to compare).
    """
    if not gpus:
        return []
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            return []
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return []
    found: list[GpuProcess] = []
    try:
        for gpu in gpus:
            handle = nvml.nvmlDeviceGetHandleByIndex(gpu.index)
            seen: set[int] = set()
            for query in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
                try:
                    processes = getattr(nvml, query)(handle)
                except (nvml.NVMLError, AttributeError):
                    continue
                for proc in processes:
                    if proc.pid in seen:
                        continue
                    seen.add(proc.pid)
                    used = getattr(proc, "usedGpuMemory", None)
                    found.append(GpuProcess(gpu_index=gpu.index, gpu_uuid=gpu.uuid, pid=int(proc.pid),
                                            name=_process_name(int(proc.pid)),
                                            used_memory_mib=used / 2**20 if isinstance(used, int) else None))
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass
    return found


def _process_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() or "?"
    except OSError:
        return "not visible from this PID namespace"


def busy_gpu_message(processes: Sequence[GpuProcess]) -> str:
    lines = "\n".join(f"  {p.describe()}" for p in processes)
    return (f"GPU(s) already busy with processes this harness did not start:\n{lines}\n"
            "A shared GPU trains slower, so its numbers would be wrong. Stop those processes, or leave the "
            "GPU out with CUDA_VISIBLE_DEVICES, and run again.")


def _optional_nvml(nvml: Any, query: Callable[[], str]) -> str | None:
    try:
        return query()
    except nvml.NVMLError:
        return None


def _cpu_hardware(reason: str, **fields: Any) -> Hardware:
    return Hardware(device="cpu", gpus=(), nvml_unavailable_reason=reason, **fields)


def _text(value: str | bytes) -> str:
    """NVML strings: ``str`` in current nvidia-ml-py, ``bytes`` in old pynvml releases."""
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value


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
    try:
        import torch.cuda.nccl

        # Reads a compiled-in constant: it does not initialise CUDA.
        return format_nccl_version(torch.cuda.nccl.version())
    except (ImportError, AttributeError, RuntimeError):
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
# Profile selection (pure)


def check_homogeneous(hw: Hardware) -> None:
    """Raise HardwareError when the visible GPUs are not all one model."""
    if len(hw.gpu_names) <= 1:
        return
    per_gpu = ", ".join(f"{gpu.index}: {gpu.name}" for gpu in hw.gpus)
    most_common_name = Counter(gpu.name for gpu in hw.gpus).most_common(1)[0][0]
    suggested = ",".join(str(gpu.index) for gpu in hw.gpus if gpu.name == most_common_name)
    raise HardwareError(
        f"several GPU models on this node: {per_gpu}; DDP runs at the speed of the slowest GPU, so the "
        f"node cannot be signed off as one. Restrict the run to one model with "
        f"CUDA_VISIBLE_DEVICES={suggested} (with CUDA_DEVICE_ORDER=PCI_BUS_ID, so that these "
        f"nvidia-smi indices mean the same GPUs to CUDA)."
    )


def select_profile(hw: Hardware, profiles: Sequence[Profile], override: str | None = None) -> Profile:
    """The threshold profile for ``hw``: the one named ``override`` (``--hardware``), or the one
    whose match rule fits the hardware most specifically."""
    if override is not None:
        for profile in profiles:
            if profile.name == override:
                return profile
        raise HardwareError(
            f"no threshold profile named {override!r} (--hardware). Known profiles: {_known_names(profiles)}."
        )
    check_homogeneous(hw)
    candidates = [profile for profile in profiles if _fits(profile, hw)]
    if not candidates:
        raise HardwareError(
            f"no threshold profile matches this hardware: {_hardware_summary(hw)}. "
            f"Known profiles: {_known_rules(profiles)}. Make one on a known-good node with "
            "`harness calibrate --name <new-profile>` (see docs/calibration.md), or pass --hardware NAME "
            "to use an existing profile deliberately."
        )
    best_specificity = max(_specificity(profile) for profile in candidates)
    best = [profile for profile in candidates if _specificity(profile) == best_specificity]
    if len(best) > 1:
        tied = ", ".join(f"{_rule_text(profile)} from {profile.path}" for profile in best)
        raise HardwareError(
            f"{len(best)} threshold profiles match this hardware ({_hardware_summary(hw)}) equally well: "
            f"{tied}. Make their [hardware] match rules distinct, or pass --hardware NAME to pick one."
        )
    return best[0]


def _fits(profile: Profile, hw: Hardware) -> bool:
    rule = profile.hardware
    if rule.device != hw.device:
        return False
    if hw.device == "cpu":
        return True
    assert hw.gpu_name is not None  # device "cuda" always has GPUs (Hardware.__post_init__)
    if rule.gpu_name_contains is not None and rule.gpu_name_contains.lower() not in hw.gpu_name.lower():
        return False
    # The smallest GPU decides: every rank must fit the profile's batch sizes.
    memory_gib = min(gpu.memory_total_gib for gpu in hw.gpus)
    if rule.min_memory_gib is not None and memory_gib < rule.min_memory_gib:
        return False
    if rule.max_memory_gib is not None and memory_gib > rule.max_memory_gib:
        return False
    return True


def _specificity(profile: Profile) -> tuple[int, int]:
    """Longer name fragments are more specific ("H200 NVL" over "H200"), then memory bounds."""
    rule = profile.hardware
    memory_bounds = (rule.min_memory_gib is not None) + (rule.max_memory_gib is not None)
    return (len(rule.gpu_name_contains or ""), memory_bounds)


def _rule_text(profile: Profile) -> str:
    rule = profile.hardware
    if rule.device == "cpu":
        return profile.name
    parts = [rule.gpu_name_contains or "any GPU"]
    if rule.min_memory_gib is not None:
        parts.append(f">= {rule.min_memory_gib:g} GiB")
    if rule.max_memory_gib is not None:
        parts.append(f"<= {rule.max_memory_gib:g} GiB")
    return f"{profile.name} ({', '.join(parts)})"


def _known_rules(profiles: Sequence[Profile]) -> str:
    if not profiles:
        return "none (no threshold file was found)"
    return ", ".join(_rule_text(profile) for profile in sorted(profiles, key=lambda p: p.name))


def _known_names(profiles: Sequence[Profile]) -> str:
    if not profiles:
        return "none (no threshold file was found)"
    return ", ".join(sorted(profile.name for profile in profiles))


def _hardware_summary(hw: Hardware) -> str:
    if hw.device == "cpu":
        return f"no GPU ({hw.nvml_unavailable_reason})"
    memory_gib = min(gpu.memory_total_gib for gpu in hw.gpus)
    return f"{hw.gpu_count} x {' + '.join(hw.gpu_names)} ({memory_gib:.1f} GiB)"


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


def cli_detect(hardware_override: str | None, thresholds_dir: str | None) -> int:
    """``harness detect``: print the hardware and the profile it selects; 0 on success, 1 on error."""
    from harness.profile import load as thresholds

    try:
        hw = detect()
    except HardwareError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(describe(hw))
    try:
        directory = Path(thresholds_dir) if thresholds_dir else thresholds.default_thresholds_dir()
        profiles = thresholds.load_profiles(directory)
        profile = select_profile(hw, profiles, hardware_override)
    except (thresholds.ThresholdError, HardwareError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"profile: {profile.name} ({profile.path})")
    return 0
