"""The pytest plugin: turns a threshold profile into parametrized acceptance tests and runs them.

Registered through the ``pytest11`` entry point, so it is loaded in every pytest session, but it
stays inert unless the session is an acceptance session: ``harness_acceptance = true`` in the
ini file (acceptance/pytest.ini sets it). Then, before any test runs, it validates every
threshold file, detects the hardware, picks the profile and makes ``reports/<run-id>/``; any
problem there is one clear error and no benchmark starts.

Options share the prefix ``--harness-``; the everyday ones also have the short spellings the
README uses (``--hardware``, ``--models``, ``--precisions``, ``--gpus``). Session state lives in
``config.stash``.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pytest

from harness.cases import CaseId
from harness.fleet.session_end import PROMETHEUS_ENV, STORE_ENV, prometheus_dir, record_session, store_path
from harness.records import RunRecord

SESSION_KEY = pytest.StashKey["HarnessSession"]()
RESULT_KEY = pytest.StashKey["CaseResult"]()


# --- options ---------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("harness_acceptance", type="bool", default=False,
                  help="run this pytest session as a GPU acceptance session (set in acceptance/pytest.ini)")
    group = parser.getgroup("harness", "GPU acceptance harness")
    group.addoption("--harness-hardware", "--hardware", dest="harness_hardware", metavar="PROFILE",
                    help="use this threshold profile instead of matching the detected hardware")
    group.addoption("--harness-thresholds-dir", dest="harness_thresholds_dir", metavar="DIR",
                    help="directory of threshold profiles (default: the shipped thresholds/)")
    group.addoption("--harness-models", "--models", dest="harness_models", action="append", metavar="M[,M...]",
                    help="only these models (default: the profile's matrix)")
    group.addoption("--harness-precisions", "--precisions", dest="harness_precisions", action="append",
                    metavar="P[,P...]", help="only these precisions (default: the profile's matrix)")
    group.addoption("--harness-gpus", "--gpus", dest="harness_gpus", action="append", metavar="N[,N...]",
                    help="only these GPU counts (default: the profile's matrix)")
    group.addoption("--harness-nodes", "--nodes", dest="harness_nodes", action="append", metavar="N[,N...]",
                    help="multi-node cases on these node counts (default: every node of the Slurm allocation, "
                         "when it has more than one; GPU counts are then per node)")
    group.addoption("--harness-report-dir", dest="harness_report_dir", default="reports", metavar="DIR",
                    help="where reports/<run-id>/ is made (default: ./reports)")
    group.addoption("--harness-warmup-seconds", dest="harness_warmup_seconds", type=float, metavar="S",
                    help="override the profile's minimum warmup seconds")
    group.addoption("--harness-measure-seconds", dest="harness_measure_seconds", type=float, metavar="S",
                    help="override the profile's measured-window seconds")
    group.addoption("--harness-timeout", dest="harness_timeout", type=float, metavar="S",
                    help="override the profile's per-launch timeout (seconds)")
    group.addoption("--harness-stall-factor", dest="harness_stall_factor", type=float, default=3.0, metavar="F",
                    help="a rank with no progress for F x its phase's expected time + the floor is hung (default 3)")
    group.addoption("--harness-stall-floor", dest="harness_stall_floor", type=float, default=30.0, metavar="S",
                    help="seconds added to every stall bound (default 30)")
    group.addoption("--harness-telemetry", dest="harness_telemetry", choices=("on", "off"), default="on",
                    help="sample the GPUs (NVML) during each measured window (default on; off measures its cost)")
    group.addoption("--harness-telemetry-period", dest="harness_telemetry_period", type=float, default=0.1,
                    metavar="S", help="seconds between telemetry samples (default 0.1)")
    group.addoption("--harness-ci-target", dest="harness_ci_target", type=float, metavar="F",
                    help="adaptive window: stop measuring a case once its throughput's 95 %% CI half-width is at "
                         "most F (0.01 = ±1 %%; 0 = a fixed window); overrides the profile's [run] ci_target")
    group.addoption("--harness-repeats", "--repeats", dest="harness_repeats", type=int, default=1, metavar="N",
                    help="run every case N times and judge one figure: the median, or with N >= 5 the mean "
                         "after dropping the best and the worst run (MLPerf's rule); default 1")
    group.addoption("--harness-launch", dest="harness_launch", choices=("grouped", "per-case"), default="grouped",
                    help="grouped (default): the cases of one GPU count share one torchrun launch (start-up paid "
                         "once; a failed case ends it and the rest run again); per-case: one launch each")
    group.addoption("--harness-compile", dest="harness_compile", action="store_true",
                    help="torch.compile every case, widest GPU count first so the narrower launches find its "
                         "graphs cached (cold: 24-83 s per case on 4 x H200; warm, from --harness-compile-cache: "
                         "7-20 s of tracing per case that torch does not cache under DDP)")
    group.addoption("--harness-compile-cache", dest="harness_compile_cache", metavar="DIR",
                    help="where torch.compile keeps its caches between runs (default: REPORT_DIR/.compile-cache, "
                         "so a container's mounted reports volume keeps them)")
    group.addoption("--harness-soak", "--soak", dest="harness_soak", metavar="DURATION",
                    help="burn-in: train the profile's most compute-heavy case on every GPU for DURATION "
                         "(e.g. 4h, 30m, 90s) with telemetry on; the soak test is skipped without it")
    group.addoption("--harness-store", dest="harness_store", metavar="PATH",
                    help=f"the history store this session's facts are added to (default: ${STORE_ENV}, else "
                         "REPORT_DIR/history.sqlite); many nodes may share one path on a shared file system")
    group.addoption("--harness-prometheus-dir", dest="harness_prometheus_dir", metavar="DIR",
                    help=f"also write the session's verdict and figures to DIR/harness_acceptance.prom, for "
                         f"node_exporter's textfile collector (default: ${PROMETHEUS_ENV}, else not written)")


def _split(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


# --- cases -----------------------------------------------------------------------------------


Case = CaseId
"""A benchmark case of the session (harness.cases.CaseId)."""


@dataclass(kw_only=True)
class CaseResult:
    case: Case
    record: RunRecord
    checks: list
    baseline_run_id: str | None
    context: str
    log_dir: Path

    @property
    def failed(self) -> list:
        return [c for c in self.checks if c.passed is False]

    def failure_message(self) -> str:
        lines = [check.describe(self.context) for check in self.failed]
        if self.record.failure:
            lines.append(f"rank logs: {self.log_dir}/")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"case": self.case.test_param, "case_id": self.case.to_dict(), "scaling": self.case.scaling, "nodes": self.case.nodes, "context": self.context,
                "record": self.record.to_dict(), "baseline_run_id": self.baseline_run_id,
                "checks": [c.to_dict() for c in self.checks]}


@dataclass(kw_only=True)
class CheckedResult:
    """The checks of a test that is not a benchmark case: the all-reduce sweep, the topology, the soak."""

    name: str
    context: str
    checks: list
    data: dict = field(default_factory=dict)
    """What the report shows beside the checks; ``record`` (a run id and telemetry) is drawn like a case's."""
    log_dir: Path | None = None

    @property
    def failed(self) -> list:
        return [c for c in self.checks if c.passed is False]

    def failure_message(self) -> str:
        lines = [check.describe(self.context) for check in self.failed]
        if self.log_dir is not None and any(c.kind == "sanity" for c in self.failed):
            lines.append(f"rank logs: {self.log_dir}/")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"case": self.name, "context": self.context, "checks": [c.to_dict() for c in self.checks],
                **self.data}


