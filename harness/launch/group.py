"""Several benchmark cases of one node in one torchrun launch; one record per case, in order.

The launch is as wide as its widest case; a narrower case runs on ranks 0 .. n-1 (a subgroup) while
the others wait (harness/workloads/ddp_cases.py). What the single launch saves is the process start,
imports and process-group init of every case but the first (11-17 s each on 4 x H200, issue 28) and
cuDNN's autotuning of every case after the first of its model and precision. What each case keeps is its
own: run directory, record, telemetry window (a sampler per case, opened and closed by that
case's phase files), time bounds. The first failure ends the launch: that case gets the failure
record, the cases before it keep theirs, and the cases after it run again in a new launch, so
one bad case costs the others nothing but time.

A launch given ``follow_on`` holds after its cases (issue 28): once every case it was handed has ended, the
launcher finalizes their records and asks ``follow_on`` what to run next on the same processes, warm (cuDNN's
autotuned algorithms kept, the GPUs hot); its answer goes to the workers as a follow-on plan (more1.json, ...),
and an empty answer ends the launch. The session's re-measures of the cases in doubt run there instead of in a
launch of their own, which paid start-up and cold autotuning again (27 s to over 80 s on H100 nodes).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

from harness.launch.benchmark import failure_record, run_benchmark
from harness.launch.cleanup import clear_run_dir
from harness.launch.command import group_launch_command
from harness.launch.prestart import Started
from harness.launch.failure import explain_failure
from harness.launch.spec import BenchmarkSpec, LaunchSettings
from harness.launch.supervise import JobOutcome, run_job
from harness.rank import read_phases
from harness.records import RunRecord, read_record, write_record
from harness import telemetry
from harness.workloads.plan import FOLLOW_ON_FILE, PLAN_FILE, RECORD_FILE, BenchmarkPlan, write_plan

PER_CASE_SETTINGS = ("timeout_s", "gpus_per_node")
"""The launch settings the cases of one launch may differ in: the launch may take what they take together,
and is as wide as its widest case."""


def check_one_launch(specs: list[BenchmarkSpec]) -> None:
    """A ValueError naming the first launch setting the cases do not share (one torchrun, one environment)."""
    for setting in dataclasses.fields(LaunchSettings):
        if setting.name in PER_CASE_SETTINGS:
            continue
        values = {repr(getattr(spec.launch, setting.name)) for spec in specs}
        if len(values) > 1:
            raise ValueError(f"the cases of one launch must share {setting.name}; got {', '.join(sorted(values))}")
    if specs[0].nodes > 1:
        raise ValueError("a launch of several cases runs on one node; launch multi-node cases one at a time")


Case = tuple[BenchmarkSpec, Path, str]
"""A case handed to a launch: its spec, its run directory, its run id."""

FollowOn = Callable[[list[RunRecord]], list[Case]]
"""A holding launch's next cases: given the final record of every case it ran so far, in order, the cases to
run next on the same processes; [] ends the launch."""

HOLD_S = 60.0
"""How long a holding launch's workers wait for the next follow-on plan before they end on their own (the
launcher answers within a poll, ~0.2 s; this is for a launcher that died)."""


def run_benchmark_group(specs: list[BenchmarkSpec], run_dirs: list[Path], run_ids: list[str],
                        launch_dir: Path, follow_on: FollowOn | None = None, started: Started | None = None
                        ) -> list[RunRecord]:
    """Launch ``specs`` together (one record per case, in order); the cases after a failure run again.
    With ``follow_on``, the launch holds and the cases it hands out run after them: their records follow, in order.
    ``started``: this launch, started early (harness/launch/prestart.py); taken when it is this launch, else
    stopped and a launch started now."""
    if not (len(specs) == len(run_dirs) == len(run_ids)) or not specs:
        raise ValueError("run_benchmark_group needs one run directory and one run id per spec, and at least one spec")
    if len(specs) == 1 and follow_on is None:
        return [run_benchmark(specs[0], run_dirs[0], run_id=run_ids[0])]
    check_one_launch(specs)
    launch_dir = Path(launch_dir)
    launch_dir.mkdir(parents=True, exist_ok=True)
    run_dirs = [Path(run_dir) for run_dir in run_dirs]
    for run_dir in run_dirs:
        clear_run_dir(run_dir)
    for stale in launch_dir.glob(FOLLOW_ON_FILE.format(number="*")):
        stale.unlink()
    plan = BenchmarkPlan(cases=tuple(spec.case_plan(run_dir, run_id)
                                     for spec, run_dir, run_id in zip(specs, run_dirs, run_ids, strict=True)),
                         hold_s=HOLD_S if follow_on is not None else 0.0)
    widest = max(specs, key=lambda spec: spec.gpus_per_node).launch
    command = group_launch_command(launch_dir, widest)
    launch_id = started.run_id if started is not None else group_launch_id(launch_dir)
    process = started.adopt(widest, command, launch_dir, launch_id) if started is not None else None
    write_plan(launch_dir / PLAN_FILE, plan)  # a launch started early begins here
    samplers = CaseSamplers(list(run_dirs), specs[0].launch)
    cases = Held(specs=list(specs), run_dirs=list(run_dirs), run_ids=list(run_ids), launch_dir=launch_dir,
                 samplers=samplers, follow_on=follow_on)
    # The stall rule bounds each case; the whole launch may take what its cases may take together.
    outcome = run_job(widest, command, launch_dir, launch_id,
                      timeout_s=sum(spec.launch.timeout_s for spec in specs), sampler=samplers,
                      watch=cases.watch if follow_on is not None else None, started_process=process)
    return _records_of_group(cases, outcome)


def group_launch_id(launch_dir: Path) -> str:
    """The run id of a launch of several cases (every process of it carries it: harness/launch/cleanup.py)."""
    return f"{launch_dir.name}-{os.getpid()}-{int(time.time())}"


@dataclass(kw_only=True)
class Held:
    """The cases of one launch, growing while it holds: each finalized once, as it ends or after the launch."""

    specs: list[BenchmarkSpec]
    run_dirs: list[Path]
    run_ids: list[str]
    launch_dir: Path
    samplers: CaseSamplers
    follow_on: FollowOn | None = None
    started: float = field(default_factory=time.time)
    final: dict[int, RunRecord] = field(default_factory=dict)
    """index -> the case's final record (its telemetry and launch_total added), written once."""
    follow_ons: int = 0
    """Follow-on plans written so far; the last one, empty, ended the launch."""
    ended: bool = False

    def watch(self) -> float:
        """At every poll of the running launch: once every case handed to it has ended, hand it the follow-on's
        cases, or end it. Seconds its limit grows by (what the new cases may take)."""
        if self.ended or self.follow_on is None or case_end(self.run_dirs[-1]) is None:
            return 0.0
        ends = [case_end(run_dir) if (run_dir / RECORD_FILE).exists() else None for run_dir in self.run_dirs]
        if None in ends:
            return 0.0  # the last case ended before an earlier one: a failure the launch's end will explain
        records = [self.finalized(index, ended) for index, ended in enumerate(ends)]
        try:
            more = self.follow_on(records)
        except Exception as err:  # the launch must still end: the session re-measures the old way
            print(f"harness: the launch {self.launch_dir.name} ends here: deciding its follow-on cases failed "
                  f"({type(err).__name__}: {err})", flush=True)
            more = []
        for spec, run_dir, run_id in more:
            clear_run_dir(run_dir)
            self.specs.append(spec)
            self.run_dirs.append(run_dir)
            self.run_ids.append(run_id)
            self.samplers.run_dirs.append(run_dir)
        self.follow_ons += 1
        write_plan(self.launch_dir / FOLLOW_ON_FILE.format(number=self.follow_ons),
                   BenchmarkPlan(cases=tuple(spec.case_plan(run_dir, run_id) for spec, run_dir, run_id in more)))
        self.ended = not more
        return sum(spec.launch.timeout_s for spec, _, _ in more)

    def finalized(self, index: int, ended: float | None, summary: dict | None = None) -> RunRecord:
        """Case ``index``'s record as rank 0 wrote it, with its telemetry (its sampler stopped now, or
        ``summary``) and the launch time since the case before it ended, written back once."""
        if index not in self.final:
            run_dir = self.run_dirs[index]
            previous_end = case_end(self.run_dirs[index - 1]) if index else None
            record = read_record(run_dir / RECORD_FILE)
            if summary is None:
                summary = self.samplers.finish(run_dir)
            self.final[index] = dataclasses.replace(record, telemetry=summary, phases_s={
                **record.phases_s, "launch_total": (ended or time.time()) - (previous_end or self.started)})
            write_record(run_dir / RECORD_FILE, self.final[index])
        return self.final[index]


