"""GPU telemetry of the measured window: a pynvml sampler beside the workers, and its reductions.

The sampler is a thread in the launcher process: NVML calls are cheap and need no CUDA context,
so the pytest process still never opens one. It follows the measured window from outside, by
watching the ``rank<R>.phase`` files the workers write: sampling starts when a rank enters
"measure" and stops when no rank is left in it (they move on to "gather"), so start-up, warmup
and the straggler probe never enter the numbers. Each GPU of the run is found by the UUID its
rank reports (by its index when there is no UUID), so "GPU 3" in a verdict is the GPU an
operator pulls.

Every metric declares how the window is reduced to one number per GPU (``METRICS`` in
harness/node/nvml.py): utilization and power by their mean, temperature and memory by their
maximum, clocks by their minimum, clock-event ("throttle") reasons by *any* (the bitmask decoded
into names), ECC and PCIe replay counters by their increase over the window (read when the window
opens and when it closes). The samples are also kept as timelines for the report, averaged into
fewer points when a window is long (a soak), so memory stays bounded; the reductions always use
every sample.

Where NVML is absent (a CPU run, no driver) or the sampler is switched off
(``HARNESS_TELEMETRY=0``), the summary says ``unavailable`` or ``disabled`` with the reason, and
the checks that need it are reported as not evaluated, never as passed (harness/kinds/ddp_scaling/checks.py).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

from harness.node.nvml import METRICS, Metric, decode_clock_event_reasons, init_nvml, is_unsupported, nvml_text
from harness.node.processes import compute_processes, descends_from, remember_foreign
from harness.rank import read_phases

TELEMETRY_ENV = "HARNESS_TELEMETRY"
"""Set to 0 / off / false to launch without the sampler (to measure what it costs)."""
DEFAULT_PERIOD_S = 0.1
PROCESS_PERIOD_S = 1.0
"""How often the GPUs' compute processes are listed during a window (a foreign one names a slow case's cause)."""
MAX_TIMELINE_POINTS = 240
"""Points per GPU and metric kept for the report; a longer window is averaged into this many."""


# --- timelines and per-metric statistics (pure) ----------------------------------------------


class Timeline:
    """(t, value) points, at most ``max_points``: when full, neighbours are averaged in pairs and
    later samples are averaged in buckets twice as long, so a 4-hour soak keeps its shape in
    bounded memory. A short window keeps every sample."""

    def __init__(self, max_points: int = MAX_TIMELINE_POINTS):
        if max_points < 2:
            raise ValueError(f"max_points must be >= 2, got {max_points}")
        self.max_points = max_points
        self.bucket = 1
        """Samples averaged into one point."""
        self._points: list[tuple[float, float]] = []
        self._pending: list[tuple[float, float]] = []

    def add(self, t: float, value: float) -> None:
        self._pending.append((t, value))
        if len(self._pending) < self.bucket:
            return
        self._points.append(_mean_point(self._pending))
        self._pending = []
        if len(self._points) > self.max_points:
            pairs = [self._points[i:i + 2] for i in range(0, len(self._points), 2)]
            self._points = [_mean_point(pair) for pair in pairs]
            self.bucket *= 2

    def points(self) -> list[list[float]]:
        shown = self._points + ([_mean_point(self._pending)] if self._pending else [])
        return [[round(t, 3), round(v, 3)] for t, v in shown]


def _mean_point(points: list[tuple[float, float]]) -> tuple[float, float]:
    return (sum(t for t, _ in points) / len(points), sum(v for _, v in points) / len(points))


@dataclass(slots=True)
class _Stat:
    count: int = 0
    total: float = 0.0
    low: float = float("inf")
    high: float = float("-inf")

    def add(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.low = min(self.low, value)
        self.high = max(self.high, value)

    def summary(self) -> dict[str, float]:
        return {"min": round(self.low, 3), "mean": round(self.total / self.count, 3), "max": round(self.high, 3)}


@dataclass(kw_only=True)
class GpuTrack:
    """Everything sampled from one GPU during the window."""

    index: int | None
    uuid: str | None
    rank: int
    handle: Any
    samples: int = 0
    stats: dict[str, _Stat] = field(default_factory=dict)
    timelines: dict[str, Timeline] = field(default_factory=dict)
    reason_mask: int = 0
    reason_samples: dict[str, int] = field(default_factory=dict)
    """Clock-event reason -> samples in which it was active."""
    counters_start: dict[str, int] = field(default_factory=dict)
    counters_end: dict[str, int] = field(default_factory=dict)
    unsupported: dict[str, str] = field(default_factory=dict)
    """Metric -> why NVML cannot report it on this GPU (asked once, then no more)."""
    errors: dict[str, str] = field(default_factory=dict)
    """Metric -> the last error of a read that failed (it is asked again next period)."""
    reads: dict[str, int] = field(default_factory=dict)
    """Metric -> successful reads."""
    foreign: dict[int, dict] = field(default_factory=dict)
    """pid -> a compute process on this GPU during the window that is neither a rank of the case nor
    started by this harness: pid, name, memory, first and last seen (seconds into the window)."""
    process_checks: int = 0
    """How many times the GPU's compute processes were listed."""

    def add_sample(self, t: float, metric: Metric, value: float) -> None:
        self.reads[metric.key] = self.reads.get(metric.key, 0) + 1
        if metric.reduction == "any":
            mask = int(value)
            self.reason_mask |= mask
            for name in decode_clock_event_reasons(mask):
                self.reason_samples[name] = self.reason_samples.get(name, 0) + 1
            return
        self.stats.setdefault(metric.key, _Stat()).add(float(value))
        if metric.timeline:
            self.timelines.setdefault(metric.key, Timeline()).add(t, float(value))

    def reduced(self) -> dict[str, Any]:
        """Each metric's declared reduction over the window; a metric never read is left out, not zero."""
        values: dict[str, Any] = {}
        for metric in METRICS:
            if metric.reduction == "any":
                if self.reads.get(metric.key):
                    values[metric.key] = decode_clock_event_reasons(self.reason_mask)
            elif metric.reduction == "delta":
                if metric.key in self.counters_start and metric.key in self.counters_end:
                    values[metric.key] = self.counters_end[metric.key] - self.counters_start[metric.key]
            elif metric.key in self.stats:
                values[metric.key] = self.stats[metric.key].summary()[metric.reduction]
        return values

    def summary(self) -> dict[str, Any]:
        return {
            "index": self.index, "uuid": self.uuid, "rank": self.rank, "samples": self.samples,
            "reduced": self.reduced(),
            "stats": {key: stat.summary() for key, stat in self.stats.items()},
            "clock_events": dict(self.reason_samples),
            "counters": {key: {"start": self.counters_start.get(key), "end": self.counters_end.get(key)}
                         for key in set(self.counters_start) | set(self.counters_end)},
            "unsupported": dict(self.unsupported),
            "errors": dict(self.errors),
            "foreign_processes": list(self.foreign.values()),
            "process_checks": self.process_checks,
        }


