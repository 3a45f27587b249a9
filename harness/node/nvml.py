"""The NVML vocabulary the harness speaks: the pynvml module, clock-event reasons, the metrics read
from every GPU with how each is reduced over a window, and how NVML's errors are told apart.

Detection (harness/node/hardware.py), the GPU-process check (harness/node/processes.py) and the
telemetry sampler (harness/telemetry.py) all talk to NVML in these terms. Nothing here opens NVML:
importing it is cheap and touches no driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, Literal

PYNVML: ModuleType | None
"""The ``pynvml`` module (package nvidia-ml-py), or None where it cannot be imported."""
PYNVML_IMPORT_ERROR: str | None
"""Why ``pynvml`` cannot be imported, as Python said it; None when it can."""
try:
    import pynvml
except ImportError as err:  # a dependency, but a CPU run must still start where it is broken or missing
    PYNVML, PYNVML_IMPORT_ERROR = None, str(err)
else:
    PYNVML, PYNVML_IMPORT_ERROR = pynvml, None

GIB_BYTES = 1024**3
"""GiB is 1024³ bytes (NVML reports bytes; GB would be 1000³)."""

Reduction = Literal["mean", "max", "min", "any", "delta"]


def installed_pynvml() -> ModuleType:
    """The real pynvml module; ImportError saying why where it cannot be imported."""
    if PYNVML is None:
        raise ImportError(PYNVML_IMPORT_ERROR)
    return PYNVML


def init_nvml(nvml: Any = None) -> tuple[Any, str | None]:
    """(the NVML module, initialised; None) or (None, why not): for the threads that watch the GPUs for
    a whole window or session (sampler, XID watcher, load watch), which record why they could not."""
    try:
        nvml = nvml if nvml is not None else installed_pynvml()
    except ImportError as err:
        return None, f"pynvml (nvidia-ml-py) is not installed: {err}"
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as err:
        return None, f"NVML is not available: {err}"
    return nvml, None


def nvml_text(value: Any) -> str:
    """NVML strings: ``str`` in current nvidia-ml-py, ``bytes`` in old pynvml releases."""
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def error_code(err: BaseException) -> int | None:
    """The NVML_ERROR_* code of a pynvml.NVMLError (None for anything else)."""
    return getattr(err, "value", None)


def is_unsupported(nvml: Any, err: BaseException) -> bool:
    """This GPU or driver cannot report the metric at all (ask no more), as opposed to a failed read."""
    codes = {getattr(nvml, name, None) for name in ("NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_FUNCTION_NOT_FOUND")}
    return error_code(err) in codes - {None}


# --- clock-event (throttle) reasons ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClockEventReason:
    bit: int
    """The bit in nvmlDeviceGetCurrentClocksEventReasons (nvmlClocksEventReason* in nvml.h)."""
    name: str
    fault: bool
    """The GPU slowed down to protect itself (heat, a hardware slowdown signal, a power brake):
    a node doing that under a benchmark is not healthy. Power capping, idling and clock settings
    are how a healthy GPU is run, so they are recorded but fail nothing."""


CLOCK_SETTING_REASON = "applications clocks setting"
"""What locked clocks (``nvidia-smi -lgc``) look like to NVML under load, which has no getter for them."""
CLOCK_EVENT_REASONS = (
    ClockEventReason(0x1, "gpu idle", False),
    ClockEventReason(0x2, CLOCK_SETTING_REASON, False),
    ClockEventReason(0x4, "sw power cap", False),
    ClockEventReason(0x8, "hw slowdown", True),
    ClockEventReason(0x10, "sync boost", False),
    ClockEventReason(0x20, "sw thermal slowdown", True),
    ClockEventReason(0x40, "hw thermal slowdown", True),
    ClockEventReason(0x80, "hw power brake slowdown", True),
    ClockEventReason(0x100, "display clock setting", False),
)
FAULT_REASONS = tuple(reason.name for reason in CLOCK_EVENT_REASONS if reason.fault)
_KNOWN_BITS = sum(reason.bit for reason in CLOCK_EVENT_REASONS)


def decode_clock_event_reasons(mask: int) -> list[str]:
    """``0x44`` -> ``["sw power cap", "hw thermal slowdown"]``; bits this table lacks are named by value."""
    names = [reason.name for reason in CLOCK_EVENT_REASONS if mask & reason.bit]
    unknown = mask & ~_KNOWN_BITS
    if unknown:
        names.append(f"unknown 0x{unknown:x}")
    return names


def _clock_event_mask(nvml: Any, handle: Any) -> int:
    # "Throttle reasons" were renamed "clocks event reasons" in driver 535; same bits.
    try:
        return int(nvml.nvmlDeviceGetCurrentClocksEventReasons(handle))
    except AttributeError:
        return int(nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle))
    except nvml.NVMLError as err:
        if error_code(err) != getattr(nvml, "NVML_ERROR_FUNCTION_NOT_FOUND", -1):
            raise
        return int(nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle))


# --- the metrics -----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Metric:
    key: str
    label: str
    unit: str
    reduction: Reduction
    """How the window becomes one number per GPU: mean, max, min, any (bitmask OR), delta (end - start)."""
    read: Callable[[Any, Any], float]
    """(the pynvml module, a device handle) -> the current value."""
    timeline: bool = False
    """Drawn over time in the report."""

    @property
    def per_sample(self) -> bool:
        """Counters (delta) are read when the window opens and closes; everything else every period."""
        return self.reduction != "delta"


METRICS: tuple[Metric, ...] = (
    Metric(key="util_pct", label="GPU utilization", unit="%", reduction="mean", timeline=True,
           read=lambda nv, h: nv.nvmlDeviceGetUtilizationRates(h).gpu),
    Metric(key="mem_util_pct", label="memory utilization", unit="%", reduction="mean",
           read=lambda nv, h: nv.nvmlDeviceGetUtilizationRates(h).memory),
    Metric(key="mem_used_gib", label="memory used", unit="GiB", reduction="max",
           read=lambda nv, h: nv.nvmlDeviceGetMemoryInfo(h).used / GIB_BYTES),
    Metric(key="power_w", label="power draw", unit="W", reduction="mean", timeline=True,
           read=lambda nv, h: nv.nvmlDeviceGetPowerUsage(h) / 1000.0),
    Metric(key="power_limit_w", label="enforced power limit", unit="W", reduction="min",
           read=lambda nv, h: nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0),
    Metric(key="temperature_c", label="GPU temperature", unit="°C", reduction="max", timeline=True,
           read=lambda nv, h: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
    Metric(key="sm_clock_mhz", label="SM clock", unit="MHz", reduction="min", timeline=True,
           read=lambda nv, h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
    Metric(key="mem_clock_mhz", label="memory clock", unit="MHz", reduction="min",
           read=lambda nv, h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)),
    Metric(key="clock_event_reasons", label="clock-event (throttle) reasons", unit="", reduction="any",
           read=_clock_event_mask),
    Metric(key="pcie_gen", label="PCIe link generation", unit="", reduction="max",
           read=lambda nv, h: nv.nvmlDeviceGetCurrPcieLinkGeneration(h)),
    Metric(key="pcie_width", label="PCIe link width", unit="lanes", reduction="max",
           read=lambda nv, h: nv.nvmlDeviceGetCurrPcieLinkWidth(h)),
    Metric(key="ecc_corrected", label="corrected ECC errors (volatile)", unit="", reduction="delta",
           read=lambda nv, h: nv.nvmlDeviceGetTotalEccErrors(h, nv.NVML_MEMORY_ERROR_TYPE_CORRECTED,
                                                             nv.NVML_VOLATILE_ECC)),
    Metric(key="ecc_uncorrected", label="uncorrected ECC errors (volatile)", unit="", reduction="delta",
           read=lambda nv, h: nv.nvmlDeviceGetTotalEccErrors(h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                                             nv.NVML_VOLATILE_ECC)),
    Metric(key="pcie_replays", label="PCIe replays", unit="", reduction="delta",
           read=lambda nv, h: nv.nvmlDeviceGetPcieReplayCounter(h)),
)
METRICS_BY_KEY = {metric.key: metric for metric in METRICS}
