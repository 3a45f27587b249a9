"""One table, GPU x check: every per-GPU figure of the session in one row per GPU, so a bad GPU
stands out at a glance; and the GPU<->GPU copy heatmap.

Rows: the node's GPUs (index and UUID, from the session's hardware). Columns: the component checks
(harness/checks/components.py: GEMM per dtype, HBM copy and read-modify-write, host<->GPU alone,
the lowest peer copy involving the GPU), then the per-GPU keys other tests produce when present
(GPU state: power_limit, clocks, ...; benchmark cases: throughput_per_gpu, gpu_uniformity). A cell
is the check's figure and its state (pass, fail, not evaluated), read from the results alone.
"""

from __future__ import annotations

import re

from markupsafe import Markup, escape

from harness.report.format import fmt_number
from harness.report.inputs import as_dict, as_int, as_list, as_number, as_text
from harness.report.outcomes import SessionTest
from harness.results.location import locations_of

COMPONENT_COLUMNS = (
    ("gemm_bf16", "GEMM bf16"), ("gemm_fp16", "GEMM fp16"), ("gemm_tf32", "GEMM tf32"), ("gemm_fp32", "GEMM fp32"),
    ("hbm_copy", "HBM copy"), ("hbm_rmw", "HBM RMW"), ("h2d_alone", "H2D"), ("d2h_alone", "D2H"),
)
PEER_COLUMN = ("peer_bandwidth", "peer min")
OTHER_COLUMNS = (
    ("power_limit", "power limit"), ("clocks", "clocks"), ("ecc_mode", "ECC mode"), ("remapped_rows", "remapped rows"),
    ("xid_events", "XID events"), ("throughput_per_gpu", "throughput / GPU"), ("gpu_uniformity", "GPU uniformity"),
)
_GPU_PARAM = re.compile(r"\[(?:[^\]]*-)?gpu(\d+)\]$")
_STATE = {True: "pass", False: "fail", None: "skip"}


def _gpu_of(test: SessionTest) -> int | None:
    """The one GPU a per-GPU test judged: as its result records it (components' ``gpu``, GPU state's
    ``gpu_state``), else its id ``[gpuN]``."""
    for gpu in (as_dict(test.harness.get("components")).get("gpu"), test.harness.get("gpu_state"),
                test.harness.get("gpu")):
        index = as_int(as_dict(gpu).get("index"))
        if index is not None:
            return index
    if "pair" in as_dict(test.harness.get("components")):
        return None
    match = _GPU_PARAM.search(test.nodeid)
    return int(match.group(1)) if match else None


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
    return {"text": text, "state": state, "title": as_text(shown.get("note"))}


def _gpus(header: dict, tests: list[SessionTest]) -> dict[int, str]:
    """index -> UUID of every GPU the session knew of."""
    found = {as_int(g.get("index")): as_text(g.get("uuid")) for g in map(as_dict, as_list(
        as_dict(header.get("hardware")).get("gpus")))}
    for test in tests:
        gpu = as_dict(as_dict(test.harness.get("components")).get("gpu"))
        if as_int(gpu.get("index")) is not None:
            found.setdefault(as_int(gpu.get("index")), as_text(gpu.get("uuid")))
    return {index: uuid for index, uuid in sorted((k, v) for k, v in found.items() if k is not None)}


def _checks_by_gpu(tests: list[SessionTest], gpus: dict[int, str]) -> dict[tuple[int, str], list[dict]]:
    """(GPU, check key) -> the checks that judged that GPU on that key."""
    keys = {key for key, _ in (*COMPONENT_COLUMNS, PEER_COLUMN, *OTHER_COLUMNS)}
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


def build_gpu_table(header: dict, tests: list[SessionTest]) -> dict | None:
    """{"columns": [...], "rows": [{"gpu", "uuid", "cells"}]}; None when no test judged a GPU on its own."""
    gpus = _gpus(header, tests)
    found = _checks_by_gpu(tests, gpus)
    columns = [(key, label) for key, label in (*COMPONENT_COLUMNS, PEER_COLUMN, *OTHER_COLUMNS)
               if any(k == key for _, k in found)]
    if not columns or not gpus:
        return None
    rows = [{"gpu": f"GPU {index}", "uuid": uuid, "failed": any(
                c.get("passed") is False for key, _ in columns for c in found.get((index, key), [])),
             "cells": [_cell(found[(index, key)]) if (index, key) in found else None for key, _ in columns]}
            for index, uuid in gpus.items()]
    return {"columns": [label for _, label in columns], "rows": rows}


# --- the peer heatmap -------------------------------------------------------------------------


def peer_pairs(tests: list[SessionTest]) -> list[dict]:
    """The peer matrix's rows as the component launch recorded them (one copy per test: the first)."""
    for test in tests:
        pairs = as_list(as_dict(as_dict(test.harness.get("components")).get("peer")).get("pairs"))
        if pairs:
            return [as_dict(p) for p in pairs]
    return []


def peer_heatmap(tests: list[SessionTest], cell_px: int = 64) -> Markup | None:
    """Source GPU (rows) x destination GPU (columns), copy GB/s; darker is slower, the slowest pair outlined."""
    pairs = [p for p in peer_pairs(tests) if as_number(p.get("gbps")) is not None]
    if not pairs:
        return None
    index = sorted({i for p in pairs for i in (as_int(as_dict(p.get("src")).get("index")),
                                                as_int(as_dict(p.get("dst")).get("index"))) if i is not None})
    rates = {(as_int(as_dict(p["src"]).get("index")), as_int(as_dict(p["dst"]).get("index"))): as_number(p["gbps"])
             for p in pairs}
    top = max(v for v in rates.values() if v is not None) or 1.0
    slowest = min(rates, key=lambda k: rates[k] or 0.0)
    margin, size = 56, cell_px * len(index)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{size + margin + 8}" '
             f'height="{size + margin + 8}" viewBox="0 0 {size + margin + 8} {size + margin + 8}">',
             '<title>GPU-to-GPU copy bandwidth, GB/s (row: source, column: destination)</title>']
    for position, gpu in enumerate(index):
        offset = margin + position * cell_px + cell_px / 2
        parts.append(f'<text x="{offset}" y="{margin - 8}" font-size="11" text-anchor="middle">to {gpu}</text>')
        parts.append(f'<text x="{margin - 6}" y="{offset + 4}" font-size="11" text-anchor="end">from {gpu}</text>')
    for (src, dst), rate in rates.items():
        if src is None or dst is None or rate is None:
            continue
        x, y = margin + index.index(dst) * cell_px, margin + index.index(src) * cell_px
        shade = int(235 - 170 * (1 - rate / top))
        outline = ' stroke="#cf222e" stroke-width="3"' if (src, dst) == slowest else ""
        parts.append(f'<rect x="{x}" y="{y}" width="{cell_px - 2}" height="{cell_px - 2}" '
                     f'fill="rgb({shade},{shade},255)"{outline}><title>GPU {src} -> GPU {dst}: '
                     f'{escape(fmt_number(rate))} GB/s</title></rect>')
        parts.append(f'<text x="{x + cell_px / 2}" y="{y + cell_px / 2 + 4}" font-size="11" '
                     f'text-anchor="middle">{escape(fmt_number(rate))}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))
