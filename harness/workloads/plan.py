"""The plan: what a worker module runs, written once by the launcher and read once by every rank;
and the files its rank 0 leaves for the launcher when it is done.

``python -m harness.workloads.ddp --plan plan.json`` (likewise kinds.interconnect.worker and kinds.soak.worker,
whose plans are their kinds', kinds/<kind>/plan.py; kinds.components.worker with its own plan and reader,
kinds/components/plan.py) is the only way a spec reaches a worker: the launcher's spec (harness/launch/spec.py, a
kind's spec.py: where the defaults live) resolves into a plan dataclass, serialized to JSON in the run directory by
write_plan. A plan holds no defaults of its own: every value was decided by the spec.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, runtime_checkable

from harness.records import Scaling
from harness.files import write_json_atomic

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Device = Literal["cuda", "cpu"]

PLAN_FILE = "plan.json"
FOLLOW_ON_FILE = "more{number}.json"
"""A follow-on plan for a launch that holds (``BenchmarkPlan.hold_s``): more cases for the same processes, written by
the launcher beside plan.json, numbered from 1; one with no cases ends the launch."""
RECORD_FILE = "record.json"
"""The benchmark's run record (harness/records.py), in each case's directory."""


PRESTART_WAIT_ENV = "HARNESS_PRESTART_WAIT_S"
"""Set on the workers of a launch started before its turn (harness/launch/prestart.py): how long they wait for
PLAN_FILE before they end on their own."""
PLAN_POLL_S = 0.05
"""How often a worker looks for a plan the launcher has yet to write (a launch started early, a holding launch's
follow-on): its work begins at most this long after it was written."""


def prestart_wait_s() -> float | None:
    """How long this worker, of a launch started before its turn, waits for its plan; None: it was started with it."""
    value = os.environ.get(PRESTART_WAIT_ENV)
    return float(value) if value is not None else None


def wait_for_plan(plan_path: Path, wait_s: float) -> bool:
    """Until the launcher writes ``plan_path`` (True), or ``wait_s`` passed without it (False)."""
    deadline = time.time() + wait_s
    while not plan_path.exists():
        if time.time() > deadline:
            return False
        time.sleep(PLAN_POLL_S)
    return True


def wait_started_early(plan_path: Path, phase: Any, wait_s: float) -> bool:
    """A started-early worker's wait (its imports done): says so in its phase file (``phase``: harness/rank.py's
    RankPhase), then waits for its plan; False, saying why in its log, when none came (the launcher did not take
    this launch, and the worker ends)."""
    phase.write("waiting for the plan", expected_s=wait_s)
    if wait_for_plan(plan_path, wait_s):
        return True
    print(f"[harness worker] no plan in {wait_s:.0f} s: the launcher did not take this launch", flush=True)
    return False


@dataclass(frozen=True, kw_only=True, slots=True)
class CasePlan:
    """One benchmark case: model × precision × batch, and how to warm up and measure it."""

    model: str
    precision: str
    scaling: Scaling
    batch_size_per_gpu: int
    global_batch_size: int
    device: Device
    warmup_seconds: float
    max_warmup_seconds: float
    min_warmup_steps: int
    warmup_block_steps: int
    measure_seconds: float
    min_measure_steps: int
    compute_probe_steps: int
    compile: bool
    peak_tflops: float | None
    sync_each_step: bool
    ci_target: float
    """Adaptive window: stop once the 95 % CI half-width of throughput is at most this (relative),
    after ``measure_seconds`` at least; 0 = a fixed window of ``measure_seconds``."""
    max_measure_seconds: float
    ci_block_seconds: float
    independent: bool
    """Every rank trains its own model with world-size-1 semantics (no DDP, no gradient all-reduce): a
    1-GPU case run on every GPU of the launch at once. The process group only agrees on step counts
    and gathers the timings, at the window's boundaries."""
    ranks: int
    """The launch's ranks this case runs on: ranks 0 .. ranks-1 (one launch holds cases of every GPU
    count of a node; the other ranks wait for the case to end). An independent case runs on all of them."""
    run_dir: Path
    """This case's directory: its record, a copy of its phase files, its failure files."""
    run_id: str


