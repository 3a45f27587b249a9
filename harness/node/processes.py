"""Processes already holding the GPUs a case is about to use: a shared GPU gives wrong numbers.

The plugin asks before every launch; a foreign process stops the case with a message naming the
GPU (index and UUID), the process and its memory, instead of producing a verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from harness.node.hardware import GpuInfo
from harness.node.nvml import installed_pynvml


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
            nvml = installed_pynvml()
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
