"""Burn-in (``--soak DURATION``): keep one compute-heavy case training on every GPU for a while.

    python -m harness.kinds.soak.worker --plan PLAN.json

A node can pass a ten-second benchmark and still fail under hours of load: it heats up and
throttles, its power delivery sags, memory starts to throw ECC errors. The soak runs one DDP
training job (the profile's case with the most FLOPs per sample) on every GPU for the whole
duration, in windows of equal step counts, with the telemetry sampler on throughout. It fails on
thermal or hardware-slowdown throttling, new ECC errors, a temperature above the profile's
bound, or throughput decay: the last window slower than the first by more than
``[soak] max_throughput_decay`` (harness/kinds/soak/checks.py).

This is the torchrun worker: the same model registry and training recipe as the benchmark, its
loop in harness/kinds/soak/loop.py. The launcher's side is harness/kinds/soak/launch.py.
"""

from __future__ import annotations

import sys

from harness.rank import Rank, run_rank
from harness.kinds.soak.plan import SoakPlan
from harness.workloads.plan import plan_argument, read_plan


def main(argv: list[str] | None = None) -> int:
    plan_path = plan_argument(argv, "harness.kinds.soak.worker")
    plan = read_plan(plan_path, SoakPlan)
    return run_rank("soak", plan.run_dir, lambda rank: run(plan, rank))


def run(plan: SoakPlan, rank: Rank) -> None:
    # Imported here, not at the top: this rank's log and phase file exist, and it dies with torchrun,
    # before torch and the models load (a failing import says so in the rank's log).
    from harness.kinds.soak import loop

    loop.soak(plan, rank)


if __name__ == "__main__":
    sys.exit(main())
