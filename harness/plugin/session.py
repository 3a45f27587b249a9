"""One acceptance session: started once before any test (or refused with a usage error), kept in
``config.stash``, and asked by each test to run and judge its case.

Starting checks everything a benchmark hour could otherwise lose: the host name resolves (torchrun's
rendezvous needs it), every threshold file is valid, a profile matches the hardware, NVIDIA hardware
that is present is also usable (never a silent fall back to the cpu profile), the options make a
measurement a launch can run, fault injection is not set behind a sign-off's back, the Slurm
allocation is readable and has the nodes asked for, the report directory is writable, has room and
is this session's alone (locked), and no foreign process holds a GPU. Before that last check it
stops what an earlier, killed session left running (launch/cleanup.py find_orphans). It also
settles how many GPUs the node must have (harness/node/shape.py), which acceptance/test_node.py
checks.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pytest

from harness.jobs.job import Job, KindRunner
from harness.launch.cleanup import Orphan, stop_orphans, survey
from harness.launch.slurm import SlurmAllocation, allocation_from_env
from harness.launch.supervise import STOPPED_LAUNCHES, stopped_since
from harness.node.cpu_features import native_bf16_flag
from harness.node import presence as node_presence
from harness.node.hardware import Hardware, HardwareError, detect
from harness.node.shape import expected_gpus
from harness.results.overrides import FAULT_ENV, Override, expected_settings, find_overrides
from harness.node.processes import busy_gpu_message, gpu_processes
from harness.plugin.context import SessionContext
from harness.plugin.gpu_state import GpuStateWatcher
from harness.plugin.options import HarnessOptions, check_run_options
from harness.plugin.provenance import container, git_commit, harness_version
from harness.plugin.results import CaseResult, CheckedResult
from harness.plugin.rundir import make_run_dir, make_run_id
from harness.run_directory import read_run_directory
from harness.timeline import budget as time_budget
from harness.timeline import timeline as session_timeline
from harness.profile.bounds import Profile
from harness.profile.load import ThresholdError, default_thresholds_dir, load_profiles
from harness.profile.match import select_profile
from harness import definitions
from harness.profile.stack import compare_stack

SESSION_KEY = pytest.StashKey["HarnessSession"]()


@dataclass(kw_only=True)
class HarnessSession:
    config: pytest.Config
    ctx: SessionContext
    gpu_state: GpuStateWatcher
    jobs: tuple[Job, ...]
    """The session's kinds of job (harness/plugin/levels.py ``gather_jobs``: harness/kinds/shipped.py's, a
    site's): their runners, and the report's kind sections (``Job.report``)."""
    runners: dict[str, KindRunner] = field(default_factory=dict)
    """Section -> the runner of the kinds of job that write it (``Job.runner``, attached in harness/kinds/): the
    all-reduce and topology's ``interconnect``, the component tests' ``components`` and the DDP cases' ``scaling``
    (launches that write no section of their own), the soak's ``soak``, a site's own. The session reaches them only
    through ``KindRunner``; their tests through ``harness.runner(section)``."""
    results: dict[str, CaseResult | CheckedResult] = field(default_factory=dict)
    """pytest node id -> the result its test produced, in the order the tests ran."""
    collect_only: bool = False
    """``--collect-only``: the cases are listed, nothing runs, so no run directory is made or written."""
    outputs_written: bool = False
    """session.json and report.html were attempted (plugin/outputs.py), so a failed hook before need not."""
    output_problems: list[str] = field(default_factory=list)
    """Writes of the session's outputs that failed (a full disk), said at the end with where things are."""
    fallback_summary: Path | None = None
    """Where session.json went when the run directory refused it."""
    launches_before: int = field(default_factory=lambda: len(STOPPED_LAUNCHES))
    """How many launches this process had seen stopped when the session began (harness/launch/supervise.py)."""

    @classmethod
    def start(cls, config: pytest.Config, ctx: SessionContext, jobs: Sequence[Job]) -> HarnessSession:
        runners: dict[str, KindRunner] = {}
        for job in jobs:
            if job.runner is not None and job.section is not None and job.section not in runners:
                runners[job.section] = job.runner(ctx=ctx)
        results: dict[str, CaseResult | CheckedResult] = {}
        gpu_state = GpuStateWatcher(ctx=ctx, results=results)
        for runner in runners.values():
            runner.attach(gpu_state)
        return cls(config=config, ctx=ctx, gpu_state=gpu_state, jobs=tuple(jobs), runners=runners, results=results,
                   collect_only=bool(config.option.collectonly))

    def runner(self, section: str) -> KindRunner:
        """The runner that writes ``section``; a test of a kind whose job declares none is a bug, said as one."""
        runner = self.runners.get(section)
        if runner is None:
            raise RuntimeError(f"no kind of job of this session has a runner for section {section!r} (known: "
                               f"{', '.join(self.runners) or 'none'}): give its Job a section and a runner "
                               "(harness/jobs/job.py)")
        return runner

    @property
    def profile(self) -> Profile:
        return self.ctx.profile

    def timeline(self) -> dict:
        """Where the session's time went (harness/timeline.py)."""
        started = datetime.fromisoformat(self.ctx.started_at)
        launches = {name: seconds for runner in self.runners.values() for name, seconds in runner.launches_s().items()}
        for stopped in stopped_since(self.launches_before):
            launches[f"{stopped.name} (stopped while it ran)"] = stopped.elapsed_s
        ctx = self.ctx
        budget_of = time_budget(ctx.options.level, ctx.device, ctx.node_gpus, ctx.profile.name)
        records = [record.data for record in read_run_directory(ctx.run_dir).records]
        return session_timeline(records, total_s=(datetime.now(timezone.utc) - started).total_seconds(),
                                launches_s=launches, budget_of=budget_of)

    def summary(self) -> dict:
        """session.json: the session's facts and every test's result."""
        ctx = self.ctx
        profile = ctx.profile
        sections = {section: summary for section, runner in self.runners.items()
                    for summary in (runner.summary(),) if summary is not None}
        stack = compare_stack(profile.stack, ctx.hardware)
        return {
            "run_id": ctx.run_id, "run_dir": str(ctx.run_dir), "started_at": ctx.started_at,
            "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "profile": {"name": profile.name, "path": str(profile.path), "sha256": profile.sha256,
                        "description": profile.description, "raw": profile.raw},
            "hardware": ctx.hardware.to_dict(),
            "command_line": [sys.executable, "-m", "pytest", *self.config.invocation_params.args],
            "harness_version": harness_version(),
            "slurm": ctx.allocation.to_dict() if ctx.allocation is not None else None,
            "git_commit": git_commit(),
            "container": container(),
            "stack": stack.to_dict() if stack is not None else None,
            "definitions": definitions.compare(profile.definitions),
            "overrides": [override.to_dict() for override in ctx.overrides],
            "expected_environment": expected_settings(),
            "orphans_stopped": [orphan.to_dict() for orphan in ctx.orphans_stopped],
            "warnings": list(ctx.start_warnings),
            "results": {nodeid: result.to_dict() for nodeid, result in self.results.items()},
            "timeline": self.timeline(),
            **sections,
        }


