"""One table, GPU x check: every per-GPU figure of the session in one row per GPU, so a bad GPU
stands out at a glance; and the GPU<->GPU copy heatmap.

Rows: the node's GPUs (index and UUID, from the session's hardware). Columns: each kind's per-GPU figures, as its
job declares them (``Job.gpu_columns``: GPU state's power limit, clocks, ...; the components' GEMM per dtype, HBM
copy and read-modify-write, host<->GPU alone, the lowest peer copy involving the GPU; the DDP cases' throughput per
GPU and uniformity), in the jobs' order, where some GPU has a check of them. A cell
is the check's figure and its state (pass, fail, not evaluated), read from the results alone, and
its figure ÷ bound (the headroom): the lowest headroom of each column is marked, so the slow GPU
shows as one row marked across its columns.

The GPU x GPU grid: for every ordered pair, the copy bandwidth (the peer test) and the topology
(peer-to-peer support from NVML, NVLinks per GPU: the topology test), whichever the session has.
"""

from __future__ import annotations

import math
import re
from typing import Any, Sequence

from markupsafe import Markup, escape

from harness.report.format import fmt_number
from harness.results.reading import as_dict, as_int, as_list, as_number, as_text
from harness.report.outcomes import SessionTest
from harness.report.sections.kind import GpuColumn
from harness.results.location import locations_of

_STATE = {True: "pass", False: "fail", None: "skip"}


def _gpu_of(test: SessionTest) -> int | None:
    """The one GPU a per-GPU test judged: as its result records it (components' ``gpu``, GPU state's
    ``gpu_state``), else the one GPU its checks' locations blame."""
    for gpu in (as_dict(test.harness.get("components")).get("gpu"), test.harness.get("gpu_state"),
                test.harness.get("gpu")):
        index = as_int(as_dict(gpu).get("index"))
        if index is not None:
            return index
    if "pair" in as_dict(test.harness.get("components")):
        return None
    # Else the one GPU its checks' locations blame (data, never the test id's words).
    named = {as_int(as_dict(place).get("gpu_index")) for check in as_list(test.harness.get("checks"))
             for place in as_list(as_dict(check).get("locations")) if as_dict(place).get("blamed", True) is not False}
    named.discard(None)
    return named.pop() if len(named) == 1 else None


def _headroom(check: dict) -> float | None:
    """measured ÷ bound, turned so that above 1 is inside the bound (bound ÷ measured for an upper
    bound); None without both or a bound of 0."""
    measured, bound = as_number(check.get("measured")), as_number(check.get("bound"))
    if measured is None or bound is None or bound == 0 or measured == 0:
        return None
    ratio = measured / bound if as_text(check.get("comparison")) != "<=" else bound / measured
    return ratio if math.isfinite(ratio) and ratio > 0 else None


def _cell(checks: list[dict]) -> dict:
    """One cell from the checks of one key for one GPU: the worst state, the figure of the worst check."""
    failed = [c for c in checks if c.get("passed") is False]
    judged = [c for c in checks if c.get("passed") is True]
    shown = (failed or judged or checks)[0]
    state = "fail" if failed else "pass" if judged else "skip"
    measured, unit = as_number(shown.get("measured")), as_text(shown.get("unit"))
    text = f"{fmt_number(measured)} {unit}".strip() if measured is not None else {"pass": "ok", "fail": "FAIL"}.get(
        state, "n/e")
    if len(checks) > 1:
        text += f" ({len(failed) or len(judged)}/{len(checks)} {'failed' if failed else 'checks'})"
    headroom = min((h for h in map(_headroom, checks) if h is not None), default=None)
    return {"text": text, "state": state, "title": as_text(shown.get("note")), "headroom": headroom,
            "ratio": "" if headroom is None else f"{headroom:.2f} × bound", "lowest": False,
            "shade": _shade(headroom)}


def _shade(headroom: float | None) -> str:
    """A background by headroom: red below the bound, white at 1.3 × and above, pale between."""
    if headroom is None:
        return ""
    if headroom < 1:
        return "#ffcecb"
    light = int(205 + 50 * min((headroom - 1) / 0.3, 1.0))
    return f"rgb({light},{min(light + 8, 255)},{light})"


