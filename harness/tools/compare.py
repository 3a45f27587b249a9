"""Two runs side by side: ``harness compare A B`` ("is the node as fast after the driver upgrade?").

A and B are run directories as ``make acceptance`` writes them (``reports/<run-id>/``, whose
``runs/*.json`` are the run records) or as ``harness calibrate`` writes them (several repeats of a
case each), or a ``session.json`` / ``report.json`` of such a directory (read by
harness/tools/run_sets.py, which turns a damaged file into a one-line error). Per case
(``harness.cases.CaseId``: each result's ``case_id`` where the session recorded one, else the run
record's own model, precision, scaling and GPUs, as in ``runs/*.json`` and files written before
case ids), both sides show per-GPU throughput with its relative change, scaling efficiency with its
change in points, and the status (the verdict when the directory has one, else the run's status).
Cases found on one side only are listed. When both sides ran the all-reduce test, its bus bandwidth
at the largest message both measured is compared per GPU count (an NCCL or driver upgrade shows
there first).

Statistics: a case with several records (calibration repeats) shows the median of its successful
runs. Efficiency is the check's own figure where the session judged the case (its
``weak_efficiency`` / ``strong_efficiency`` check's ``measured``, against the baseline the session
chose): the number the terminal and the report showed. Only records without a judged check (a
directory of ``runs/*.json``, calibration repeats) have it recomputed from the records on that side,
marked ``r``: weak = per-GPU throughput at N / at 1 GPU with the same per-GPU batch; strong =
total throughput at N / at 1 GPU with the same global batch, over N. A throughput change is
flagged ``*`` when it exceeds the sum of both runs' 95 % confidence half-widths, which is
within-run noise only. Run-to-run spread on a healthy node is larger: over three sign-offs on
4 x H200, at most 0.62 % for bf16, ViT and BERT cases and up to 4.5 % for ResNet fp16, whose loss
scaler syncs with the host every step (docs/measurements.md). Read a ``*`` below about 1 % (5 %
for ResNet fp16) as noise, not a finding.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.cases import CaseId
from harness.exitcodes import EXIT_USAGE_ERROR
from harness.records import RunRecord
from harness.results.reading import clean_text
from harness.tools.run_sets import CompareError, RunSet, load_run_set
from harness.kinds.interconnect.busbw import size_label


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
    efficiency_recomputed: bool = False
    """The efficiency was rebuilt from the records: no check of the session recorded it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Row:
    case: CaseId
    a: CaseSummary
    b: CaseSummary

    @property
    def throughput_change(self) -> float | None:
        """(B - A) / A; None without both, or when A is 0 (a run that measured nothing is no baseline)."""
        if self.a.throughput_per_gpu is None or self.b.throughput_per_gpu is None or not self.a.throughput_per_gpu > 0:
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
        efficiency, recomputed = None, False
        judged = [run_set.efficiencies[r.run_id] for r in ok if r.run_id in run_set.efficiencies]
        if case.world_size > 1 and judged:
            efficiency = _median(judged)
        elif case.world_size > 1 and ok and throughput is not None:
            efficiency = _efficiency(case, ok, throughput, _baseline_records(run_set.records, ok[0]))
            recomputed = efficiency is not None
        summaries[case] = CaseSummary(
            case=case, runs=len(records), throughput_per_gpu=throughput,
            sample_unit=records[0].sample_unit, efficiency=efficiency,
            ci95_rel=_median([r.throughput_ci95_rel for r in ok if r.throughput_ci95_rel is not None]),
            status=_status(records, run_set.verdicts), efficiency_recomputed=recomputed)
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
    lines = []
    for side, run_set in (("A", a), ("B", b)):
        lines.append(f"{side}: {run_set.path}  ({len(run_set.records)} records from {run_set.read_from})")
        lines.extend(f"   note: {note}" for note in run_set.notes)
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
            f"{_eff(row.a):>6} {_eff(row.b):>6} "
            f"{_signed(row.efficiency_change, 100, ' pt', 1):>9}  {row.a.status} -> {row.b.status}")
    if not comparison.rows:
        lines.append("(no case was run on both sides)")
    if any(s.efficiency_recomputed for row in comparison.rows for s in (row.a, row.b)):
        lines.append("r = efficiency recomputed from the run records (no judged check on that side); the others "
                     "are the checks' own figures, as the report shows them")
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


def _eff(summary: CaseSummary) -> str:
    """The efficiency as the check gave it, or marked ``r`` where recomputed from the records."""
    return _number(summary.efficiency, 3) + ("r" if summary.efficiency_recomputed else "")


def add_compare_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "compare", help="compare two run directories case by case",
        description="Compare two run directories (reports/<run-id>/, or their session.json / report.json): "
                    "per-GPU throughput, scaling efficiency and status per case.")
    p.add_argument("a", help="the earlier run (the reference), e.g. reports/20261121-101500-gpu017-h200")
    p.add_argument("b", help="the later run, e.g. reports/latest")
    return p


def _for_terminal(text: str) -> str:
    """Every line cleaned as the report cleans its inputs (harness/results/reading.py clean_text): a model
    name or status read from a file must not carry escape sequences that retitle or clear the terminal."""
    return "\n".join(clean_text(line, 100_000, one_line=True) for line in text.split("\n"))


def cli_compare(a: str | Path, b: str | Path) -> int:
    """``harness compare A B``: 0 when both were read and compared, 4 (usage error) when either cannot be read."""
    try:
        comparison = compare(load_run_set(a), load_run_set(b))
    except CompareError as exc:
        print(f"harness compare: {_for_terminal(str(exc))}", file=sys.stderr)
        return EXIT_USAGE_ERROR
    print(_for_terminal(format_comparison(comparison)))
    return 0
