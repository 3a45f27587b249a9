"""The search for the largest batch that fits (pure): doubling, then bisection, over a
``probe(batch) -> ProbeResult`` callable; the verdict on each probe; the table and the recommendation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

DEFAULT_MEMORY_FRACTION = 0.9
DEFAULT_START = 8
MAX_PROBES = 40
"""Doubling from 1 reaches 2^20 in 20 probes and bisection needs at most as many again."""
MONOTONE_TOLERANCE = 0.02
"""Peak memory may wobble by this fraction between batch sizes before it counts as falling."""

ProbeOutcome = Literal["ran", "oom", "error"]
Verdict = Literal["fits", "oom", "over_fraction", "error"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ProbeResult:
    """What one probe reported: did a training step at this batch run, and how much memory it took."""

    batch_size: int
    outcome: ProbeOutcome
    """``ran``: the steps completed; ``oom``: out of memory; ``error``: any other failure."""
    peak_memory_gib: float | None = None
    """Peak memory allocated by tensors (``torch.cuda.max_memory_allocated``) on cuda; the probe
    process's peak resident set size (host memory, informational) on cpu."""
    reserved_memory_gib: float | None = None
    """Peak memory held by the CUDA caching allocator (``max_memory_reserved``); None on cpu."""
    total_memory_gib: float | None = None
    """The device's total memory; None on cpu, where no device memory limit applies."""
    device_name: str | None = None
    detail: str = ""
    """Why it did not run (the error's first line), or where its log is."""


@dataclass(frozen=True, kw_only=True, slots=True)
class JudgedProbe:
    """A probe result and the search's verdict on it."""

    result: ProbeResult
    verdict: Verdict
    limit_gib: float | None
    """memory_fraction × total memory; None when no limit applies (cpu)."""

    @property
    def batch_size(self) -> int:
        return self.result.batch_size

    @property
    def fits(self) -> bool:
        return self.verdict == "fits"

    def describe_verdict(self) -> str:
        if self.verdict == "over_fraction":
            return f"over the limit ({self.limit_gib:.2f} GiB)"
        if self.verdict == "oom":
            return "OOM"
        if self.verdict == "error":
            return f"error: {self.result.detail}"
        return "fits"


@dataclass(frozen=True, kw_only=True, slots=True)
class SearchResult:
    max_batch_size: int | None
    """The largest batch that fit; None when not even batch 1 fit."""
    probes: tuple[JudgedProbe, ...]
    """In the order they ran."""
    memory_fraction: float
    capped: bool
    """True when the search stopped at ``max_batch`` with that batch fitting: larger ones may fit too."""
    warnings: tuple[str, ...] = ()

    @property
    def best(self) -> JudgedProbe | None:
        for probe in self.probes:
            if probe.fits and probe.batch_size == self.max_batch_size:
                return probe
        return None


class SearchError(Exception):
    """The search could not finish: a probe failed for a reason other than memory, or the inputs are
    wrong. ``probes`` holds what ran before, so the table can still be shown."""

    def __init__(self, message: str, probes: tuple[JudgedProbe, ...] = ()):
        super().__init__(message)
        self.probes = probes


# ---------------------------------------------------------------------------------------------
# The search (pure)


def judge(result: ProbeResult, memory_fraction: float) -> JudgedProbe:
    """Fits when it ran and its peak is within memory_fraction × total (no total: no limit)."""
    limit = result.total_memory_gib * memory_fraction if result.total_memory_gib is not None else None
    if result.outcome == "error":
        verdict: Verdict = "error"
    elif result.outcome == "oom":
        verdict = "oom"
    elif limit is not None and (result.peak_memory_gib is None or result.peak_memory_gib > limit):
        verdict = "over_fraction"
    else:
        verdict = "fits"
    return JudgedProbe(result=result, verdict=verdict, limit_gib=limit)