# --- the session -----------------------------------------------------------------------------


@dataclass(kw_only=True)
class HarnessSession:
    config: pytest.Config
    profile: object
    hardware: object
    run_id: str
    run_dir: Path
    started_at: str
    available_gpus: int
    allocation: object = None
    """The Slurm allocation (harness.launch.slurm.SlurmAllocation) when the driver runs in a Slurm job."""
    baselines: dict = field(default_factory=dict)
    planned: list = field(default_factory=list)
    """The selected scaling cases that will run (not skipped, not deselected), in test order."""
    prefetched: dict = field(default_factory=dict)
    """label -> record launched with an earlier case's group, waiting for its test."""
    launched: set = field(default_factory=set)
    launches: int = 0
    results: dict = field(default_factory=dict)
    allreduce_runs: dict = field(default_factory=dict)
    """GPU count -> harness.workloads.allreduce.AllReduceRun, measured once per session."""
    topology: dict | None = None
    soak_run: object | None = None

    # What the matrix is, after the command-line filters.
    def selected(self, option: str, default) -> list:
        chosen = _split(self.config.getoption(option))
        return chosen if chosen is not None else list(default)

    def cases(self, scaling: str) -> list:
        profile = self.profile
        models = self.selected("harness_models", profile.models)
        precisions = self.selected("harness_precisions", profile.precisions)
        # Compiling, the widest GPU count goes first: its launch compiles every graph for each of its
        # GPUs at once (Inductor's cache key holds the device index), and the narrower launches after
        # it, the 1-GPU baselines included, find their graphs cached (harness/workloads/compilecache.py).
        gpus = sorted({int(g) for g in self.selected("harness_gpus", profile.gpu_counts)},
                      reverse=bool(self.config.getoption("harness_compile")))
        params = []
        # Single-node cases, then the same GPU counts per node on each multi-node count (Slurm).
        layouts = [(1, count) for count in gpus] + [(n, count) for n in self.node_counts() for count in gpus]
        for nodes, count in layouts:
            for model in models:
                for precision in precisions:
                    bounds = profile.bounds(model, precision)
                    world = nodes * count
                    if scaling == "strong" and (bounds is None or world == 1 or
                                                world not in bounds.min_strong_efficiency):
                        continue
                    case = Case(model=model, precision=precision, gpus=count, scaling=scaling, nodes=nodes)
                    marks = [pytest.mark.weak_scaling if scaling == "weak" else pytest.mark.strong_scaling]
                    if bounds is None:
                        marks.append(pytest.mark.skip(
                            reason=f"profile {profile.name} has no [models.{model}.{precision}] bounds"))
                    elif count > self.available_gpus:
                        unit = "GPUs" if profile.hardware.device == "cuda" else "CPU cores"
                        marks.append(pytest.mark.skip(
                            reason=f"needs {count} {unit}; this node has {self.available_gpus}"))
                    params.append(pytest.param(case, id=case.test_param, marks=marks))
        return params

    def node_counts(self) -> list[int]:
        """Node counts of the multi-node cases: --nodes, else the whole allocation (none outside Slurm)."""
        chosen = _split(self.config.getoption("harness_nodes"))
        if chosen is not None:
            return sorted({int(n) for n in chosen if int(n) > 1})
        if self.allocation is not None and self.allocation.node_count > 1:
            return [self.allocation.node_count]
        return []

    def allreduce_counts(self) -> list:
        """GPU counts of the all-reduce test: the selected counts above 1 (an all-reduce needs two), when
        the profile has an [interconnect] section (like every optional section: left out, not checked)."""
        if self.profile.interconnect is None:
            return [pytest.param(None, id="none", marks=pytest.mark.skip(
                reason=f"profile {self.profile.name} has no [interconnect] section"))]
        counts = sorted({int(g) for g in self.selected("harness_gpus", self.profile.gpu_counts)} - {1})
        unit = "GPUs" if self.profile.hardware.device == "cuda" else "CPU cores"
        params = [pytest.param(n, id=f"{n}gpu", marks=[pytest.mark.skip(
            reason=f"needs {n} {unit}; this node has {self.available_gpus}")] if n > self.available_gpus else [])
            for n in counts]
        return params or [pytest.param(None, id="none", marks=pytest.mark.skip(
            reason="no GPU count above 1 is selected: an all-reduce needs two"))]

    def spec_for(self, case: Case, gpus: int | None = None):
        from harness.launch.run import BenchmarkSpec

        bounds = self.profile.bounds(case.model, case.precision)
        run = self.profile.run
        option = self.config.getoption
        per_node = gpus if gpus is not None else case.gpus
        return BenchmarkSpec(
            model=case.model, precision=case.precision, gpus_per_node=per_node, nodes=case.nodes,
            scaling=case.scaling,
            batch_size_per_gpu=bounds.batch_size_per_gpu if case.scaling == "weak" else None,
            global_batch_size=bounds.strong_global_batch_size if case.scaling == "strong" else None,
            device=self.profile.hardware.device,
            warmup_seconds=option("harness_warmup_seconds") or run.warmup_seconds,
            measure_seconds=option("harness_measure_seconds") or run.measure_seconds,
            ci_target=self.ci_target,
            max_measure_seconds=max(run.max_measure_seconds, option("harness_measure_seconds") or 0)
            if run.max_measure_seconds else None,
            timeout_s=option("harness_timeout") or run.timeout_seconds,
            stall_factor=option("harness_stall_factor"), stall_floor_s=option("harness_stall_floor"),
            peak_tflops=self.profile.peak_tflops.get(case.precision),
            compile=option("harness_compile"), extra_env=self.compile_env,
            telemetry=self.telemetry_on, telemetry_period_s=option("harness_telemetry_period"),
        )

    def log_dir(self, label: str) -> Path:
        return self.run_dir / "logs" / label

    @property
    def ci_target(self) -> float:
        chosen = self.config.getoption("harness_ci_target")
        return chosen if chosen is not None else self.profile.run.ci_target

    @property
    def compile_env(self) -> dict[str, str]:
        """The environment that keeps torch.compile's caches where the next run finds them."""
        if not self.config.getoption("harness_compile"):
            return {}
        from harness.workloads.compilecache import cache_env

        chosen = self.config.getoption("harness_compile_cache")
        root = Path(chosen) if chosen else Path(self.config.getoption("harness_report_dir")) / ".compile-cache"
        return cache_env(root.resolve())

    @property
    def repeats(self) -> int:
        return self.config.getoption("harness_repeats")

    def launch(self, case: Case, gpus: int | None = None, label: str | None = None) -> RunRecord:
        """The record of ``case`` (its repeats combined): launched now, or earlier with its group."""
        spec = self.spec_for(case, gpus)
        label = label or spec.case_id
        if label not in self.prefetched:
            self.launch_group(label, spec)
        return self.prefetched.pop(label)

    def pending(self) -> list[tuple[str, object]]:
        """(label, spec) of every selected case, and every 1-GPU baseline they need, not yet launched."""
        wanted: dict[str, object] = {}
        for case in self.planned:
            spec = self.spec_for(case)
            wanted.setdefault(spec.case_id, spec)
            if case.world_size > 1 or case.scaling == "strong":
                one = self.spec_for(case.one_gpu())
                if self.baseline_key(case) not in self.baselines:
                    wanted.setdefault(one.case_id, one)
        return [(label, spec) for label, spec in wanted.items() if label not in self.launched]

    def launch_group(self, label: str, spec) -> None:
        """Launch ``spec`` (and, grouped, every pending case of its GPU count) ``repeats`` times each."""
        from harness.launch import run as launcher
        from harness.records import write_record
        from harness.checks.repeats import combine

        group = [(label, spec)]
        if self.config.getoption("harness_launch") == "grouped" and spec.nodes == 1:
            group += [(other, s) for other, s in self.pending()
                      if other != label and s.nodes == 1 and s.gpus_per_node == spec.gpus_per_node]
        runs = [(f"{name}-repeat{r + 1}" if r else name, s) for name, s in group for r in range(self.repeats)]
        busy = self.busy_gpus(spec.gpus_per_node)  # this node's; srun's other nodes are not looked at
        if busy:
            records = [refused_record(s, f"{self.run_id}-{name}", busy) for name, s in runs]
        elif len(runs) == 1:
            records = [launcher.run_benchmark(spec, self.log_dir(label), run_id=f"{self.run_id}-{label}")]
        else:
            self.launches += 1
            records = launcher.run_benchmark_group(
                [s for _, s in runs], [self.log_dir(name) for name, _ in runs],
                [f"{self.run_id}-{name}" for name, _ in runs],
                self.run_dir / "logs" / f"launch{self.launches}-{spec.gpus_per_node}gpu")
        for (name, _), record in zip(runs, records):
            write_record(self.run_dir / "runs" / f"{name}.json", record)
        for index, (name, _) in enumerate(group):
            self.prefetched[name] = combine(records[index * self.repeats:(index + 1) * self.repeats])
            self.launched.add(name)

    def busy_gpus(self, count: int) -> list:
        """Foreign processes on the GPUs a launch of ``count`` ranks will use (CUDA order)."""
        if self.profile.hardware.device != "cuda":
            return []
        from harness.node.hardware import gpu_processes

        return gpu_processes(self.hardware.gpus[:count])

    def baseline(self, case: Case) -> RunRecord:
        """The 1-GPU run with this case's model, precision and (1-GPU) batch: measured once per session.

        Keyed by what the run does, not by the test that asked: a strong-scaling baseline at global
        batch B is the same launch as the weak-scaling 1-GPU case at batch B, and is shared.
        """
        key = self.baseline_key(case)
        if key not in self.baselines:
            one = case.one_gpu()
            self.baselines[key] = self.launch(one, label=self.spec_for(one).case_id)
        return self.baselines[key]

    def baseline_key(self, case: Case) -> tuple:
        """What identifies ``case``'s 1-GPU run: model, precision and the batch that run trains."""
        return case.model, case.precision, self.spec_for(case.one_gpu()).per_gpu_batch

    def measured_baseline(self, case: Case) -> RunRecord | None:
        """This 1-GPU case's record when it already ran as another case's baseline; else None."""
        return self.baselines.get(self.baseline_key(case)) if case.world_size == 1 else None

    def remember_baseline(self, case: Case, record: RunRecord) -> None:
        if case.world_size == 1:
            self.baselines.setdefault(self.baseline_key(case), record)

    @property
    def telemetry_on(self) -> bool:
        return self.config.getoption("harness_telemetry") != "off"

    def telemetry_note(self) -> str:
        """Why a check that needs telemetry could not be evaluated, when the run record does not say."""
        if self.profile.hardware.device == "cpu":
            return "no GPU telemetry on a CPU run"
        if not self.telemetry_on:
            return "GPU telemetry was switched off (--harness-telemetry off)"
        return "no GPU telemetry was recorded for this run"

    # --- interconnect, topology, soak (harness/workloads/allreduce.py, harness/workloads/soak.py)

    def allreduce(self, gpus: int):
        """The all-reduce sweep on ``gpus`` GPUs (CPU ranks): measured once per session."""
        from harness.workloads import allreduce as interconnect

        if gpus not in self.allreduce_runs:
            device = self.profile.hardware.device
            memory = min((g.memory_total_gib for g in self.hardware.gpus), default=None)
            option = self.config.getoption
            spec = interconnect.AllReduceSpec(
                gpus_per_node=gpus, device=device,
                min_bytes=interconnect.MIB if device == "cuda" else 64 * 1024,
                max_bytes=interconnect.default_max_bytes(device, memory), factor=2 if device == "cuda" else 4,
                target_seconds=0.2 if device == "cuda" else 0.1,
                timeout_s=option("harness_timeout") or self.profile.run.timeout_seconds,
                stall_factor=option("harness_stall_factor"), stall_floor_s=option("harness_stall_floor"),
                telemetry=self.telemetry_on, telemetry_period_s=option("harness_telemetry_period"))
            run_id = f"{self.run_id}-{spec.case_id}"
            busy = self.busy_gpus(gpus)
            if busy:
                from harness.node.hardware import busy_gpu_message

                run = interconnect.AllReduceRun(gpus=gpus, run_id=run_id, status="failed",
                                                failure=busy_gpu_message(busy))
            else:
                run = interconnect.run_allreduce(spec, self.log_dir(spec.case_id), run_id=run_id)
            self.allreduce_runs[gpus] = run
        return self.allreduce_runs[gpus]

    def run_allreduce(self, gpus: int) -> CheckedResult:
        from harness.workloads import allreduce as interconnect

        run = self.allreduce(gpus)
        unit = "GPU" if self.profile.hardware.device == "cuda" else "rank"
        checks = interconnect.allreduce_checks(run, self.profile.interconnect, missing_note=self.telemetry_note())
        return CheckedResult(name=f"allreduce-{gpus}gpu", context=f"{self.profile.name}, all-reduce, {gpus} {unit}s",
                             checks=checks, log_dir=self.log_dir(f"allreduce-{gpus}gpu"),
                             data={"interconnect": run.to_dict(),
                                   "record": {"run_id": run.run_id, "telemetry": run.telemetry}})

    def run_topology(self) -> CheckedResult:
        """NVLink, P2P and PCIe of every GPU against [topology]; PCIe read under the all-reduce's load."""
        from harness.workloads import allreduce as interconnect
        from harness.telemetry import not_available_reason

        gpus = self.hardware.gpu_count
        self.topology = interconnect.read_topology(self.hardware.gpus)
        run = self.allreduce(gpus)
        loaded = interconnect.pcie_under_load(run.telemetry)
        why = run.failure or not_available_reason(run.telemetry, self.telemetry_note())
        self.topology["pcie_under_load"] = loaded
        checks = interconnect.topology_checks(self.topology, self.profile.topology, loaded,
                                              load_note=f"no PCIe reading under load: {why}")
        return CheckedResult(name="topology", context=f"{self.profile.name}, topology, {gpus} GPUs", checks=checks,
                             data={"topology": self.topology})

    def soak_spec(self):
        from harness.workloads.models import MODELS
        from harness.workloads.soak import SoakSpec, parse_duration

        profile = self.profile
        pairs = [(m, p) for m in profile.models for p in profile.precisions if profile.bounds(m, p) is not None]
        # The most FLOPs per sample: the case that works the GPUs hardest (max picks the first on ties).
        model, precision = max(pairs, key=lambda pair: MODELS[pair[0]].train_flops_per_sample)
        counts = [n for n in profile.gpu_counts if n <= self.available_gpus]
        gpus = self.hardware.gpu_count if profile.hardware.device == "cuda" else max(counts, default=1)
        option = self.config.getoption
        return SoakSpec(model=model, precision=precision, batch_size_per_gpu=profile.bounds(model, precision).batch_size_per_gpu,
                        gpus_per_node=gpus, duration_s=parse_duration(option("harness_soak")),
                        device=profile.hardware.device,
                        warmup_seconds=option("harness_warmup_seconds") or profile.run.warmup_seconds,
                        stall_factor=option("harness_stall_factor"), stall_floor_s=option("harness_stall_floor"),
                        telemetry=self.telemetry_on, telemetry_period_s=option("harness_telemetry_period"))

    def run_soak(self) -> CheckedResult:
        from harness.workloads.soak import run_soak, soak_checks

        spec = self.soak_spec()
        run = run_soak(spec, self.log_dir(spec.case_id), run_id=f"{self.run_id}-{spec.case_id}")
        self.soak_run = run
        bounds = self.profile.bounds(spec.model, spec.precision)
        checks = soak_checks(run, self.profile.soak, bounds, missing_note=self.telemetry_note())
        unit = "GPU" if spec.device == "cuda" else "rank"
        return CheckedResult(name=spec.case_id, checks=checks, log_dir=self.log_dir(spec.case_id),
                             context=f"{self.profile.name}, soak {spec.model} {spec.precision}, {spec.world_size} "
                                     f"{unit}{'' if spec.world_size == 1 else 's'}, {run.spec.duration_s:.0f} s",
                             data={"soak": run.to_dict(), "record": {"run_id": run.run_id, "telemetry": run.telemetry}})

    def context(self, case: Case) -> str:
        unit = "GPU" if self.profile.hardware.device == "cuda" else "rank"  # a CPU profile runs CPU ranks
        gpus = f"{case.gpus} {unit}{'' if case.gpus == 1 else 's'}"
        if case.nodes > 1:
            gpus = f"{case.nodes} nodes x {gpus}"
        return f"{self.profile.name}, {case.model} {case.precision}, {gpus}"

    def run(self, case: Case) -> CaseResult:
        from harness.checks import verdict

        bounds = self.profile.bounds(case.model, case.precision)
        if case.scaling == "weak":
            # A 1-GPU case may have run already as a wider case's baseline (compiling, the widest go first).
            record = self.measured_baseline(case) or self.launch(case)
            self.remember_baseline(case, record)
            baseline = self.baseline(case) if case.world_size > 1 and record.ok else None
            checks = verdict.weak_scaling_checks(record, baseline, bounds, telemetry_note=self.telemetry_note())
        else:
            record = self.launch(case)
            baseline = self.baseline(case) if record.ok else None
            checks = verdict.strong_scaling_checks(record, baseline, bounds, telemetry_note=self.telemetry_note())
        return CaseResult(case=case, record=record, checks=checks,
                          baseline_run_id=baseline.run_id if baseline is not None else None,
                          context=self.context(case), log_dir=self.log_dir(self.spec_for(case).case_id))

    def summary(self) -> dict:
        hardware = self.hardware
        return {
            "run_id": self.run_id, "run_dir": str(self.run_dir), "started_at": self.started_at,
            "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "profile": {"name": self.profile.name, "path": str(self.profile.path), "sha256": self.profile.sha256,
                        "description": self.profile.description, "raw": self.profile.raw},
            "hardware": hardware.to_dict(),
            "command_line": [sys.executable, "-m", "pytest", *self.config.invocation_params.args],
            "harness_version": _harness_version(),
            "slurm": self.allocation.to_dict() if self.allocation is not None else None,
            "git_commit": _git_commit(),
            "container": _container(),
            "results": {nodeid: result.to_dict() for nodeid, result in self.results.items()},
            **({"interconnect": self.interconnect_summary()} if self.allreduce_runs or self.topology else {}),
            **({"soak": self.soak_run.to_dict()} if self.soak_run is not None else {}),
        }

    def interconnect_summary(self) -> dict:
        from harness.workloads.allreduce import session_summary

        return session_summary(self.allreduce_runs, self.topology)