def _mark_lowest(rows: list[dict], columns: int) -> None:
    """Per column, the GPU with the lowest headroom (ties: none), where two or more GPUs have one."""
    for column in range(columns):
        cells = [row["cells"][column] for row in rows if row["cells"][column] and
                 row["cells"][column]["headroom"] is not None]
        if len(cells) < 2:
            continue
        lowest = min(cells, key=lambda c: c["headroom"])
        if sum(1 for c in cells if c["headroom"] == lowest["headroom"]) == 1:
            lowest["lowest"] = True


def _gpus(header: dict, tests: list[SessionTest]) -> dict[int, str]:
    """index -> UUID of every GPU the session knew of."""
    found = {as_int(g.get("index")): as_text(g.get("uuid")) for g in map(as_dict, as_list(
        as_dict(header.get("hardware")).get("gpus")))}
    for test in tests:
        gpu = as_dict(as_dict(test.harness.get("components")).get("gpu"))
        if as_int(gpu.get("index")) is not None:
            found.setdefault(as_int(gpu.get("index")), as_text(gpu.get("uuid")))
    return {index: uuid for index, uuid in sorted((k, v) for k, v in found.items() if k is not None)}


def _checks_by_gpu(tests: list[SessionTest], gpus: dict[int, str], keys: set[str]) -> dict[tuple[int, str], list[dict]]:
    """(GPU, check key) -> the checks of ``keys`` that judged that GPU on that key."""
    found: dict[tuple[int, str], list[dict]] = {}
    for test in tests:
        if as_dict(test.harness.get("gpu_state")).get("other_node"):
            continue  # a GPU of another node of a multi-node session: not a row of this node's table
        checks = [as_dict(c) for c in as_list(test.harness.get("checks")) if as_dict(c).get("key") in keys]
        pair = as_list(as_dict(test.harness.get("components")).get("pair"))
        index = _gpu_of(test)
        for check in checks:
            if pair:
                owners = [as_int(g) for g in pair]
            elif index is not None:
                owners = [index]
            else:  # a benchmark case: each GPU a failed check names (its locations), else every GPU
                named = [loc.gpu_index for loc in locations_of(check) if loc.node is None and loc.blamed]
                owners = list(named if named and check.get("passed") is False else gpus)
            for owner in owners:
                if owner is not None:
                    found.setdefault((owner, as_text(check.get("key"))), []).append(check)
    return found


def build_gpu_table(header: dict, tests: list[SessionTest], kind_columns: Sequence[GpuColumn]) -> dict | None:
    """{"columns": [...], "rows": [{"gpu", "uuid", "cells"}]}; None when no test judged a GPU on its own.
    ``kind_columns``: every kind's per-GPU figures (``Job.gpu_columns``), in order; those some GPU has a check of."""
    gpus = _gpus(header, tests)
    found = _checks_by_gpu(tests, gpus, {key for key, _ in kind_columns})
    columns = [(key, label) for key, label in kind_columns if any(k == key for _, k in found)]
    if not columns or not gpus:
        return None
    rows: list[dict[str, Any]] = [{"gpu": f"GPU {index}", "uuid": uuid, "failed": any(
                c.get("passed") is False for key, _ in columns for c in found.get((index, key), [])),
             "cells": [_cell(found[(index, key)]) if (index, key) in found else None for key, _ in columns]}
            for index, uuid in gpus.items()]
    _mark_lowest(rows, len(columns))
    for row in rows:
        row["lowest"] = sum(1 for cell in row["cells"] if cell and cell["lowest"])
    return {"columns": [label for _, label in columns], "rows": rows}


# --- the peer heatmap -------------------------------------------------------------------------


def peer_pairs(tests: list[SessionTest]) -> list[dict]:
    """The peer matrix's rows as the component launch recorded them (one copy per test: the first)."""
    for test in tests:
        pairs = as_list(as_dict(as_dict(test.harness.get("components")).get("peer")).get("pairs"))
        if pairs:
            return [as_dict(p) for p in pairs]
    return []


