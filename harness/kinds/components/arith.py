"""The arithmetic of the component benchmarks and the NUMA facts they need; pure, torch-free.

Bandwidth units: GB/s is 10^9 bytes/s (as datasheets and nccl-tests count); GiB is 1024^3 bytes.
A device-to-device copy and a read-modify-write both count every byte twice (read once, written
once), as the HBM datasheet figure (a sum of both directions of the memory bus) does.
"""

from __future__ import annotations

from pathlib import Path

SYSFS_PCI = Path("/sys/bus/pci/devices")
SYSFS_NODES = Path("/sys/devices/system/node")


def gemm_flops(n: int) -> float:
    """FLOPs of one n x n x n matrix product: n^3 multiply-adds, 2 FLOPs each."""
    return 2.0 * n ** 3


def gemm_tflops(n: int, iters: int, seconds: float) -> float:
    """TFLOP/s of ``iters`` n^3 products in ``seconds``."""
    return gemm_flops(n) * iters / seconds / 1e12


def moved_gbps(bytes_per_op: int, iters: int, seconds: float, *, touches: int = 1) -> float:
    """GB/s of ``iters`` operations each moving ``bytes_per_op`` bytes ``touches`` times (2: read + write)."""
    return bytes_per_op * touches * iters / seconds / 1e9


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def iterations_for(seconds_per_op: float, target_seconds: float, *, at_least: int = 3) -> int:
    """How many operations fill ``target_seconds`` (at least ``at_least``)."""
    if seconds_per_op <= 0:
        return at_least
    return max(at_least, int(target_seconds / seconds_per_op))


def parse_cpulist(text: str) -> list[int]:
    """sysfs cpulist ``0-3,8,10-11`` -> [0, 1, 2, 3, 8, 10, 11]; a ValueError names a damaged entry."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ValueError(f"cpulist entry {part!r} is not N or N-M")
        cpus.extend(range(int(low), int(high or low) + 1))
    return cpus


def sysfs_bus_id(pci_bus_id: str) -> str:
    """NVML's ``00000000:1B:00.0`` -> sysfs's ``0000:1b:00.0`` (a 4-digit domain, lower case)."""
    text = pci_bus_id.strip().lower()
    domain, _, rest = text.partition(":")
    return f"{domain[-4:]}:{rest}" if rest else text


def numa_node_of(pci_bus_id: str, sysfs_pci: Path = SYSFS_PCI) -> tuple[int | None, str]:
    """(NUMA node of the GPU at ``pci_bus_id``, why None): sysfs ``numa_node``, -1 when the platform says nothing."""
    path = sysfs_pci / sysfs_bus_id(pci_bus_id) / "numa_node"
    try:
        node = int(path.read_text().strip())
    except (OSError, ValueError) as exc:
        return None, f"{path} unreadable ({exc})"
    if node < 0:
        return None, f"{path} says {node}: the platform (often a VM) does not report the GPU's NUMA node"
    return node, ""


def node_cpus(node: int, sysfs_nodes: Path = SYSFS_NODES) -> tuple[list[int], str]:
    """(CPUs of NUMA node ``node``, why empty)."""
    path = sysfs_nodes / f"node{node}" / "cpulist"
    try:
        return parse_cpulist(path.read_text()), ""
    except (OSError, ValueError) as exc:
        return [], f"{path} unreadable ({exc})"