def _records_of_group(cases: Held, outcome: JobOutcome) -> list[RunRecord]:
    """Each case's final record (written once, with its telemetry), up to the first that has none."""
    records: list[RunRecord] = []
    specs, run_dirs, run_ids, launch_dir = cases.specs, cases.run_dirs, cases.run_ids, cases.launch_dir
    previous_end = cases.started = outcome.started
    for index, (spec, run_dir, run_id) in enumerate(zip(specs, run_dirs, run_ids, strict=True)):
        record_path = run_dir / RECORD_FILE
        summary = (outcome.telemetry or {}).get(str(run_dir)) or telemetry.unavailable(
            "the launch ended before this case began", period_s=spec.launch.telemetry_period_s)
        ended = case_end(run_dir)
        if record_path.exists() and ended is not None:
            records.append(cases.finalized(index, ended, summary))
            previous_end = ended
            continue
        # This case was running when the launch ended: the launch's failure is its failure.
        status, failure = ((outcome.status, outcome.failure) if outcome.failure is not None else
                           explain_failure(launch_dir, returncode=1, stall=None, elapsed_s=outcome.elapsed_s,
                                           phases=outcome.phases))
        record = failure_record(spec, run_id, status=status, failure=failure, phases=outcome.phases,
                                elapsed_s=time.time() - previous_end if outcome.stall is None else outcome.elapsed_s,
                                telemetry=summary)
        write_record(record_path, record)
        records.append(record)
        rest = index + 1
        if rest < len(specs):
            records += run_benchmark_group(specs[rest:], run_dirs[rest:], run_ids[rest:],
                                           launch_dir.with_name(f"{launch_dir.name}-from-{rest}"))
        break
    return records


