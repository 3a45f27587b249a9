"""Launching the benchmark cases: one launch per node, repeated, and each 1-GPU baseline once.

A test asks for its case's record; the first test launches every pending single-node case together
(``--harness-launch grouped``, the default), ordered by model and precision so that a case's 1-GPU
reference and its 2-, 4-, 8-GPU runs are measured back to back, in the same processes (launch_order);
the other tests find their records waiting. A case's 1-GPU baseline is keyed by what that run does
(model, precision, batch), so a weak-scaling 1-GPU case and a strong-scaling baseline of the same batch are one launch.
With ``follow_ons`` (kinds/ddp_scaling/confirming.py), that launch holds after its cases and runs the re-measures of the
cases in doubt on the same processes, warm, before it ends (launch/group.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from harness.cases import CaseId, remeasure_label
from harness.checks.repeats import combine
from harness.launch import benchmark as single_launch
from harness.launch import group as shared_launch
from harness.launch import prestart
from harness.launch.command import group_launch_command
from harness.launch.spec import BenchmarkSpec
from harness.node.processes import GpuProcess, busy_gpu_message
from harness.plugin.context import SessionContext
from harness.plugin.specs import benchmark_spec
from harness.records import RunRecord, write_record
from harness.results.job import Failure

BaselineKey = tuple[str, str, int]
"""(model, precision, per-GPU batch) of a 1-GPU run."""

Runs = list[tuple[str, BenchmarkSpec]]
"""(label, spec) of the runs of a launch, in order."""


class FollowOns(Protocol):
    """What a holding launch runs after the session's planned cases (kinds/ddp_scaling/confirming.py)."""

    def next_runs(self, done: dict[str, RunRecord]) -> Runs:
        """Given every record of the launch so far, by label: the runs to hand it next ([]: it ends)."""

    def took(self, done: dict[str, RunRecord]) -> None:
        """Every record of the launch once it ended, by label (those it handed out included, failed or not)."""


