"""XID events during the session: an NVML event set watched by a daemon thread, and what the common
XIDs mean.

An XID is the driver's report of a GPU error (NVIDIA's catalog: docs/references.md#xid-catalog).
The watcher registers every GPU for ``nvmlEventTypeXidCriticalError`` at session start and waits
on the set with a timeout (``nvmlEventSetWait_v2`` raises NVML_ERROR_TIMEOUT when nothing came),
so stopping it at session end takes at most one timeout. It runs in the pytest process: NVML
events need no CUDA context.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from harness.node.nvml import error_code, init_nvml, is_unsupported, nvml_text

XID_MEANINGS: dict[int, str] = {
    8: "GPU stopped processing (channel idle timeout)",
    13: "graphics engine exception (often an application fault)",
    31: "GPU memory page fault (often an application fault)",
    43: "GPU stopped processing (reset channel verification error)",
    45: "preemptive cleanup after a previous error",
    48: "double-bit ECC error (uncorrectable)",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapping recording failed",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
    121: "C2C link error",
    140: "unrecovered ECC error",
}
"""The XIDs a node under a benchmark is most likely to show (docs/references.md#xid-catalog)."""

WAIT_MS = 500
"""How long one wait on the event set lasts: the longest ``stop()`` waits for the thread."""


def xid_meaning(xid: int) -> str:
    return XID_MEANINGS.get(xid, "see NVIDIA's XID catalog (docs/references.md#xid-catalog)")


@dataclass(frozen=True, kw_only=True, slots=True)
class XidEvent:
    time: float
    """Unix time when the watcher received it, seconds."""
    gpu_index: int | None
    gpu_uuid: str | None
    xid: int

    @property
    def meaning(self) -> str:
        return xid_meaning(self.xid)

    def describe(self) -> str:
        when = time.strftime("%H:%M:%S", time.localtime(self.time))
        return f"XID {self.xid} ({self.meaning}) on GPU {self.gpu_index} ({self.gpu_uuid}) at {when}"

    def to_dict(self) -> dict[str, Any]:
        return {"time": self.time, "gpu_index": self.gpu_index, "gpu_uuid": self.gpu_uuid, "xid": self.xid,
                "meaning": self.meaning}


class XidWatcher:
    """Watches ``gpus`` (index, uuid) for XIDs from ``start()`` to ``stop()``.

    ``status`` says whether it watched: per GPU uuid, ``ok`` or why not (``unsupported: ...`` where
    the GPU cannot report XID events, ``error: ...`` otherwise). ``poll()`` is one wait, so tests
    drive it without a thread.
    """

    def __init__(self, gpus: Sequence[Any], nvml: Any = None, clock: Callable[[], float] = time.time,
                 wait_ms: int = WAIT_MS):
        self.gpus = list(gpus)
        self.clock = clock
        self.wait_ms = wait_ms
        self._nvml = nvml
        self._event_set: Any = None
        self._by_uuid: dict[str, Any] = {}
        """The GPUs registered, by UUID: an event's handle is a new ctypes object, equal to none we hold."""
        self.status: dict[str, str] = {}
        self.failure: str | None = None
        """Why nothing was watched at all (no NVML); None when the watcher ran."""
        self.events: list[XidEvent] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def open(self) -> bool:
        """NVML, the event set and every GPU's registration; False (with ``failure``) where none."""
        nv, self.failure = init_nvml(self._nvml)
        if nv is None:
            return False
        self._nvml = nv
        try:
            self._event_set = nv.nvmlEventSetCreate()
        except nv.NVMLError as err:
            self.failure = f"NVML cannot create an event set: {err}"
            self._shutdown()
            return False
        for gpu in self.gpus:
            self.status[gpu.uuid] = self._register(gpu)
        return True

    def _register(self, gpu: Any) -> str:
        nv = self._nvml
        try:
            handle = nv.nvmlDeviceGetHandleByUUID(gpu.uuid)
            nv.nvmlDeviceRegisterEvents(handle, nv.nvmlEventTypeXidCriticalError, self._event_set)
        except nv.NVMLError as err:
            return f"{'unsupported' if is_unsupported(nv, err) else 'error'}: {err}"
        self._by_uuid[gpu.uuid] = gpu
        return "ok"

    def start(self) -> XidWatcher:
        if self.open() and self._by_uuid:
            self._thread = threading.Thread(target=self._run, name="harness-xid", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.poll()

    def poll(self) -> XidEvent | None:
        """One wait of ``wait_ms``; the event it brought, if any."""
        nv = self._nvml
        try:
            data = nv.nvmlEventSetWait_v2(self._event_set, self.wait_ms)
        except nv.NVMLError as err:
            if error_code(err) != nv.NVML_ERROR_TIMEOUT:
                self.failure = f"waiting for XID events failed: {err}"
                self._stop.set()
            return None
        uuid = _uuid_of(nv, data.device)
        gpu = self._by_uuid.get(uuid) if uuid is not None else None
        event = XidEvent(time=self.clock(), gpu_index=gpu.index if gpu is not None else None, gpu_uuid=uuid,
                         xid=int(data.eventData))
        with self._lock:
            self.events.append(event)
        return event

    def events_between(self, start: float | None, end: float | None) -> list[XidEvent]:
        with self._lock:
            return [e for e in self.events if (start is None or e.time >= start) and (end is None or e.time <= end)]

    def stop(self) -> list[XidEvent]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.wait_ms / 1000.0 + 5.0)
            self._thread = None
        if self._event_set is not None:
            try:
                self._nvml.nvmlEventSetFree(self._event_set)
            except self._nvml.NVMLError:
                pass
            self._event_set = None
            self._shutdown()
        return list(self.events)

    def _shutdown(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except self._nvml.NVMLError:
            pass

    def to_dict(self) -> dict[str, Any]:
        return {"failure": self.failure, "status": dict(self.status), "events": [e.to_dict() for e in self.events]}


def _uuid_of(nvml: Any, handle: Any) -> str | None:
    try:
        return nvml_text(nvml.nvmlDeviceGetUUID(handle))
    except nvml.NVMLError:
        return None
