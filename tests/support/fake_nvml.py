"""One fake of the pynvml module, for every test that needs NVML without a GPU.

It borrows pynvml's real error class and constants (nvidia-ml-py imports without a driver) and
offers only functions the real pynvml has, with the real parameter names; tests/test_support_fakes.py
checks both against the installed pynvml, so what passes here calls NVML the way a GPU node will.
Handles are GPU indices; every reading comes from the ``FakeGpu`` at that index.
"""

from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass, field
from types import SimpleNamespace

import pynvml

H200_MEMORY_BYTES = 150754820096
"""What NVML reports for an H200 SXM: 140.4 GiB."""
UUIDS = tuple(f"GPU-{digit * 8}-aaaa-bbbb-cccc-{digit * 12}" for digit in "1234")
"""GPU-11111111-aaaa-bbbb-cccc-111111111111 and three more."""
_C_UINT_ZERO = ctypes.c_uint(0)
"""pynvml's default for the out-parameters of nvmlDeviceGetMinMaxClockOfPState (unused: it returns a pair)."""
NVLINK_MAX_LINKS = 18
"""Links the fake answers for; NVML_ERROR_INVALID_ARGUMENT past them, as a real H100/H200 does."""


@dataclass
class FakeGpu:
    uuid: str | bytes
    name: str | bytes = "NVIDIA H200"
    memory_total_bytes: int = H200_MEMORY_BYTES
    bus_id: str | bytes = "00000000:18:00.0"
    util: float = 98.0
    mem_util: float = 40.0
    mem_used_bytes: int = 60 * 2**30
    power_mw: int = 550_000
    limit_mw: int = 700_000
    temperature_c: int = 60
    sm_clock_mhz: int = 1980
    mem_clock_mhz: int = 2619
    reasons: int = 0
    ecc_corrected: int = 0
    ecc_uncorrected: int = 0
    replays: int = 0
    pcie_gen: int = 5
    pcie_width: int = 16
    pcie_gen_max: int = 5
    pcie_width_max: int = 16
    nvlinks: int = 18
    default_limit_mw: int = 700_000
    app_clock_mhz: dict[str, int] = field(default_factory=lambda: {"sm": 1980, "mem": 2619})
    default_app_clock_mhz: dict[str, int] = field(default_factory=lambda: {"sm": 1980, "mem": 2619})
    max_clock_mhz: dict[str, int] = field(default_factory=lambda: {"sm": 1980, "mem": 2619, "graphics": 1980})
    pstate0_graphics_mhz: tuple[int, int] = (345, 1980)
    gpc_offset_mhz: int = 0
    ecc_mode: tuple[int, int] = (1, 1)
    """(current, pending): 1 enabled, 0 disabled."""
    retired_pages_pending: int = 0
    retired_pages: dict[str, list[int]] = field(default_factory=lambda: {"dbe": [], "sbe": []})
    remapped_rows: tuple[int, int, int, int] = (0, 0, 0, 0)
    """(correctable, uncorrectable, pending, failure), as nvmlDeviceGetRemappedRows returns them."""
    ecc_uncorrected_aggregate: int = 0
    nvlink_errors: dict[tuple[int, int], int] = field(default_factory=dict)
    """(link, NVML_NVLINK_ERROR_DL_* counter) -> count; unlisted are 0."""
    compute_processes: list[tuple[int, int | None]] = field(default_factory=list)
    """(pid, used GPU memory in bytes or None when NVML cannot tell) of each compute process."""
    unsupported: set[str] = field(default_factory=set)
    """pynvml function names that answer NVML_ERROR_NOT_SUPPORTED on this GPU."""


