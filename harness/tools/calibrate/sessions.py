"""The figures ``harness calibrate-fit`` fits, read out of acceptance sessions: each session's host, its
health gate (a session of an unhealthy host is refused), and every figure a fitted bound judges, keyed by the
profile table, key and GPU count it bounds. The figure of every check is what the check itself measures,
read by running the checks over the session's run records with bounds no record can miss (``probe_bounds``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.cases import remeasure_of
from harness.kinds.ddp_scaling import checks as scaling_checks
from harness.checks.confirm import MAX_REMEASURES, window_settled
from harness.definitions import current_id
from harness.kinds.components.bounds import ComponentBounds
from harness.profile.bounds import CaseBounds
from harness.records import RunRecord
from harness.results.reading import as_dict, as_int, as_list, as_number, as_text
from harness.run_directory import SESSION_FILE, RecordError, RunDirectoryError, read_run_directory, run_record
from harness.tools.calibrate import CalibrationError

CHECK_TO_BOUND = {"throughput_per_gpu": "min_samples_per_sec_per_gpu", "weak_efficiency": "min_weak_efficiency",
                  "strong_efficiency": "min_strong_efficiency", "gpu_utilization": "min_gpu_utilization_pct",
                  "power_fraction_of_limit": "min_power_fraction_of_limit", "step_time_cv": "max_step_time_cv",
                  "straggler_ratio": "max_straggler_ratio", "gpu_uniformity": "min_gpu_uniformity",
                  "h2d_concurrent": "min_h2d_concurrent_gbps", "d2h_concurrent": "min_d2h_concurrent_gbps",
                  "allreduce_busbw": "min_allreduce_busbw_gbps"}
"""The check key -> the profile key that bounds it."""
MAX_GPUS = 64


def _table(value: float) -> dict[int, float]:
    return {count: value for count in range(1, MAX_GPUS + 1)}


def probe_bounds(model: str, precision: str, batch: int) -> CaseBounds:
    """Bounds every record meets at every GPU count: the checks then measure and report every figure."""
    return CaseBounds(model=model, precision=precision, batch_size_per_gpu=batch, source="calibrate-fit probe",
                      min_samples_per_sec_per_gpu=_table(1e-12), min_weak_efficiency=_table(1e-12),
                      min_strong_efficiency=_table(1e-12), min_gpu_utilization_pct=_table(0.0),
                      min_power_fraction_of_limit=_table(1e-12), max_straggler_ratio=_table(1e12),
                      max_step_time_cv=_table(1e12), min_gpu_uniformity=_table(1e-12))


PROBE_COMPONENTS = ComponentBounds(min_h2d_concurrent_gbps=_table(1e-12), min_d2h_concurrent_gbps=_table(1e-12),
                                   source="calibrate-fit probe")


@dataclass(frozen=True, kw_only=True, slots=True)
class Figure:
    """One figure of one session: the profile table it bounds and the GPU count it is keyed by."""

    table: str
    """``models.resnet50.bf16`` or ``components``."""
    key: str
    gpus: int
    value: float
    host: str
    session: str
    reference_at_once: int | None = None
    """An efficiency's: how many GPUs its 1-GPU reference ran on at once (the node's GPUs)."""


EFFICIENCIES = ("min_weak_efficiency", "min_strong_efficiency")
"""Bounds whose figure is a ratio to a 1-GPU reference run on every GPU of the node at once: fitted with the
node size they were measured on (``node_gpus``), as a node of another size is another shape."""


@dataclass(kw_only=True)
class Session:
    path: Path
    host: str
    """The host's GPU UUIDs (a VM's host name says nothing: lent machines are all called "vm")."""
    profile: str
    figures: list[Figure] = field(default_factory=list)
    remeasured: int = 0
    """Cases whose figures come from a re-measure, their first window having never settled (``fitted_attempts``)."""
    unsettled: int = 0
    """Cases whose figures come from a window that never settled: no re-measure of it settled either."""


_GIVE = "give run directories that `make acceptance` wrote (reports/<run-id>/)"


def _read(run_dir: Path) -> tuple[dict, list[RunRecord]]:
    """session.json and the run records of an acceptance run directory (harness/run_directory.py), or a
    CalibrationError naming the file that is missing or damaged: no bound is fitted from half a session."""
    try:
        directory = read_run_directory(run_dir)
    except RunDirectoryError:
        what = "no such directory" if not run_dir.exists() else "not a directory"
        raise CalibrationError(f"{run_dir}: not an acceptance run directory ({what}); {_GIVE}") from None
    if directory.session is None:
        raise CalibrationError(f"{run_dir / SESSION_FILE}: not a readable session file: "
                               f"{directory.problem_of(SESSION_FILE)}; {_GIVE}")
    if not directory.has_runs:
        raise CalibrationError(f"{run_dir}: not an acceptance run directory (no runs/ beside its session.json); "
                               f"{_GIVE}")
    if directory.record_problems:
        problem = directory.record_problems[0]
        raise CalibrationError(f"{run_dir / problem.file}: {problem.what}; move it out of the way or leave the "
                               "session out")
    records = []
    for record in directory.records:
        try:
            records.append(run_record(record.data))
        except RecordError as exc:
            raise CalibrationError(f"{run_dir / record.file}: not a readable run record: {exc}; move it out of "
                                   "the way or leave the session out") from None
    return directory.session, records


def _host_of(summary: dict) -> str:
    hardware = as_dict(summary.get("hardware"))
    uuids = sorted(str(gpu.get("uuid")) for gpu in map(as_dict, as_list(hardware.get("gpus"))) if gpu.get("uuid"))
    return ",".join(uuids) or str(hardware.get("hostname") or "unknown host")


def first_attempts(records: list[RunRecord]) -> list[RunRecord]:
    """A session's single-node training records that ran, re-measures and repeats left out: what
    benchmarks/rejudge_sessions.py judges, and the attempts a fit starts from (``fitted_attempts``)."""
    return [r for r in records
            if r.ok and r.nodes == 1 and "-repeat" not in r.run_id and remeasure_of(r.run_id) is None]


@dataclass(frozen=True, kw_only=True, slots=True)
class FittedAttempt:
    record: RunRecord
    baseline: RunRecord | None
    attempt: int
    """0: the case's first attempt; N: its Nth re-measure (taken where the first's window never settled)."""
    settled: bool
    """Whether its window and its reference's settled (harness/checks/confirm.py ``window_settled``)."""


