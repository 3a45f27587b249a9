"""Hardware as detect() would describe it, built directly: for tests of what reads a Hardware."""

from __future__ import annotations

from harness.node.hardware import GpuInfo, Hardware


def make_hardware(*gpus: tuple[str, float], reason: str | None = None) -> Hardware:
    """Node "node01" with one GPU per (name, memory GiB), in index order; none: a CPU node, for ``reason``."""
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