def refused_record(spec, run_id: str, busy: list) -> RunRecord:
    """A launch we did not start because its GPUs were busy: a failed record naming them."""
    from harness.node.hardware import busy_gpu_message
    from harness.records import Failure

    return RunRecord(run_id=run_id, model=spec.model, precision=spec.precision, scaling=spec.scaling,
                     world_size=spec.world_size, nodes=spec.nodes, device_kind=spec.device,
                     batch_size_per_gpu=spec.per_gpu_batch, global_batch_size=spec.per_gpu_batch * spec.world_size,
                     status="failed", failure=Failure(reason=busy_gpu_message(busy), phase="setup"))


def _git_commit() -> str | None:
    """The harness checkout's commit (with "-dirty" for local changes), or None outside a checkout."""
    import subprocess

    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return os.environ.get("HARNESS_GIT_COMMIT")  # baked into container images at build time
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("-dirty" if dirty else "")


def _container() -> dict | None:
    """The image this session runs in, when it runs in one (OCI image or Apptainer/Singularity)."""
    facts = {key: os.environ[key] for key in ("HARNESS_CONTAINER_IMAGE", "APPTAINER_NAME", "APPTAINER_CONTAINER",
                                              "SINGULARITY_NAME", "SINGULARITY_CONTAINER") if os.environ.get(key)}
    if not facts and Path("/run/.containerenv").exists():
        facts["runtime"] = "podman/buildah"
    if not facts and Path("/.dockerenv").exists():
        facts["runtime"] = "docker"
    return facts or None


