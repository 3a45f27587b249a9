"""Two runs side by side: ``harness compare A B`` ("is the node as fast after the driver upgrade?").

A and B are run directories as ``make acceptance`` writes them (``reports/<run-id>/``, whose
``runs/*.json`` are the run records) or as ``harness calibrate`` writes them (several repeats of a
case each), or a ``session.json`` / ``report.json`` of such a directory. Per case
(``harness.cases.CaseId``: each result's ``case_id`` where the session recorded one, else the run
record's own model, precision, scaling and GPUs, as in ``runs/*.json`` and files written before
case ids), both sides show per-GPU throughput with its relative change, scaling efficiency with its
change in points, and the status (the verdict when the directory has one, else the run's status).
Cases found on one side only are listed. When both sides ran the all-reduce test, its bus bandwidth
at the largest message both measured is compared per GPU count (an NCCL or driver upgrade shows
there first).

Statistics: a case with several records (calibration repeats) shows the median of its successful
runs. Efficiency is recomputed from the records on each side, as the verdict does: weak = per-GPU
throughput at N / at 1 GPU with the same per-GPU batch; strong = total throughput at N / at 1 GPU
with the same global batch, over N. A throughput change is flagged ``*`` when it exceeds the sum of
both runs' 95 % confidence half-widths, which is within-run noise only. Run-to-run spread on a
healthy node is larger: over three sign-offs on 4 x H200, at most 0.62 % for bf16, ViT and BERT
cases and up to 4.5 % for ResNet fp16, whose loss scaler syncs with the host every step
(docs/measurements.md). Read a ``*`` below about 1 % (5 % for ResNet fp16) as noise, not a finding.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

from harness.cases import CaseId
from harness.records import RunRecord
from harness.workloads.busbw import size_label


class CompareError(Exception):
    """A run directory that cannot be read; the message says which and what was expected."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunSet:
    """The records of one run directory, and its verdicts when it has them."""

    path: Path
    records: tuple[RunRecord, ...]
    verdicts: dict[str, str]
    """run_id -> "PASS" / "FAIL" (from the checks in session.json or report.json)."""
    profile: str | None = None
    """The threshold profile the run was judged against, when known."""
    read_from: str = ""
    allreduce_busbw_gbps: dict[tuple[int, int], float] = field(default_factory=dict)
    """(GPUs, message bytes) -> all-reduce bus bandwidth in GB/s, from session.json when the run had
    the all-reduce test."""
    cases: dict[str, CaseId] = field(default_factory=dict)
    """run_id -> the case as the session recorded it (each result's ``case_id``); empty for a directory
    of run records only, and for files written before results carried a case_id."""

    def case_of(self, record: RunRecord) -> CaseId:
        """The recorded case of this run, else the one its record's fields describe."""
        return self.cases.get(record.run_id) or record_case(record)


def record_case(record: RunRecord) -> CaseId:
    """The case a run record describes (model, precision, scaling, nodes x GPUs per node)."""
    nodes = max(record.nodes, 1)
    return CaseId(model=record.model, precision=record.precision, gpus=record.world_size // nodes,
                  scaling=record.scaling, nodes=nodes)


def _case_order(case: CaseId) -> tuple[str, str, str, int, int]:
    """Rows by model, precision, scaling, then nodes and GPUs per node."""
    return case.model, case.precision, case.scaling, case.nodes, case.gpus


