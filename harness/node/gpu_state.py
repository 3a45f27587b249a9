"""A snapshot of each GPU's state through NVML: power limits, clocks and their settings, ECC mode,
retired pages, remapped rows, the aggregate uncorrectable ECC count, NVLink links and their error
counters. Read at session start and session end (harness/plugin/gpu_state.py) and judged by
harness/kinds/gpu_state/checks.py.

Every query ends as one ``reading``: ``{"status": "ok", "value": ...}``, ``{"status":
"unsupported", "why": ...}`` (NVML_ERROR_NOT_SUPPORTED: this GPU or driver has no such query, e.g.
retired pages on Hopper, which remaps rows instead) or ``{"status": "error", "why": ...}`` (any
other failure). A query never raises: a snapshot of a sick GPU is exactly what must not crash.

Locked clocks (``nvidia-smi -lgc``) have no getter in NVML (only nvmlDeviceSetGpuLockedClocks and
its reset). What NVML does tell: the applications clocks against their defaults, a GPC clock
offset (``nvmlDeviceGetGpcClkVfOffset``), and, under load, the clock-event reason "applications
clocks setting" (a clock setting holds the GPU below what it would run at), which the case windows
record; harness/kinds/gpu_state/checks.py reads both.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Sequence

from harness.node.nvml import installed_pynvml, is_unsupported

Reading = dict[str, Any]
"""``{"status": "ok" | "unsupported" | "error", "value": ... | "why": ...}``."""

NVLINK_COUNTERS = (("replay", "NVML_NVLINK_ERROR_DL_REPLAY"), ("recovery", "NVML_NVLINK_ERROR_DL_RECOVERY"),
                   ("crc_flit", "NVML_NVLINK_ERROR_DL_CRC_FLIT"), ("crc_data", "NVML_NVLINK_ERROR_DL_CRC_DATA"))
"""The per-link data-link error counters (nvmlNvLinkErrorCounter_t), by the name a check says."""


def read(query: Callable[[], Any], nvml: Any) -> Reading:
    """One NVML query as a reading; NotSupported and every other NVML error are told apart."""
    try:
        return {"status": "ok", "value": query()}
    except nvml.NVMLError as err:
        return {"status": "unsupported" if is_unsupported(nvml, err) else "error", "why": str(err)}
    except AttributeError as err:  # an nvidia-ml-py too old to have this function
        return {"status": "unsupported", "why": f"this pynvml cannot ask it: {err}"}
    except (TypeError, ValueError) as err:  # an answer of an unexpected shape: a failed read, never "allowed"
        return {"status": "error", "why": f"{type(err).__name__}: {err}"}


def value(reading: Reading | None) -> Any:
    """The value of a reading, None unless it is ok."""
    return reading.get("value") if reading and reading.get("status") == "ok" else None


@dataclass(kw_only=True)
class GpuState:
    """What NVML said about one GPU at one moment."""

    index: int
    uuid: str
    taken_at: float
    """Unix time, seconds."""
    readings: dict[str, Reading] = field(default_factory=dict)
    """Query name (see ``read_gpu_state``) -> its reading."""

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "uuid": self.uuid, "taken_at": self.taken_at, "readings": self.readings}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GpuState:
        return cls(index=int(data["index"]), uuid=str(data["uuid"]), taken_at=float(data["taken_at"]),
                   readings=dict(data.get("readings", {})))


def _watts(milliwatts: Any) -> float:
    return int(milliwatts) / 1000.0


def read_gpu_state(nvml: Any, handle: Any, *, index: int, uuid: str, now: float | None = None) -> GpuState:
    """Every state query of one GPU (NVML already initialised)."""
    nv, h = nvml, handle
    sm, mem, graphics = nv.NVML_CLOCK_SM, nv.NVML_CLOCK_MEM, nv.NVML_CLOCK_GRAPHICS
    queries: dict[str, Callable[[], Any]] = {
        "enforced_power_limit_w": lambda: _watts(nv.nvmlDeviceGetEnforcedPowerLimit(h)),
        "default_power_limit_w": lambda: _watts(nv.nvmlDeviceGetPowerManagementDefaultLimit(h)),
        "app_clock_sm_mhz": lambda: int(nv.nvmlDeviceGetApplicationsClock(h, sm)),
        "default_app_clock_sm_mhz": lambda: int(nv.nvmlDeviceGetDefaultApplicationsClock(h, sm)),
        "max_clock_sm_mhz": lambda: int(nv.nvmlDeviceGetMaxClockInfo(h, sm)),
        "app_clock_mem_mhz": lambda: int(nv.nvmlDeviceGetApplicationsClock(h, mem)),
        "default_app_clock_mem_mhz": lambda: int(nv.nvmlDeviceGetDefaultApplicationsClock(h, mem)),
        "max_clock_mem_mhz": lambda: int(nv.nvmlDeviceGetMaxClockInfo(h, mem)),
        "max_clock_graphics_mhz": lambda: int(nv.nvmlDeviceGetMaxClockInfo(h, graphics)),
        "pstate0_graphics_clock_range_mhz": lambda: [int(v) for v in nv.nvmlDeviceGetMinMaxClockOfPState(
            h, graphics, nv.NVML_PSTATE_0)],
        "gpc_clock_offset_mhz": lambda: int(nv.nvmlDeviceGetGpcClkVfOffset(h)),
        "ecc_mode": lambda: _ecc_mode(nv.nvmlDeviceGetEccMode(h)),
        "retired_pages_pending": lambda: int(nv.nvmlDeviceGetRetiredPagesPendingStatus(h)),
        "retired_pages_dbe": lambda: len(nv.nvmlDeviceGetRetiredPages(
            h, nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)),
        "retired_pages_sbe": lambda: len(nv.nvmlDeviceGetRetiredPages(
            h, nv.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)),
        "remapped_rows": lambda: dict(zip(("correctable", "uncorrectable", "pending", "failure"),
                                          (int(v) for v in nv.nvmlDeviceGetRemappedRows(h)), strict=True)),
        "ecc_uncorrected_aggregate": lambda: int(nv.nvmlDeviceGetTotalEccErrors(
            h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_AGGREGATE_ECC)),
    }
    state = GpuState(index=index, uuid=uuid, taken_at=time.time() if now is None else now)
    state.readings = {name: read(query, nv) for name, query in queries.items()}
    state.readings["nvlinks"] = read_nvlinks(nv, h)
    return state


def _ecc_mode(mode: Sequence[int]) -> dict[str, int]:
    current, pending = mode
    return {"current": int(current), "pending": int(pending)}


def read_nvlinks(nvml: Any, handle: Any) -> Reading:
    """Per link: up or not, and its error counters (each its own reading).

    Link 0 answering NotSupported means NVML sees no NVLink on this GPU (a PCIe card, a single-GPU
    VM): the whole reading is then ``unsupported``. Links past the GPU's count answer NotSupported
    or InvalidArgument and are left out.
    """
    links: dict[str, dict[str, Any]] = {}
    for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))):
        state = read(partial(nvml.nvmlDeviceGetNvLinkState, handle, link), nvml)
        if state["status"] != "ok":
            if link == 0:
                return state
            continue
        counters = {name: read(partial(nvml.nvmlDeviceGetNvLinkErrorCounter, handle, link, getattr(nvml, constant)),
                               nvml) for name, constant in NVLINK_COUNTERS}
        links[str(link)] = {"active": state["value"] == getattr(nvml, "NVML_FEATURE_ENABLED", 1),
                            "counters": counters}
    return {"status": "ok", "value": links}


def read_gpu_states(gpus: Sequence[Any], nvml: Any = None) -> tuple[list[GpuState], str | None]:
    """A snapshot of every GPU (``GpuInfo``: index, uuid); ([], why) where NVML cannot be opened."""
    try:
        nvml = nvml if nvml is not None else installed_pynvml()
    except ImportError as err:
        return [], f"pynvml (nvidia-ml-py) is not installed: {err}"
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as err:
        return [], f"NVML is not available: {err}"
    states: list[GpuState] = []
    problems: list[str] = []
    try:
        for gpu in gpus:
            try:
                handle = nvml.nvmlDeviceGetHandleByUUID(gpu.uuid)
            except nvml.NVMLError as err:
                problems.append(f"GPU {gpu.index} ({gpu.uuid}): NVML cannot find it: {err}")
                continue
            states.append(read_gpu_state(nvml, handle, index=gpu.index, uuid=gpu.uuid))
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass
    return states, "; ".join(problems) or None
