"""Throttling and foreign processes on another node of a multi-node session, over the session.

The driver's own GPUs are judged per case, by the telemetry of each measured window
(harness/kinds/ddp_scaling/checks.py: ``throttling``, ``foreign_processes``). A GPU of another node has no
sampler; the probe there reads it once a second for the whole session (harness/node/load_watch.py),
and its GPU-state test carries the same two rules under the same keys:

* ``throttling`` fails on any fault reason (heat, a hardware slowdown, a power brake) while a process
  of the session held the GPU. Where NVML never showed a process of the session on it (it cannot see
  that node's processes, or no case ran there), every sample is judged: a GPU slowing itself for heat
  or a hardware signal is not healthy, loaded or not.
* ``foreign_processes`` fails on any compute process there that is not the session's. It is not
  evaluated, saying why, where NVML listed no process at all on the GPU: it then cannot tell.

A node the probe could not read fails both, naming the node (an unread node is never signed off).
Pure: the probe's record in, checks out; the notes name the node, the GPU and, where a case's
measured window overlapped a fault, the case.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

from harness.results.check import Check
from harness.results.location import Location
from harness.results.telemetry_summary import read_telemetry

THROTTLE_SOURCE = ("harness rule: a healthy GPU never slows itself for heat or a hardware signal (read on that node "
                   "once a second by the GPU-state probe)")
FOREIGN_SOURCE = ("harness rule: a GPU under acceptance runs the session's ranks and nothing else (listed on that "
                  "node once a second by the GPU-state probe)")


def _check(key: str, name: str, passed: bool | None, note: str, source: str,
           locations: tuple[Location, ...] = ()) -> Check:
    return Check(key=key, name=name, kind="health", measured=None, bound=None, unit="", comparison="==",
                 passed=passed, note=note, source=source, locations=locations)


def _clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at))


def _cases_during(first: float, last: float, windows: Sequence[dict]) -> list[str]:
    """The cases whose measured window overlaps [first, last]."""
    return [str(w["case"]) for w in windows
            if isinstance(w.get("start"), (int, float)) and isinstance(w.get("end"), (int, float))
            and w["start"] <= last and first <= w["end"]]


def _interval(interval: dict, windows: Sequence[dict]) -> str:
    first, last = float(interval["first"]), float(interval["last"])
    span = _clock(first) if last - first < 0.5 else f"{_clock(first)}-{_clock(last)}"
    cases = _cases_during(first, last, windows)
    during = f", during {', '.join(cases)}" if cases else ""
    return f"{' + '.join(interval.get('reasons') or ['fault'])} at {span}{during}"


def load_throttling_check(label: str, load: dict | None, missing_why: str, windows: Sequence[dict] = (),
                          at: Location | None = None) -> Check:
    """``throttling`` of one GPU of another node, from its probe's load record (None: there is none)."""
    key, name = "throttling", "no thermal / hardware-slowdown throttling in the session"
    if load is None:
        return _check(key, name, False, f"{label}: not watched: {missing_why}", THROTTLE_SOURCE)
    if not load.get("reason_reads"):
        why = (load.get("unsupported") or {}).get("clock_event_reasons") or (load.get("errors") or {}).get(
            "clock_event_reasons") or "never read"
        return _check(key, name, None, f"{label}: NVML reported no clock-event reasons ({why})", THROTTLE_SOURCE)
    loaded = int(load.get("loaded_samples") or 0)
    judged = [i for i in load.get("fault_intervals", []) if i.get("loaded") or not loaded]
    counts = load.get("reasons_loaded") if loaded else load.get("reasons_all")
    scope = (f"{loaded} of {load.get('samples')} samples under the session's load" if loaded else
             f"all {load.get('samples')} samples (NVML showed no process of the session on this GPU)")
    if judged:
        more = int(load.get("fault_runs") or 0) - len(load.get("fault_intervals", []))
        shown = "; ".join(_interval(i, windows) for i in judged)
        tally = ", ".join(f"{reason} in {count}" for reason, count in sorted((counts or {}).items()))
        return _check(key, name, False, f"{label}: {shown}{f' (and {more} more)' if more > 0 else ''}; "
                      f"over {scope}: {tally}", THROTTLE_SOURCE, (at,) if at is not None else ())
    info = ", ".join(f"{reason} in {count}" for reason, count in sorted((counts or {}).items()))
    return _check(key, name, True, f"{label}: none over {scope}" + (f" (not faults: {info})" if info else ""),
                  THROTTLE_SOURCE)


def load_foreign_check(label: str, load: dict | None, missing_why: str, windows: Sequence[dict] = (),
                       at: Location | None = None) -> Check:
    """``foreign_processes`` of one GPU of another node over the session; ``at``: the GPU, to place each
    foreign process on (its pid and name)."""
    key, name = "foreign_processes", "no foreign process on the GPU in the session"
    if load is None:
        return _check(key, name, False, f"{label}: not watched: {missing_why}", FOREIGN_SOURCE)
    found = load.get("foreign_processes") or []
    if found:
        return _check(key, name, False, f"{label}: " + "; ".join(_describe(p, windows) for p in found),
                      FOREIGN_SOURCE, _on(at, found))
    if not load.get("process_checks"):
        why = (load.get("unsupported") or {}).get("processes") or (load.get("errors") or {}).get(
            "processes") or "never listed"
        return _check(key, name, None, f"{label}: NVML listed no processes ({why})", FOREIGN_SOURCE)
    if not load.get("loaded_samples"):
        return _check(key, name, None, f"{label}: NVML listed no process on this GPU in {load.get('process_checks')} "
                      "looks, not even the session's: either no case ran here or NVML cannot see this node's "
                      "processes, so a foreign one could not be seen either", FOREIGN_SOURCE)
    return _check(key, name, True, f"{label}: only the session's processes in {load.get('process_checks')} looks",
                  FOREIGN_SOURCE)


def _on(at: Location | None, processes: list[dict]) -> tuple[Location, ...]:
    if at is None:
        return ()
    return tuple(Location(node=at.node, gpu_index=at.gpu_index, gpu_uuid=at.gpu_uuid, pid=p["pid"],
                          detail=str(p["name"]) if p.get("name") else None)
                 for p in processes if isinstance(p.get("pid"), int) and p["pid"] >= 0) or (at,)


def _describe(process: dict, windows: Sequence[dict]) -> str:
    memory = process.get("used_memory_mib")
    shown = f", {memory:,.0f} MiB" if isinstance(memory, (int, float)) else ""
    first, last = process.get("first_seen"), process.get("last_seen")
    when = ""
    if isinstance(first, (int, float)) and isinstance(last, (int, float)):
        cases = _cases_during(float(first), float(last), windows)
        span = _clock(first) if _clock(first) == _clock(last) else f"{_clock(first)}-{_clock(last)}"
        when = f", seen {span}" + (
            f" during {', '.join(cases)}" if cases else "")
    return f"pid {process.get('pid')} ({process.get('name')}{shown}{when})"


def case_windows(results: Sequence[Any]) -> list[dict]:
    """``{"case", "start", "end"}`` (unix times) of each result's measured window, from its telemetry."""
    windows = []
    for result in results:
        telemetry = read_telemetry(getattr(getattr(result, "record", None), "telemetry", None))
        if telemetry.window_start is not None and telemetry.window_end is not None:
            windows.append({"case": getattr(result, "context", "?"), "start": telemetry.window_start,
                            "end": telemetry.window_end})
    return windows
