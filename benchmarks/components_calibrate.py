"""Measure the component benchmarks on a healthy node, several runs, and print the figures as JSON:
every run's figures per GPU (and per ordered pair), the spread, and bounds at a stated margin.

    python benchmarks/components_calibrate.py --runs 3 --out out/components-h100.json
    python benchmarks/components_calibrate.py --runs 3 --margin 0.10 --parts gemm hbm host

It runs exactly what the acceptance tests run (harness.kinds.components.launch.run_components with the
GPU sizes of harness/kinds/components/launch.py: every GPU at once, one process each), so its figures
are the ones the [components] bounds are compared with. Bounds suggested: the lowest figure over
every run and GPU x (1 - margin) for rates, the highest x (1 + margin) for the peer latency (the rule
lives in harness/tools/calibrate/components.py; `harness calibrate --components` writes it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness.kinds.components.launch import (CPU_SIZES, GPU_SIZES, ComponentsSpec, placements_of,  # noqa: E402
                                       run_components)
from harness.launch.spec import LaunchSettings  # noqa: E402
from harness.node.hardware import detect  # noqa: E402
from harness.tools.calibrate.components import summarise  # noqa: E402
from harness.kinds.components.plan import PARTS  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--margin", type=float, default=0.10, help="bound = lowest x (1 - margin); default 0.10")
    parser.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    parser.add_argument("--out", type=Path, default=Path("out/components"))
    args = parser.parse_args()
    hardware = detect()
    cuda = hardware.device == "cuda"
    gpus = hardware.gpu_count if cuda else 1
    spec = ComponentsSpec(launch=LaunchSettings(gpus_per_node=gpus, device=hardware.device), parts=tuple(args.parts),
                          sizes=GPU_SIZES if cuda else CPU_SIZES,
                          placements=placements_of(hardware.gpus) if cuda else ())
    runs, elapsed = [], []
    for index in range(args.runs):
        run_id = f"calibrate-{time.strftime('%Y%m%d-%H%M%S')}-{index}"
        run = run_components(spec, args.out / run_id, run_id=run_id)
        if run.status != "ok":
            print(f"run {index}: {run.status}: {run.failure} (logs: {args.out / run_id})", file=sys.stderr)
            return 1
        runs.append(run.result)
        elapsed.append(run.elapsed_s)
    print(json.dumps({"hardware": hardware.to_dict(), "sizes": spec.sizes.__repr__(), "elapsed_s": elapsed,
                      "margin": args.margin, "summary": summarise(runs, args.margin), "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