@dataclass(frozen=True, kw_only=True, slots=True)
class CaseSummary:
    case: CaseId
    runs: int
    throughput_per_gpu: float | None
    """Median over the case's successful runs, samples/s per GPU; None when none succeeded."""
    sample_unit: str
    efficiency: float | None
    """Weak or strong scaling efficiency against the 1-GPU run on the same side; None at 1 GPU or
    without a successful baseline."""
    ci95_rel: float | None
    """Median of the runs' throughput CI95 half-widths (relative)."""
    status: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Row:
    case: CaseId
    a: CaseSummary
    b: CaseSummary

    @property
    def throughput_change(self) -> float | None:
        """(B - A) / A."""
        if self.a.throughput_per_gpu is None or self.b.throughput_per_gpu is None:
            return None
        return (self.b.throughput_per_gpu - self.a.throughput_per_gpu) / self.a.throughput_per_gpu

    @property
    def efficiency_change(self) -> float | None:
        """B - A, in fraction units (0.01 = one point)."""
        if self.a.efficiency is None or self.b.efficiency is None:
            return None
        return self.b.efficiency - self.a.efficiency

    @property
    def beyond_noise(self) -> bool:
        change = self.throughput_change
        if change is None or self.a.ci95_rel is None or self.b.ci95_rel is None:
            return False
        return abs(change) > self.a.ci95_rel + self.b.ci95_rel


@dataclass(frozen=True, kw_only=True, slots=True)
class AllreduceRow:
    """The all-reduce bus bandwidth of one GPU count on both sides, at the largest message both ran."""

    gpus: int
    size_bytes: int
    a_gbps: float
    b_gbps: float

    @property
    def change(self) -> float:
        return (self.b_gbps - self.a_gbps) / self.a_gbps


@dataclass(frozen=True, kw_only=True, slots=True)
class Comparison:
    a: RunSet
    b: RunSet
    rows: tuple[Row, ...]
    only_a: tuple[CaseSummary, ...]
    only_b: tuple[CaseSummary, ...]
    allreduce: tuple[AllreduceRow, ...] = ()


# ---------------------------------------------------------------------------------------------
# Reading a run directory (the I/O edge)


# Keys that mark a session result as something other than a benchmark case (see harness.plugin).
NOT_BENCHMARK_RESULTS = ("interconnect", "topology", "soak")


@dataclass(frozen=True, kw_only=True, slots=True)
class _Summary:
    """What a session.json or report.json holds for compare."""

    records: list[RunRecord]
    verdicts: dict[str, str]
    profile: str | None
    allreduce: dict[tuple[int, int], float]
    cases: dict[str, CaseId]


def load_run_set(path: str | Path) -> RunSet:
    """Records and verdicts of a run directory, or of its session.json / report.json."""
    path = Path(path)
    if not path.exists():
        raise CompareError(f"{path}: no such file or directory; give a run directory such as reports/<run-id>/ "
                           "(or reports/latest)")
    if path.is_file():
        summary = _read_summary_file(path)
        if not summary.records:
            raise CompareError(f"{path}: holds no run records (no test ran a benchmark)")
        return RunSet(path=path, records=tuple(summary.records), verdicts=summary.verdicts, profile=summary.profile,
                      read_from=path.name, allreduce_busbw_gbps=summary.allreduce, cases=summary.cases)
    runs_dir = path / "runs"
    record_files = sorted(runs_dir.glob("*.json")) if runs_dir.is_dir() else []
    summary_file = next((path / name for name in ("session.json", "report.json") if (path / name).is_file()), None)
    summary = (_read_summary_file(summary_file) if summary_file is not None else
               _Summary(records=[], verdicts={}, profile=None, allreduce={}, cases={}))
    if record_files:
        records = [_read_record_file(file) for file in record_files]
        read_from = "runs/*.json" + (f" + {summary_file.name}" if summary_file else "")
    elif summary.records and summary_file is not None:
        records = summary.records
        read_from = summary_file.name
    else:
        raise CompareError(f"{path}: no run records here: expected runs/*.json, session.json or report.json "
                           f"(a run directory of `make acceptance` or `harness calibrate`){_subdir_hint(path)}")
    return RunSet(path=path, records=tuple(records), verdicts=summary.verdicts, profile=summary.profile,
                  read_from=read_from, allreduce_busbw_gbps=summary.allreduce, cases=summary.cases)