@dataclass(kw_only=True)
class CaseLauncher:
    ctx: SessionContext
    planned: list[CaseId] = field(default_factory=list)
    """The selected scaling cases that will run (not skipped, not deselected), in test order."""
    prefetched: dict[str, RunRecord] = field(default_factory=dict)
    """label -> record launched with an earlier case's group, waiting for its test."""
    launched: set[str] = field(default_factory=set)
    launches: int = 0
    """Shared launches so far: names their log directories."""
    baselines: dict[BaselineKey, RunRecord] = field(default_factory=dict)
    follow_ons: FollowOns | None = None
    """Decides what the session's grouped launch runs after its planned cases, while it holds; None: it ends."""
    started: prestart.Started | None = None
    """The session's first grouped launch, started with the session (``start_early``) until a launch takes it."""

    def start_early(self) -> None:
        """Start the launch the first scaling test will ask for now, so that its workers start and import
        (11-17 s on 4 x H100 and 4 x H200, issue 28) while the component and all-reduce launches measure; they
        touch no GPU until their plan comes (harness/launch/prestart.py). Only a launch of several single-node
        cases (the grouped path); ``--harness-prestart`` says where (auto: on GPUs)."""
        ctx = self.ctx
        if (self.started is not None or ctx.options.launch != "grouped" or not self.planned
                or not ctx.options.starts_early(ctx.device)):
            return
        runs = [(label, spec) for label, spec in self.pending() if spec.nodes == 1]
        if len(runs) * ctx.options.repeats < 2:
            return  # a one-run launch is a plain launch (launch_group)
        widest = max((spec for _, spec in runs), key=lambda spec: spec.gpus_per_node).launch
        launch_dir = self.launch_dir(self.launches + 1, widest.gpus_per_node)
        self.started = prestart.start_early(widest, group_launch_command(launch_dir, widest), launch_dir,
                                            shared_launch.group_launch_id(launch_dir))

    def launch_dir(self, number: int, width: int) -> Path:
        """The log directory of the session's ``number``-th shared launch, ``width`` GPUs wide: where a launch started
        early waits is where the launch that takes it runs."""
        return self.ctx.log_dir(f"launch{number}-{width}gpu")

    def take_started(self) -> prestart.Started | None:
        started, self.started = self.started, None
        return started

    def spec_for(self, case: CaseId, gpus: int | None = None) -> BenchmarkSpec:
        return benchmark_spec(self.ctx, case, gpus)

    def launch(self, case: CaseId, label: str | None = None) -> RunRecord:
        """The record of ``case`` (its repeats combined): launched now, or earlier with its group."""
        spec = self.spec_for(case)
        label = label or spec.case_id
        if label not in self.prefetched:
            self.launch_group(label, spec)
        return self.prefetched.pop(label)

    def pending(self) -> list[tuple[str, BenchmarkSpec]]:
        """(label, spec) of every selected case, and every 1-GPU baseline they need, not yet launched."""
        wanted: dict[str, BenchmarkSpec] = {}
        for case in self.planned:
            spec = self.spec_for(case)
            wanted.setdefault(spec.case_id, spec)
            if case.world_size > 1 or case.scaling == "strong":
                one = self.spec_for(case.one_gpu())
                if self.baseline_key(case) not in self.baselines:
                    wanted.setdefault(one.case_id, one)
        return [(label, spec) for label, spec in wanted.items() if label not in self.launched]

    def launch_group(self, label: str, spec: BenchmarkSpec) -> None:
        """Launch ``spec`` (and, grouped, every pending single-node case) ``repeats`` times each."""
        ctx, repeats = self.ctx, self.ctx.options.repeats
        group = [(label, spec)]
        if ctx.options.launch == "grouped" and spec.nodes == 1:
            group = launch_order(group + [(other, s) for other, s in self.pending() if other != label and s.nodes == 1])
        runs = [(f"{name}-repeat{r + 1}" if r else name, s) for name, s in group for r in range(repeats)]

        def keep(done: dict[str, RunRecord]) -> None:
            """The group's records, waiting for their tests (before the launch ends, for the follow-ons to judge)."""
            for index, (name, _) in enumerate(group):
                self.prefetched[name] = combine([done[run] for run, _ in runs[index * repeats:(index + 1) * repeats]])
                self.launched.add(name)

        # A launch of one run (a one-case session) stays a plain launch: its own directory, as before.
        follow_ons = (self.follow_ons if ctx.options.launch == "grouped" and spec.nodes == 1 and len(runs) > 1
                      else None)

        def then(done: dict[str, RunRecord]) -> Runs:
            assert follow_ons is not None
            keep(done)
            return follow_ons.next_runs(done)

        done = self.run_launch(runs, then=then if follow_ons is not None else None)
        keep(done)
        if follow_ons is not None and len(done) > len(runs):
            follow_ons.took(done)

    def run_launch(self, runs: Runs, then: Callable[[dict[str, RunRecord]], Runs] | None = None
                   ) -> dict[str, RunRecord]:
        """``runs`` (label, spec) in one launch as wide as the widest (or refused, naming what holds the
        GPUs); each record written under its label. With ``then``, the launch holds after them and runs what
        ``then`` hands it (given every record so far), until it hands nothing. Every record by label, in order."""
        ctx = self.ctx
        width = max(s.gpus_per_node for _, s in runs)
        busy = ctx.busy_gpus(width)
        handed = list(runs)
        started = self.take_started()
        if started is not None and (busy or (len(runs) == 1 and then is None)):
            started.stop()  # not the launch it was started for: that one does not run
            started = None
        if busy:
            records = [refused_record(s, f"{ctx.run_id}-{name}", busy) for name, s in runs]
        elif len(runs) == 1 and then is None:
            (name, spec), = runs
            records = [single_launch.run_benchmark(spec, ctx.log_dir(name), run_id=f"{ctx.run_id}-{name}")]
        else:
            def follow_on(so_far: list[RunRecord]) -> list[shared_launch.Case]:
                assert then is not None
                more = then(dict(zip((name for name, _ in handed), so_far, strict=True)))
                handed.extend(more)
                return [(s, ctx.log_dir(name), f"{ctx.run_id}-{name}") for name, s in more]

            self.launches += 1
            records = shared_launch.run_benchmark_group(
                [s for _, s in runs], [ctx.log_dir(name) for name, _ in runs],
                [f"{ctx.run_id}-{name}" for name, _ in runs],
                self.launch_dir(self.launches, width), follow_on=follow_on if then is not None else None,
                started=started)
        for (name, _), record in zip(handed, records, strict=True):
            write_record(ctx.record_path(name), record)
        return dict(zip((name for name, _ in handed), records, strict=True))

    def remeasure(self, case: CaseId, attempt: int) -> tuple[RunRecord, RunRecord | None]:
        """``case`` measured again, with its 1-GPU reference right before it in the same launch (issue 27:
        confirm before a FAIL); (its record, the reference's, None for a 1-GPU weak case)."""
        runs = self.remeasure_runs(case, attempt)
        # One launch holds one shape of job (launch/group.py): a multi-node case and its single-node
        # reference go one launch after the other, as the session first measured them.
        records = (list(self.run_launch(runs).values()) if self.spec_for(case).nodes == 1
                   else [record for run in runs for record in self.run_launch([run]).values()])
        return records[-1], records[0] if len(records) == 2 else None

    def remeasure_runs(self, case: CaseId, attempt: int) -> list[tuple[str, BenchmarkSpec]]:
        """(label, spec) of one re-measure of ``case``: its 1-GPU reference first where it has one."""
        spec = self.spec_for(case)
        runs = [(remeasure_label(spec.case_id, attempt), spec)]
        if case.world_size > 1 or case.scaling == "strong":
            one = self.spec_for(case.one_gpu())
            runs.insert(0, (remeasure_label(one.case_id, attempt, reference_for_gpus=case.gpus), one))
        return runs

    def remeasure_together(self, cases: list[CaseId], attempt: int) -> dict[CaseId, tuple[RunRecord,
                                                                                         RunRecord | None]]:
        """Attempt ``attempt`` of every single-node case in ``cases`` in one launch (issue 28: a launch per
        re-measure paid start-up and cold autotuning again, 27 s each, 215 s of one 2 x H100 session), each
        right after its reference, in launch order as the session first measured them; a multi-node case
        in launches of its own (remeasure). (record, reference) per case."""
        together = [case for case in cases if self.spec_for(case).nodes == 1]
        measured = {case: self.remeasure(case, attempt) for case in cases if case not in together}
        if not together:
            return measured
        labels, runs = self.remeasure_plan(together, attempt)
        records = self.run_launch(runs)
        for case, (label, reference) in labels.items():
            measured[case] = records[label], records[reference] if reference is not None else None
        return measured

    def remeasure_plan(self, cases: list[CaseId], attempt: int) -> tuple[dict[CaseId, tuple[str, str | None]], Runs]:
        """Attempt ``attempt`` of single-node ``cases`` as one launch's runs: (case -> the labels of its run and of
        its reference's, None for a 1-GPU weak case; the runs, each case right after its reference, in launch
        order as the session first measured them)."""
        planned = {case: self.remeasure_runs(case, attempt) for case in cases}
        labels = {case: (runs[-1][0], runs[0][0] if len(runs) == 2 else None) for case, runs in planned.items()}
        return labels, launch_order([run for runs in planned.values() for run in runs])

    def peek(self, case: CaseId) -> tuple[RunRecord, RunRecord | None] | None:
        """The first record of a single-node ``case`` whose test has not taken it yet, and its reference,
        without taking them (a look ahead: which other cases a batch of re-measures should hold); None
        when either is not measured yet or the case failed."""
        spec = self.spec_for(case)
        record = self.prefetched.get(spec.case_id) or self.measured_baseline(case)
        if spec.nodes != 1 or record is None or not record.ok:
            return None
        if case.world_size == 1 and case.scaling == "weak":
            return record, None
        baseline = (self.baselines.get(self.baseline_key(case))
                    or self.prefetched.get(self.spec_for(case.one_gpu()).case_id))
        return (record, baseline) if baseline is not None and baseline.ok else None

    # --- 1-GPU baselines

    def baseline(self, case: CaseId) -> RunRecord:
        """The 1-GPU run with this case's model, precision and (1-GPU) batch: measured once per session.

        Keyed by what the run does, not by the test that asked: a strong-scaling baseline at global
        batch B is the same launch as the weak-scaling 1-GPU case at batch B, and is shared.
        """
        key = self.baseline_key(case)
        if key not in self.baselines:
            one = case.one_gpu()
            self.baselines[key] = self.launch(one, label=self.spec_for(one).case_id)
        return self.baselines[key]

    def baseline_key(self, case: CaseId) -> BaselineKey:
        """What identifies ``case``'s 1-GPU run: model, precision and the batch that run trains."""
        return case.model, case.precision, self.spec_for(case.one_gpu()).per_gpu_batch

    def measured_baseline(self, case: CaseId) -> RunRecord | None:
        """This 1-GPU case's record when it already ran as another case's baseline; else None."""
        return self.baselines.get(self.baseline_key(case)) if case.world_size == 1 else None

    def remember_baseline(self, case: CaseId, record: RunRecord) -> None:
        if case.world_size == 1:
            self.baselines.setdefault(self.baseline_key(case), record)

    def record_and_baseline(self, case: CaseId) -> tuple[RunRecord, RunRecord | None]:
        """The case's record and, for a case that needs one and ran, its 1-GPU baseline."""
        if case.scaling == "weak":
            # A 1-GPU case may have run already as a wider case's baseline (compiling, the widest go first).
            record = self.measured_baseline(case) or self.launch(case)
            self.remember_baseline(case, record)
            return record, self.baseline(case) if case.world_size > 1 and record.ok else None
        record = self.launch(case)
        return record, self.baseline(case) if record.ok else None


