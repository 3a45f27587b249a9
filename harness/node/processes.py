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


# --- during a window: processes that are not the case's own (telemetry sampler) ---------------


def compute_processes(nvml: Any, handle: Any) -> list[tuple[int, int | None]]:
    """(pid, used GPU memory in bytes or None) of every compute process on one GPU; NVMLError passes up."""
    return [(int(p.pid), p.usedGpuMemory if isinstance(getattr(p, "usedGpuMemory", None), int) else None)
            for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)]


def parent_pid(pid: int, proc: Path = Path("/proc")) -> int | None:
    """The parent of ``pid`` from /proc/<pid>/stat; None where it is gone or not visible."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: the ppid follows its last ')'.
    fields = stat.rpartition(")")[2].split()
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None


def descends_from(pid: int, ancestor: int, proc: Path = Path("/proc"), max_depth: int = 64) -> bool:
    """Whether ``ancestor`` is ``pid`` or one of its ancestors (a rank, torchrun, a compile worker of ours)."""
    current: int | None = pid
    for _ in range(max_depth):
        if current is None or current <= 1:
            return False
        if current == ancestor:
            return True
        current = parent_pid(current, proc)
    return False


def foreign_process(pid: int, used_bytes: int | None, *, gpu_index: Any, gpu_uuid: Any) -> GpuProcess:
    return GpuProcess(gpu_index=gpu_index, gpu_uuid=gpu_uuid, pid=pid, name=_process_name(pid),
                      used_memory_mib=used_bytes / 2**20 if used_bytes is not None else None)


def remember_foreign(seen: dict[int, dict], pid: int, used_bytes: int | None, at: float, *, gpu_index: Any,
                     gpu_uuid: Any, first_key: str, last_key: str) -> None:
    """Note one sighting of a foreign process in ``seen`` (pid -> pid, name, the most memory seen in MiB, and
    when it was first and last seen, under ``first_key`` / ``last_key``): a window's sampler and the other
    nodes' load watch keep them alike."""
    known = seen.get(pid)
    if known is None:
        found = foreign_process(pid, used_bytes, gpu_index=gpu_index, gpu_uuid=gpu_uuid)
        seen[pid] = {"pid": pid, "name": found.name, "used_memory_mib": found.used_memory_mib,
                     first_key: at, last_key: at}
        return
    known[last_key] = at
    if used_bytes is not None:
        known["used_memory_mib"] = max(known["used_memory_mib"] or 0.0, used_bytes / 2**20)