def _allreduce_of(data: dict) -> dict[tuple[int, int], float]:
    """(GPUs, bytes) -> bus bandwidth from a session.json's ``interconnect.allreduce`` rows; {} when it
    has none (a report.json, a run without the all-reduce test) or they are malformed."""
    try:
        rows = ((data.get("interconnect") or {}).get("allreduce")) or []
        return {(int(row["gpus"]), int(row["size_bytes"])): float(row["busbw_gbps"])
                for row in rows if row.get("correct", True) and row.get("busbw_gbps")}
    except (ValueError, TypeError, KeyError, AttributeError):
        return {}  # the cases are what compare is for; a damaged interconnect section only loses its rows


def _subdir_hint(path: Path) -> str:
    runs = sorted(child.name for child in path.iterdir()
                  if child.is_dir() and ((child / "runs").is_dir() or (child / "session.json").is_file()))
    if not runs:
        return ""
    shown = ", ".join(runs[-3:])
    return f"; it holds run directories ({shown}): pick one, e.g. {path / runs[-1]}"


def _read_record_file(file: Path) -> RunRecord:
    try:
        return RunRecord.from_json(file.read_text())
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise CompareError(f"{file}: not a readable run record: {exc}") from None


def _read_summary_file(file: Path) -> _Summary:
    """session.json (plugin summary) or report.json (pytest-json-report): records, verdicts, profile,
    all-reduce bus bandwidths and the recorded case of each run."""
    try:
        data = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        raise CompareError(f"{file}: not readable JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CompareError(f"{file}: expected a JSON object (session.json or report.json of a run directory)")
    if "results" in data:  # session.json
        results = list(data["results"].values())
        profile = (data.get("profile") or {}).get("name")
    elif "tests" in data:  # report.json
        results = [test.get("metadata", {}).get("harness") for test in data["tests"]]
        results = [result for result in results if result]
        profile = ((data.get("harness") or {}).get("profile") or {}).get("name")
    else:
        raise CompareError(f"{file}: neither a session.json (no 'results') nor a report.json (no 'tests')")
    records, verdicts, cases = [], {}, {}
    for result in results:
        if any(key in result for key in NOT_BENCHMARK_RESULTS):
            continue  # all-reduce, topology and soak results hold no benchmark run record to compare
        try:
            record = RunRecord.from_dict(result["record"])
        except (KeyError, ValueError, TypeError) as exc:
            raise CompareError(f"{file}: a result without a readable run record: {exc}") from None
        records.append(record)
        checks = result.get("checks") or []
        verdicts[record.run_id] = "FAIL" if any(check.get("passed") is False for check in checks) else "PASS"
        case = CaseId.from_dict(result.get("case_id"))  # None when absent (older files) or damaged
        if case is not None:
            cases[record.run_id] = case
    return _Summary(records=records, verdicts=verdicts, profile=profile, allreduce=_allreduce_of(data), cases=cases)


# ---------------------------------------------------------------------------------------------
# Summaries and the comparison (pure)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _baseline_records(records: tuple[RunRecord, ...], record: RunRecord) -> list[RunRecord]:
    """Successful 1-GPU runs of the same model and precision whose batch is this case's 1-GPU batch."""
    batch = record.batch_size_per_gpu if record.scaling == "weak" else record.global_batch_size
    return [r for r in records if r.ok and r.world_size == 1 and r.model == record.model
            and r.precision == record.precision and r.batch_size_per_gpu == batch]


def _status(records: list[RunRecord], verdicts: dict[str, str]) -> str:
    counts: dict[str, int] = {}
    for record in records:
        status = verdicts.get(record.run_id, record.status.upper())
        counts[status] = counts.get(status, 0) + 1
    if len(records) == 1:
        return next(iter(counts))
    return ", ".join(f"{status} x{count}" for status, count in counts.items())


def summarize(run_set: RunSet) -> dict[CaseId, CaseSummary]:
    groups: dict[CaseId, list[RunRecord]] = {}
    for record in run_set.records:
        groups.setdefault(run_set.case_of(record), []).append(record)
    summaries = {}
    for case in sorted(groups, key=_case_order):
        records = groups[case]
        ok = [r for r in records if r.ok and r.throughput_per_gpu is not None]
        throughput = _median([r.throughput_per_gpu for r in ok if r.throughput_per_gpu is not None])
        efficiency = None
        if case.world_size > 1 and ok and throughput is not None:
            efficiency = _efficiency(case, ok, throughput, _baseline_records(run_set.records, ok[0]))
        summaries[case] = CaseSummary(
            case=case, runs=len(records), throughput_per_gpu=throughput,
            sample_unit=records[0].sample_unit, efficiency=efficiency,
            ci95_rel=_median([r.throughput_ci95_rel for r in ok if r.throughput_ci95_rel is not None]),
            status=_status(records, run_set.verdicts))
    return summaries


def _efficiency(case: CaseId, ok: list[RunRecord], throughput_per_gpu: float,
                baseline: list[RunRecord]) -> float | None:
    """Weak: per-GPU throughput / the 1-GPU run's; strong: total throughput / the 1-GPU run's, over N.
    None without a successful baseline."""
    if case.scaling == "weak":
        base = _median([r.throughput_per_gpu for r in baseline if r.throughput_per_gpu])
        return throughput_per_gpu / base if base else None
    total = _median([r.throughput_total for r in ok if r.throughput_total])
    base = _median([r.throughput_total for r in baseline if r.throughput_total])
    return total / base / case.world_size if base and total else None


def compare(a: RunSet, b: RunSet) -> Comparison:
    summary_a, summary_b = summarize(a), summarize(b)
    cases_a, cases_b = sorted(summary_a, key=_case_order), sorted(summary_b, key=_case_order)
    rows = tuple(Row(case=case, a=summary_a[case], b=summary_b[case]) for case in cases_a if case in summary_b)
    return Comparison(a=a, b=b, rows=rows,
                      only_a=tuple(summary_a[case] for case in cases_a if case not in summary_b),
                      only_b=tuple(summary_b[case] for case in cases_b if case not in summary_a),
                      allreduce=compare_allreduce(a.allreduce_busbw_gbps, b.allreduce_busbw_gbps))


def compare_allreduce(a: dict[tuple[int, int], float], b: dict[tuple[int, int], float]) -> tuple[AllreduceRow, ...]:
    """Per GPU count run on both sides, the largest message size both measured (where bus bandwidth
    has saturated, and what the profiles' bounds are set at)."""
    rows = []
    for gpus in sorted({g for g, _ in a} & {g for g, _ in b}):
        common = [size for g, size in a if g == gpus and (g, size) in b]
        if common:
            size = max(common)
            rows.append(AllreduceRow(gpus=gpus, size_bytes=size, a_gbps=a[(gpus, size)], b_gbps=b[(gpus, size)]))
    return tuple(rows)



# ---------------------------------------------------------------------------------------------
# Output


def _side_facts(run_set: RunSet) -> dict[str, str]:
    """What the run ran on and with: the facts a "what changed?" question needs."""
    def distinct(values) -> str:
        shown = list(dict.fromkeys(v for v in values if v))
        return ", ".join(shown) if shown else "unknown"

    versions = [r.versions for r in run_set.records if r.versions is not None]
    starts = sorted(r.started_at for r in run_set.records if r.started_at)
    return {
        "profile": run_set.profile or "—",
        "hosts": distinct(host for r in run_set.records for host in r.hosts),
        "device": distinct(r.device_name for r in run_set.records),
        "driver": distinct(v.driver for v in versions),
        "CUDA": distinct(v.cuda for v in versions),
        "NCCL": distinct(v.nccl for v in versions),
        "torch": distinct(v.torch for v in versions),
        "harness": distinct(v.harness for v in versions),
        "started": starts[0] if starts else "unknown",
    }


def _number(value: float | None, digits: int = 1) -> str:
    return f"{value:,.{digits}f}" if value is not None else "—"


def _signed(value: float | None, scale: float, unit: str, digits: int) -> str:
    return f"{value * scale:+.{digits}f}{unit}" if value is not None else "—"


def format_comparison(comparison: Comparison) -> str:
    a, b = comparison.a, comparison.b
    lines = [f"A: {a.path}  ({len(a.records)} records from {a.read_from})",
             f"B: {b.path}  ({len(b.records)} records from {b.read_from})"]
    facts_a, facts_b = _side_facts(a), _side_facts(b)
    for name in facts_a:
        if name == "started":
            lines.append(f"  {name + ':':9} {facts_a[name]}  ->  {facts_b[name]}")
        elif facts_a[name] == facts_b[name]:
            lines.append(f"  {name + ':':9} {facts_a[name]}")
        else:
            lines.append(f"  {name + ':':9} {facts_a[name]}  ->  {facts_b[name]}   (changed)")
    lines.append("")
    header = (f"{'case':34} {'per-GPU /s A':>13} {'B':>11} {'change':>8}  {'eff A':>6} {'eff B':>6} "
              f"{'change':>9}  status A -> B")
    lines.append(header)
    lines.append("-" * len(header))
    for row in comparison.rows:
        flag = "*" if row.beyond_noise else " "
        lines.append(
            f"{row.case.key:34} {_number(row.a.throughput_per_gpu):>13} {_number(row.b.throughput_per_gpu):>11} "
            f"{_signed(row.throughput_change, 100, ' %', 1):>8}{flag} "
            f"{_number(row.a.efficiency, 3):>6} {_number(row.b.efficiency, 3):>6} "
            f"{_signed(row.efficiency_change, 100, ' pt', 1):>9}  {row.a.status} -> {row.b.status}")
    if not comparison.rows:
        lines.append("(no case was run on both sides)")
    for side, only in (("A", comparison.only_a), ("B", comparison.only_b)):
        if only:
            lines.append("")
            lines.append(f"only in {side}:")
            lines.extend(f"  {summary.case.key:34} {_number(summary.throughput_per_gpu):>13} "
                         f"{summary.sample_unit}/s per GPU  {summary.status}" for summary in only)
    if comparison.allreduce:
        lines.append("")
        lines.append(f"{'all-reduce bus bandwidth':34} {'GB/s A':>13} {'B':>11} {'change':>8}")
        lines.extend(f"{f'{row.gpus} GPUs, {size_label(row.size_bytes)}':34} {row.a_gbps:>13,.1f} {row.b_gbps:>11,.1f} "
                     f"{row.change * 100:>+6.1f} %" for row in comparison.allreduce)
    lines.append("")
    lines.append("per-GPU throughput in images/s or sequences/s (by model), median of a case's successful runs; "
                 "change = (B - A) / A; efficiency changes in points; * = beyond both runs' 95 % CIs "
                 "(within-run noise only; run-to-run spread is larger, see docs/calibration.md)")
    return "\n".join(lines)


def add_compare_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "compare", help="compare two run directories case by case",
        description="Compare two run directories (reports/<run-id>/, or their session.json / report.json): "
                    "per-GPU throughput, scaling efficiency and status per case.")
    p.add_argument("a", help="the earlier run (the reference), e.g. reports/20261121-101500-gpu017-h200")
    p.add_argument("b", help="the later run, e.g. reports/latest")
    return p


def cli_compare(a: str | Path, b: str | Path) -> int:
    """``harness compare A B``: 0 when both were read and compared, 2 when either cannot be read."""
    try:
        comparison = compare(load_run_set(a), load_run_set(b))
    except CompareError as exc:
        print(f"harness compare: {exc}", file=sys.stderr)
        return 2
    print(format_comparison(comparison))
    return 0
