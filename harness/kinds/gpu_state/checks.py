"""One GPU's state against the profile's ``[gpu_state]`` (harness/kinds/gpu_state/bounds.py): power cap, clocks,
ECC mode, retired pages, remapped rows, uncorrectable ECC, XIDs and NVLink errors. Pure: snapshots in
(harness/node/gpu_state.py, as dicts, gathered as harness/checks/gpu_state.py ``GpuStateInput``), checks out; each
failing note names the GPU (index and UUID) and the cause.

A query NVML does not support on this GPU fails its check unless the profile lists the check in
``allow_unsupported`` (then it is not evaluated, saying so): a state the harness cannot read cannot
be signed off, and the profile, written from a probe of healthy hardware of this kind, is what
says a query is absent by design (retired pages on Hopper, which remaps rows instead). A read that
failed for any other reason fails its check, naming NVML's error. A profile without ``[gpu_state]``
leaves those cases not evaluated, saying the section is missing.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Sequence

from harness.checks.gpu_state import APPLICATIONS_CLOCKS_REASON, GpuStateInput
from harness.checks.node_load import load_foreign_check, load_throttling_check
from harness.kinds.gpu_state.bounds import GpuStateBounds
from harness.node.gpu_state import Reading, value
from harness.results.check import Check
from harness.results.location import Location

SOURCE_RULE = "harness rule (docs/gpu_state.md): a healthy GPU runs at its default limits with nothing pending"


def _check(key: str, name: str, passed: bool | None, note: str, *, source: str, measured: float | None = None,
           bound: float | None = None, unit: str = "", comparison: str = "==",
           locations: tuple[Location, ...] = ()) -> Check:
    return Check(key=key, name=name, kind="health", measured=measured, bound=bound, unit=unit,
                 comparison=comparison, passed=passed, note=note, source=source,  # type: ignore[arg-type]
                 locations=locations)


def _source(bounds: GpuStateBounds | None) -> str:
    return f"{SOURCE_RULE}; [gpu_state]: {bounds.source}" if bounds is not None else SOURCE_RULE


def _readings(snapshot: dict | None, name: str, missing_why: str = "no snapshot of this GPU") -> Reading:
    if snapshot is None:
        return {"status": "error", "why": missing_why}
    return snapshot.get("readings", {}).get(name) or {"status": "error", "why": f"{name} was not read"}


def unreadable(key: str, name: str, gpu: GpuStateInput, what: str, reading: Reading,
               bounds: GpuStateBounds | None) -> Check:
    """The check of a query that gave no value: allowed by the profile, not evaluated; else FAIL."""
    why = reading.get("why", "no value")
    source = _source(bounds)
    if reading.get("status") != "unsupported":
        return _check(key, name, False, f"{gpu.label}: NVML could not read {what}: {why}", source=source)
    if bounds is None:
        return _check(key, name, None, f"{gpu.label}: NVML does not support {what} ({why}); the profile has no "
                      "[gpu_state] section to say whether that is allowed", source=source)
    if key in bounds.allow_unsupported:
        return _check(key, name, None, f"{gpu.label}: NVML does not support {what} ({why}); allowed by "
                      f"[gpu_state] allow_unsupported", source=source)
    return _check(key, name, False, f"{gpu.label}: NVML does not support {what} ({why}) and [gpu_state] does not "
                  f"allow that, so this state cannot be signed off. If this GPU kind truly lacks the query, add "
                  f"\"{key}\" to allow_unsupported, citing a probe of healthy hardware", source=source)


def _both(gpu: GpuStateInput, name: str) -> list[tuple[str, Reading]]:
    return [("session start", _readings(gpu.start, name, gpu.missing_why)),
            ("session end", _readings(gpu.end, name, gpu.missing_why))]


def _first_unread(pairs: Sequence[tuple[str, Reading]]) -> Reading | None:
    return next((reading for _, reading in pairs if reading.get("status") != "ok"), None)


def _read_both(gpu: GpuStateInput, reading: str, key: str, name: str, what: str,
               bounds: GpuStateBounds | None) -> tuple[list[tuple[str, Reading]], Check | None]:
    """Both snapshots' readings of ``reading``, and the check to return instead where one has no value."""
    pairs = _both(gpu, reading)
    missing = _first_unread(pairs)
    return pairs, unreadable(key, name, gpu, what, missing, bounds) if missing is not None else None


