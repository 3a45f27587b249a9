"""``harness calibrate-fit``: bounds fitted across hosts from acceptance sessions, written into a profile.

Each bound is fitted from sessions of the harness's own acceptance suite (``reports/<run-id>/``), so a
bound and the figure it judges share one definition (harness/definitions.py): the figure of every check
is what the check itself measures (harness/tools/calibrate/sessions.py reads them). Per bound, GPU count
and case:

- the sessions are grouped by host (a host is its set of GPU UUIDs: two VMs may share a host name);
- ``ref`` is the median of the per-host medians (a host with many sessions weighs as much as one with one);
- ``tol`` is twice the largest shortfall of any session from ``ref`` (a ``min_`` bound; the largest excess
  for a ``max_`` bound) or of the host medians' spread, whichever is larger, and at least ``FLOORS``
  (an absolute floor on a GPU's own rate is there to catch broken hardware, not 1 % of noise);
- a tail figure (``POOLED``: the step-time CV, the straggler ratio) has no confidence interval, and 3 hosts x
  1-2 runs of one case cannot say how far it wanders: its excess-or-spread is also taken as the median over every
  case of that GPU count, in the figure's own units (a host's hiccup adds to a window's CV whatever the model: the same
  +0.01 is +4x on a quiet case and +15 % on a noisy one), and the larger of the two counts;
- it is checked leave-one-host-out: each host's sessions must pass the bound fitted without that host. The
  report states the false-FAIL rate so measured, per bound and per session (a session missing any bound fitted
  without its host): a count over sessions, not a normal fit's tail, which 3-10 values of a skewed figure do not
  support.

Fewer than ``min_hosts`` hosts (3 by default) is refused unless asked for; the profile then says so.
"""

from __future__ import annotations

import json
import statistics
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from harness.definitions import current_id
from harness.exitcodes import EXIT_USAGE_ERROR
from harness.tools.calibrate import CalibrationError
from harness.tools.calibrate.sessions import CHECK_TO_BOUND, Session, read_session

MIN_HOSTS = 3
FACTOR = 2.0
"""tol = FACTOR x the largest shortfall (or excess) any healthy session showed."""
HOST_LINK_FLOOR = 0.29
"""The concurrent host link's least tolerance: FACTOR x the deepest dip a host that passed minutes before showed
between two of its sessions, 14.4 % (1 x H200 host D, pinned host-to-GPU 54.70 -> 46.82 GB/s in 2 of 3 attempts,
docs/data/2026-11-28-h200x1-held-out; 4 x H100 host J: 55.15 -> 48.06, 12.9 %). The figure is the host's (its memory,
its other tenants), not the GPU's, and an absolute floor on it should catch a host that cannot feed its GPUs at once,
not a busy minute (issue 27 item 2: absolute floors generous); a link at half its width or generation fails the bound
on each GPU alone and the topology's PCIe check, a process off its GPU's NUMA node the binding check. At 5 % it FAILed
host D's second session on a slowdown that no launch of the session caused."""
POWER_FLOOR = 0.14
"""The power fraction's least tolerance: FACTOR x the deepest healthy GPU's shortfall below its kind's median for a
case, 6.85 % (nvidia-h200 GPU-c78f79bd, ResNet-50 bf16, 25 H200s measured by the fitted profiles' sessions; 6.49 %
over the first 13, before three 4 x H200 hosts joined; 34 H100s: 5.02 %; tests/test_fit.py recomputes it), rounded up
to a hundredth. How much power a GPU draws at the same work is its chip's (leakage), not its health: a fit over 3
nodes of 1 GPU saw 3 chips within 0.46 % and set the 5 % floor, then a fourth host's GPU drew 5.4 % under the
reference at full clocks (1965-1980 MHz), 99.4-99.5 % utilization and the reference's rate, and FAILed (2026-11-28
host G, docs/data/2026-11-28-h200x1-hosts-f-g). A GPU held below its power is caught by its clocks' event reasons, its
enforced limit (GPU state) and its rate; this floor catches one that draws far less than any healthy chip."""
FLOORS = {"min_samples_per_sec_per_gpu": 0.05, "min_weak_efficiency": 0.01, "min_strong_efficiency": 0.02,
          "min_gpu_utilization_pct": 0.02, "min_power_fraction_of_limit": POWER_FLOOR, "max_step_time_cv": 0.5,
          "max_straggler_ratio": 0.01, "min_gpu_uniformity": 0.01, "min_h2d_concurrent_gbps": HOST_LINK_FLOOR,
          "min_d2h_concurrent_gbps": HOST_LINK_FLOOR, "min_allreduce_busbw_gbps": 0.02}
