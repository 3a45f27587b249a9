"""The component checks of one GPU (or one ordered pair): GEMM TFLOP/s per dtype, HBM copy and
read-modify-write, host<->GPU both directions (alone and all at once) with the NUMA binding, and
the peer bandwidth and latency of a pair. Pure: figures (harness/kinds/components/worker.py) x
``[components]`` bounds -> checks.

Every miss names the GPU (index and UUID) or the pair. A bound the profile leaves out makes its
check *not evaluated* with the reason (never passed): the shipped GPU profiles get their bounds
from measurements on healthy GPUs (docs/components.md).
"""

from __future__ import annotations

from typing import Literal

from harness.results.check import Check, CheckKind
from harness.checks.shapes import bound_for
from harness.kinds.components.bounds import ComponentBounds
from harness.results.location import Location, gpu_location
from harness.telemetry import gpu_label

HOST_DIRECTIONS = (("h2d", "host-to-GPU"), ("d2h", "GPU-to-host"))
HOST_MODES = (("alone", "alone", ""), ("concurrent", "with every GPU at once", "_concurrent"))


def label_of(rank: dict) -> str:
    """``GPU 3 (GPU-8d1c...)``, or ``CPU rank 0`` on a CPU run."""
    if rank.get("gpu_index") is None and rank.get("gpu_uuid") is None:
        return f"CPU rank {rank.get('rank', '?')}"
    return gpu_label(rank.get("gpu_index"), rank.get("gpu_uuid"))


def location_of(rank: dict) -> tuple[Location, ...]:
    """The rank's GPU (index, UUID) and rank number; its rank alone on a CPU run."""
    rank_number = rank.get("rank") if isinstance(rank.get("rank"), int) and rank["rank"] >= 0 else None
    location = gpu_location(rank.get("gpu_index"), rank.get("gpu_uuid"), rank=rank_number)
    return (location,) if location is not None else ()


def completed_check(status: str, why: str) -> Check:
    """Sanity: the launch ran to its end and left its figures."""
    return Check(key="components_completed", name="component benchmarks completed", kind="sanity", measured=None,
                 bound=None, unit="", comparison="==", passed=status == "ok", note=why)


def reported_check(where: str, locations: tuple[Location, ...] = ()) -> Check:
    """Sanity, failed: the launch finished but no rank reported figures for this GPU."""
    return Check(key="components_reported", name="component figures reported", kind="sanity", measured=None,
                 bound=None, unit="", comparison="==", passed=False, locations=locations,
                 note=f"{where}: the launch finished but no rank reported figures for this GPU (rank logs say why)")


def bounded(*, key: str, name: str, measured: float | None, bound: float | None, unit: str, where: str,
            bounds: ComponentBounds | None, no_bounds: str, kind: CheckKind = "performance",
            comparison: Literal[">=", "<="] = ">=", detail: str = "",
            locations: tuple[Location, ...] = ()) -> Check:
    """``measured`` against ``bound``; no bound -> not evaluated, saying which key the profile lacks.
    ``locations``: the GPU or the pair judged."""
    source = bounds.source if bounds is not None else ""
    note = f"{where}{': ' + detail if detail else ''}"
    if bound is None:
        why = no_bounds if bounds is None else f"the profile's [components] has no {key} bound"
        return Check(key=key, name=name, kind=kind, measured=measured, bound=None, unit=unit, comparison=comparison,
                     passed=None, note=f"not evaluated: {why} ({note})", source=source, locations=locations)
    if measured is None:
        return Check(key=key, name=name, kind=kind, measured=None, bound=bound, unit=unit, comparison=comparison,
                     passed=None, note=f"no measurement ({note})", source=source, locations=locations)
    passed = measured >= bound if comparison == ">=" else measured <= bound
    return Check(key=key, name=name, kind=kind, measured=measured, bound=bound, unit=unit, comparison=comparison,
                 passed=passed, note=note, source=source, locations=locations)


