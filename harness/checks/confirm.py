"""Confirm before a FAIL, never best-of-N (issue 27): when a case's verdict is not yet certain, and how
its re-measures decide it. Pure: checks and records in, a decision out.

A training case is *uncertain* when a check against a bound misses it by less than the figure's measured
noise (the 95 % CI of throughput, the reference's CI added for an efficiency), or misses it on a window
that never settled (stopped at its time cap), or when a rate the noise describes (throughput, efficiency)
meets its bound by less than that noise: re-measuring near passes as well as near misses keeps the median
from leaning toward PASS. A health figure (utilization, power, straggler, uniformity, step-time CV) that
meets its bound is not doubted on the throughput's CI, which is not its noise: on an unfitted 2 x H100
host that rule re-measured 8 of 16 cases, 4 of them only for straggler ratios, a power fraction and a
uniformity that passed (2026-11-27).
A step-time CV that misses is always in doubt: it is a tail figure with no CI of its own, one host hiccup
in a 2 s window moves it several-fold (0.0367 against 0.0145 on an unfitted 2 x H100 host, then two
windows under the bound), so a miss is confirmed by two more windows, never failed on one. So is a straggler
ratio: the slowest over the fastest rank of a 5-step probe (0.7 s), with no CI either, where one rank's
hiccup is the ratio (healthy 4 x H100 hosts outside the fit: bert_large 1.054 against 1.026 with every other
figure of the case passing, 1.064 against 1.045; 2026-11-27/28). A GPU that is slow stays slow in all three
probes; a hiccup does not.

A case in doubt is measured again with its 1-GPU reference, up to ``MAX_REMEASURES`` times, and judged on the
**median** attempt, never the best. A clear miss fails at once; a direct cause (a foreign process, throttling,
ECC, a failed run) is never re-measured. A case whose every attempt stays uncertain on unsettled windows is
not judged: "host too noisy to sign off", which makes the session INCOMPLETE, never PASS.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TypeVar

from harness.results.check import Check
from harness.records import RunRecord

MAX_REMEASURES = 2
RE_MEASURED_KINDS = ("performance", "health")
RATES = frozenset({"throughput_per_gpu", "weak_efficiency", "strong_efficiency"})
"""The checks whose figure the throughput's CI describes: a pass within it is in doubt too."""
TAIL_FIGURES = frozenset({"step_time_cv", "straggler_ratio"})
"""Checks whose figure has no CI of its own and moves with one slow step: any miss is in doubt."""
UNSETTLED = "max time"
"""The adaptive window's stop reason when its CI never met the target (harness/workloads/window.py)."""
TOO_NOISY = "host too noisy to sign off"
T = TypeVar("T")


def noise(record: RunRecord, baseline: RunRecord | None) -> float:
    """The relative uncertainty of the case's figures: its CI (and its reference's, for a ratio to it)."""
    own = record.throughput_ci95_rel or 0.0
    reference = (baseline.throughput_ci95_rel or 0.0) if baseline is not None and baseline is not record else 0.0
    return own + reference


def unsettled(record: RunRecord) -> bool:
    return (record.settings or {}).get("measure_stop_reason") == UNSETTLED


def _margin(check: Check) -> float | None:
    """How far the figure is from its bound, relative to the bound (negative: a miss)."""
    if check.measured is None or check.bound is None or not check.bound or not check.evaluated:
        return None
    gap = (check.measured - check.bound) / abs(check.bound)
    return gap if check.comparison == ">=" else -gap


def uncertain_checks(checks: list[Check], record: RunRecord, baseline: RunRecord | None, *,
                     tails: bool = True) -> list[Check]:
    """The re-measurable checks whose verdict the noise could flip, or that missed on an unsettled window, or
    (``tails``) a tail figure that missed at all."""
    within = noise(record, baseline)
    found = []
    for check in checks:
        margin = _margin(check)
        if check.kind not in RE_MEASURED_KINDS or margin is None:
            continue
        missed_in_doubt = -margin <= within or unsettled(record) or tails and check.key in TAIL_FIGURES
        if margin < 0 and missed_in_doubt or 0 <= margin <= within and check.key in RATES:
            found.append(check)
    return found


def direct_failure(checks: list[Check]) -> bool:
    """A failed check no re-measure can explain away: a sanity check, or a rule without a bound."""
    return any(c.passed is False and (c.kind == "sanity" or c.bound is None) for c in checks)


def needs_confirmation(checks: list[Check], record: RunRecord, baseline: RunRecord | None) -> bool:
    return not direct_failure(checks) and bool(uncertain_checks(checks, record, baseline))