"""The least tolerance of each bound, a fraction of its reference. The all-reduce's is the tightest: it is the bound
that catches a communication-only fault once the efficiencies are fitted as wide as healthy hosts scatter (issue 27),
and its figure is steady: 363.5-366.1 GB/s at 4 GPUs over ten 4 x H100 hosts, host spread 0.14 % in the fit
(docs/data/2026-11-28-h100x4-refit), so 2 % is still over twice its widest healthy range."""
POOLED = frozenset({"max_step_time_cv", "max_straggler_ratio"})
"""Tail figures whose wander is pooled over the cases of one GPU count: vit_b_16 fp16 at 2 GPUs wandered 9 % over 3
hosts and 5 sessions (tol 0.5, the floor), then a fourth host showed +58 % (0.0061 against 0.0039, a healthy 0.6 %),
while the other cases of that count wandered 106-1442 % (docs/data/2026-11-27-h100x4-host-h). Pooled as a fraction of
each case's own reference, the quietest case still got the tightest limit: vit_b_16 bf16 at 2 GPUs, ref 0.0027, limit
0.0116, which a fifth host's windows missed three times in two sessions (0.0265, 0.015, 0.0291) while every other
figure of its first session passed (docs/data/2026-11-27-h100x4-host-j). Pooled in the CV's own units, a hiccup's
size: the median excess over every case of the count. The straggler ratio likewise (the slowest over the fastest rank
of a 5-step probe, no CI): fitted case by case from 3 hosts, 8 of 16 4 x H100 bounds sat at the 1 % floor and held-out
hosts missed 4 of them (docs/data/2026-11-28-h100x4-refit)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Fitted:
    table: str
    key: str
    gpus: int
    ref: float
    tol: float
    hosts: int
    runs: int
    spread: float
    worst: float
    """The worst session's value (lowest for a min_ bound, highest for a max_ one)."""
    held_out_failures: tuple[str, ...]
    """Sessions that fail the bound fitted without their host (leave-one-host-out)."""
    held_out_judged: tuple[str, ...] = ()
    """Sessions judged leave-one-host-out (those of a host with others beside it)."""
    node_gpus: int | None = None
    """An efficiency's: the GPUs its 1-GPU reference ran on at once (Figure.reference_at_once)."""

    @property
    def limit(self) -> float:
        return self.ref * (1 - self.tol) if not self.key.startswith("max_") else self.ref * (1 + self.tol)

    def toml(self) -> str:
        shape = f", node_gpus = {self.node_gpus}" if self.node_gpus is not None else ""
        return (f"{{ ref = {self.ref:.6g}, tol = {self.tol:.4g}, hosts = {self.hosts}, runs = {self.runs}, "
                f"spread = {self.spread:.4g}{shape} }}")


def _wander(key: str, by_host: dict[str, list[float]]) -> tuple[float, float, float, float]:
    """(ref, wander, spread, worst): the median host, the larger of the worst session's shortfall (excess) and the
    host medians' spread, both fractions of ref."""
    medians = [statistics.median(values) for values in by_host.values()]
    ref = statistics.median(medians)
    values = [v for vs in by_host.values() for v in vs]
    lower_is_worse = not key.startswith("max_")
    worst = min(values) if lower_is_worse else max(values)
    scale = abs(ref) or 1.0
    deviation = ((ref - worst) if lower_is_worse else (worst - ref)) / scale
    spread = (max(medians) - min(medians)) / scale
    return ref, max(deviation, spread, 0.0), spread, worst


