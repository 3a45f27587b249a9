"""The GPUs' wiring, read from NVML in the launcher process (no CUDA context): NVLink links up per GPU
(``nvmlDeviceGetNvLinkState`` over its links), peer-to-peer read support between every pair
(``nvmlDeviceGetP2PStatus``), and PCIe link generation and width, idle and the slot's maximum.

PCIe links downtrain when a GPU idles, so the generation and width that count are the highest the
telemetry sampler saw while the all-reduce sweep kept every GPU busy (harness/checks/interconnect.py);
the idle reading and the slot's maximum are kept as context.
"""

from __future__ import annotations

from typing import Any, Sequence

import pynvml

_PCIE_QUERIES = (("pcie_gen_idle", "nvmlDeviceGetCurrPcieLinkGeneration"),
                 ("pcie_width_idle", "nvmlDeviceGetCurrPcieLinkWidth"),
                 ("pcie_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration"),
                 ("pcie_width_max", "nvmlDeviceGetMaxPcieLinkWidth"))


def read_topology(gpus: Sequence[Any], nvml: Any = pynvml) -> dict:
    """NVLink links up, P2P status of every pair, PCIe link (idle and the slot's maximum) per GPU.

    ``gpus`` are harness.node.hardware.GpuInfo (index, uuid). Unsupported queries are recorded as such.
    """
    nvml.nvmlInit()
    try:
        handles = {gpu.index: nvml.nvmlDeviceGetHandleByIndex(gpu.index) for gpu in gpus}
        per_gpu = [_links(nvml, gpu, handles[gpu.index]) for gpu in gpus]
        return {"gpus": per_gpu, "p2p_read": _p2p_read(nvml, gpus, handles)}
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass


def _links(nvml: Any, gpu: Any, handle: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"index": gpu.index, "uuid": gpu.uuid, "unsupported": {}}
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
