"""The GPU telemetry of one measured window, as every stage reads it: a type, not a dict of string keys.

The sampler (harness/telemetry.py) writes the summary as JSON into each run record; the checks, the
GPU-state test, the interconnect's PCIe reading, calibration's health bounds and the fleet read it back
through ``read_telemetry`` here, once, tolerantly (a record written by an older harness, or damaged, reads
as telemetry that is not available, saying why), and from then on by attribute. On the ground floor: it
imports nothing of the harness above ``results``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _whole(value: Any) -> int | None:
    number = _number(value)
    return int(number) if number is not None and number == int(number) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True, kw_only=True, slots=True)
class GpuTelemetry:
    """One GPU's window: its reductions (``reduced``: metric key -> the value its declared reduction gave),
    what NVML could not say, and the processes seen on it."""

    index: int | None
    uuid: str | None
    rank: int | None = None
    samples: int = 0
    reduced: Mapping[str, Any] = field(default_factory=dict)
    """Metric key (``util_pct``, ``power_w``, ``clock_event_reasons``, ...) -> its reduction over the window;
    a metric never read is absent, not zero."""
    stats: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    clock_events: Mapping[str, int] = field(default_factory=dict)
    """Clock-event reason -> in how many samples it was set."""
    counters: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    unsupported: Mapping[str, str] = field(default_factory=dict)
    """Metric key -> why NVML does not support it on this GPU."""
    errors: Mapping[str, str] = field(default_factory=dict)
    """Metric key -> the NVML error reading it raised."""
    foreign_processes: tuple[Mapping[str, Any], ...] = ()
    """Compute processes on this GPU that were none of the run's ranks (pid, name, memory, when seen)."""
    process_checks: int = 0
    """How many times NVML listed this GPU's processes (0: never, so no foreign process could be seen)."""

    def value(self, key: str) -> float | None:
        """The reduction of metric ``key`` as a number; None where NVML gave none."""
        return _number(self.reduced.get(key))

    @classmethod
    def read(cls, data: Any) -> GpuTelemetry:
        data = _mapping(data)
        clock_events = {str(k): int(v) for k, v in _mapping(data.get("clock_events")).items() if _whole(v) is not None}
        return cls(index=_whole(data.get("index")), uuid=_text(data.get("uuid")), rank=_whole(data.get("rank")),
                   samples=_whole(data.get("samples")) or 0, reduced=dict(_mapping(data.get("reduced"))),
                   stats={str(k): _mapping(v) for k, v in _mapping(data.get("stats")).items()},
                   clock_events=clock_events,
                   counters={str(k): _mapping(v) for k, v in _mapping(data.get("counters")).items()},
                   unsupported={str(k): str(v) for k, v in _mapping(data.get("unsupported")).items()},
                   errors={str(k): str(v) for k, v in _mapping(data.get("errors")).items()},
                   foreign_processes=tuple(p for p in data.get("foreign_processes") or () if isinstance(p, dict)),
                   process_checks=_whole(data.get("process_checks")) or 0)


@dataclass(frozen=True, kw_only=True, slots=True)
class TelemetrySummary:
    """A run's telemetry: ``ok`` with one ``GpuTelemetry`` per sampled GPU, or why there is none."""

    status: str
    """``ok``; ``unavailable`` (no GPU, the run never reached its window, NVML failed) or ``disabled``."""
    reason: str | None = None
    period_s: float | None = None
    window_s: float | None = None
    """Seconds of the measured window the samples cover."""
    window_start: float | None = None
    window_end: float | None = None
    """The window's ends on the sampler's clock (time.time() of the launching process)."""
    window_samples: int | None = None
    gpus: tuple[GpuTelemetry, ...] = ()
    metrics: Mapping[str, Any] = field(default_factory=dict)
    """Metric key -> its timelines per GPU, as the report draws them."""

    @property
    def ok(self) -> bool:
        """Sampled, with at least one GPU: what every check that reads telemetry needs."""
        return self.status == "ok" and bool(self.gpus)

    def why_not(self, fallback: str) -> str:
        """Why there is no usable telemetry: the sampler's reason, else ``fallback``."""
        if self.status != "ok" and self.reason:
            return self.reason
        return "no GPU was sampled" if self.status == "ok" and not self.gpus else fallback

    def gpu(self, uuid: str | None) -> GpuTelemetry | None:
        return next((gpu for gpu in self.gpus if uuid and gpu.uuid == uuid), None)


def read_telemetry(data: Any) -> TelemetrySummary:
    """A run record's ``telemetry`` (the sampler's JSON) as a ``TelemetrySummary``; anything that is not one
    reads as telemetry not available (its reason then the caller's), never as an error."""
    if isinstance(data, TelemetrySummary):
        return data
    if not isinstance(data, dict):
        return TelemetrySummary(status="unavailable")
    window = _mapping(data.get("window"))
    gpus = tuple(GpuTelemetry.read(gpu) for gpu in data.get("gpus") or () if isinstance(gpu, dict))
    return TelemetrySummary(status=_text(data.get("status")) or "unavailable", reason=_text(data.get("reason")),
                            period_s=_number(data.get("period_s")), window_s=_number(window.get("seconds")),
                            window_start=_number(window.get("start")), window_end=_number(window.get("end")),
                            window_samples=_whole(window.get("samples")),
                            gpus=gpus,
                            metrics=_mapping(data.get("metrics")))