def start_session(config: pytest.Config, options: HarnessOptions, jobs: Sequence[Job]) -> HarnessSession:
    """Everything checked before the first benchmark: any problem is one usage error, nothing launched. ``jobs``:
    the session's kinds of job (harness/plugin/levels.gather_jobs), whose runners it builds."""
    _check_host_name_resolves()
    try:
        tables = [job.bounds for job in jobs if job.bounds is not None]
        profiles = load_profiles(options.thresholds_dir or default_thresholds_dir(), tables, sites_declared=True)
    except ThresholdError as exc:
        raise pytest.UsageError(f"threshold files are invalid; no benchmark was started:\n{exc}") from None
    try:
        hardware = detect()
        profile = select_profile(hardware, profiles, options.hardware)
    except HardwareError as exc:
        raise pytest.UsageError(f"{exc}\nNo benchmark was started.") from None
    presence = node_presence.find_nvidia_presence()
    check_run_options(options, profile)
    overrides = find_overrides()
    _refuse_fault_injection(overrides, options)
    allocation = _allocation(options)
    _refuse_unusable_gpus(hardware, presence, profile, options, allocation)
    started = datetime.now()
    run_id = make_run_id(started, profile.name)
    orphans: tuple[Orphan, ...] = ()
    warnings: tuple[str, ...] = ()
    if config.option.collectonly:  # listing the cases makes no run directory, leaves `latest`, stops nothing
        run_dir = options.report_dir / run_id
    else:
        orphans = _stop_orphans()
        run_dir, latest_warning = make_run_dir(options.report_dir, run_id)
        run_id = run_dir.name  # numbered when a session of this process made run_id already
        warnings = (latest_warning,) if latest_warning else ()
    if profile.hardware.device == "cuda":
        busy = gpu_processes(hardware.gpus)
        if busy:
            raise pytest.UsageError(f"{busy_gpu_message(busy)}\nNo benchmark was started.")
        available = hardware.gpu_count
    else:
        available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    expected = expected_gpus(device=profile.hardware.device, stated=options.expect_gpus,
                             slurm_gpus=allocation.gpus_per_node if allocation is not None else None,
                             env=os.environ, hw=hardware, presence=presence,
                             shapes=profile.node.gpus_per_node if profile.node is not None else None,
                             profile_name=profile.name)
    ctx = SessionContext(options=options, profile=profile, hardware=hardware, available_gpus=available,
                         allocation=allocation, run_id=run_id, run_dir=run_dir, native_bf16=native_bf16_flag(),
                         started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                         expected_gpus=expected.count if expected is not None else None,
                         expected_gpus_source=expected.source if expected is not None else None,
                         expected_gpus_stated=expected.stated if expected is not None else False,
                         nvidia_presence=presence,
                         overrides=overrides, orphans_stopped=orphans, start_warnings=warnings)
    return HarnessSession.start(config, ctx, jobs)