class FakeNvml:
    """Stands in for the pynvml module; ``calls`` lists the functions asked, in order."""

    NVMLError = pynvml.NVMLError
    CONSTANTS = ("NVML_TEMPERATURE_GPU", "NVML_CLOCK_SM", "NVML_CLOCK_MEM", "NVML_MEMORY_ERROR_TYPE_CORRECTED",
                 "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", "NVML_VOLATILE_ECC", "NVML_ERROR_NOT_SUPPORTED",
                 "NVML_ERROR_FUNCTION_NOT_FOUND", "NVML_ERROR_NOT_FOUND", "NVML_ERROR_INVALID_ARGUMENT",
                 "NVML_FEATURE_ENABLED", "NVML_FEATURE_DISABLED", "NVML_NVLINK_MAX_LINKS", "NVML_P2P_STATUS_OK",
                 "NVML_P2P_CAPS_INDEX_READ", "NVML_P2P_STATUS_NOT_SUPPORTED",
                 "NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED", "NVML_ERROR_LIBRARY_NOT_FOUND",
                 "NVML_ERROR_DRIVER_NOT_LOADED", "NVML_ERROR_GPU_IS_LOST", "NVML_CLOCK_GRAPHICS", "NVML_PSTATE_0",
                 "NVML_AGGREGATE_ECC", "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR",
                 "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", "NVML_NVLINK_ERROR_DL_REPLAY",
                 "NVML_NVLINK_ERROR_DL_RECOVERY", "NVML_NVLINK_ERROR_DL_CRC_FLIT", "NVML_NVLINK_ERROR_DL_CRC_DATA",
                 "NVML_ERROR_TIMEOUT")
    """The pynvml constants the fake carries, with pynvml's own values."""

    def __init__(self, gpus: list[FakeGpu], *, init_error: int | None = None,
                 driver_version: str | bytes = "580.65.06", cuda_driver_version: int = 13000):
        for name in self.CONSTANTS:
            setattr(self, name, getattr(pynvml, name))
        self.gpus = gpus
        self.init_error = init_error
        """An NVML_ERROR_* code nvmlInit fails with; None: it succeeds."""
        self.driver_version = driver_version
        self.cuda_driver_version = cuda_driver_version
        self.lost_gpu_indices: set[int] = set()
        """GPUs whose handle NVML cannot get (NVML_ERROR_GPU_IS_LOST)."""
        self.p2p: dict[tuple[int, int], int] = {}
        """(handle, handle) -> NVML_P2P_STATUS_*; unlisted pairs are OK."""
        self.calls: list[str] = []
        self.nvmlEventTypeXidCriticalError = pynvml.nvmlEventTypeXidCriticalError
        self.xid_queue: list[tuple[int, int]] = []
        """(handle, XID) events the next nvmlEventSetWait_v2 calls deliver, in order."""
        self.registered: dict[int, list[int]] = {}
        """Event set -> the handles registered on it."""

    @property
    def lifecycle(self) -> list[str]:
        """The nvmlInit and nvmlShutdown calls, in order: every init must be shut down once."""
        return [call for call in self.calls if call in ("nvmlInit", "nvmlShutdown")]

    def _gpu(self, handle: int, function: str) -> FakeGpu:
        self.calls.append(function)
        gpu = self.gpus[handle]
        if function in gpu.unsupported:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu

    # -- the library and the system

    def nvmlInit(self):
        self.calls.append("nvmlInit")
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)

    def nvmlShutdown(self):
        self.calls.append("nvmlShutdown")

    def nvmlSystemGetDriverVersion(self):
        return self.driver_version

    def nvmlSystemGetCudaDriverVersion(self):
        return self.cuda_driver_version

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    # -- handles and identity

    def nvmlDeviceGetHandleByIndex(self, index):
        if index in self.lost_gpu_indices:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        if not 0 <= index < len(self.gpus):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return index

    def nvmlDeviceGetHandleByUUID(self, uuid):
        for index, gpu in enumerate(self.gpus):
            if gpu.uuid == uuid:
                return index
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetIndex(self, handle):
        return handle

    def nvmlDeviceGetUUID(self, handle):
        return self._gpu(handle, "nvmlDeviceGetUUID").uuid

    def nvmlDeviceGetName(self, handle):
        return self._gpu(handle, "nvmlDeviceGetName").name

    def nvmlDeviceGetPciInfo(self, handle):
        return SimpleNamespace(busId=self._gpu(handle, "nvmlDeviceGetPciInfo").bus_id)

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        gpu = self._gpu(handle, "nvmlDeviceGetMemoryInfo")
        return SimpleNamespace(total=gpu.memory_total_bytes, used=gpu.mem_used_bytes,
                               free=gpu.memory_total_bytes - gpu.mem_used_bytes)

    # -- readings

    def nvmlDeviceGetUtilizationRates(self, handle):
        gpu = self._gpu(handle, "nvmlDeviceGetUtilizationRates")
        return SimpleNamespace(gpu=gpu.util, memory=gpu.mem_util)

    def nvmlDeviceGetPowerUsage(self, handle):
        return self._gpu(handle, "nvmlDeviceGetPowerUsage").power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return self._gpu(handle, "nvmlDeviceGetEnforcedPowerLimit").limit_mw

    def nvmlDeviceGetTemperature(self, handle, sensor):
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._gpu(handle, "nvmlDeviceGetTemperature").temperature_c

    def nvmlDeviceGetClockInfo(self, handle, type):  # noqa: A002 - pynvml's own parameter name
        gpu = self._gpu(handle, "nvmlDeviceGetClockInfo")
        return {pynvml.NVML_CLOCK_SM: gpu.sm_clock_mhz, pynvml.NVML_CLOCK_MEM: gpu.mem_clock_mhz}[type]

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return self._gpu(handle, "nvmlDeviceGetCurrentClocksEventReasons").reasons

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle):
        return self._gpu(handle, "nvmlDeviceGetCurrPcieLinkGeneration").pcie_gen

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle):
        return self._gpu(handle, "nvmlDeviceGetCurrPcieLinkWidth").pcie_width

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle):
        return self._gpu(handle, "nvmlDeviceGetMaxPcieLinkGeneration").pcie_gen_max

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle):
        return self._gpu(handle, "nvmlDeviceGetMaxPcieLinkWidth").pcie_width_max

    def nvmlDeviceGetTotalEccErrors(self, handle, errorType, counterType):  # noqa: N803 - pynvml's names
        gpu = self._gpu(handle, "nvmlDeviceGetTotalEccErrors")
        if counterType == pynvml.NVML_AGGREGATE_ECC:
            assert errorType == pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
            return gpu.ecc_uncorrected_aggregate
        assert counterType == pynvml.NVML_VOLATILE_ECC
        return {pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED: gpu.ecc_corrected,
                pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED: gpu.ecc_uncorrected}[errorType]

    def nvmlDeviceGetPcieReplayCounter(self, handle):
        return self._gpu(handle, "nvmlDeviceGetPcieReplayCounter").replays

    # -- state: power limits, clock settings, ECC, retired pages, remapped rows

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle):
        return self._gpu(handle, "nvmlDeviceGetPowerManagementDefaultLimit").default_limit_mw

    def _clock_domain(self, type):  # noqa: A002 - pynvml's own parameter name
        return {pynvml.NVML_CLOCK_SM: "sm", pynvml.NVML_CLOCK_MEM: "mem", pynvml.NVML_CLOCK_GRAPHICS: "graphics"}[type]

    def nvmlDeviceGetApplicationsClock(self, handle, type):  # noqa: A002 - pynvml's own parameter name
        return self._gpu(handle, "nvmlDeviceGetApplicationsClock").app_clock_mhz[self._clock_domain(type)]

    def nvmlDeviceGetDefaultApplicationsClock(self, handle, type):  # noqa: A002 - pynvml's own parameter name
        gpu = self._gpu(handle, "nvmlDeviceGetDefaultApplicationsClock")
        return gpu.default_app_clock_mhz[self._clock_domain(type)]

    def nvmlDeviceGetMaxClockInfo(self, handle, type):  # noqa: A002 - pynvml's own parameter name
        return self._gpu(handle, "nvmlDeviceGetMaxClockInfo").max_clock_mhz[self._clock_domain(type)]

    def nvmlDeviceGetMinMaxClockOfPState(self, device, clockType, pstate,  # noqa: N803 - pynvml's signature
                                         minClockMHz=_C_UINT_ZERO, maxClockMHz=_C_UINT_ZERO):  # noqa: N803
        assert clockType == pynvml.NVML_CLOCK_GRAPHICS and pstate == pynvml.NVML_PSTATE_0
        return self._gpu(device, "nvmlDeviceGetMinMaxClockOfPState").pstate0_graphics_mhz

    def nvmlDeviceGetGpcClkVfOffset(self, device):
        return self._gpu(device, "nvmlDeviceGetGpcClkVfOffset").gpc_offset_mhz

    def nvmlDeviceGetEccMode(self, handle):
        return list(self._gpu(handle, "nvmlDeviceGetEccMode").ecc_mode)

    def nvmlDeviceGetRetiredPagesPendingStatus(self, device):
        return self._gpu(device, "nvmlDeviceGetRetiredPagesPendingStatus").retired_pages_pending

    def nvmlDeviceGetRetiredPages(self, device, sourceFilter):  # noqa: N803 - pynvml's name
        cause = "dbe" if sourceFilter == pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR else "sbe"
        return list(self._gpu(device, "nvmlDeviceGetRetiredPages").retired_pages[cause])

    def nvmlDeviceGetRemappedRows(self, device):
        return tuple(self._gpu(device, "nvmlDeviceGetRemappedRows").remapped_rows)

    # -- wiring

    def nvmlDeviceGetNvLinkState(self, device, link):
        gpu = self._gpu(device, "nvmlDeviceGetNvLinkState")
        if link >= NVLINK_MAX_LINKS:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return pynvml.NVML_FEATURE_ENABLED if link < gpu.nvlinks else pynvml.NVML_FEATURE_DISABLED

    def nvmlDeviceGetNvLinkErrorCounter(self, device, link, counter):
        gpu = self._gpu(device, "nvmlDeviceGetNvLinkErrorCounter")
        if link >= min(gpu.nvlinks, NVLINK_MAX_LINKS):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return gpu.nvlink_errors.get((link, counter), 0)

    def nvmlDeviceGetP2PStatus(self, device1, device2, p2pIndex):  # noqa: N803 - pynvml's name
        # The real call hands the index to ctypes, which takes an int and nothing else; nvidia-ml-py
        # spells this constant `NVML_P2P_CAPS_INDEX_READ = 0,` (a tuple), which failed on a real H200.
        if type(p2pIndex) is not int:
            raise ctypes.ArgumentError(f"argument 3: TypeError: Don't know how to convert parameter 3 ({p2pIndex!r})")
        assert p2pIndex == 0  # NVML_P2P_CAPS_INDEX_READ in nvml.h
        return self.p2p.get((device1, device2), pynvml.NVML_P2P_STATUS_OK)

    # -- XID events

    def nvmlEventSetCreate(self):
        self.calls.append("nvmlEventSetCreate")
        event_set = len(self.registered) + 1
        self.registered[event_set] = []
        return event_set

    def nvmlDeviceRegisterEvents(self, handle, eventTypes, eventSet):  # noqa: N803 - pynvml's names
        self._gpu(handle, "nvmlDeviceRegisterEvents")
        assert eventTypes == pynvml.nvmlEventTypeXidCriticalError
        self.registered[eventSet].append(handle)

    def nvmlEventSetWait_v2(self, eventSet, timeoutms):  # noqa: N803 - pynvml's name
        self.calls.append("nvmlEventSetWait_v2")
        for position, (handle, xid) in enumerate(self.xid_queue):
            if handle in self.registered.get(eventSet, []):
                del self.xid_queue[position]
                return SimpleNamespace(device=handle, eventType=pynvml.nvmlEventTypeXidCriticalError, eventData=xid)
        time.sleep(min(timeoutms, 10) / 1000.0)  # a real wait blocks; a watcher thread must not spin
        raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)

    def nvmlEventSetFree(self, eventSet):  # noqa: N803 - pynvml's name
        self.calls.append("nvmlEventSetFree")
        self.registered.pop(eventSet, None)

    # -- processes

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        gpu = self._gpu(handle, "nvmlDeviceGetComputeRunningProcesses")
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in gpu.compute_processes]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle):
        self._gpu(handle, "nvmlDeviceGetGraphicsRunningProcesses")
        return []


HOPPER_VM_UNSUPPORTED = {"nvmlDeviceGetRetiredPagesPendingStatus", "nvmlDeviceGetRetiredPages",
                         "nvmlDeviceGetNvLinkState", "nvmlDeviceGetNvLinkErrorCounter"}
"""What NVML answered NotSupported on a lent healthy 1 x H100 80GB HBM3 VM (driver 580.159.04): Hopper
remaps rows instead of retiring pages, and a single-GPU VM has no NVLink."""


def fake_nvml(count: int = 2, **changes) -> FakeNvml:
    """``count`` healthy H200s (UUIDS, consecutive PCI buses), each with ``changes`` applied."""
    return FakeNvml([FakeGpu(**{"uuid": UUIDS[index], "bus_id": f"00000000:{0x18 + index:02X}:00.0", **changes})
                     for index in range(count)])