def _fit_values(key: str, by_host: dict[str, list[float]], min_tol: float = 0.0,
                pooled: float = 0.0) -> tuple[float, float, float, float]:
    """(ref, tol, spread, worst) of one bound from each host's values; ``min_tol`` raises every floor; ``pooled``:
    the wander of a ``POOLED`` key over every case of its GPU count, in the figure's units."""
    ref, wander, spread, worst = _wander(key, by_host)
    tol = max(FLOORS.get(key, 0.05), min_tol, FACTOR * max(wander, pooled / (abs(ref) or 1.0)))
    if not key.startswith("max_"):
        tol = min(tol, 0.9)
    return ref, tol, spread, worst


def _pooled(key: str, gpus: int, groups: dict[tuple[str, str, int], dict[str, list[float]]],
            without: str | None = None) -> float:
    """The median wander of ``key`` over every table's case of ``gpus`` GPUs, in the figure's units (each case's
    relative wander times its reference; 0 for a key not ``POOLED``), its hosts but ``without``."""
    if key not in POOLED:
        return 0.0
    wanders = [ref * wander for (_, k, g), by_host in groups.items() if k == key and g == gpus
               for hosts in ({h: vs for h, vs in by_host.items() if h != without},) if hosts
               for ref, wander, _, _ in (_wander(key, hosts),)]
    return statistics.median(wanders) if wanders else 0.0


def fit(sessions: Iterable[Session], *, min_hosts: int = MIN_HOSTS, min_tol: float = 0.0) -> list[Fitted]:
    """Every bound the sessions' figures allow, each keyed by table, key and GPU count."""
    groups: dict[tuple[str, str, int], dict[str, list[tuple[str, float]]]] = {}
    shapes: dict[tuple[str, str, int], set[int]] = {}
    for session in sessions:
        for f in session.figures:
            groups.setdefault((f.table, f.key, f.gpus), {}).setdefault(f.host, []).append((f.session, f.value))
            if f.reference_at_once is not None:
                shapes.setdefault((f.table, f.key, f.gpus), set()).add(f.reference_at_once)
    values_of = {group: {host: [v for _, v in pairs] for host, pairs in by_host.items()}
                 for group, by_host in groups.items() if len(by_host) >= min_hosts}
    fitted = []
    for (table, key, gpus), by_host in sorted(groups.items()):
        if len(by_host) < min_hosts:
            continue
        node_gpus = sorted(shapes.get((table, key, gpus), ()))
        if len(node_gpus) > 1:
            raise CalibrationError(
                f"[{table}] {key} for {gpus} GPUs: the sessions ran its 1-GPU reference on "
                f"{' and '.join(map(str, node_gpus))} GPUs at once (nodes of different sizes), which are different "
                "shapes: fit the sessions of each node size into a profile of their own")
        values_by_host = values_of[(table, key, gpus)]
        ref, tol, spread, worst = _fit_values(key, values_by_host, min_tol, _pooled(key, gpus, values_of))
        failures: list[str] = []
        judged: set[str] = set()
        for host, pairs in by_host.items():
            others = {h: vs for h, vs in values_by_host.items() if h != host}
            if not others:
                continue
            held_ref, held_tol, _, _ = _fit_values(key, others, min_tol, _pooled(key, gpus, values_of, without=host))
            probe = Fitted(table=table, key=key, gpus=gpus, ref=held_ref, tol=held_tol, hosts=0, runs=0, spread=0,
                           worst=0, held_out_failures=())
            judged.update(session for session, _ in pairs)
            failures += [session for session, value in pairs
                         if (value < probe.limit if not key.startswith("max_") else value > probe.limit)]
        values = [v for vs in values_by_host.values() for v in vs]
        fitted.append(Fitted(table=table, key=key, gpus=gpus, ref=ref, tol=tol, hosts=len(by_host), runs=len(values),
                             spread=spread, worst=worst, held_out_failures=tuple(dict.fromkeys(failures)),
                             held_out_judged=tuple(sorted(judged)),
                             node_gpus=node_gpus[0] if node_gpus else None))
    return fitted


