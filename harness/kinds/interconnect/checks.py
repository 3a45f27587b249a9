"""The interconnect's checks: the all-reduce sweep (completed, correct, bus bandwidth against the
profile's bound for its GPU count, GPU health during it) and the topology against [topology]
(NVLink links up, peer-to-peer between every pair, PCIe link under load), each miss naming the
GPU (index and UUID) or the pair."""

from __future__ import annotations

from typing import Any

from harness.results.check import Check
from harness.checks.shapes import reference_note
from harness.checks.telemetry_checks import telemetry_checks
from harness.kinds.interconnect.launch import AllReduceRun
from harness.node.topology import why_no_nvlink
from harness.results.location import Location, gpu_location
from harness.results.telemetry_summary import TelemetrySummary, read_telemetry
from harness.telemetry import gpu_label
from harness.kinds.interconnect.busbw import size_label


def allreduce_checks(run: AllReduceRun, bounds: Any, *, missing_note: str) -> list[Check]:
    """Sanity (the sweep ran, every sum was right), then bus bandwidth at the largest message vs
    the profile's bound for this GPU count, then the GPUs' health during the sweep."""
    completed = Check(name="all-reduce sweep completed", kind="sanity", measured=None, bound=None, unit="",
                      comparison="==", passed=run.status in ("ok", "invalid"), note=run.why)
    if not completed.passed:
        return [completed]
    wrong = [r for r in run.rows if not r.get("correct")]
    correct = Check(name="all-reduce results correct", kind="sanity", measured=None, bound=None, unit="",
                    comparison="==", passed=not wrong,
                    note=("every element of every size equals the expected sum" if not wrong else
                          "; ".join(f"{size_label(r['size_bytes'])}: {r['mismatches']:,} wrong elements over all ranks"
                                    + (f" ({r['rank0_check']})" if r.get("rank0_check") else "") for r in wrong)))
    if wrong:
        return [completed, correct]
    return [completed, correct, _busbw_check(run, bounds),
            *telemetry_checks(run.telemetry, missing_note=missing_note)]


def _busbw_check(run: AllReduceRun, bounds: Any) -> Check:
    largest = run.largest
    name = f"all-reduce bus bandwidth at {size_label(largest['size_bytes'])}" if largest else "all-reduce bus bandwidth"
    measured = largest["busbw_gbps"] if largest else None
    if bounds is None:
        return Check(name=name, key="allreduce_busbw", kind="performance", measured=measured, bound=None, unit="GB/s",
                     comparison=">=", passed=None, note="the profile has no [interconnect] section")
    bound = bounds.min_allreduce_busbw_gbps.get(run.gpus)
    if bound is None:
        return Check(name=name, key="allreduce_busbw", kind="performance", measured=measured, bound=None, unit="GB/s",
                     comparison=">=", passed=None, source=bounds.source,
                     note=f"the profile has no bound for {run.gpus} GPUs")
    return Check(name=name, key="allreduce_busbw", kind="performance", measured=measured, bound=bound, unit="GB/s",
                 comparison=">=", passed=measured is not None and measured >= bound, source=bounds.source,
                 note=reference_note(bounds, "min_allreduce_busbw_gbps", run.gpus, measured))


def pcie_under_load(telemetry: TelemetrySummary | dict | None) -> dict[str, dict]:
    """uuid -> {"gen": ..., "width": ...}: the highest PCIe link the sampler saw while the GPU was busy."""
    summary = read_telemetry(telemetry)
    if not summary.ok:
        return {}

    def whole(value: float | None) -> int | None:
        return int(value) if value is not None else None

    return {gpu.uuid: {"gen": whole(gpu.value("pcie_gen")), "width": whole(gpu.value("pcie_width"))}
            for gpu in summary.gpus if gpu.uuid}


def topology_checks(topology: dict, bounds: Any, loaded: dict[str, dict], *, load_note: str) -> list[Check]:
    """Each [topology] key against every GPU; a miss names the GPU (index and UUID) or the pair."""
    gpus = topology.get("gpus", [])
    label = {g["index"]: gpu_label(g["index"], g["uuid"]) for g in gpus}
    checks = []
    if bounds.nvlinks_per_gpu is not None:
        checks.append(_nvlink_check(topology, label, bounds))
    if bounds.p2p_all_pairs:
        checks.append(_p2p_check(topology.get("p2p_read", {}), gpus, label, bounds.source))
    for key, expected, word in (("gen", bounds.pcie_generation, "generation"), ("width", bounds.pcie_width, "width")):
        if expected is not None:
            checks.append(_pcie_check(key, word, expected, gpus, label, loaded, bounds.source, load_note))
    return checks