@dataclass(frozen=True, kw_only=True, slots=True)
class Attempt:
    record: RunRecord
    baseline: RunRecord | None
    checks: list[Check]


def _figure(attempt: Attempt, key: str) -> float:
    measured = next((c.measured for c in attempt.checks if c.key == key and c.measured is not None), None)
    return measured if measured is not None else float("nan")


def _worst_first_median(items: list[T], figure: Callable[[T], float], lower_is_worse: bool) -> T:
    """The middle of ``items`` by ``figure``; of two (which agreed, or a third would have been measured), the
    worse one. The one median rule of every re-measured figure, a case's or a component's."""
    ordered = sorted(items, key=figure)
    if not lower_is_worse:
        ordered.reverse()  # worst first either way
    return ordered[(len(ordered) - 1) // 2]


def _median_attempt(attempts: list[Attempt], key: str) -> Attempt:
    """The middle attempt by the figure of check ``key`` (``_worst_first_median``)."""
    return _worst_first_median(attempts, lambda a: _figure(a, key), _lower_is_worse(attempts[0], key))


def _tally(missed: int, attempts: int, passed: bool | None) -> str:
    """What a re-measured check's note says: "FAIL, confirmed 2 of 2", "passed on re-measure, 1 of 3 missed"."""
    return (f"FAIL, confirmed {missed} of {attempts}" if passed is False
            else f"passed on re-measure, {missed} of {attempts} missed" if missed else "")


def decide(attempts: list[Attempt], key: str) -> tuple[Attempt, list[Check]]:
    """The median attempt by the figure of check ``key`` (the one that was in doubt), and its checks with
    every re-measured one decided by its own median over the attempts (a miss in one attempt of three is
    not a FAIL, a pass in one of three is not a PASS), its note saying how many attempts missed; a figure
    still in doubt after every attempt on unsettled windows is not evaluated (TOO_NOISY). For ``WINDOW`` (a
    calibration session): ``settled_attempt``."""
    if key == WINDOW:
        return settled_attempt(attempts)
    median = _median_attempt(attempts, key)
    decided = []
    for check in median.checks:
        if check.kind not in RE_MEASURED_KINDS or check.bound is None or not check.evaluated:
            decided.append(check)
            continue
        own = _median_attempt(attempts, check.key)
        check = next((c for c in own.checks if c.key == check.key), check)
        missed = sum(1 for a in attempts for c in a.checks if c.key == check.key and c.passed is False)
        tally = _tally(missed, len(attempts), check.passed)
        all_in_doubt = all(unsettled(a.record) and any(c.key == check.key for c in
                                                      uncertain_checks(a.checks, a.record, a.baseline))
                           for a in attempts)
        if check.key == key and all_in_doubt:
            decided.append(replace(check, passed=None, note=_joined(
                f"not evaluated: {TOO_NOISY} (CI ±{noise(median.record, median.baseline):.1%} on windows that "
                f"never settled, {len(attempts)} attempts: " + ", ".join(
                    f"{_figure(a, key):.4g}" for a in attempts) + ")", check.note)))
        else:
            decided.append(replace(check, note=_joined(tally, check.note)) if tally else check)
    return median, decided


def settled_attempt(attempts: list[Attempt]) -> tuple[Attempt, list[Check]]:
    """A calibration session's case: its first attempt whose window settled (the one calibrate-fit fits), else
    its first, each performance check's note saying which."""
    index = next((i for i, a in enumerate(attempts) if window_settled(a.record, a.baseline)), None)
    chosen = attempts[index or 0]
    said = (f"calibration: window never settled in {len(attempts)} attempts, the first stands" if index is None
            else f"calibration: window settled on re-measure {index} of {len(attempts) - 1}" if index else "")
    return chosen, [replace(c, note=_joined(said, c.note)) if said and c.kind == "performance" else c
                    for c in chosen.checks]


def _lower_is_worse(attempt: Attempt, key: str) -> bool:
    check = next((c for c in attempt.checks if c.key == key), None)
    return check is None or check.comparison != "<="


def _joined(first: str, second: str) -> str:
    return "; ".join(part for part in (first, second) if part)


def settles(attempts: list[Attempt], key: str) -> bool:
    """Whether the attempts so far settle what was in doubt, so that no further one is measured: for ``WINDOW``,
    the last attempt's window settled; for a check, the attempts agree (``agree``)."""
    if key == WINDOW:
        return window_settled(attempts[-1].record, attempts[-1].baseline)
    return agree(attempts, key)


def agree(attempts: list[Attempt], key: str) -> bool:
    """Whether the attempts so far agree on every re-measured check, with no doubt left on ``key`` in the
    last one (no third needed): of two attempts that disagree on any check, a third decides it. A tail figure
    that missed twice agrees: its doubt was one window's hiccup, and a second window ruled that out."""
    keys = {c.key for a in attempts for c in a.checks if c.kind in RE_MEASURED_KINDS and c.bound is not None}
    last = attempts[-1]
    still_in_doubt = {c.key for c in uncertain_checks(last.checks, last.record, last.baseline, tails=False)}
    return checks_agree([a.checks for a in attempts], keys) and key not in still_in_doubt


WINDOW = "window"
"""What a calibration session's re-measure settles: no check (it judges against no fitted bound), the window.
calibrate-fit fits each case's first attempt whose window settled (harness/tools/calibrate/sessions.py), as an
acceptance session judges a settled figure or none (``decide``: an unsettled miss is re-measured, then "host too
noisy"); an unsettled figure fitted as it came widens the bound with the host's noise (2 x H200: 2 of 4 windows of
one case never settled, its tolerance 19 %, docs/data/2026-11-28-h200x2-calibration)."""


def window_settled(record: RunRecord, baseline: RunRecord | None) -> bool:
    """Whether the case's window and its 1-GPU reference's met their CI target (its figure is settled)."""
    return not unsettled(record) and (baseline is None or not unsettled(baseline))


def doubted_key(checks: list[Check], record: RunRecord, baseline: RunRecord | None, *,
                calibration: bool = False) -> str | None:
    """The key of the check a re-measure must settle, or None: none in doubt, or a direct failure (never
    re-measured). In a calibration session no check is doubted (none judges against a fitted bound): ``WINDOW``
    when the case's window or its reference's never settled, else None."""
    if direct_failure(checks):
        return None
    if calibration:
        return None if window_settled(record, baseline) else WINDOW
    found = uncertain_checks(checks, record, baseline)
    failed = [c for c in found if c.passed is False]
    return (failed or found)[0].key if found else None


# --- a component figure: the host link, confirmed the same way -------------------------------------------------

HOST_LINK = frozenset({"h2d_alone", "d2h_alone", "h2d_concurrent", "d2h_concurrent"})
"""Pinned host-link copies: they ride on the host (its memory, its other tenants) and moved 55.15 -> 48.06 GB/s on
one GPU of a healthy-looking 4 x H100 host between two sessions minutes apart (docs/data/2026-11-27-h100x4-host-j)."""
CLEAR_HOST_LINK_MISS = 0.5
"""A host-link figure under this fraction of its bound fails at once: a link at half its width or generation
carries half (arithmetic), which no re-measure explains away; a figure between it and the bound is in doubt."""


def doubted_host_link(checks: list[Check]) -> list[Check]:
    """The host-link checks that missed their bound, but not by a clear miss: re-measured before they fail."""
    return [c for c in checks if c.key in HOST_LINK and c.passed is False and c.measured is not None
            and c.bound is not None and c.measured >= CLEAR_HOST_LINK_MISS * c.bound]


def _check_of(attempt: list[Check], key: str) -> Check | None:
    return next((c for c in attempt if c.key == key), None)


def checks_agree(attempts: list[list[Check]], keys: Iterable[str]) -> bool:
    """Whether every attempt so far passed or failed each of ``keys`` alike (a check missing from an attempt
    counts as a verdict of its own); where they split, a third attempt decides."""
    return all(len({c.passed if (c := _check_of(a, key)) is not None else None for a in attempts}) <= 1
               for key in keys)


def decide_checks(attempts: list[list[Check]], keys: frozenset[str]) -> list[Check]:
    """The first attempt's checks, each of ``keys`` replaced by its median attempt's (of two, the worse), its note
    saying how many attempts missed: "FAIL, confirmed 2 of 2", "passed on re-measure, 1 of 3 missed"."""
    decided = []
    for check in attempts[0]:
        if check.key not in keys:
            decided.append(check)
            continue
        own = [c for a in attempts if (c := _check_of(a, check.key)) is not None and c.measured is not None]
        median = (_worst_first_median(own, lambda c: c.measured or 0.0, lower_is_worse=check.comparison != "<=")
                  if own else check)
        tally = _tally(sum(1 for c in own if c.passed is False), len(own), median.passed)
        decided.append(replace(median, note=_joined(tally, median.note)) if tally else median)
    return decided