def case_end(run_dir: Path) -> float | None:
    """When rank 0 finished this case (its phase file says done), or None."""
    info = read_phases(run_dir).get(0)
    return float(info["since"]) if info and info.get("phase") == "done" and "since" in info else None


class CaseSamplers:
    """One telemetry sampler per case of a launch, each started when its case begins.

    A sampler polls its own case directory, so it opens and closes on that case's measured window
    only; starting them lazily keeps one sampling thread busy at a time.
    """

    def __init__(self, run_dirs: list[Path], launch: LaunchSettings, *,
                 factory: Callable[[Path], Any] | None = None, poll_s: float = 0.2):
        self.run_dirs = run_dirs
        self._factory = factory or (lambda run_dir: telemetry.sampler_for(
            launch.device, run_dir, enabled=launch.telemetry, period_s=launch.telemetry_period_s))
        self._started: dict[Path, Any] = {}
        self._finished: dict[Path, dict] = {}
        self._period_s = launch.telemetry_period_s
        self._poll_s = poll_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> CaseSamplers:
        self._thread = threading.Thread(target=self._watch, name="harness-case-samplers", daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._stop.is_set():
            self.poll()
            self._stop.wait(self._poll_s)

    def poll(self) -> None:
        for run_dir in list(self.run_dirs):  # a holding launch's cases grow while this thread polls
            if run_dir not in self._started and any(run_dir.glob("rank*.phase")):
                self._started[run_dir] = self._factory(run_dir).start()

    def finish(self, run_dir: Path) -> dict:
        """The telemetry summary of a case that has ended while the launch goes on (its sampler stopped now)."""
        if run_dir not in self._finished:
            self.poll()
            sampler = self._started.get(run_dir)
            self._finished[run_dir] = sampler.stop() if sampler is not None else telemetry.unavailable(
                "this case left no phase files", period_s=self._period_s)
        return self._finished[run_dir]

    def stop(self) -> dict[str, dict]:
        """Every case's telemetry summary, keyed by its run directory (str)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10.0)
        self.poll()  # a case that began in the last moments still says why it has no samples
        return {str(run_dir): self._finished[run_dir] if run_dir in self._finished else sampler.stop()
                for run_dir, sampler in self._started.items()}