def launch_order(group: list[tuple[str, BenchmarkSpec]]) -> list[tuple[str, BenchmarkSpec]]:
    """Cases by model, precision and scaling mode; within each, the 1-GPU reference (every GPU at once)
    first, then the GPU counts ascending: an efficiency's two figures are measured seconds apart, and
    each case after the first of its work starts hot (harness/workloads/ddp_cases.py settle_key)."""
    first_seen = {key: index for index, key in reversed(list(enumerate((s.model, s.precision) for _, s in group)))}
    return sorted(group, key=lambda item: (first_seen[(item[1].model, item[1].precision)], item[1].scaling != "weak",
                                           not item[1].independent, item[1].training_world_size))


def refused_record(spec: BenchmarkSpec, run_id: str, busy: list[GpuProcess]) -> RunRecord:
    """A launch we did not start because its GPUs were busy: a failed record naming them."""
    return RunRecord(run_id=run_id, model=spec.model, precision=spec.precision, scaling=spec.scaling,
                     world_size=spec.training_world_size, nodes=spec.nodes, device_kind=spec.device,
                     batch_size_per_gpu=spec.per_gpu_batch,
                     global_batch_size=spec.per_gpu_batch * spec.training_world_size, independent=spec.independent,
                     status="failed", failure=Failure(reason=busy_gpu_message(busy), phase="setup"))