def power_limit_check(gpu: GpuStateInput, bounds: GpuStateBounds | None) -> Check:
    """The enforced power limit below the GPU's default limit is a capped GPU."""
    key, name = "power_limit", "enforced power limit at its default"
    enforced, default = _both(gpu, "enforced_power_limit_w"), _both(gpu, "default_power_limit_w")
    missing = _first_unread([*enforced, *default])
    if missing is not None:
        return unreadable(key, name, gpu, "the enforced or default power limit", missing, bounds)
    default_w = min(float(value(r)) for _, r in default)
    capped = [f"{gpu.label}: enforced power limit {value(r):,.0f} W < default {default_w:,.0f} W at {when}"
              for when, r in enforced if float(value(r)) < default_w]
    lowest = min(float(value(r)) for _, r in enforced)
    return _check(key, name, not capped, "; ".join(capped) or f"{gpu.label}: {lowest:,.0f} W", source=_source(bounds),
                  measured=lowest, bound=default_w, unit="W", comparison=">=")


def clocks_check(gpu: GpuStateInput, bounds: GpuStateBounds | None) -> Check:
    """Applications clocks below their defaults, a negative GPC clock offset, or a clock setting that held
    the GPU back under load (what locked clocks look like to NVML) is a capped GPU."""
    key, name = "clocks", "clocks not set below their defaults"
    low: list[str] = []
    shown: list[str] = []
    for domain in ("sm", "mem"):
        pairs = [*_both(gpu, f"app_clock_{domain}_mhz"), *_both(gpu, f"default_app_clock_{domain}_mhz")]
        missing = _first_unread(pairs)
        if missing is not None:
            return unreadable(key, name, gpu, f"the {domain.upper()} applications clocks", missing, bounds)
        default = min(int(value(r)) for _, r in _both(gpu, f"default_app_clock_{domain}_mhz"))
        most = value(_readings(gpu.end, f"max_clock_{domain}_mhz"))
        for when, reading in _both(gpu, f"app_clock_{domain}_mhz"):
            if int(value(reading)) < default:
                low.append(f"{domain.upper()} applications clock {value(reading)} MHz < default {default} MHz "
                           f"(max {most if most is not None else '?'} MHz) at {when}")
        shown.append(f"{domain.upper()} {value(_readings(gpu.end, f'app_clock_{domain}_mhz'))}/{default} MHz")
    for when, reading in _both(gpu, "gpc_clock_offset_mhz"):
        offset = value(reading)
        if offset is not None and int(offset) < 0:
            low.append(f"GPC clock offset {offset} MHz at {when}")
    low += _held_low(gpu, min(int(value(r)) for _, r in _both(gpu, "default_app_clock_sm_mhz")))
    if low:
        return _check(key, name, False, f"{gpu.label}: " + "; ".join(low), source=_source(bounds))
    return _check(key, name, True, f"{gpu.label}: applications/default " + ", ".join(shown), source=_source(bounds))


def _held_low(gpu: GpuStateInput, default_sm_mhz: int) -> list[str]:
    """Windows where a clock setting held the SM clock below its default applications clock: what
    locked clocks (``nvidia-smi -lgc``) look like to NVML, which has no getter for them. A GPU running
    at its default applications clock with the reason set (V100-style defaults below boost) is healthy."""
    return [f"\"{APPLICATIONS_CLOCKS_REASON}\" held the SM clock at {w['min_sm_clock_mhz']:,.0f} MHz < default "
            f"{default_sm_mhz} MHz under load in {w['where']}" for w in gpu.clock_setting_windows
            if w.get("min_sm_clock_mhz") is not None and w["min_sm_clock_mhz"] < default_sm_mhz]


def ecc_mode_check(gpu: GpuStateInput, bounds: GpuStateBounds | None) -> Check:
    key, name = "ecc_mode", "ECC enabled"
    pairs, unread = _read_both(gpu, "ecc_mode", key, name, "the ECC mode", bounds)
    if unread is not None:
        return unread
    modes = [(when, value(r)) for when, r in pairs]
    words = {1: "on", 0: "off"}
    shown = "; ".join(f"{when}: current {words.get(m['current'], m['current'])}, pending "
                      f"{words.get(m['pending'], m['pending'])}" for when, m in modes)
    changing = any(m["current"] != m["pending"] for _, m in modes)
    note = f"{gpu.label}: {shown}" + (" (pending differs: it takes effect at the next GPU reset)" if changing else "")
    if bounds is None:
        return _check(key, name, None, f"{note}; the profile has no [gpu_state] require_ecc", source=SOURCE_RULE)
    off = any(m["current"] != 1 for _, m in modes)
    return _check(key, name, not (bounds.require_ecc and off),
                  ("ECC disabled, the profile requires it: " if bounds.require_ecc and off else "") + note,
                  source=_source(bounds))