def _harness_version() -> str:
    from harness import __version__

    return __version__


class HarnessTest:
    """What an acceptance test gets as its ``harness`` fixture: the session, bound to this test."""

    def __init__(self, session: HarnessSession, item: pytest.Item):
        self.session = session
        self.item = item

    @property
    def profile(self):
        return self.session.profile

    def run(self, case: Case) -> CaseResult:
        return self._keep(self.session.run(case))

    def run_allreduce(self, gpus: int) -> CheckedResult:
        return self._keep(self.session.run_allreduce(gpus))

    def run_topology(self) -> CheckedResult:
        return self._keep(self.session.run_topology())

    def run_soak(self) -> CheckedResult:
        return self._keep(self.session.run_soak())

    def _keep(self, result):
        self.item.stash[RESULT_KEY] = result
        self.session.results[self.item.nodeid] = result
        return result

    def assert_passed(self, result: CaseResult | CheckedResult) -> None:
        """Fail the test listing every check that missed, one line each; not-evaluated checks don't fail."""
        if result.failed:
            pytest.fail(result.failure_message(), pytrace=False)


# --- hooks -----------------------------------------------------------------------------------


def _active(config: pytest.Config) -> bool:
    """An acceptance session: the ini says so, or a loaded conftest declares ``harness_acceptance = True``.

    The conftest route keeps ``pytest acceptance --harness-thresholds-dir DIR`` working when pytest
    picks a rootdir (and so an ini file) above acceptance/ because of the extra path argument.
    """
    if config.getini("harness_acceptance"):
        return True
    return any(getattr(plugin, "harness_acceptance", False) is True for plugin in config.pluginmanager.get_plugins())


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "weak_scaling: a weak-scaling acceptance case (per-GPU batch fixed)")
    config.addinivalue_line("markers", "strong_scaling: a strong-scaling acceptance case (global batch fixed)")
    if not _active(config) or hasattr(config, "workerinput"):
        return
    session = _start_session(config)
    config.stash[SESSION_KEY] = session
    config.pluginmanager.register(_JsonReportHooks(session), "harness-json-report")
    # Reports go into the run directory unless the user asked for them elsewhere.
    if hasattr(config.option, "json_report"):
        config.option.json_report = True
        if config.option.json_report_file in (None, ".report.json"):
            config.option.json_report_file = str(session.run_dir / "report.json")
        config.option.json_report_indent = config.option.json_report_indent or 1
    if not getattr(config.option, "xmlpath", None):
        config.option.xmlpath = str(session.run_dir / "junit.xml")
    # Slurm sends SIGTERM at the time limit: make it an interrupt, so the launcher kills the
    # process groups and pytest still writes its reports.
    from harness.launch.run import stop_on_sigterm

    stop_on_sigterm()


