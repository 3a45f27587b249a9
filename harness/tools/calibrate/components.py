"""[components] from healthy runs: the rule benchmarks/components_calibrate.py prints and ``harness calibrate
--components`` writes, in one place (pure but for ``measure_components``, the launch).

Every figure of every run and GPU (ordered pair) is read; a rate bound is the lowest x (1 - margin), the
peer latency bound the highest x (1 + margin), rounded to 0.1. The datasheet figures of [components]
(datasheet_tflops, datasheet_hbm_gbps) are citations, never measured: calibrate leaves them out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Literal, Sequence

from harness.kinds.components.launch import ComponentsRun, ComponentsSpec, node_components_spec, run_components
from harness.launch.spec import LaunchSettings
from harness.node.hardware import Hardware
from harness.tools.calibrate import CalibrationError
from harness.tools.calibrate.health import MIN_RUNS

COMPONENT_MARGIN = 0.10
"""Rates: lowest x 0.90, as the shipped h100-80gb [components] (3 runs on nvidia-h100-x1,
docs/data/2026-11-24-components)."""

RATE_PATHS = {
    **{f"min_gemm_tflops.{d}": ("gemm", d, "tflops") for d in ("bf16", "fp16", "tf32", "fp32")},
    "min_hbm_copy_gbps": ("hbm", "copy", "gbps"), "min_hbm_rmw_gbps": ("hbm", "rmw", "gbps"),
    "min_h2d_gbps": ("host_link", "alone", "h2d", "gbps"), "min_d2h_gbps": ("host_link", "alone", "d2h", "gbps"),
    "min_h2d_concurrent_gbps": ("host_link", "concurrent", "h2d", "gbps"),
    "min_d2h_concurrent_gbps": ("host_link", "concurrent", "d2h", "gbps"),
}
"""Bound key (``table.key`` for a dtype of min_gemm_tflops) -> where each rank's components.json holds the figure."""


def _dig(data: Any, path: tuple[str, ...]) -> float | None:
    for part in path:
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data if isinstance(data, (int, float)) else None


def summarise(runs: list[dict], margin: float) -> dict:
    """Per bound key: every figure (run x GPU), lowest, highest, and the bound at ``margin``."""
    out: dict = {}
    for key, path in RATE_PATHS.items():
        values = [v for run in runs for rank in run.get("ranks") or [] if (v := _dig(rank, path)) is not None]
        if values:
            out[key] = {"figures": values, "lowest": min(values), "highest": max(values),
                        "bound": round(min(values) * (1 - margin), 1)}
    pairs = [p for run in runs for p in ((run.get("peer") or {}).get("pairs") or [])]
    if pairs:
        rates, latencies = [p["gbps"] for p in pairs], [p["latency_us"] for p in pairs]
        out["min_peer_gbps"] = {"figures": rates, "lowest": min(rates), "bound": round(min(rates) * (1 - margin), 1)}
        out["max_peer_latency_us"] = {"figures": latencies, "highest": max(latencies),
                                      "bound": round(max(latencies) * (1 + margin), 1)}
    return out


def component_bounds(runs: list[dict], margin: float) -> tuple[dict[str, Any], list[str]]:
    """([components] values to write, min_gemm_tflops as a table; how each came, and what is left out and why)."""
    if len(runs) < MIN_RUNS:
        return {}, [f"[components] left out: only {len(runs)} run{'s' if len(runs) != 1 else ''}; a bound needs "
                    f"{MIN_RUNS} or more (--repeats)"]
    values: dict[str, Any] = {}
    rules = []
    for key, figures in summarise(runs, margin).items():
        if figures["bound"] <= 0:  # a rate that rounds to 0.0 bounds nothing; the schema refuses it
            rules.append(f"{key} left out: lowest {figures['lowest']:g} x {1 - margin:g} rounds to 0")
            continue
        table, _, dtype = key.partition(".")
        if dtype:
            values.setdefault(table, {})[dtype] = figures["bound"]
        else:
            values[key] = figures["bound"]
        extreme = (f"highest {figures['highest']:g} x {1 + margin:g}" if key.startswith("max_")
                   else f"lowest {figures['lowest']:g} x {1 - margin:g}")
        rules.append(f"{key} {figures['bound']:g} = {extreme} ({len(figures['figures'])} figures over {len(runs)} "
                     "runs)")
    if "min_peer_gbps" not in values:
        rules.append("min_peer_gbps, max_peer_latency_us left out: peer copies need 2 GPUs or more")
    return values, rules


def components_spec(hw: Hardware, device: Literal["cuda", "cpu"], timeout_s: float) -> ComponentsSpec:
    """What the acceptance suite launches (harness/kinds/components/runner.py), with calibrate's time limit."""
    return node_components_spec(device, hw.gpus,
                                lambda gpus: LaunchSettings(gpus_per_node=gpus, device=device, timeout_s=timeout_s))


Runner = Callable[..., ComponentsRun]


def measure_components(spec: ComponentsSpec, records_dir: Path, repeats: int, runner: Runner | None = None,
                       echo: Callable[[str], None] = print) -> list[dict]:
    """``repeats`` component launches, one after the other; the first failure stops calibration (CalibrationError)."""
    results = []
    for repeat in range(1, repeats + 1):
        run_id = f"{records_dir.name}-components-r{repeat}"
        run_dir = records_dir / "components" / f"r{repeat}"
        run = (runner or run_components)(spec, run_dir, run_id=run_id)
        if run.status != "ok":
            raise CalibrationError(f"components, repeat {repeat}: {run.status}: {run.why or 'no reason recorded'} "
                                   f"(logs: {run_dir}/). No profile was written: bounds are never made from failed "
                                   "runs.")
        echo(f"[components {repeat}/{repeats}] ok in {run.elapsed_s or 0:.0f} s")
        results.append(run.result)
    return results


def components_lines(values: dict[str, Any], rules: Sequence[str], source: str) -> list[str]:
    """The [components] table (nothing when no bound is measured), each bound's rule as a comment above it."""
    if not values:
        return ["", *(f"# {rule}" for rule in rules)]
    lines = ["", "# Component checks (acceptance/test_components.py, docs/components.md), measured by calibrate:"]
    lines += [f"#   {rule}" for rule in rules]
    lines.append("[components]")
    for key, value in values.items():
        if isinstance(value, dict):
            lines.append(f"{key} = {{ " + ", ".join(f"{k} = {v!r}" for k, v in value.items()) + " }")
        else:
            lines.append(f"{key} = {value!r}")
    lines.append(f"source = {json.dumps(source, ensure_ascii=False)}")  # a JSON string is a TOML basic string
    return lines
