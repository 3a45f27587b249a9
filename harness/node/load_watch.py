"""What the GPUs of another node of a multi-node session went through while the session's cases ran
on them: clock-event ("throttle") reasons and processes that are not the session's.

On the driver's node the telemetry sampler (harness/telemetry.py) follows each case's measured window
and its verdict judges throttling and foreign processes per case. The other nodes have no sampler:
the GPU-state probe (harness/node/gpu_state_probe.py) runs there for the whole session, so it
carries this watcher, which reads every GPU once a period:

* the compute processes: one is the session's when its environment carries the session's owner tag
  (``HARNESS_OWNER``, harness/launch/cleanup.py: every launch of a session carries its pytest
  process's pid and start time, and srun passes it to every node); any other one (another job,
  another user's, an untagged one) is foreign, recorded with its name, memory and when it was seen;
* the clock-event reasons, counted apart in the samples where a process of the session held the GPU
  ("under load"), the remote counterpart of a case's window: the check judges those, and every sample
  only where NVML showed no process of the session at all (harness/checks/node_load.py); and, under
  load with "applications clocks setting" active, the lowest SM clock (the ``clocks`` check's sign of
  locked clocks, as the driver's case windows give it).

Memory stays bounded over a long soak: counts, first/last times and at most ``MAX_INTERVALS`` fault
intervals per GPU. Pure apart from NVML and /proc; ``poll()`` is one period, so tests drive it with a
fake NVML and a fake owner lookup.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from harness.node.process_tags import process_owner, process_start_time
from harness.node.nvml import (CLOCK_SETTING_REASON, FAULT_REASONS, METRICS_BY_KEY, decode_clock_event_reasons,
                               init_nvml, is_unsupported)
from harness.node.processes import compute_processes, remember_foreign

PERIOD_S = 1.0
"""How often every GPU is read: a case's window lasts tens of seconds, so it is sampled many times, and
one NVML call per GPU per second costs the node nothing measurable."""
MAX_INTERVALS = 50
"""Fault intervals kept per GPU (the first ones; later ones are counted, not kept)."""


@dataclass(kw_only=True)
class GpuLoad:
    """What one GPU showed over the session."""

    index: int
    uuid: str
    handle: Any = None
    samples: int = 0
    loaded_samples: int = 0
    """Samples in which a process of the session held this GPU."""
    reasons_loaded: dict[str, int] = field(default_factory=dict)
    """Clock-event reason -> loaded samples in which it was active."""
    reasons_all: dict[str, int] = field(default_factory=dict)
    """Clock-event reason -> samples in which it was active, loaded or not."""
    fault_intervals: list[dict] = field(default_factory=list)
    """Each run of samples with a fault reason active: ``first``/``last`` (unix times), ``loaded`` (whether a
    process of the session held the GPU meanwhile), ``reasons`` (the fault reasons of its first sample)."""
    fault_runs: int = 0
    """Runs of faulty samples, counting those past MAX_INTERVALS."""
    clock_setting_min_sm_mhz: float | None = None
    """The lowest SM clock in a loaded sample with "applications clocks setting" active: locked clocks
    (``nvidia-smi -lgc``) look so to NVML (harness/kinds/gpu_state/checks.py ``clocks``)."""
    reason_reads: int = 0
    process_checks: int = 0
    foreign: dict[int, dict] = field(default_factory=dict)
    """pid -> name, memory (MiB), first and last seen (unix time)."""
    unsupported: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    _last: tuple[bool, bool] = (False, False)
    """(faulty, loaded) of the previous sample: a change starts a new interval."""

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "uuid": self.uuid, "samples": self.samples, "loaded_samples": self.loaded_samples,
                "reasons_loaded": dict(self.reasons_loaded), "reasons_all": dict(self.reasons_all),
                "fault_intervals": self.fault_intervals,
                "fault_runs": self.fault_runs, "clock_setting_min_sm_mhz": self.clock_setting_min_sm_mhz,
                "reason_reads": self.reason_reads,
                "process_checks": self.process_checks, "foreign_processes": list(self.foreign.values()),
                "unsupported": dict(self.unsupported), "errors": dict(self.errors)}


class LoadWatch:
    """Reads ``gpus`` (index, uuid) every ``period_s`` from ``start()`` to ``stop()``; ``to_dict()`` is the
    record the probe writes into its end snapshot."""

    def __init__(self, gpus: Sequence[Any], owner: str | None, nvml: Any = None, *, period_s: float = PERIOD_S,
                 clock: Callable[[], float] = time.time,
                 start_time_of: Callable[[int], str | None] = process_start_time,
                 owner_of: Callable[[int], str | None] = process_owner):
        self.owner = owner
        """The session's owner tag; None: the probe was started without one, so no process can be told
        the session's (every one is then foreign, and nothing counts as under load)."""
        self.period_s = period_s
        self.clock = clock
        self._start_time_of = start_time_of
        self._owner_of = owner_of
        self._nvml = nvml
        self.gpus = [GpuLoad(index=int(gpu.index), uuid=str(gpu.uuid)) for gpu in gpus]
        self.failure: str | None = None
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self._ours: dict[tuple[int, str], bool] = {}
        self._unseen: dict[int, int] = {}
        """pid -> consecutive samples in which NVML listed it but /proc did not show it."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._initialised = False

    def open(self) -> bool:
        nv, self.failure = init_nvml(self._nvml)
        if nv is None:
            return False
        self._nvml, self._initialised = nv, True
        for gpu in self.gpus:
            try:
                gpu.handle = nv.nvmlDeviceGetHandleByUUID(gpu.uuid)
            except nv.NVMLError as err:
                gpu.errors["handle"] = str(err)
        self.started_at = self.clock()
        return True

    def start(self) -> "LoadWatch":
        if self.open():
            self._thread = threading.Thread(target=self._run, name="harness-load-watch", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            started = self.clock()
            self.poll(started)
            self._stop.wait(max(0.0, self.period_s - (self.clock() - started)))

    def stop(self) -> "LoadWatch":
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10.0)
        if self._initialised:
            self.ended_at = self.clock()
            try:
                self._nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001 - the end snapshot must still be written
                pass
            self._initialised = False
        return self

    # -- one period

    def poll(self, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        for gpu in self.gpus:
            if gpu.handle is None:
                continue
            try:
                self._sample(gpu, now)
            except Exception as err:  # noqa: BLE001 - one bad read must not end the watch of the others
                gpu.errors["sample"] = f"{type(err).__name__}: {err}"

    def _sample(self, gpu: GpuLoad, now: float) -> None:
        gpu.samples += 1
        loaded = self._list_processes(gpu, now)
        mask = self._read_reasons(gpu)
        gpu.loaded_samples += loaded
        names = decode_clock_event_reasons(mask) if mask is not None else []
        for name in names:
            gpu.reasons_all[name] = gpu.reasons_all.get(name, 0) + 1
            if loaded:
                gpu.reasons_loaded[name] = gpu.reasons_loaded.get(name, 0) + 1
        if loaded and CLOCK_SETTING_REASON in names:
            sm_mhz = self._read_sm_clock(gpu)
            if sm_mhz is not None and (gpu.clock_setting_min_sm_mhz is None or sm_mhz < gpu.clock_setting_min_sm_mhz):
                gpu.clock_setting_min_sm_mhz = sm_mhz
        faulty = any(name in FAULT_REASONS for name in names)
        state = (faulty, loaded)
        if faulty and state == gpu._last and gpu.fault_runs <= MAX_INTERVALS:
            gpu.fault_intervals[-1]["last"] = now
        elif faulty and state != gpu._last:
            gpu.fault_runs += 1
            if gpu.fault_runs <= MAX_INTERVALS:
                gpu.fault_intervals.append({"first": now, "last": now, "loaded": loaded,
                                            "reasons": [n for n in names if n in FAULT_REASONS]})
        gpu._last = state

    def _read_sm_clock(self, gpu: GpuLoad) -> float | None:
        nv = self._nvml
        try:
            return float(METRICS_BY_KEY["sm_clock_mhz"].read(nv, gpu.handle))
        except nv.NVMLError as err:
            gpu.errors["sm_clock_mhz"] = str(err)
            return None

    def _read_reasons(self, gpu: GpuLoad) -> int | None:
        if "clock_event_reasons" in gpu.unsupported:
            return None
        nv = self._nvml
        try:
            mask = int(METRICS_BY_KEY["clock_event_reasons"].read(nv, gpu.handle))
        except nv.NVMLError as err:
            (gpu.unsupported if is_unsupported(nv, err) else gpu.errors)["clock_event_reasons"] = str(err)
            return None
        gpu.reason_reads += 1
        return mask

    def _list_processes(self, gpu: GpuLoad, now: float) -> bool:
        """Record foreign processes on ``gpu``; whether a process of the session holds it."""
        if "processes" in gpu.unsupported:
            return False
        nv = self._nvml
        try:
            processes = compute_processes(nv, gpu.handle)
        except nv.NVMLError as err:
            (gpu.unsupported if is_unsupported(nv, err) else gpu.errors)["processes"] = str(err)
            return False
        gpu.process_checks += 1
        loaded = False
        for pid, used in processes:
            verdict = self._classify(pid)
            if verdict == "ours":
                loaded = True
            if verdict != "foreign":
                continue
            remember_foreign(gpu.foreign, pid, used, now, gpu_index=gpu.index, gpu_uuid=gpu.uuid,
                             first_key="first_seen", last_key="last_seen")
        return loaded

    def _classify(self, pid: int) -> str:
        """``ours``, ``foreign``, or ``gone`` (not in /proc: it ended between NVML's list and this look)."""
        start = self._start_time_of(pid)
        if start is None:
            # A rank ending as a case ends is listed once more and then gone: not foreign. A pid NVML
            # keeps listing that /proc never shows lives in another PID namespace: foreign, as on the
            # driver's node (harness/telemetry.py).
            self._unseen[pid] = self._unseen.get(pid, 0) + 1
            return "foreign" if self._unseen[pid] >= 2 else "gone"
        self._unseen.pop(pid, None)
        # The environment is read once per process (pid and start time: a pid may be reused): it never changes,
        # and /proc/<pid>/environ costs more than the start time asked every period.
        key = (pid, start)
        if key not in self._ours:
            self._ours[key] = self.owner is not None and self._owner_of(pid) == self.owner
        return "ours" if self._ours[key] else "foreign"

    # -- the record

    def to_dict(self) -> dict[str, Any]:
        return {"owner": self.owner, "period_s": self.period_s, "failure": self.failure,
                "started_at": self.started_at, "ended_at": self.ended_at,
                "gpus": {gpu.uuid: gpu.to_dict() for gpu in self.gpus}}
