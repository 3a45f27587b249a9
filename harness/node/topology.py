"""The GPUs' wiring, read from NVML in the launcher process (no CUDA context): NVLink links up per GPU
(``nvmlDeviceGetNvLinkState`` over its links), peer-to-peer read support between every pair
(``nvmlDeviceGetP2PStatus``), and PCIe link generation and width, idle and the slot's maximum.

PCIe links downtrain when a GPU idles, so the generation and width that count are the highest the
telemetry sampler saw while the all-reduce sweep kept every GPU busy (harness/kinds/interconnect/checks.py);
the idle reading and the slot's maximum are kept as context.
"""

from __future__ import annotations

from typing import Any, Sequence

import pynvml

from harness.node.cpu_features import runs_in_virtual_machine

_PCIE_QUERIES = (("pcie_gen_idle", "nvmlDeviceGetCurrPcieLinkGeneration"),
                 ("pcie_width_idle", "nvmlDeviceGetCurrPcieLinkWidth"),
                 ("pcie_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration"),
                 ("pcie_width_max", "nvmlDeviceGetMaxPcieLinkWidth"))


def read_topology(gpus: Sequence[Any], nvml: Any = pynvml, virtualized: bool | None = None) -> dict:
    """NVLink links up, P2P status of every pair, PCIe link (idle and the slot's maximum) per GPU.

    ``gpus`` are harness.node.hardware.GpuInfo (index, uuid, name). Unsupported queries are recorded as
    such. ``virtualized`` (default: the CPU's hypervisor flag) is kept so that a GPU without NVLink
    can be explained (harness/kinds/interconnect/checks.py).
    """
    nvml.nvmlInit()
    try:
        handles = {gpu.index: nvml.nvmlDeviceGetHandleByIndex(gpu.index) for gpu in gpus}
        per_gpu = [_links(nvml, gpu, handles[gpu.index]) for gpu in gpus]
        return {"gpus": per_gpu, "p2p_read": _p2p_read(nvml, gpus, handles),
                "virtualized": runs_in_virtual_machine() if virtualized is None else virtualized}
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass


def _links(nvml: Any, gpu: Any, handle: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"index": gpu.index, "uuid": gpu.uuid, "name": getattr(gpu, "name", None),
                             "unsupported": {}}
    active, links = 0, 0
    for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            state = nvml.nvmlDeviceGetNvLinkState(handle, link)
        except nvml.NVMLError as err:
            if link == 0:
                entry["unsupported"]["nvlink"] = str(err)
            continue  # links past the GPU's count answer "not supported" or "invalid argument"
        links += 1
        active += 1 if state == getattr(nvml, "NVML_FEATURE_ENABLED", 1) else 0
    entry["nvlinks_active"] = active if links else None
    entry["nvlinks_reported"] = links
    for key, query in _PCIE_QUERIES:
        try:
            entry[key] = int(getattr(nvml, query)(handle))
        except nvml.NVMLError as err:
            entry[key] = None
            entry["unsupported"][key] = str(err)
    return entry


def _p2p_read(nvml: Any, gpus: Sequence[Any], handles: dict[int, Any]) -> dict[str, str]:
    p2p = {}
    ok = getattr(nvml, "NVML_P2P_STATUS_OK", 0)
    # nvml.h's NVML_P2P_CAPS_INDEX_READ is 0; nvidia-ml-py spells it `= 0,`, a tuple that ctypes
    # refuses ("Don't know how to convert parameter 3", seen on H200 with nvidia-ml-py 13).
    read = 0
    for a in gpus:
        for b in gpus:
            if a.index >= b.index:
                continue
            try:
                status = nvml.nvmlDeviceGetP2PStatus(handles[a.index], handles[b.index], read)
                p2p[f"{a.index}-{b.index}"] = "ok" if status == ok else p2p_status_name(nvml, status)
            except nvml.NVMLError as err:
                p2p[f"{a.index}-{b.index}"] = f"unknown ({err})"
    return p2p


def p2p_status_name(nvml: Any, status: int) -> str:
    """``NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED`` -> ``ioh topology not supported``."""
    for name in dir(nvml):
        if name.startswith("NVML_P2P_STATUS_") and getattr(nvml, name) == status and "SUPPORED" not in name:
            return name.removeprefix("NVML_P2P_STATUS_").lower().replace("_", " ")
    return f"status {status}"


def why_no_nvlink(gpu_name: str | None, virtualized: bool | None) -> str:
    """What kind of node shows a GPU without NVLink, from the GPU's name and the CPU's hypervisor flag.

    NVML answers "Not Supported" for NVLink both on PCIe cards and where a hypervisor passes an SXM GPU
    through without its NVLink fabric; on bare metal an SXM GPU without NVLink is a fault.
    """
    name = gpu_name or "this GPU"
    if gpu_name and "PCIe" in gpu_name:
        return f"{name} is a PCIe card: it has no NVLink"
    if gpu_name and gpu_name.rstrip().endswith(" NVL"):
        return f"{name} is a PCIe card whose NVLink comes from a bridge: no bridge is seen"
    if virtualized:
        return (f"{name} runs in a virtual machine (the CPU reports the 'hypervisor' flag), which passes the GPU "
                "through without its NVLink fabric")
    if virtualized is False:
        return (f"{name} on bare metal should have NVLink: the baseboard, the driver's fabric manager or the GPU "
                "is at fault")
    return f"{name}: whether this is a virtual machine is unknown (no 'hypervisor' flag to read)"