def _start_session(config: pytest.Config) -> HarnessSession:
    from harness.node.hardware import HardwareError, detect, select_profile
    from harness.profile.schema import ThresholdError, default_thresholds_dir, load_profiles

    try:
        socket.getaddrinfo(socket.gethostname(), None)
    except OSError as exc:
        # torchrun's rendezvous binds to this name: without it every launch would hang in setup.
        raise pytest.UsageError(
            f"this host's name {socket.gethostname()!r} does not resolve ({exc}); torchrun needs it for its "
            "rendezvous. Add it to /etc/hosts (in a container: run with --add-host or a hostname that resolves).") from None
    thresholds_dir = config.getoption("harness_thresholds_dir") or default_thresholds_dir()
    try:
        profiles = load_profiles(thresholds_dir)
    except ThresholdError as exc:
        raise pytest.UsageError(f"threshold files are invalid; no benchmark was started:\n{exc}") from None
    hardware = detect()
    try:
        profile = select_profile(hardware, profiles, config.getoption("harness_hardware"))
    except HardwareError as exc:
        raise pytest.UsageError(str(exc)) from None
    for option, known in (("harness_models", profile.models), ("harness_precisions", profile.precisions)):
        from harness.workloads.models import MODELS, PRECISIONS

        valid = MODELS if option == "harness_models" else PRECISIONS
        for name in _split(config.getoption(option)) or []:
            if name not in valid:
                raise pytest.UsageError(f"--{option.removeprefix('harness_')} {name}: unknown; known: {', '.join(valid)}")
    if config.getoption("harness_soak"):
        from harness.workloads.soak import parse_duration

        try:
            parse_duration(config.getoption("harness_soak"))
        except ValueError as exc:
            raise pytest.UsageError(f"--soak: {exc}") from None
    if config.getoption("harness_repeats") < 1:
        raise pytest.UsageError(f"--repeats {config.getoption('harness_repeats')}: expected a count >= 1, e.g. --repeats 3")
    ci_target = config.getoption("harness_ci_target")
    if ci_target is not None and not 0 <= ci_target < 1:
        raise pytest.UsageError(f"--harness-ci-target {ci_target}: expected a fraction in [0, 1), e.g. 0.01 for "
                                "±1 %, or 0 for a fixed window")
    if not config.getoption("harness_telemetry_period") > 0:
        raise pytest.UsageError(f"--harness-telemetry-period {config.getoption('harness_telemetry_period')}: "
                                "expected seconds > 0, e.g. 0.1")
    for text in _split(config.getoption("harness_gpus")) or []:
        if not text.isdigit() or int(text) < 1:
            raise pytest.UsageError(f"--gpus {text!r}: expected positive integers, e.g. --gpus 1,2,4")
    from harness.launch.slurm import allocation_from_env

    try:
        allocation = allocation_from_env()
    except ValueError as exc:
        raise pytest.UsageError(f"cannot read the Slurm allocation: {exc}") from None
    for text in _split(config.getoption("harness_nodes")) or []:
        if not text.isdigit() or int(text) < 1:
            raise pytest.UsageError(f"--nodes {text!r}: expected positive integers, e.g. --nodes 2,4")
        have = allocation.node_count if allocation is not None else 1
        if int(text) > have:
            raise pytest.UsageError(f"--nodes {text}: this {'Slurm job' if allocation else 'run'} has {have} "
                                    f"node{'s' if have != 1 else ''}; submit with sbatch --nodes={text} "
                                    "slurm/acceptance.sbatch")
    started = datetime.now()
    run_id = f"{started.strftime('%Y%m%d-%H%M%S')}-{socket.gethostname()}-{profile.name}"
    report_root = Path(config.getoption("harness_report_dir"))
    run_dir = report_root / run_id
    try:
        (run_dir / "runs").mkdir(parents=True, exist_ok=True)
        (run_dir / "logs").mkdir(parents=True, exist_ok=True)
        probe = run_dir / ".writable"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise pytest.UsageError(
            f"cannot write the report directory {run_dir}: {exc.strerror or exc}; no benchmark was started. "
            "Point --harness-report-dir at a writable directory (in a container, mount one at reports/).") from None
    _point_latest(report_root, run_dir)
    if profile.hardware.device == "cuda":
        from harness.node.hardware import busy_gpu_message, gpu_processes

        busy = gpu_processes(hardware.gpus)
        if busy:
            raise pytest.UsageError(f"{busy_gpu_message(busy)}\nNo benchmark was started.")
        available = hardware.gpu_count
    else:
        available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return HarnessSession(config=config, profile=profile, hardware=hardware, run_id=run_id, run_dir=run_dir,
                          started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                          available_gpus=available, allocation=allocation)


