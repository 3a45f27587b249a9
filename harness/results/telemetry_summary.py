"""The GPU telemetry of one measured window, as every stage reads it: a type, not a dict of string keys.

The sampler (harness/telemetry.py) writes the summary as JSON into each run record; the checks, the
GPU-state test, the interconnect's PCIe reading, calibration's health bounds and the fleet read it back
through ``read_telemetry`` here, once, tolerantly (a record written by an older harness, or damaged, reads
as telemetry that is not available, saying why), and from then on by attribute. On the ground floor: it
imports nothing of the harness above ``results``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from harness.results.reading import as_dict, as_int, as_label, as_number, as_text


def _name(value: Any) -> str | None:
    """A UUID or a status as written: a string, cleaned to one short line (results/reading.py); else none."""
    return as_label(value) if isinstance(value, str) else None


def _reason(value: Any) -> str | None:
    """Why there is no telemetry, as the sampler wrote it: a sentence, cleaned; anything else is none."""
    return (as_text(value) or None) if isinstance(value, str) else None


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
        return as_number(self.reduced.get(key))

    @classmethod
    def read(cls, data: Any) -> GpuTelemetry:
        data = as_dict(data)
        clock_events = {str(k): int(v) for k, v in as_dict(data.get("clock_events")).items() if as_int(v) is not None}
        return cls(index=as_int(data.get("index")), uuid=_name(data.get("uuid")), rank=as_int(data.get("rank")),
                   samples=as_int(data.get("samples")) or 0, reduced=dict(as_dict(data.get("reduced"))),
                   stats={str(k): as_dict(v) for k, v in as_dict(data.get("stats")).items()},
                   clock_events=clock_events,
                   counters={str(k): as_dict(v) for k, v in as_dict(data.get("counters")).items()},
                   unsupported={str(k): str(v) for k, v in as_dict(data.get("unsupported")).items()},
                   errors={str(k): str(v) for k, v in as_dict(data.get("errors")).items()},
                   foreign_processes=tuple(p for p in data.get("foreign_processes") or () if isinstance(p, dict)),
                   process_checks=as_int(data.get("process_checks")) or 0)


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


def read_telemetry(data: Any) -> TelemetrySummary:
    """A run record's ``telemetry`` (the sampler's JSON) as a ``TelemetrySummary``; anything that is not one
    reads as telemetry not available (its reason then the caller's), never as an error."""
    if isinstance(data, TelemetrySummary):
        return data
    if not isinstance(data, dict):
        return TelemetrySummary(status="unavailable")
    window = as_dict(data.get("window"))
    gpus = tuple(GpuTelemetry.read(gpu) for gpu in data.get("gpus") or () if isinstance(gpu, dict))
    return TelemetrySummary(status=_name(data.get("status")) or "unavailable", reason=_reason(data.get("reason")),
                            period_s=as_number(data.get("period_s")), window_s=as_number(window.get("seconds")),
                            window_start=as_number(window.get("start")), window_end=as_number(window.get("end")),
                            window_samples=as_int(window.get("samples")), gpus=gpus,
                            metrics=as_dict(data.get("metrics")))