def _at(gpus: list[dict]) -> tuple[Location, ...]:
    found = (gpu_location(g.get("index"), g.get("uuid")) for g in gpus)
    return tuple(location for location in found if location is not None)


def _nvlink_check(topology: dict, label: dict[int, str], bounds: Any) -> Check:
    """Every GPU shows ``nvlinks_per_gpu`` active links; where NVML shows none, the message says what kind
    of node that is, and ``nvlink_when`` says whether it fails: a GPU alone has no peer to link to."""
    gpus = topology.get("gpus", [])
    counts = [(g, g.get("nvlinks_active")) for g in gpus]
    known = [(g, c) for g, c in counts if c is not None]
    name = "NVLink links up per GPU"
    if len(known) < len(counts):
        missing = [g for g, c in counts if c is None]
        seen = "; ".join(f"{label[g['index']]}: NVML reports no NVLink "
                         f"({g['unsupported'].get('nvlink', 'no reading')}): "
                         f"{why_no_nvlink(g.get('name'), topology.get('virtualized'))}" for g in missing)
        if bounds.nvlink_when == "multi_gpu" and len(gpus) < 2:
            return Check(name=name, kind="health", measured=None, bound=bounds.nvlinks_per_gpu, unit="",
                         comparison=">=", passed=None, source=bounds.source,
                         note=f"does not apply: one GPU on this node has no peer to link to "
                              f"([topology] nvlink_when = \"multi_gpu\"). {seen}")
        needs = ("this node has several GPUs, so [topology] requires NVLink" if bounds.nvlink_when == "multi_gpu"
                 else "[topology] requires NVLink on every GPU (nvlink_when = \"always\")")
        return Check(name=name, kind="health", measured=None, bound=bounds.nvlinks_per_gpu, unit="",
                     comparison=">=", passed=False if bounds.nvlinks_per_gpu > 0 else None, source=bounds.source,
                     locations=_at(missing),
                     note=f"{seen}. The node failed: {needs}; a node of a kind without NVLink needs a profile "
                          "without nvlinks_per_gpu")
    few = [g for g, c in known if c < bounds.nvlinks_per_gpu]
    short = [f"{label[g['index']]}: {g.get('nvlinks_active')} up" for g in few]
    fewest = min(c for _, c in known)
    return Check(name=name, kind="health", measured=float(fewest), bound=float(bounds.nvlinks_per_gpu),
                 unit="links", comparison=">=", passed=not short, source=bounds.source, note="; ".join(short),
                 locations=_at(few))


def _p2p_check(pairs: dict[str, str], gpus: list[dict], label: dict[int, str], source: str) -> Check:
    name = "peer-to-peer access between every GPU pair"
    if len(gpus) < 2:
        return Check(name=name, kind="health", measured=None, bound=None, unit="", comparison="==", passed=None,
                     source=source, note="one GPU: no pair to check")
    bad, ends = [], []
    uuids = {g.get("index"): g.get("uuid") for g in gpus}
    for pair, status in pairs.items():
        if status != "ok":
            a, b = (int(x) for x in pair.split("-"))
            bad.append(f"{label.get(a, a)} ↔ {label.get(b, b)}: {status}")
            ends += [index for index in (a, b) if index not in ends]
    return Check(name=name, kind="health", measured=None, bound=None, unit="", comparison="==", passed=not bad,
                 source=source, note="; ".join(bad) if bad else f"{len(pairs)} pairs",
                 locations=tuple(Location(gpu_index=index, gpu_uuid=uuids.get(index)) for index in ends))


def _pcie_check(key: str, word: str, expected: int, gpus: list[dict], label: dict[int, str],
                loaded: dict[str, dict], source: str, load_note: str) -> Check:
    name = f"PCIe link {word} under load"
    unit = "lanes" if key == "width" else ""
    readings = [(g, loaded.get(g["uuid"], {}).get(key)) for g in gpus]
    if not loaded or any(v is None for _, v in readings):
        return Check(name=name, kind="health", measured=None, bound=float(expected), unit=unit,
                     comparison=">=", passed=None, source=source, note=load_note)
    values = [(g, int(v)) for g, v in readings if v is not None]
    mark = "Gen" if key == "gen" else "x"
    slow = [(g, v) for g, v in values if v < expected]
    low = [f"{label[g['index']]}: {mark}{v} (the slot allows {mark}{g.get('pcie_' + key + '_max')})" for g, v in slow]
    return Check(name=name, kind="health", measured=float(min(v for _, v in values)), bound=float(expected),
                 unit=unit, comparison=">=", passed=not low, source=source, note="; ".join(low),
                 locations=_at([g for g, _ in slow]))