PLANNED_STEPS = "steps"
"""plan.json's key for what the launch will do and how long each step is planned to take: ``[[what, seconds],
...]``, which the launcher's heartbeat reads (harness/launch/heartbeat.py) whatever kind of plan it is."""


@runtime_checkable
class StepsPlanned(Protocol):
    """A plan that says its steps and their planned seconds (written beside it in plan.json as ``PLANNED_STEPS``)."""

    def planned_steps(self) -> list[tuple[str, float]]:
        """(what, planned seconds) of each step, in order."""


@dataclass(frozen=True, kw_only=True, slots=True)
class BenchmarkPlan:
    """The cases of one launch, in order: process start, imports and process-group init are paid once."""

    cases: tuple[CasePlan, ...]
    hold_s: float = 0.0
    """After its cases, how long the launch waits for a follow-on plan (FOLLOW_ON_FILE) before it ends; 0: it
    ends at once. A holding launch keeps its processes, warm (cuDNN's autotuned algorithms, the GPUs' clocks),
    for cases the launcher decides on only after it has read these cases' records (re-measures, issue 28)."""

    def planned_steps(self) -> list[tuple[str, float]]:
        """Each case: its warmup and its (least) window."""
        return [(f"{case.model} {case.precision} {case.scaling}", case.warmup_seconds + case.measure_seconds)
                for case in self.cases]


Plan = TypeVar("Plan", bound="DataclassInstance")
"""A plan of any kind: the DDP benchmark's (``BenchmarkPlan``, its cases nested) or a kind's own dataclass of
plain fields (harness/kinds/<kind>/plan.py), which write_plan and read_plan take as they are."""


def _to_json_value(value: Any) -> Any:
    return str(value) if isinstance(value, Path) else value


def _from_dict(kind: type, data: dict[str, Any]) -> Any:
    if kind is BenchmarkPlan:
        return BenchmarkPlan(cases=tuple(_from_dict(CasePlan, case) for case in data["cases"]),
                             hold_s=float(data.get("hold_s", 0.0)))
    return kind(**{**data, "run_dir": Path(data["run_dir"])})


def write_plan(path: Path, plan: DataclassInstance) -> None:
    """``plan`` as JSON at ``path`` (atomically: every rank reads it)."""
    if isinstance(plan, BenchmarkPlan):
        data: dict[str, Any] = {"cases": [{k: _to_json_value(v) for k, v in dataclasses.asdict(case).items()}
                                          for case in plan.cases], "hold_s": plan.hold_s}
    else:
        data = {k: _to_json_value(v) for k, v in dataclasses.asdict(plan).items()}
    steps = [list(step) for step in plan.planned_steps()] if isinstance(plan, StepsPlanned) else []
    write_json_atomic(path, json.dumps({"kind": type(plan).__name__, **data, PLANNED_STEPS: steps}, indent=1))


def read_plan(path: Path, kind: type[Plan]) -> Plan:
    """The plan at ``path``, which must be a ``kind``; a wrong or damaged file stops the worker saying so."""
    try:
        data = json.loads(Path(path).read_text())
        if data.pop("kind", None) != kind.__name__:
            raise ValueError(f"not a {kind.__name__}")
        data.pop(PLANNED_STEPS, None)
        plan: Plan = _from_dict(kind, data)
        return plan
    except (OSError, ValueError, TypeError, KeyError) as err:
        raise SystemExit(f"{path}: not a readable {kind.__name__} ({err}); plans are written by the harness "
                         "launcher (harness/launch/spec.py), not by hand") from None


def plan_argument(argv: list[str] | None, module: str) -> Path:
    """``--plan PLAN.json``, the one argument of every worker module."""
    args = sys.argv[1:] if argv is None else list(argv)
    if len(args) != 2 or args[0] != "--plan":
        raise SystemExit(f"usage: python -m {module} --plan PLAN.json (written by the harness launcher)")
    return Path(args[1])