def _refuse_unusable_gpus(hardware: Hardware, presence: node_presence.NvidiaPresence, profile: Profile,
                          options: HarnessOptions, allocation: SlurmAllocation | None) -> None:
    """No silent CPU fallback: NVIDIA hardware that CUDA or NVML cannot use stops the session, once, with
    the fix; the cpu profile runs where none is found, or when --hardware names it."""
    if hardware.device == "cuda":
        return
    slurm = ((f"This Slurm job ({allocation.job_id}) was given no GPUs: submit it with --gpus-per-node=N "
              "(slurm/acceptance.sbatch).",) if allocation is not None and not allocation.gpus_per_node else ())
    message = node_presence.unusable_gpus_message(hardware, presence, more_fixes=slurm)
    if profile.hardware.device == "cuda":  # --hardware named a GPU profile
        raise pytest.UsageError(message or f"--hardware {profile.name} is a GPU profile, but this node has no "
                                f"usable GPU ({hardware.nvml_unavailable_reason}). No benchmark was started.")
    if options.hardware is None and message is not None:
        raise pytest.UsageError(message)


def _refuse_fault_injection(overrides: tuple[Override, ...], options: HarnessOptions) -> None:
    fault = next((override for override in overrides if override.name == FAULT_ENV), None)
    if fault is not None and not options.allow_fault_injection:
        raise pytest.UsageError(
            f"{FAULT_ENV}={fault.value} is set: every launch would fail on purpose (fault injection), and the "
            "verdict would not be the node's. Unset it for a sign-off; the harness's self-tests pass "
            "--harness-allow-fault-injection.")


def _stop_orphans() -> tuple[Orphan, ...]:
    """Stop the processes of launches whose session was killed (SIGKILL, the OOM killer): on a GPU node
    they hold the GPUs, and this session would refuse to start or measure a shared GPU. A tagged process
    whose launcher cannot be looked up from here (another container's, another host's) is never killed:
    the session refuses to start and names it."""
    found, unsure = survey()
    if unsure:
        raise pytest.UsageError(
            "processes of another harness session run on this node, and this session cannot tell whether that "
            "session still runs, so it stops none of them:\n"
            + "\n".join(f"  {orphan.describe()}" for orphan in unsure)
            + "\nIf that session is gone, stop them (kill PID, as their owner or root); if it runs, wait for it "
              "to end. No benchmark was started.")
    left = stop_orphans(found) if found else []
    if left:
        raise pytest.UsageError("processes an earlier harness session left running could not be stopped:\n"
                                + "\n".join(f"  {orphan.describe()}" for orphan in left)
                                + "\nStop them (as their owner or root), then start again. No benchmark was started.")
    return tuple(found)


def _check_host_name_resolves() -> None:
    try:
        socket.getaddrinfo(socket.gethostname(), None)
    except OSError as exc:
        # torchrun's rendezvous binds to this name: without it every launch would hang in setup.
        raise pytest.UsageError(
            f"this host's name {socket.gethostname()!r} does not resolve ({exc}); torchrun needs it for its "
            "rendezvous. Add it to /etc/hosts (in a container: run with --add-host or a hostname that "
            "resolves).") from None


def _allocation(options: HarnessOptions) -> SlurmAllocation | None:
    """The Slurm allocation, when this runs in a job, holding every node count --nodes asks for."""
    try:
        allocation = allocation_from_env()
    except ValueError as exc:
        raise pytest.UsageError(f"cannot read the Slurm allocation: {exc}") from None
    have = allocation.node_count if allocation is not None else 1
    for count in options.nodes or ():
        if count > have:
            raise pytest.UsageError(f"--nodes {count}: this {'Slurm job' if allocation else 'run'} has {have} "
                                    f"node{'s' if have != 1 else ''}; submit with sbatch --nodes={count} "
                                    "slurm/acceptance.sbatch")
    return allocation