def gpu_label(index: Any, uuid: Any) -> str:
    """``GPU 3 (GPU-8d1c...)``: the index an operator sees in nvidia-smi and the UUID that cannot be misread."""
    where = f"GPU {index}" if index is not None else "GPU ?"
    return f"{where} ({uuid})" if uuid else where


# --- following the measured window (pure) ----------------------------------------------------


def window_state(phases: dict[int, dict], was_open: bool) -> Literal["before", "open", "closed"]:
    """Where the run is relative to its measured window, from the ranks' phase files.

    Open while any rank is in "measure" (they enter it together, after a barrier); closed once a
    window was open and no rank is left in it.
    """
    measuring = any(info.get("phase") == "measure" for info in phases.values())
    if measuring:
        return "open"
    return "closed" if was_open else "before"


def telemetry_enabled(environ: dict[str, str] | None = None) -> bool:
    value = (environ if environ is not None else os.environ).get(TELEMETRY_ENV, "1").strip().lower()
    return value not in ("0", "off", "false", "no")


def unavailable(reason: str, status: Literal["unavailable", "disabled"] = "unavailable",
                period_s: float | None = None) -> dict[str, Any]:
    """The summary of a run with no telemetry: the checks that need it say this reason."""
    return {"status": status, "reason": reason, "period_s": period_s}


# --- the sampler -----------------------------------------------------------------------------