def _of_peak(measured: float | None, peak: float | None, unit: str) -> str:
    if measured is None or not peak:
        return "no datasheet peak in the profile"
    return f"{measured / peak:.1%} of the datasheet {peak:g} {unit}"


def gemm_checks(rank: dict, dtypes: tuple[str, ...], bounds: ComponentBounds | None, peaks: dict[str, float], *,
                no_bounds: str) -> list[Check]:
    """One check per dtype: the settled TFLOP/s (median of the measured blocks) against the bound."""
    where, figures = label_of(rank), rank.get("gemm") or {}
    checks = []
    for dtype in dtypes:
        figure = figures.get(dtype) or {}
        measured = figure.get("tflops")
        peak = (bounds.datasheet_tflops.get(dtype) if bounds is not None else None) or peaks.get(dtype)
        detail = _of_peak(measured, peak, "TFLOP/s")
        if figure.get("first_warmup_block") is not None:
            detail += f"; first warm-up block {figure['first_warmup_block']:.1f}"
        checks.append(bounded(key=f"gemm_{dtype}", name=f"GEMM {dtype} {figure.get('n', '')}^3", measured=measured,
                              bound=bounds.min_gemm_tflops.get(dtype) if bounds is not None else None,
                              unit="TFLOP/s", where=where, bounds=bounds, no_bounds=no_bounds, detail=detail,
                              locations=location_of(rank)))
    return checks


def hbm_checks(rank: dict, bounds: ComponentBounds | None, *, no_bounds: str) -> list[Check]:
    """Copy and read-modify-write bandwidth, bytes read + written, as a fraction of the datasheet too."""
    where, figures = label_of(rank), rank.get("hbm") or {}
    peak = bounds.datasheet_hbm_gbps if bounds is not None else None
    checks = []
    for part, words, bound in (("copy", "device-to-device copy", bounds.min_hbm_copy_gbps if bounds else None),
                               ("rmw", "read-modify-write", bounds.min_hbm_rmw_gbps if bounds else None)):
        measured = (figures.get(part) or {}).get("gbps")
        checks.append(bounded(key=f"hbm_{part}", name=f"memory bandwidth, {words}", measured=measured, bound=bound,
                              unit="GB/s", where=where, bounds=bounds, no_bounds=no_bounds,
                              detail=_of_peak(measured, peak, "GB/s"), locations=location_of(rank)))
    return checks


def host_link_checks(rank: dict, bounds: ComponentBounds | None, *, no_bounds: str, gpus_at_once: int) -> list[Check]:
    """Both directions, alone and with every GPU at once (``gpus_at_once`` of them: the concurrent bounds
    are a table by that count, since the GPUs share the host's bandwidth); then whether the process sat on
    the GPU's NUMA node."""
    where, figures = label_of(rank), rank.get("host_link") or {}
    numa = rank.get("numa_node")
    place = f"{where}, NUMA node {numa if numa is not None else 'unknown'}"
    checks = []
    for mode, words, suffix in HOST_MODES:
        for direction, direction_words in HOST_DIRECTIONS:
            measured = ((figures.get(mode) or {}).get(direction) or {}).get("gbps")
            name = f"pinned {direction_words} bandwidth, {words}"
            bound, why = (bound_for(bounds, f"min_{direction}{suffix}_gbps", gpus_at_once, " at once")
                          if bounds is not None else (None, ""))
            if why:
                checks.append(Check(key=f"{direction}_{mode}", name=name, kind="performance", measured=measured,
                                    bound=None, unit="GB/s", comparison=">=", passed=None,
                                    source=bounds.source if bounds else "", note=f"{why} ({place})",
                                    locations=location_of(rank)))
                continue
            checks.append(bounded(key=f"{direction}_{mode}", name=name, measured=measured, bound=bound, unit="GB/s",
                                  where=place, bounds=bounds, no_bounds=no_bounds, locations=location_of(rank)))
    checks.append(numa_binding_check(rank))
    return checks