def fitted_attempts(records: list[RunRecord]) -> list[FittedAttempt]:
    """Per single-node case of a session, the attempt a fit takes, with its 1-GPU reference: the first whose window
    and whose reference's settled, else the first (an acceptance session judges a settled figure: an unsettled one
    in doubt is re-measured, harness/checks/confirm.py). A calibration session re-measures exactly the cases whose
    window never settled; a default session's re-measures of a case whose first window settled are not taken (that
    would pick among attempts by their figures)."""
    first = first_attempts(records)
    references = references_of(first)
    # (the case's key, attempt) -> its re-measure; (model, precision, batch, attempt, G) -> a G-GPU case's reference
    again: dict[tuple, RunRecord] = {}
    for record in records:
        label = remeasure_of(record.run_id)
        if record.ok and record.nodes == 1 and label is not None:
            number, gpus = label
            again[(record.model, record.precision, record.batch_size_per_gpu, number, gpus) if gpus is not None
                  else _case_key(record) + (number,)] = record
    chosen = []
    for record in first:
        baseline = reference_of(record, references)
        attempt = FittedAttempt(record=record, baseline=baseline, attempt=0, settled=window_settled(record, baseline))
        for number in range(1, MAX_REMEASURES + 1):
            if attempt.settled:
                break
            remeasured = again.get(_case_key(record) + (number,))
            if baseline is None or baseline is record:  # a 1-GPU weak case is its own reference
                reference = remeasured
            else:
                reference = again.get((baseline.model, baseline.precision, baseline.batch_size_per_gpu, number,
                                       record.world_size))
            if remeasured is None or reference is None:
                break
            if window_settled(remeasured, reference):
                attempt = FittedAttempt(record=remeasured, baseline=reference, attempt=number, settled=True)
        chosen.append(attempt)
    return chosen


def _case_key(record: RunRecord) -> tuple:
    return (record.model, record.precision, record.scaling, record.batch_size_per_gpu, record.world_size)


References = dict[tuple[str, str, int], RunRecord]
"""(model, precision, per-GPU batch) -> a session's 1-GPU record of that work."""


def references_of(records: list[RunRecord]) -> References:
    return {(r.model, r.precision, r.batch_size_per_gpu): r for r in records if r.world_size == 1}


def reference_of(record: RunRecord, references: References) -> RunRecord | None:
    """The 1-GPU run a case is a ratio to: the same model and precision at the per-GPU batch its 1-GPU run trains
    (a strong case's whole global batch)."""
    return references.get((record.model, record.precision, record.batch_size_per_gpu * (
        record.world_size if record.scaling == "strong" else 1)))


def _training_figures(attempts: list[FittedAttempt], host: str, session: str) -> list[Figure]:
    figures = []
    for attempt in attempts:
        record, baseline = attempt.record, attempt.baseline
        bounds = probe_bounds(record.model, record.precision, record.batch_size_per_gpu)
        judge = scaling_checks.weak_scaling_checks if record.scaling == "weak" else scaling_checks.strong_scaling_checks
        gpus = record.world_size if record.world_size > 1 else scaling_checks.gpus_at_once(record)
        for check in judge(record, baseline, bounds, telemetry_note=""):
            bound_key = CHECK_TO_BOUND.get(check.key)
            if bound_key is None or check.measured is None or not check.evaluated:
                continue
            if bound_key in EFFICIENCIES and record.world_size == 1:
                # A strong-scaling 1-GPU baseline judged against itself (speedup 1): no case is judged on it, and
                # its ~1.0 pooled into the 2-GPU table lifted the cpu profile's strong references (0.576 -> 0.736).
                continue
            figures.append(Figure(table=f"models.{record.model}.{record.precision}", key=bound_key,
                                  gpus=gpus if bound_key not in ("min_gpu_utilization_pct", "max_step_time_cv",
                                                                 "min_power_fraction_of_limit")
                                  else scaling_checks.gpus_at_once(record),
                                  value=check.measured, host=host, session=session,
                                  reference_at_once=scaling_checks.gpus_at_once(baseline)
                                  if bound_key in EFFICIENCIES and baseline is not None else None))
    return figures