def count_hosts(sessions: list[Session]) -> int:
    return len({s.host for s in sessions})


def check_hosts(sessions: list[Session], min_hosts: int) -> None:
    hosts = count_hosts(sessions)
    if hosts < min_hosts:
        raise CalibrationError(
            f"{len(sessions)} sessions from {hosts} host{'s' if hosts != 1 else ''}; a fitted bound needs sessions "
            f"on >= {min_hosts} hosts of the kind (each host's own spread is not the fleet's). Run `make "
            f"acceptance` on more healthy hosts, or pass --min-hosts {hosts} to fit from these (the profile then "
            "says how few hosts it saw)")


# ---------------------------------------------------------------------------------------------
# Into the profile's text


def _section_span(lines: list[str], table: str) -> tuple[int, int] | None:
    """[start, end) of ``[table]``'s lines (its header excluded), or None."""
    header = f"[{table}]"
    for index, line in enumerate(lines):
        if line.strip() == header:
            end = next((j for j in range(index + 1, len(lines)) if lines[j].lstrip().startswith("[")), len(lines))
            while end > index + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
                end -= 1
            return index + 1, end
    return None


NEW_TABLES = ("interconnect",)
"""Tables ``apply`` adds when the profile has none: a kind's all-reduce bounds may be fitted before it has any
(its sessions ran with --harness-calibration); a case table is never invented (its batch size is the author's)."""
NOTE_START = "# Bounds written as { ref, tol, hosts, runs, spread } were fitted"
"""How the note ``apply`` ends a profile with begins: an earlier fit's note is replaced, never kept beside."""


def _line_of(lines: list[str], span: tuple[int, int], key: str) -> int | None:
    """The index of ``key = ...`` within ``span`` of ``lines``; None when the section has no such key."""
    start, end = span
    return next((i for i in range(start, end) if lines[i].split("=")[0].strip() == key), None)


def _set_line(lines: list[str], span: tuple[int, int], key: str, entry: str, before: str | None = None) -> None:
    """``entry`` in place of ``key``'s line in ``span``; where there is none, inserted before the ``before``
    key's line (a table's ``source`` closes it), else at the section's end."""
    found = _line_of(lines, span, key)
    if found is not None:
        lines[found] = entry
        return
    at = _line_of(lines, span, before) if before is not None else None
    lines.insert(span[1] if at is None else at, entry)


def _without_note(lines: list[str]) -> list[str]:
    """``lines`` without an earlier fit's note: its first line and the comment lines right after it (a note an
    author wrapped or extended by hand; a refit had left those lines under the new note, 2026-11-27)."""
    kept: list[str] = []
    in_note = False
    for line in lines:
        in_note = line.startswith(NOTE_START) or (in_note and line.startswith("#"))
        if not in_note:
            kept.append(line)
    return kept


def _hosts(count: int) -> str:
    return f"{count} host{'' if count == 1 else 's'}"


def _cases_figures(count: int) -> str:
    return f"{count} case's figures come" if count == 1 else f"{count} cases' figures come"


def _other_counts(line: str, fitted_counts: set[int]) -> list[str]:
    """The GPU counts a key's line bounds that this fit does not (``min_x = { 1 = ..., 4 = ... }``): a fit writes the
    whole line, so those would be dropped. A line that is no table by GPU count has none."""
    try:
        value = tomllib.loads(line).popitem()[1] if "=" in line else None
    except (tomllib.TOMLDecodeError, KeyError):
        return []
    if not isinstance(value, dict):
        return []
    return sorted((count for count in value if count.isdigit() and int(count) not in fitted_counts), key=int)