def retired_pages_check(gpu: GpuStateInput, bounds: GpuStateBounds | None) -> Check:
    key, name = "retired_pages", "no page retirement pending"
    pending, unread = _read_both(gpu, "retired_pages_pending", key, name, "retired pages", bounds)
    if unread is not None:
        return unread
    counts = ", ".join(f"{_shown(value(_readings(gpu.end, f'retired_pages_{c}')))} retired for {c.upper()}"
                       for c in ("dbe", "sbe"))
    waiting = [when for when, r in pending if int(value(r)) != 0]
    if waiting:
        return _check(key, name, False, f"{gpu.label}: page retirement pending at {', '.join(waiting)} (a GPU "
                      f"reset retires them; {counts})", source=_source(bounds))
    return _check(key, name, True, f"{gpu.label}: {counts}", source=_source(bounds))


def _shown(count: Any) -> str:
    return "?" if count is None else str(count)


def remapped_rows_check(gpu: GpuStateInput, bounds: GpuStateBounds | None) -> Check:
    key, name = "remapped_rows", "no row remapping pending or failed"
    pairs, unread = _read_both(gpu, "remapped_rows", key, name, "remapped rows", bounds)
    if unread is not None:
        return unread
    bad = []
    for when, reading in pairs:
        rows = value(reading)
        if rows.get("pending"):
            bad.append(f"row remapping pending at {when} (a GPU reset applies it)")
        if rows.get("failure"):
            bad.append(f"row remapping failed at {when} (no spare rows left: the GPU needs service)")
    rows = value(pairs[-1][1])
    counts = f"{rows.get('correctable')} rows remapped for correctable, {rows.get('uncorrectable')} for " \
             "uncorrectable errors"
    return _check(key, name, not bad, f"{gpu.label}: " + "; ".join([*bad, counts]), source=_source(bounds))


def ecc_uncorrected_check(gpu: GpuStateInput, bounds: GpuStateBounds | None) -> Check:
    key, name = "ecc_uncorrected", "no new uncorrectable ECC errors in the session"
    pairs, unread = _read_both(gpu, "ecc_uncorrected_aggregate", key, name,
                               "the aggregate uncorrectable ECC count", bounds)
    if unread is not None:
        return unread
    start, end = (int(value(r)) for _, r in pairs)
    rise = end - start
    note = f"{gpu.label}: aggregate uncorrectable ECC errors {start} at session start, {end} at session end"
    return _check(key, name, rise <= 0, note, source=_source(bounds), measured=float(rise), bound=0.0,
                  comparison="<=")


def xid_events_check(gpu: GpuStateInput, bounds: GpuStateBounds | None) -> Check:
    key, name = "xid_events", "no XID errors in the session"
    if gpu.xid_watch != "ok":
        status, _, why = gpu.xid_watch.partition(": ")
        return unreadable(key, name, gpu, "XID events", {"status": status, "why": why or gpu.xid_watch}, bounds)
    if gpu.xid_events:
        seen = "; ".join(_describe_xid(e) for e in gpu.xid_events)
        return _check(key, name, False, f"{gpu.label}: {seen}", source=_source(bounds),
                      measured=float(len(gpu.xid_events)), bound=0.0, comparison="<=",
                      locations=tuple(_xid_location(gpu, e) for e in gpu.xid_events))
    return _check(key, name, True, f"{gpu.label}: watched the whole session, none", source=_source(bounds),
                  measured=0.0, bound=0.0, comparison="<=")


def _xid_location(gpu: GpuStateInput, event: dict) -> Location:
    xid = event.get("xid")
    meaning = event.get("meaning")
    return gpu.location(xid=xid if isinstance(xid, int) and xid >= 0 else None,
                        detail=str(meaning) if meaning else None)


def _describe_xid(event: dict) -> str:
    when = time.strftime("%H:%M:%S", time.localtime(float(event.get("time", 0.0))))
    return f"XID {event.get('xid')} ({event.get('meaning')}) at {when}"