def _point_latest(report_root: Path, run_dir: Path) -> None:
    latest = report_root / "latest"
    tmp = report_root / f".latest.{os.getpid()}"
    try:
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(run_dir.name)
        os.replace(tmp, latest)
    except OSError:
        tmp.unlink(missing_ok=True)  # a filesystem without symlinks: the run dir is still there


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    session = config.stash.get(SESSION_KEY, None)
    if session is None:
        return None
    hw = session.hardware
    what = f"{hw.gpu_count} x {hw.gpu_name}" if hw.device == "cuda" else f"CPU ({session.available_gpus} cores)"
    if session.allocation is not None:
        alloc = session.allocation
        what += f"; Slurm job {alloc.job_id} on {alloc.node_count} node(s): {', '.join(alloc.nodes)}"
    return [f"harness: profile {session.profile.name} ({session.profile.path}) on {what}",
            f"harness: reports in {session.run_dir}"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    session = metafunc.config.stash.get(SESSION_KEY, None)
    for fixture, scaling in (("weak_case", "weak"), ("strong_case", "strong")):
        if fixture in metafunc.fixturenames:
            if session is None:
                metafunc.parametrize(fixture, [pytest.param(None, marks=pytest.mark.skip(
                    reason="not an acceptance session (run `make acceptance` or pytest on acceptance/)"))])
            else:
                cases = session.cases(scaling) or [pytest.param(None, id="none", marks=pytest.mark.skip(
                    reason=f"profile {session.profile.name} has no {scaling}-scaling cases for this selection"))]
                metafunc.parametrize(fixture, cases)
    if "allreduce_gpus" in metafunc.fixturenames:
        if session is None:
            metafunc.parametrize("allreduce_gpus", [pytest.param(None, marks=pytest.mark.skip(
                reason="not an acceptance session (run `make acceptance` or pytest on acceptance/)"))])
        else:
            metafunc.parametrize("allreduce_gpus", session.allreduce_counts())


def pytest_collection_finish(session: pytest.Session) -> None:
    """Remember which scaling cases will run, so a launch can take the others of its GPU count along."""
    harness_session = session.config.stash.get(SESSION_KEY, None)
    if harness_session is None:
        return
    for item in session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        case = params.get("weak_case") or params.get("strong_case")
        if isinstance(case, Case) and item.get_closest_marker("skip") is None:
            harness_session.planned.append(case)


@pytest.fixture
def harness(request: pytest.FixtureRequest) -> HarnessTest:
    session = request.config.stash.get(SESSION_KEY, None)
    if session is None:
        pytest.skip("not an acceptance session (run `make acceptance` or pytest on acceptance/)")
    return HarnessTest(session, request.node)


class _JsonReportHooks:
    """Attaches each test's record and checks, and the session's sign-off facts, to report.json."""

    def __init__(self, session: HarnessSession):
        self.session = session

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_runtest_metadata(self, item: pytest.Item, call: pytest.CallInfo) -> dict:
        result = item.stash.get(RESULT_KEY, None)
        if call.when != "call" or result is None:
            return {}
        return {"harness": result.to_dict()}

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_modifyreport(self, json_report: dict) -> None:
        summary = self.session.summary()
        summary.pop("results")  # already attached to each test
        json_report["harness"] = summary


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """After pytest-json-report saved report.json: session.json, then the HTML sign-off report.

    Runs on a normal end, on failures and on an interrupt (Ctrl-C, or SIGTERM from Slurm's time
    limit), so a cut-short session still leaves a report, marked INCOMPLETE.
    """
    harness_session = session.config.stash.get(SESSION_KEY, None)
    if harness_session is None:
        return
    from harness.records import write_json_atomic

    summary = harness_session.summary()
    summary["exitstatus"] = int(exitstatus)
    summary["interrupted"] = bool(session.shouldstop) or int(exitstatus) == pytest.ExitCode.INTERRUPTED
    write_json_atomic(harness_session.run_dir / "session.json", json.dumps(summary, indent=1, default=str))
    _write_html_report(session, harness_session.run_dir)
    _record_for_fleet(session, harness_session.run_dir)


def _record_for_fleet(session: pytest.Session, run_dir: Path) -> None:
    """harness/fleet: the session into the history store, its Prometheus file; never raises (warning lines)."""
    option = session.config.getoption
    lines = record_session(run_dir, store=store_path(option("harness_store"), option("harness_report_dir")),
                           textfile_dir=prometheus_dir(option("harness_prometheus_dir")))
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        for line in lines:
            reporter.write_line(line)


def _write_html_report(session: pytest.Session, run_dir: Path) -> None:
    """The sign-off page; a problem here is a warning line, never a changed exit status."""
    from harness.report.render import write_report

    try:
        line = f"harness: report {write_report(run_dir)}"
    except Exception as exc:  # noqa: BLE001 - the JSON is saved: `harness report RUN_DIR` rebuilds the page
        line = f"harness: report.html not written ({type(exc).__name__}: {exc}); rebuild with `harness report {run_dir}`"
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line)
