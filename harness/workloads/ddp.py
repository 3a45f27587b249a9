"""The DDP benchmark worker: one process per GPU (or per CPU rank with gloo), run by torchrun.

    python -m harness.workloads.ddp --plan PLAN.json

The plan (harness/workloads/plan.py) holds one case or several of one GPU layout: the process
start, imports and process-group init are paid once, and charged to the first case. The launch
directory (the plan's) holds the rank logs and the phase files the launcher watches
(harness/rank.py); each case's own directory gets its record, a copy of its phase files (its
telemetry sampler opens and closes its window on them) and, on failure, the failure files. The
first failure ends the launch; the launcher runs the cases after it again. The cases themselves
run in harness/workloads/ddp_cases.py.

A launch started early (harness/launch/prestart.py, ``HARNESS_PRESTART_WAIT_S`` set) imports, then waits for
its plan touching no GPU: its start-up ran while other launches measured, and its first case is charged
only what came after the plan (the start-up it hid is kept as ``phases_s["start_up_hidden"]``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from harness.rank import Rank, launch_epoch, run_rank
from harness.workloads.plan import BenchmarkPlan, plan_argument, prestart_wait_s, read_plan, wait_started_early

PROCESS_START_S = time.time()


def main(argv: list[str] | None = None) -> int:
    plan_path = plan_argument(argv, "harness.workloads.ddp")
    wait_s = prestart_wait_s()
    if wait_s is not None:
        return run_rank("worker", plan_path.parent, lambda rank: run_started_early(plan_path, rank, wait_s))
    plan = read_plan(plan_path, BenchmarkPlan)
    return run_rank("worker", plan_path.parent, lambda rank: run(plan, rank, plan_path.parent))


def run(plan: BenchmarkPlan, rank: Rank, plan_dir: Path) -> None:
    started_s = time.time()
    # Imported here, not at the top: this rank's log and phase file exist before torch loads (an
    # import that fails says so in them), and the import is timed as the launch's phases_s["import"].
    from harness.workloads import ddp_cases

    startup_s = {"process_start": started_s - launch_epoch(started_s), "import": time.time() - started_s}
    ddp_cases.run_cases(plan, rank, process_start_s=PROCESS_START_S, startup_s=startup_s, plan_dir=plan_dir)


def run_started_early(plan_path: Path, rank: Rank, wait_s: float) -> None:
    """Import, then wait up to ``wait_s`` for the plan (none: end, the launcher did not take this launch) and run
    it; the start-up before the plan is not this launch's time (it ran beside earlier launches)."""
    started_s = time.time()
    from harness.workloads import ddp_cases

    imported_s = time.time()
    if not wait_started_early(plan_path, rank.phase, wait_s):
        return
    plan = read_plan(plan_path, BenchmarkPlan)
    ddp_cases.run_cases(plan, rank, process_start_s=PROCESS_START_S, plan_dir=plan_path.parent,
                        startup_s=hidden_start_up(launch_epoch(started_s), imported_s, plan_path.stat().st_mtime))


def hidden_start_up(launched_s: float, imported_s: float, planned_s: float) -> dict[str, float]:
    """A started-early launch's start-up as its first case is charged it: what ran before the launcher wrote the
    plan (at ``planned_s``) was hidden behind earlier launches (``start_up_hidden``, not the session's time); what
    ran after it, the session waited for (``import``: a session whose first launch is this one hides nothing)."""
    return {"process_start": 0.0, "import": max(0.0, imported_s - planned_s),
            "start_up_hidden": max(0.0, min(imported_s, planned_s) - launched_s)}


if __name__ == "__main__":
    sys.exit(main())