def nvlink_errors_check(gpu: GpuStateInput, bounds: GpuStateBounds | None) -> Check:
    """Link error counters (CRC, replay, recovery) rising beyond the bound, or a link going down."""
    key, name = "nvlink_errors", "NVLink error counters steady"
    start, end = _readings(gpu.start, "nvlinks", gpu.missing_why), _readings(gpu.end, "nvlinks", gpu.missing_why)
    missing = _first_unread([("session start", start), ("session end", end)])
    if missing is not None:
        what = "NVLink (NVML shows no NVLink on this GPU; the topology check judges whether it should have some)"
        return unreadable(key, name, gpu, what, missing, bounds)
    grown, unknown, down = nvlink_changes(value(start), value(end), bounds)
    source = _source(bounds)
    # Only a GPU without NVLink may lack the counters: a link that is up must say how it is doing.
    problems = down + grown + [f"{link} is up but NVML gives none of its error counters" for link in unknown]
    if problems:
        return _check(key, name, False, f"{gpu.label}: " + "; ".join(problems), source=source,
                      locations=_link_locations(gpu, value(start), value(end), bounds))
    rises = [f"link {link} {counter} +{rise}" for link, counter, rise in _counter_rises(value(start), value(end))]
    if rises and (bounds is None or bounds.max_nvlink_error_growth is None):
        return _check(key, name, None, f"{gpu.label}: {'; '.join(rises)}; the profile has no [gpu_state] "
                      "max_nvlink_error_growth (to be measured on healthy hardware)", source=source)
    return _check(key, name, True, f"{gpu.label}: {len(value(end))} links" + (f"; {'; '.join(rises)}" if rises else ""),
                  source=source)


def _link_locations(gpu: GpuStateInput, start: dict, end: dict,
                    bounds: GpuStateBounds | None) -> tuple[Location, ...]:
    """Each link of the GPU that went down, lost its counters or grew them past the bound."""
    limit = bounds.max_nvlink_error_growth if bounds is not None else None
    links = [link for link, _, rise in _counter_rises(start, end) if limit is not None and rise > limit]
    links += [link for link, now in end.items() if now.get("active")
              and all(value(r) is None for r in now.get("counters", {}).values())]
    links += [link for link, now in end.items() if start.get(link, {}).get("active") and not now.get("active")]
    numbered = [int(link) for link in dict.fromkeys(str(link) for link in links) if link.isdigit()]
    return tuple(gpu.location(link=link) for link in numbered) or (gpu.location(),)


def _counter_rises(start: dict, end: dict) -> list[tuple[str, str, int]]:
    rises = []
    for link, now in end.items():
        before = start.get(link, {}).get("counters", {})
        for counter, reading in now.get("counters", {}).items():
            if value(reading) is not None and value(before.get(counter)) is not None:
                rise = int(value(reading)) - int(value(before[counter]))
                if rise > 0:
                    rises.append((link, counter, rise))
    return rises


def nvlink_changes(start: dict, end: dict, bounds: GpuStateBounds | None) -> tuple[list[str], list[str], list[str]]:
    """(counters over the bound, links whose counters are unreadable, links that went down)."""
    limit = bounds.max_nvlink_error_growth if bounds is not None else None
    grown = [f"link {link} {counter} errors +{rise} > {limit} allowed" for link, counter, rise
             in _counter_rises(start, end) if limit is not None and rise > limit]
    unknown = [f"link {link}" for link, now in end.items() if now.get("active")
               and all(value(r) is None for r in now.get("counters", {}).values())]
    down = [f"link {link} went down during the session" for link, now in end.items()
            if start.get(link, {}).get("active") and not now.get("active")]
    return grown, unknown, down


GPU_STATE_CHECKS = (power_limit_check, clocks_check, ecc_mode_check, retired_pages_check, remapped_rows_check,
                    ecc_uncorrected_check, xid_events_check, nvlink_errors_check)


def gpu_state_checks(gpu: GpuStateInput, bounds: GpuStateBounds | None) -> list[Check]:
    """Every GPU-state check of one GPU, in the order of the contract's keys; on another node, then its
    throttling and foreign processes over the session."""
    checks = [check(gpu, bounds) for check in GPU_STATE_CHECKS]
    if gpu.judge_load:
        checks += [judge(gpu.label, gpu.load, gpu.load_why, gpu.case_windows, gpu.location())
                   for judge in (load_throttling_check, load_foreign_check)]
    # Every check here judges this one GPU: where a check names no more (an XID, a link), the GPU.
    return [check if check.locations else replace(check, locations=(gpu.location(),)) for check in checks]


