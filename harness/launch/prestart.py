"""A launch started before its turn (issue 28): its processes start and import while earlier launches
measure, then wait, holding no GPU, until the launcher writes their plan.

A DDP launch spends 11-17 s before its first step (process start, importing torch and torchvision) on
4 x H100 and 4 x H200: 8-9 % of a sign-off. Started when the session begins, that start-up runs beside the
component launch instead of before the training. The waiting workers hold no CUDA context (nothing touches a
GPU before the plan: harness/workloads/ddp.py), so the launches before it see idle GPUs, and what the workers
measure once their plan comes is measured as before: same processes, same cases, same order.

The launcher adopts a started launch when the one it is about to run is that launch (same command, run
directory, run id and settings): ``run_job`` then waits on it instead of starting another. One that is not
adopted (a test deselected it, the session stopped first, the settings differ) is stopped: at adoption time,
or with every other one when the session ends (``stop_all``); a launcher that dies takes it along (the
parent-death signal of every launch, harness/launch/command.py).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness.launch.cleanup import clear_run_dir, kill_run
from harness.launch.spec import LaunchSettings
from harness.launch.supervise import start_process
from harness.workloads.plan import PLAN_FILE, PRESTART_WAIT_ENV

WAIT_S = 900.0
"""Longer than any session takes to reach its training launch (components, host-link re-measures, all-reduce);
a launcher that died or forgot it has it killed sooner (parent-death signal, ``stop_all``)."""


def _same_launch(a: LaunchSettings, b: LaunchSettings) -> bool:
    """One torchrun, one environment: equal but for the time limit, which the adopting launch sets."""
    return dataclasses.replace(a, timeout_s=b.timeout_s) == b


@dataclass(kw_only=True)
class Started:
    """A launch whose workers are importing or waiting for their plan."""

    launch: LaunchSettings
    command: list[str]
    run_dir: Path
    run_id: str
    process: subprocess.Popen

    def adopt(self, launch: LaunchSettings, command: list[str], run_dir: Path, run_id: str) -> subprocess.Popen | None:
        """Its torchrun, for ``run_job`` to hand the plan to, when it is the launch asked for and still running;
        else None, and it is stopped (the caller starts a launch of its own)."""
        STARTED.remove(self)
        if (command == self.command and Path(run_dir) == self.run_dir and run_id == self.run_id
                and _same_launch(launch, self.launch) and self.process.poll() is None):
            return self.process
        self.stop()
        return None

    def stop(self) -> None:
        if self in STARTED:
            STARTED.remove(self)
        kill_run(self.process, self.run_id)


STARTED: list[Started] = []
"""This process's started launches not yet adopted or stopped."""


def start_early(launch: LaunchSettings, command: list[str], run_dir: Path, run_id: str) -> Started:
    """Start ``command`` now; its workers wait for <run_dir>/plan.json (any stale one removed first)."""
    run_dir = Path(run_dir)
    clear_run_dir(run_dir, PLAN_FILE)
    (run_dir / "command.json").write_text(json.dumps(command))
    process = start_process(launch, command, run_dir, run_id, extra_env={PRESTART_WAIT_ENV: repr(WAIT_S)})
    started = Started(launch=launch, command=list(command), run_dir=run_dir, run_id=run_id, process=process)
    STARTED.append(started)
    return started


def stop_all() -> int:
    """Stop every started launch nobody adopted (the session's end); how many there were."""
    left = list(STARTED)
    for started in left:
        started.stop()
    return len(left)