def numa_binding_check(rank: dict) -> Check:
    """Health: the rank ran on its GPU's NUMA node's CPUs; unknown where sysfs does not name the node."""
    cpus = rank.get("cpu_affinity") or []
    shown = f"CPUs {_cpu_ranges(cpus)}" if cpus else "CPUs unknown"
    note = f"{label_of(rank)}: {rank.get('binding_note', 'no binding recorded')}; {shown}"
    numa = rank.get("numa_node")
    passed = None if numa is None else bool(rank.get("bound"))
    return Check(key="numa_binding", name="host copies ran on the GPU's NUMA node", kind="health", measured=None,
                 bound=None, unit="", comparison="==", passed=passed, note=note, locations=location_of(rank),
                 source="harness rule: a GPU's host copies run on the CPUs of its own NUMA node")


def _cpu_ranges(cpus: list[int]) -> str:
    """[0, 1, 2, 5] -> ``0-2,5``."""
    ranges: list[str] = []
    ordered = sorted(cpus)
    start = previous = ordered[0]
    for cpu in ordered[1:]:
        if cpu != previous + 1:
            ranges.append(f"{start}-{previous}" if previous != start else f"{start}")
            start = cpu
        previous = cpu
    ranges.append(f"{start}-{previous}" if previous != start else f"{start}")
    return ",".join(ranges)


def pair_label(row: dict) -> str:
    src, dst = row.get("src") or {}, row.get("dst") or {}
    return f"{gpu_label(src.get('index'), src.get('uuid'))} -> {gpu_label(dst.get('index'), dst.get('uuid'))}"


def pair_locations(row: dict) -> tuple[Location, ...]:
    """The pair's source and destination GPU, in that order."""
    ends = (gpu_location((row.get(end) or {}).get("index"), (row.get(end) or {}).get("uuid")) for end in ("src", "dst"))
    return tuple(end for end in ends if end is not None)


def slowest_pair(pairs: list[dict]) -> dict | None:
    """The ordered pair of lowest bandwidth (the one to look at first)."""
    measured = [p for p in pairs if p.get("gbps") is not None]
    return min(measured, key=lambda p: p["gbps"]) if measured else None


def find_pair(pairs: list[dict], src: int, dst: int) -> dict | None:
    return next((p for p in pairs if (p.get("src") or {}).get("index") == src
                 and (p.get("dst") or {}).get("index") == dst), None)


def peer_checks(pairs: list[dict], src: int, dst: int, bounds: ComponentBounds | None, *,
                no_bounds: str) -> list[Check]:
    """The pair ``src -> dst``: bandwidth and latency against the bounds, the slowest pair of the node named."""
    row = find_pair(pairs, src, dst)
    if row is None:
        return [Check(key="peer_measured", name="peer copy measured", kind="sanity", measured=None, bound=None,
                      unit="", comparison="==", passed=False,
                      locations=(Location(gpu_index=src), Location(gpu_index=dst)),
                      note=f"GPU {src} -> GPU {dst}: no figure in the peer matrix (the GPU was not visible?)")]
    slowest = slowest_pair(pairs)
    where = pair_label(row) + ("" if row.get("p2p") else " (no peer access: copied through host memory)")
    detail = (f"slowest pair of the node: {pair_label(slowest)} {slowest['gbps']:.1f} GB/s"
              if slowest is not None else "")
    return [bounded(key="peer_bandwidth", name="GPU-to-GPU copy bandwidth", measured=row.get("gbps"),
                    bound=bounds.min_peer_gbps if bounds is not None else None, unit="GB/s", where=where,
                    bounds=bounds, no_bounds=no_bounds, detail=detail, locations=pair_locations(row)),
            bounded(key="peer_latency", name="GPU-to-GPU 4-byte copy time", measured=row.get("latency_us"),
                    bound=bounds.max_peer_latency_us if bounds is not None else None, unit="us", where=where,
                    bounds=bounds, no_bounds=no_bounds, comparison="<=", locations=pair_locations(row))]