def _component_figures(summary: dict, host: str, session: str, node_gpus: int) -> list[Figure]:
    """The concurrent host-link figures of each GPU's host-link test, keyed by how many GPUs ran at once
    (sessions before it was recorded: every GPU of the node, as the component launch runs them)."""
    figures = []
    for result in map(as_dict, as_dict(summary.get("results")).values()):
        data = result.get("components")
        if not isinstance(data, dict) or not ("host" in data or "gpus_at_once" in data):
            continue
        recorded = as_int(data.get("gpus_at_once"))
        at_once = recorded if recorded is not None else node_gpus
        for key, measured in _measured(result):
            bound_key = CHECK_TO_BOUND.get(key)
            if bound_key and bound_key.endswith("concurrent_gbps"):
                figures.append(Figure(table="components", key=bound_key, gpus=at_once, value=measured, host=host,
                                      session=session))
    return figures


def _interconnect_figures(summary: dict, host: str, session: str) -> list[Figure]:
    """The all-reduce bus bandwidth of each all-reduce test of the session, keyed by its GPU count: a session runs
    them where its profile has an [interconnect] table, or with --harness-calibration where it has none yet."""
    figures = []
    for result in map(as_dict, as_dict(summary.get("results")).values()):
        gpus = as_int(as_dict(result.get("interconnect")).get("gpus"))
        if gpus is None or gpus < 2:
            continue
        figures += [Figure(table="interconnect", key="min_allreduce_busbw_gbps", gpus=gpus, value=measured, host=host,
                           session=session) for key, measured in _measured(result) if key == "allreduce_busbw"]
    return figures


def _measured(result: dict) -> list[tuple[str, float]]:
    """(key, measured figure) of each check of a session.json result that has a number."""
    checks = map(as_dict, as_list(result.get("checks")))
    return [(as_text(check.get("key")), measured) for check in checks
            if (measured := as_number(check.get("measured"))) is not None]


def health_failures(summary: dict) -> list[str]:
    """Each health or sanity check the session failed (``throttling in test_gemm[gpu0]``), but those whose
    bounds this tool fits (a refit may be widening them): a host showing one is not healthy, and a bound
    fitted from it would let the fault it shows pass (issue 27: a GPU in sw thermal slowdown lowered the
    first H100 fit)."""
    failed = []
    for name, result in as_dict(summary.get("results")).items():
        for check in map(as_dict, as_list(as_dict(result).get("checks"))):
            key = as_text(check.get("key"))
            if check.get("kind") in ("health", "sanity") and check.get("passed") is False and key not in CHECK_TO_BOUND:
                failed.append(f"{key} in {str(name).rsplit('::', 1)[-1]}")  # a bound this tool fits may be what is off
    return failed


def read_session(run_dir: Path, assume_training: str | None = None) -> Session:
    """One acceptance session's figures; a directory that is not one is refused, naming it.
    ``assume_training``: the training definition of a session written before sessions recorded theirs."""
    run_dir = Path(run_dir)
    summary, records = _read(run_dir)
    unhealthy = health_failures(summary)
    if unhealthy:
        raise CalibrationError(
            f"{run_dir}: this host was not healthy in this session ({', '.join(unhealthy[:3])}"
            f"{f' and {len(unhealthy) - 3} more' if len(unhealthy) > 3 else ''} failed): bounds are fitted from "
            "healthy hosts only (docs/calibration.md); leave this session out, or mend the host and run it again")
    host = _host_of(summary)
    session = Session(path=run_dir, host=host, profile=str(as_dict(summary.get("profile")).get("name")))
    recorded = {family: entry.get("harness") for family, entry in as_dict(summary.get("definitions")).items()
                if isinstance(entry, dict)}
    if "training" not in recorded and assume_training is not None:
        recorded["training"] = assume_training
    if recorded.get("training") != current_id("training"):
        raise CalibrationError(
            f"{run_dir}: measured as training definition {recorded.get('training') or 'unknown (older harness)'}; "
            f"this harness measures {current_id('training')}: fit from sessions of this harness only")
    gpus = as_int(as_dict(summary.get("hardware")).get("gpu_count")) or 0
    attempts = fitted_attempts(records)
    session.remeasured = sum(1 for a in attempts if a.attempt)
    session.unsettled = sum(1 for a in attempts if not a.settled)
    session.figures = (_training_figures(attempts, host, run_dir.name)
                       + _component_figures(summary, host, run_dir.name, gpus))
    if recorded.get("allreduce") == current_id("allreduce"):  # else its all-reduce was measured another way
        session.figures += _interconnect_figures(summary, host, run_dir.name)
    return session