class Sampler:
    """Samples every GPU of one launch during its measured window; ``stop()`` returns the summary.

    ``poll()`` is one period's work (read the phase files, open or close the window, sample), so
    tests can drive it with a fake clock and a fake NVML; ``start()`` runs it on a thread.
    """

    def __init__(self, run_dir: Path, *, period_s: float = DEFAULT_PERIOD_S, nvml: Any = None,
                 clock: Callable[[], float] = time.time, host: str | None = None):
        if not period_s > 0:
            raise ValueError(f"period_s must be > 0 seconds, got {period_s}")
        self.run_dir = Path(run_dir)
        self.period_s = period_s
        self.clock = clock
        self.host = host or socket.gethostname()
        self._nvml = nvml
        self._initialised = False
        self._failure: str | None = None
        self._state: Literal["before", "open", "closed"] = "before"
        self.gpus: list[GpuTrack] = []
        self.window_start: float | None = None
        self.window_end: float | None = None
        self.samples = 0
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._poll_seconds = 0.0
        self._rank_pids: set[int] = set()
        self._processes_listed_at: float | None = None

    # -- lifecycle

    def init(self) -> bool:
        """Load NVML; False (with the reason kept) where there is none."""
        nvml, self._failure = init_nvml(self._nvml)
        if nvml is None:
            return False
        self._nvml, self._initialised = nvml, True
        return True

    def start(self) -> "Sampler":
        if self.init():
            self._thread = threading.Thread(target=self._run, name="harness-telemetry", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        next_tick = self.clock()
        while not self._stop.is_set():
            self.poll()
            if self._state == "closed" or self._failure:
                return
            # A late period is skipped, not made up for: never sample faster than the period.
            next_tick = max(next_tick + self.period_s, self.clock())
            self._stop.wait(max(0.0, next_tick - self.clock()))

    def stop(self) -> dict[str, Any]:
        """End sampling (closing a window still open: the run died in it) and return the summary."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10.0)
        with self._lock:
            if self._state == "open":
                self._close(self.clock())
            if self._initialised:
                try:
                    self._nvml.nvmlShutdown()
                except Exception:  # noqa: BLE001 - shutting down must not cost the run its record
                    pass
                self._initialised = False
        return self.summary()

    # -- one period

    def poll(self, now: float | None = None) -> None:
        with self._lock:
            if self._failure or self._state == "closed" or not self._initialised:
                return
            started = time.perf_counter()
            now = self.clock() if now is None else now
            try:
                phases = self._local_phases()
                self._rank_pids.update(int(i["pid"]) for i in phases.values() if isinstance(i.get("pid"), int))
                state = window_state(phases, was_open=self._state == "open")
                if state == "open" and self._state == "before":
                    self._open(phases, now)  # reads the counters and takes the first sample
                elif self._state == "open":
                    if state == "closed":
                        self._close(now, phases)
                    else:
                        self._sample(now)
            except Exception as err:  # noqa: BLE001 - a sampler bug must never take the launch down
                self._failure = f"the sampler stopped: {type(err).__name__}: {err}"
            self._poll_seconds += time.perf_counter() - started

    def _local_phases(self) -> dict[int, dict]:
        return {rank: info for rank, info in read_phases(self.run_dir).items()
                if info.get("host") in (None, self.host)}

    def _open(self, phases: dict[int, dict], now: float) -> None:
        nv = self._nvml
        seen: set[str] = set()
        for rank, info in sorted(phases.items()):
            uuid, index = info.get("gpu_uuid"), info.get("gpu_index")
            if uuid is None and index is None:
                continue
            try:
                try:
                    if uuid:
                        handle = nv.nvmlDeviceGetHandleByUUID(uuid)
                    else:
                        assert index is not None  # a rank with neither was skipped above
                        handle = nv.nvmlDeviceGetHandleByIndex(int(index))
                except nv.NVMLError:
                    if not uuid or index is None:
                        raise
                    # torch and NVML spell a UUID alike today; should one not, the index still names the GPU.
                    handle = nv.nvmlDeviceGetHandleByIndex(int(index))
                    uuid = None
                if index is None:
                    index = int(nv.nvmlDeviceGetIndex(handle))
                if uuid is None:
                    uuid = nvml_text(nv.nvmlDeviceGetUUID(handle))
            except nv.NVMLError as err:
                self._failure = f"NVML cannot find {gpu_label(index, uuid)} of rank {rank}: {err}"
                return
            if uuid in seen:
                continue
            seen.add(uuid)
            self.gpus.append(GpuTrack(index=index, uuid=uuid, rank=rank, handle=handle))
        if not self.gpus:
            self._failure = "no rank reported a GPU (a CPU run has nothing to sample)"
            return
        self._state = "open"
        self.window_start = min((float(i["since"]) for i in phases.values()
                                 if i.get("phase") == "measure" and i.get("since") is not None), default=now)
        for gpu in self.gpus:
            self._read_counters(gpu, gpu.counters_start)
        self._sample(now)

    def _close(self, now: float, phases: dict[int, dict] | None = None) -> None:
        for gpu in self.gpus:
            self._read_counters(gpu, gpu.counters_end)
        ends = [float(i["since"]) for i in (phases or {}).values()
                if i.get("phase") not in ("measure", None) and i.get("since") is not None
                and self.window_start is not None and float(i["since"]) >= self.window_start]
        self.window_end = min(ends) if ends else now
        self._state = "closed"

    def _read_counters(self, gpu: GpuTrack, into: dict[str, int]) -> None:
        for metric in METRICS:
            if not metric.per_sample and metric.key not in gpu.unsupported:
                value = self._read(gpu, metric)
                if value is not None:
                    into[metric.key] = int(value)

    def _sample(self, now: float) -> None:
        t = now - (self.window_start if self.window_start is not None else now)
        for gpu in self.gpus:
            gpu.samples += 1
            for metric in METRICS:
                if metric.per_sample and metric.key not in gpu.unsupported:
                    value = self._read(gpu, metric)
                    if value is not None:
                        gpu.add_sample(max(t, 0.0), metric, value)
        self.samples += 1
        if self._processes_listed_at is None or now - self._processes_listed_at >= PROCESS_PERIOD_S:
            self._processes_listed_at = now
            for gpu in self.gpus:
                self._list_processes(gpu, max(t, 0.0))

    def _list_processes(self, gpu: GpuTrack, t: float) -> None:
        """Remember compute processes on ``gpu`` that are not ours: not a rank, not under this launcher."""
        if "processes" in gpu.unsupported:
            return
        nv = self._nvml
        try:
            processes = compute_processes(nv, gpu.handle)
        except nv.NVMLError as err:
            (gpu.unsupported if is_unsupported(nv, err) else gpu.errors)["processes"] = str(err)
            return
        gpu.process_checks += 1
        for pid, used in processes:
            if pid in self._rank_pids or descends_from(pid, os.getpid()):
                continue
            remember_foreign(gpu.foreign, pid, used, round(t, 3), gpu_index=gpu.index, gpu_uuid=gpu.uuid,
                             first_key="first_seen_s", last_key="last_seen_s")

    def _read(self, gpu: GpuTrack, metric: Metric) -> float | None:
        nv = self._nvml
        try:
            return metric.read(nv, gpu.handle)
        except nv.NVMLError as err:
            if is_unsupported(nv, err):
                gpu.unsupported[metric.key] = str(err)
            else:
                gpu.errors[metric.key] = str(err)
            return None

    # -- the result

    def summary(self) -> dict[str, Any]:
        if self._failure and not self.samples:
            return unavailable(self._failure, period_s=self.period_s)
        if self._state == "before":
            return unavailable("the run never reached its measured window", period_s=self.period_s)
        window_s = (self.window_end or self.clock()) - (self.window_start or 0.0)
        metrics = {}
        for metric in METRICS:
            if not metric.timeline:
                continue
            per_gpu = {str(gpu.index): gpu.timelines[metric.key].points()
                       for gpu in self.gpus if metric.key in gpu.timelines}
            if per_gpu:
                metrics[metric.key] = {"label": metric.label, "unit": metric.unit, "reduction": metric.reduction,
                                       "per_gpu": per_gpu}
        return {
            "status": "ok",
            "reason": self._failure,
            "period_s": self.period_s,
            "window": {"start": self.window_start, "end": self.window_end, "seconds": round(window_s, 3),
                       "samples": self.samples},
            "sampler_cpu_s": round(self._poll_seconds, 4),
            "reductions": {metric.key: metric.reduction for metric in METRICS},
            "gpus": [gpu.summary() for gpu in self.gpus],
            "metrics": metrics,
        }


# --- what a launch uses ----------------------------------------------------------------------


class _NoSampler:
    """Stands in for the sampler where there is nothing to sample; its summary says why."""

    def __init__(self, summary: dict[str, Any]):
        self._summary = summary

    def start(self) -> "_NoSampler":
        return self

    def stop(self) -> dict[str, Any]:
        return self._summary


def sampler_for(device: str, run_dir: Path, *, enabled: bool = True, period_s: float = DEFAULT_PERIOD_S,
                nvml: Any = None) -> Sampler | _NoSampler:
    """The sampler of one launch: a real one on CUDA, a stand-in saying why not otherwise."""
    if not enabled or not telemetry_enabled():
        why = (f"GPU telemetry was switched off ({TELEMETRY_ENV}={os.environ.get(TELEMETRY_ENV)})"
               if not telemetry_enabled() else "GPU telemetry was switched off for this launch")
        return _NoSampler(unavailable(why, status="disabled", period_s=period_s))
    if device != "cuda":
        return _NoSampler(unavailable("a CPU run (gloo) has no GPU to sample", period_s=period_s))
    return Sampler(run_dir, period_s=period_s, nvml=nvml)