def _family(table: str) -> str:
    """The definition family (harness/definitions.py) of the bounds of ``table``."""
    return {"components": "components", "interconnect": "allreduce"}.get(table, "training")


def apply(text: str, fitted: list[Fitted], note: str, source: str = "", *, drop_unfitted: bool = False) -> str:
    """``text`` (a profile) with every fitted bound written as a reference table in its section (an [interconnect]
    the profile lacks is added), the ``source`` of each case and interconnect table a bound was written into set
    to ``source`` (when given), ``[definitions]`` of each family fitted (training, else components; allreduce)
    set to this harness's definition, and ``note`` as the profile's last comment (an earlier fit's note
    removed).

    A key's line is written whole, so a bound the profile holds for a GPU count (a node shape) this fit has no
    sessions of would be lost: where it is of today's definition, CalibrationError names it, unless
    ``drop_unfitted``. (Kept beside the new ones it would claim this fit's source, which it does not share; one of
    an older definition is judged nowhere and goes, as the definition it would claim is today's.)"""
    try:
        recorded = tomllib.loads(text).get("definitions", {})
    except tomllib.TOMLDecodeError:
        recorded = {}
    lines = _without_note(text.splitlines())
    by_line: dict[tuple[str, str], list[Fitted]] = {}
    for f in fitted:
        by_line.setdefault((f.table, f.key), []).append(f)
    for (table, key), entries in by_line.items():
        span = _section_span(lines, table)
        if span is None and table in NEW_TABLES:  # a kind's first all-reduce bounds: its table, made here
            lines += ["", f"[{table}]",
                      f"source = {json.dumps(source or 'fitted by harness calibrate-fit', ensure_ascii=False)}"]
            span = _section_span(lines, table)
        if span is None:
            raise CalibrationError(f"the profile has no [{table}] table for the fitted {key}; add the case first")
        found = _line_of(lines, span, key)
        dropped = _other_counts(lines[found], {f.gpus for f in entries}) if found is not None else []
        if dropped and not drop_unfitted and recorded.get(_family(table)) == current_id(_family(table)):
            raise CalibrationError(
                f"[{table}] {key} has bounds for {' and '.join(dropped)} GPU{'s' if dropped != ['1'] else ''} that "
                "these sessions did not measure, and a fit writes the key whole: give the sessions of every node "
                "shape the profile bounds in one fit, or pass --drop-unfitted to remove those bounds; nothing was "
                "written")
        value = "{ " + ", ".join(f"{f.gpus} = {f.toml()}" for f in sorted(entries, key=lambda f: f.gpus)) + " }"
        _set_line(lines, span, key, f"{key} = {value}", before="source")
    # [components] also holds bounds measured otherwise (GEMM, memory): its source stays the author's.
    for table in sorted({f.table for f in fitted if f.table != "components"} if source else ()):
        _set_line(lines, _section_span(lines, table) or (0, 0), "source",
                  f"source = {json.dumps(source, ensure_ascii=False)}")
    if any(f.table.startswith("models.") for f in fitted):
        lines = _set_definition(lines, "training")
    elif any(f.table == "components" for f in fitted):
        lines = _set_definition(lines, "components")
    if any(f.table == "interconnect" for f in fitted):
        lines = _set_definition(lines, "allreduce")
    return "\n".join(lines).rstrip() + "\n" + (f"# {note}\n" if note else "")


def _set_definition(lines: list[str], family: str) -> list[str]:
    span = _section_span(lines, "definitions")
    entry = f'{family} = "{current_id(family)}"'
    if span is None:
        return lines + ["", "[definitions]", entry]
    _set_line(lines, span, family, entry)
    return lines


def held_out_sessions(fitted: list[Fitted]) -> tuple[int, int]:
    """(missed, tried): the sessions judged leave-one-host-out, and how many of them miss at least one bound
    fitted without their host. missed / tried is the measured false-FAIL rate of a first settled window on a healthy
    host the bounds did not see (a miss within its noise is re-measured before it fails, so a session's is lower)."""
    missed = {session for f in fitted for session in f.held_out_failures}
    judged = {session for f in fitted for session in f.held_out_judged}
    return len(missed), len(judged)