def search_max_batch(probe: Callable[[int], ProbeResult], *, start: int = DEFAULT_START,
                     max_batch: int | None = None, memory_fraction: float = DEFAULT_MEMORY_FRACTION,
                     multiple_of: int = 1, max_probes: int = MAX_PROBES,
                     on_probe: Callable[[JudgedProbe], None] | None = None) -> SearchResult:
    """The largest batch for which ``probe`` fits: doubling from ``start``, then bisection.

    Above ``multiple_of`` only its multiples are probed (the answer is the largest fitting multiple);
    below it, when even ``start`` does not fit, the search goes down to batch 1.
    ``on_probe`` sees each judged probe as soon as it is known (for live output).
    Raises SearchError when a probe fails for a reason other than memory.
    """
    if start < 1:
        raise ValueError(f"start must be >= 1, got {start}")
    if multiple_of < 1:
        raise ValueError(f"multiple_of must be >= 1, got {multiple_of}")
    if start % multiple_of:
        raise ValueError(f"start {start} is not a multiple of multiple_of {multiple_of}")
    if max_batch is not None and max_batch < start:
        raise ValueError(f"max_batch {max_batch} is below start {start}")
    if not 0 < memory_fraction <= 1:
        raise ValueError(f"memory_fraction must be in (0, 1], got {memory_fraction}")
    probes: list[JudgedProbe] = []

    def fits(batch: int) -> bool:
        if len(probes) >= max_probes:
            raise SearchError(f"{max_probes} probes without an answer; the memory model is not monotone or the "
                              "limit is far away: pass --max", tuple(probes))
        result = probe(batch)
        if result.batch_size != batch:
            raise SearchError(f"asked to probe batch {batch}, the probe answered for batch {result.batch_size}",
                              tuple(probes))
        judged = judge(result, memory_fraction)
        probes.append(judged)
        if on_probe is not None:
            on_probe(judged)
        if judged.verdict == "error":
            raise SearchError(f"the probe at batch {batch} failed for a reason other than memory: "
                              f"{result.detail or 'no detail'}", tuple(probes))
        if judged.fits and judged.limit_gib is None and max_batch is None:
            raise SearchError("no device memory limit applies (cpu): the search needs a cap; pass --max",
                              tuple(probes))
        return judged.fits

    # Doubling: lo is the largest batch known to fit (0: none yet), hi the smallest known not to.
    lo, hi = 0, None
    batch = start
    capped = False
    while True:
        if fits(batch):
            lo = batch
            if max_batch is not None and batch >= max_batch:
                capped = True
                break
            batch = batch * 2 if max_batch is None else min(batch * 2, max_batch)
        else:
            hi = batch
            break
    # Bisection between lo (fits) and hi (does not).
    while hi is not None:
        step = multiple_of if lo >= multiple_of else 1
        mid = (lo + hi) // 2 // step * step
        if mid <= lo:
            break
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return SearchResult(max_batch_size=lo or None, probes=tuple(probes), memory_fraction=memory_fraction,
                        capped=capped, warnings=tuple(monotonicity_warnings(probes)))


def monotonicity_warnings(probes: list[JudgedProbe] | tuple[JudgedProbe, ...]) -> list[str]:
    """Where measured peak memory falls as the batch grows: the bisection assumes it never does."""
    measured: list[tuple[int, float]] = []  # (batch, peak GiB) of each probe that ran and measured its peak
    for probe in probes:
        if probe.result.outcome == "ran" and probe.result.peak_memory_gib is not None:
            measured.append((probe.batch_size, probe.result.peak_memory_gib))
    measured.sort(key=lambda batch_and_peak: batch_and_peak[0])
    warnings = []
    for (smaller, low), (larger, high) in zip(measured, measured[1:], strict=False):
        if larger > smaller and high < low * (1 - MONOTONE_TOLERANCE):
            warnings.append(
                f"peak memory fell from {low:.2f} GiB at batch {smaller} to {high:.2f} GiB at batch "
                f"{larger}: the search assumes memory grows with the batch (cuDNN may pick other "
                "algorithms at other sizes); confirm the recommendation with `harness run`")
    return warnings


# ---------------------------------------------------------------------------------------------
# Output


def format_table(probes: tuple[JudgedProbe, ...] | list[JudgedProbe]) -> str:
    lines = [format_header()]
    lines.extend(format_row(p) for p in sorted(probes, key=lambda p: p.batch_size))
    return "\n".join(lines)


def format_header() -> str:
    return f"{'batch':>7}  {'peak GiB':>9}  {'reserved GiB':>12}  result"


def format_row(probe: JudgedProbe) -> str:
    def gib(value: float | None) -> str:
        return f"{value:.2f}" if value is not None else "—"

    return (f"{probe.batch_size:>7}  {gib(probe.result.peak_memory_gib):>9}  "
            f"{gib(probe.result.reserved_memory_gib):>12}  {probe.describe_verdict()}")


def recommendation(result: SearchResult, model: str, precision: str) -> str:
    best = result.best
    if result.max_batch_size is None or best is None:
        smallest = min((p for p in result.probes), key=lambda p: p.batch_size, default=None)
        why = f" (batch {smallest.batch_size}: {smallest.describe_verdict()})" if smallest is not None else ""
        return (f"even batch 1 does not fit for {model} {precision}{why}: the model's weights, gradients and "
                "optimizer state alone exceed the limit; use a GPU with more memory or a smaller model")
    device = best.result.device_name or "this device"
    text = f"largest batch per GPU for {model} {precision} on {device}: {result.max_batch_size}"
    peak, total = best.result.peak_memory_gib, best.result.total_memory_gib
    if best.limit_gib is not None and total and peak is not None:  # a probe fits under a limit only with a peak
        text += f" (peak {peak:.2f} GiB of {total:.1f} GiB = {peak / total:.0%}; limit {result.memory_fraction:.0%})"
    else:
        text += " (no device memory limit on cpu: capped by --max)"
    if result.capped and best.limit_gib is not None:
        text += "; reached --max, larger batches were not probed"
    return text


