"""The soak's checks: it completed with a finite loss; throughput decay against [soak]; temperature,
throttling and ECC over the whole soak (harness/kinds/ddp_scaling/checks.py's telemetry checks)."""

from __future__ import annotations

from typing import Any

from harness.results.check import Check
from harness.checks.telemetry_checks import telemetry_checks
from harness.kinds.soak.launch import SoakRun
from harness.kinds.soak.windows import MIN_WINDOWS


def soak_checks(run: SoakRun, soak_bounds: Any, case_bounds: Any, *, missing_note: str) -> list[Check]:
    """Completed with a finite loss; throughput decay vs [soak]; temperature, throttling and ECC over the soak."""
    ran = run.status in ("ok", "invalid")
    completed = Check(name="soak completed", kind="sanity", measured=None, bound=None, unit="", comparison="==",
                      passed=ran, note=f"{len(run.windows)} windows of about {run.spec.window:.0f} s" if ran
                      else (run.why or "no reason recorded"))
    checks = [completed]
    if completed.passed:
        checks.append(Check(name="loss finite", kind="sanity", measured=None, bound=None, unit="", comparison="==",
                            passed=bool(run.loss_finite), note="" if run.loss_finite else "non-finite loss"))
    checks.append(_decay_check(run, soak_bounds))
    temperature = case_bounds.max_temperature_c if case_bounds is not None else None
    return checks + telemetry_checks(run.telemetry, max_temperature_c=temperature,
                                     source=case_bounds.source if case_bounds is not None else "",
                                     missing_note=missing_note)


def _decay_check(run: SoakRun, soak_bounds: Any) -> Check:
    decay = run.decay
    name = "throughput decay (last window vs first)"
    note = (f"first window {run.windows[0]['throughput']:,.1f} {run.sample_unit}/s, last "
            f"{run.windows[-1]['throughput']:,.1f} {run.sample_unit}/s" if decay is not None else
            f"fewer than {MIN_WINDOWS} windows were measured")
    if soak_bounds is None:
        return Check(name=name, kind="health", measured=decay, bound=None, unit="", comparison="<=",
                     passed=None, note=f"the profile has no [soak] bound; {note}")
    if decay is None:
        return Check(name=name, kind="health", measured=None, bound=soak_bounds.max_throughput_decay,
                     unit="", comparison="<=", passed=None, note=note, source=soak_bounds.source)
    return Check(name=name, kind="health", measured=decay, bound=soak_bounds.max_throughput_decay,
                 unit="", comparison="<=", passed=decay <= soak_bounds.max_throughput_decay, note=note,
                 source=soak_bounds.source)