def topology_of(tests: list[SessionTest]) -> dict:
    """The topology test's NVML reading ({"gpus": [...], "p2p_read": {"0-1": "ok"}}), or {}."""
    for test in tests:
        topology = as_dict(test.harness.get("topology"))
        if topology.get("gpus") or topology.get("p2p_read"):
            return topology
    return {}


def peer_heatmap(tests: list[SessionTest], cell_px: int = 64) -> Markup | None:
    """The GPU x GPU grid: source GPU (rows) x destination GPU (columns). Each cell: the copy GB/s
    (darker is slower, the slowest pair outlined) and the pair's peer-to-peer support; each GPU's
    label: its NVLinks up. None when the session has neither the peer test nor the topology."""
    pairs = [p for p in peer_pairs(tests) if as_number(p.get("gbps")) is not None]
    topology = topology_of(tests)
    p2p = {tuple(int(i) for i in key.split("-")): as_text(status)
           for key, status in as_dict(topology.get("p2p_read")).items() if re.fullmatch(r"\d+-\d+", key)}
    links = {as_int(g.get("index")): as_int(g.get("nvlinks_active"))
             for g in map(as_dict, as_list(topology.get("gpus")))}
    rates = {(as_int(as_dict(p["src"]).get("index")), as_int(as_dict(p["dst"]).get("index"))): as_number(p["gbps"])
             for p in pairs}
    index = sorted({i for pair in (*rates, *p2p) for i in pair if i is not None} | {i for i in links if i is not None})
    if len(index) < 2 or not (rates or p2p):
        return None
    measured = [v for v in rates.values() if v is not None]
    top = max(measured, default=0.0) or 1.0
    slowest = min(rates, key=lambda k: rates[k] or 0.0) if rates else None
    margin, size = 76, cell_px * len(index)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{size + margin + 8}" '
             f'height="{size + margin + 8}" viewBox="0 0 {size + margin + 8} {size + margin + 8}" '
             f'style="max-width:100%;height:auto">',
             '<title>GPU x GPU: copy bandwidth in GB/s and peer-to-peer support (row: source, column: '
             'destination)</title>']
    for position, gpu in enumerate(index):
        offset = margin + position * cell_px + cell_px / 2
        nvlinks = links.get(gpu)
        parts.append(f'<text x="{offset}" y="{margin - 8}" font-size="11" text-anchor="middle">to {gpu}</text>')
        parts.append(f'<text x="{margin - 6}" y="{offset}" font-size="11" text-anchor="end">from {gpu}</text>')
        if nvlinks is not None:
            parts.append(f'<text x="{margin - 6}" y="{offset + 13}" font-size="9" fill="#57606a" '
                         f'text-anchor="end">{nvlinks} NVLink{"" if nvlinks == 1 else "s"}</text>')
    for src in index:
        for dst in index:
            if src == dst:
                continue
            rate = rates.get((src, dst))
            status = p2p.get((min(src, dst), max(src, dst)))
            x, y = margin + index.index(dst) * cell_px, margin + index.index(src) * cell_px
            shade = 245 if rate is None else int(235 - 170 * (1 - rate / top))
            fill = f"rgb({shade},{shade},255)" if status in (None, "ok") else "#ffebe9"
            outline = ' stroke="#cf222e" stroke-width="3"' if (src, dst) == slowest else ""
            said = " · ".join(t for t in (f"{fmt_number(rate)} GB/s" if rate is not None else "",
                                          f"P2P {status}" if status else "") if t)
            parts.append(f'<rect x="{x}" y="{y}" width="{cell_px - 2}" height="{cell_px - 2}" fill="{fill}"'
                         f'{outline}><title>GPU {src} -> GPU {dst}: {escape(said)}</title></rect>')
            if rate is not None:
                parts.append(f'<text x="{x + cell_px / 2}" y="{y + cell_px / 2}" font-size="11" '
                             f'text-anchor="middle">{escape(fmt_number(rate))}</text>')
            if status:
                short = "P2P" if status == "ok" else "no P2P"
                parts.append(f'<text x="{x + cell_px / 2}" y="{y + cell_px / 2 + 14}" font-size="9" '
                             f'fill="{"#57606a" if status == "ok" else "#a40e26"}" text-anchor="middle">{short}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))