def report(fitted: list[Fitted], sessions: list[Session]) -> str:
    """A Markdown table of every fitted bound: reference, tolerance, limit, worst session, and its leave-one-host-out
    misses, which are the false-FAIL rate measured on hosts the bound was not fitted on."""
    hosts = sorted({s.host for s in sessions})
    missed, tried = held_out_sessions(fitted)
    out = [f"Fitted from {len(sessions)} sessions on {_hosts(len(hosts))} (GPU UUIDs): "
           + "; ".join(f"host {i + 1}: {h[:60]}" for i, h in enumerate(hosts)), "",
           f"False-FAIL rate, measured leave-one-host-out: {missed} of {tried} sessions miss at least one bound "
           f"fitted without their host on a first settled window ({missed / tried:.0%}); a miss within its measured "
           "noise is re-measured before it fails, so a session's rate is at most this." if tried else
           "False-FAIL rate: not measured (leave-one-host-out needs a second host).", "",
           f"Windows: {_cases_figures(sum(s.remeasured for s in sessions))} from a re-measure whose window "
           f"settled (the first never did); {sum(s.unsettled for s in sessions)} from a window that never settled "
           "(no settled re-measure of it).", "",
           "| table | bound | GPUs | ref | tol | limit | worst session | hosts | runs | host spread | "
           "held-out failures | held-out misses |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for f in fitted:
        out.append(f"| {f.table} | {f.key} | {f.gpus} | {f.ref:.5g} | {f.tol:.3g} | {f.limit:.5g} | {f.worst:.5g} | "
                   f"{f.hosts} | {f.runs} | {f.spread:.2%} | {', '.join(f.held_out_failures) or 'none'} | "
                   f"{len(f.held_out_failures)} of {len(f.held_out_judged)} |")
    return "\n".join(out) + "\n"


def leave_out_keys(text: str) -> frozenset[str]:
    """``--leave-out``'s comma-separated profile keys, each one a bound this tool fits."""
    keys = frozenset(word.strip() for word in text.split(",") if word.strip())
    known = set(CHECK_TO_BOUND.values())
    unknown = sorted(keys - known)
    if unknown:
        raise CalibrationError(f"--leave-out {', '.join(unknown)}: not a bound calibrate-fit fits; "
                               f"give some of {', '.join(sorted(known))}")
    return keys


def add_fit_parser(sub: Any) -> None:
    p = sub.add_parser(
        "calibrate-fit", help="fit a profile's bounds across hosts from acceptance sessions",
        description="Fit each bound of PROFILE from acceptance sessions (reports/<run-id>/) on several healthy hosts "
                    "of one kind: a reference and a tolerance per GPU count, checked leave-one-host-out "
                    "(harness/tools/calibrate/fit.py says how). Writes the profile, and a report of every fit.")
    p.add_argument("sessions", nargs="+", help="acceptance run directories, from >= 3 hosts")
    p.add_argument("--profile", required=True,
                   help="the profile to write the bounds into, e.g. thresholds/h100-80gb.toml")
    p.add_argument("--output", help="where the fitted profile goes (default: PROFILE, replaced)")
    p.add_argument("--report", help="where the Markdown fit report goes (default: printed)")
    p.add_argument("--min-hosts", type=int, default=MIN_HOSTS, help=f"hosts a bound needs (default {MIN_HOSTS})")
    p.add_argument("--min-tol", type=float, default=0.0,
                   help="the least tolerance of every bound, a fraction (the cpu self-check profile: 0.6, as its "
                        "bounds check the mechanics on shared machines, not a CPU's speed)")
    p.add_argument("--source", default="",
                   help="where the sessions are kept, e.g. docs/data/2026-11-27-h100x4-refit: written with the hosts "
                        "and sessions counted as the source of every table a bound was fitted into")
    p.add_argument("--leave-out", metavar="KEY[,KEY]", default="",
                   help="profile keys not to fit, e.g. max_step_time_cv,max_straggler_ratio on shared machines, "
                        "where the step-time jitter is the neighbours', not the hardware's "
                        f"(one of: {', '.join(sorted(set(CHECK_TO_BOUND.values())))})")
    p.add_argument("--assume-training-definition", metavar="ID",
                   help="the training definition of sessions written before sessions recorded theirs")
    p.add_argument("--drop-unfitted", action="store_true",
                   help="remove the bounds of GPU counts (node shapes) these sessions did not measure from every key "
                        "fitted; without it such a fit is refused, naming them")


def cli_fit(ns: Any) -> int:
    """0: the profile was written and validates; 4: bad input (said on stderr; harness/exitcodes.py)."""
    import sys

    from harness.profile.load import ThresholdError
    from harness.files import write_text_atomic
    from harness.tools.calibrate.profile_file import validate_profile_text

    try:
        if ns.min_hosts < 1:
            raise CalibrationError(f"--min-hosts must be >= 1, got {ns.min_hosts}")
        if not 0 <= ns.min_tol < 1:
            raise CalibrationError(f"--min-tol must be a fraction in [0, 1), got {ns.min_tol}")
        left_out = leave_out_keys(ns.leave_out)
        sessions = [read_session(Path(d), ns.assume_training_definition) for d in ns.sessions]
        check_hosts(sessions, ns.min_hosts)
        fitted = [f for f in fit(sessions, min_hosts=ns.min_hosts, min_tol=ns.min_tol) if f.key not in left_out]
        if not fitted:
            raise CalibrationError("the sessions hold no figure with a bound to fit")
        profile_path = Path(ns.profile)
        hosts = count_hosts(sessions)
        note = (f"Bounds written as {{ ref, tol, hosts, runs, spread }} were fitted by `harness calibrate-fit` from "
                f"{len(sessions)} sessions on {_hosts(hosts)}" + (f" (fewer than the {MIN_HOSTS} the method asks)"
                                                                  if hosts < MIN_HOSTS else "")
                + (f", every tolerance at least {ns.min_tol:g}" if ns.min_tol else "")
                + (f"; not fitted, as asked: {', '.join(sorted(left_out))}" if left_out else ""))
        try:
            text = apply(profile_path.read_text(), fitted, note,
                         f"fitted by harness calibrate-fit from {len(sessions)} sessions on {_hosts(hosts)} "
                         f"({ns.source}); each bound {{ ref, tol, hosts, runs, spread }}" if ns.source else "",
                         drop_unfitted=bool(getattr(ns, "drop_unfitted", False)))
        except CalibrationError as exc:  # apply names the table and key; the file is the profile's
            raise CalibrationError(f"{profile_path}: {exc}") from None
        output = Path(ns.output or ns.profile)
        validate_profile_text(text, output.stem)  # before anything is replaced: a bad fit loses nothing
        write_text_atomic(output, text)
    except (CalibrationError, ThresholdError, OSError) as exc:
        print(f"harness calibrate-fit: {exc}", file=sys.stderr)
        return EXIT_USAGE_ERROR
    table = report(fitted, sessions)
    if ns.report:
        write_text_atomic(Path(ns.report), table)
    else:
        print(table)
    held_out = sum(1 for f in fitted if f.held_out_failures)
    missed, tried = held_out_sessions(fitted)
    print(f"wrote {output}: {len(fitted)} bounds from {len(sessions)} sessions on {_hosts(hosts)}"
          + (f"; {held_out} of them fail leave-one-host-out (the report's held-out column): a host outside "
             "the others' spread; fit from more hosts before trusting a miss by a hair" if held_out else "")
          + (f"; false-FAIL rate measured leave-one-host-out: {missed} of {tried} sessions miss a bound on a "
             "first settled window" if tried else ""))
    return 0
