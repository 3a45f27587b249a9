"""A report directory's facts as SessionFacts: the fleet's one adapter onto what a session writes.

The fleet reads ``reports/<run-id>/`` (session.json, report.json, runs/) only here, through the
report's inputs and the one run-directory reader beneath them (harness/run_directory.py), so a change
of that layout is mended in one place. The session verdict is the node report's own
(``harness.report.sections.verdict.build_verdict``): a fleet page never judges a node differently from
the node's report. Keys are read defensively: an old or damaged file gives a CollectError that
names the file and says what to do, never a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.cases import CaseId
from harness.fleet.facts import CheckFact, Direction, GpuFact, GpuFigure, SessionFacts
from harness.report.inputs import ReportError, load_inputs
from harness.report.outcomes import SessionTest, collect_tests
from harness.report.sections.verdict import build_verdict, recorded_verdict
from harness.node.nvml import METRICS_BY_KEY
from harness import run_directory
from harness.results.reading import as_dict, as_int, as_label, as_list, as_number, clean_text
from harness.results.telemetry_summary import read_telemetry

TELEMETRY_FIGURES: dict[str, Direction] = {"util_pct": "higher", "power_w": "either", "temperature_c": "lower",
                                           "sm_clock_mhz": "higher"}
"""Telemetry reductions compared across GPUs, and which way is better. A power draw is neither:
a GPU drawing less may be idling, one drawing more may be leaking."""


class CollectError(Exception):
    """A report directory that cannot be read as a session: ``str(err)`` names it and what to do."""


def find_run_dirs(paths: list[Path]) -> list[Path]:
    """The run directories in ``paths`` (harness/run_directory.py ``find_run_dirs``). Raises CollectError."""
    try:
        return run_directory.find_run_dirs(paths)
    except run_directory.RunDirectoryError as exc:
        raise CollectError(str(exc)) from None


def read_session(run_dir: Path) -> SessionFacts:
    """The facts of the session that wrote ``run_dir``. Raises CollectError."""
    try:
        inputs = load_inputs(run_dir)
    except ReportError as exc:
        raise CollectError(str(exc)) from None
    header = inputs.header
    hardware = as_dict(header.get("hardware"))
    node = as_label(hardware.get("hostname"))
    if node is None:
        where = "session.json" if inputs.session is not None else "report.json"
        raise CollectError(f"{run_dir / where}: no hardware.hostname, so it cannot say which node it signed off "
                           f"(session.json {inputs.session_problem or 'read'}, report.json "
                           f"{inputs.report_problem or 'read'}); rerun the session on that node")
    tests = collect_tests(inputs)
    verdict = build_verdict(inputs, header, tests)
    records = [as_dict(t.harness.get("record")) for t in tests if t.harness.get("record")]
    versions = next((as_dict(r.get("versions")) for r in records if r.get("versions")), {})
    profile = as_dict(header.get("profile"))
    checks, figures = [], []
    for test in tests:
        case_key = _case_key(test)
        checks += [_check(test.nodeid, case_key, as_dict(c)) for c in as_list(test.harness.get("checks"))]
        figures += gpu_figures(case_key, as_dict(test.harness.get("record")), node)
    return SessionFacts(
        run_id=as_label(header.get("run_id")) or run_dir.name, node=node, verdict=verdict["title"],
        verdict_reasons=tuple(verdict["incomplete"]) + tuple(verdict["notes"]),
        started_at=as_label(header.get("started_at")), finished_at=as_label(header.get("finished_at")),
        profile_name=as_label(profile.get("name")), profile_sha256=as_label(profile.get("sha256")),
        device=as_label(hardware.get("device")), gpu_name=as_label(hardware.get("gpu_name")),
        driver_version=as_label(hardware.get("driver_version")) or as_label(versions.get("driver")),
        cuda_driver_version=as_label(hardware.get("cuda_driver_version")),
        cuda_runtime_version=as_label(hardware.get("cuda_runtime_version")) or as_label(versions.get("cuda")),
        nccl_version=as_label(hardware.get("nccl_version")) or as_label(versions.get("nccl")),
        torch_version=as_label(hardware.get("torch_version")) or as_label(versions.get("torch")),
        python_version=as_label(versions.get("python")),
        harness_version=as_label(header.get("harness_version")) or as_label(versions.get("harness")),
        git_commit=as_label(header.get("git_commit")), container=_container(header.get("container")),
        slurm_job_id=as_label(as_dict(header.get("slurm")).get("job_id")),
        gpus=tuple(gpu for gpu in (_gpu(as_dict(g)) for g in as_list(hardware.get("gpus"))) if gpu is not None),
        checks=tuple(checks), gpu_figures=tuple(figures), source=str(run_dir), **scope_facts(recorded_verdict(inputs)))


def scope_facts(recorded: dict | None) -> dict[str, Any]:
    """What the session's own verdict says it covered (scope, level, sign-off, CPU self-check); each
    None where it is not recorded (an older harness, a session killed before its end)."""
    recorded = recorded or {}
    flags = {key: recorded.get(key) if isinstance(recorded.get(key), bool) else None
             for key in ("sign_off", "cpu_self_check")}
    return {"scope": as_label(recorded.get("scope")), "level": as_label(recorded.get("level")), **flags}


def _case_key(test: SessionTest) -> str:
    harness = test.harness
    case = CaseId.from_dict(harness.get("case_id"))
    if case is not None:
        return case.key
    return as_label(harness.get("case")) or test.nodeid


def _check(test: str, case_key: str, check: dict) -> CheckFact:
    name = as_label(check.get("name")) or "(unnamed check)"
    passed = check.get("passed")
    return CheckFact(test=test, case_key=case_key, key=as_label(check.get("key")) or name, name=name,
                     kind=as_label(check.get("kind")) or "", measured=as_number(check.get("measured")),
                     bound=as_number(check.get("bound")), unit=as_label(check.get("unit")) or "",
                     comparison=as_label(check.get("comparison")) or "",
                     passed=passed if isinstance(passed, bool) else None,
                     note=clean_text(check.get("note") or "", 500, one_line=True))


def _gpu(gpu: dict) -> GpuFact | None:
    """None for an entry without an index: no GPU can be named without one."""
    index = as_int(gpu.get("index"))
    if index is None:
        return None
    return GpuFact(index=index, uuid=as_label(gpu.get("uuid")), serial=as_label(gpu.get("serial")),
                   name=as_label(gpu.get("name")), pci_bus_id=as_label(gpu.get("pci_bus_id")),
                   memory_gib=as_number(gpu.get("memory_total_gib")))


def _container(value: Any) -> str | None:
    if isinstance(value, dict):
        return ", ".join(f"{k}: {as_label(v)}" for k, v in value.items() if as_label(v)) or None
    return as_label(value)


def gpu_figures(case_key: str, record: dict, node: str) -> list[GpuFigure]:
    """Each GPU's own figures in one run: what can single out one slow GPU among its peers.

    A 1-GPU run's throughput is that GPU's; a 1-GPU case run on every GPU at once (``independent``) has each
    GPU's own rate in its rank (the record's figure is their median, no one GPU's). In a wider run every rank
    waits for the slowest at each all-reduce, so the synchronised throughput hides a slow GPU; its own speed is
    the straggler probe's step time without the all-reduce (``compute_step_ms``).
    """
    if record.get("status") != "ok":
        return []
    unit = f"{as_label(record.get('sample_unit')) or 'samples'}/s"
    ranks = [as_dict(r) for r in as_list(record.get("per_rank"))]
    figures = []
    common: dict[str, Any] = {"case_key": case_key, "unit": unit, "direction": "higher"}
    alone = as_number(record.get("throughput_per_gpu"))
    if as_int(record.get("world_size")) == 1 and ranks and alone:
        own = [(rank, as_number(rank.get("throughput"))) for rank in ranks] if len(ranks) > 1 else [(ranks[0], alone)]
        figures += [GpuFigure(key="throughput_alone", name="throughput alone", value=value, **common,
                              **_where(rank, node)) for rank, value in own if value]
    batch = as_number(record.get("batch_size_per_gpu"))
    if as_int(record.get("world_size")) != 1 and batch:
        for rank in ranks:
            step_ms = as_number(rank.get("compute_step_ms"))
            if step_ms:
                figures.append(GpuFigure(key="compute_throughput", name="compute throughput (no all-reduce)",
                                         value=batch * 1000.0 / step_ms, **common, **_where(rank, node)))
    return figures + telemetry_figures(case_key, record.get("telemetry"), node)


def _where(rank: dict, node: str) -> dict[str, Any]:
    return {"host": as_label(rank.get("host")) or node, "rank": as_int(rank.get("rank")) or 0,
            "gpu_index": as_int(rank.get("gpu_index")), "gpu_uuid": as_label(rank.get("gpu_uuid"))}


def telemetry_figures(case_key: str, telemetry: Any, node: str) -> list[GpuFigure]:
    """The window's telemetry reductions per GPU (sampled on the driver's node)."""
    summary = read_telemetry(telemetry)
    if summary.status != "ok":
        return []
    figures = []
    for gpu in summary.gpus:
        for metric, direction in TELEMETRY_FIGURES.items():
            value = gpu.value(metric)
            if value is None:
                continue
            described = METRICS_BY_KEY[metric]
            figures.append(GpuFigure(case_key=case_key, key=f"telemetry.{metric}", name=described.label, host=node,
                                     rank=gpu.rank or 0, gpu_index=gpu.index, gpu_uuid=as_label(gpu.uuid),
                                     value=value, unit=described.unit, direction=direction))
    return figures

