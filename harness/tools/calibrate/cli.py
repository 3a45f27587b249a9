"""``harness calibrate``: detect the node, plan, run the calibration, say where the profile went and
which profile automatic selection now picks. The options are in ``options`` (kept light for
``harness --help``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.exitcodes import EXIT_USAGE_ERROR
from harness.node.hardware import Hardware, HardwareError, detect
from harness.profile.match import select_profile
from harness.profile.load import default_thresholds_dir
from harness.tools.calibrate import CalibrationError
from harness.tools.calibrate.measure import run_calibration
from harness.tools.calibrate.plan import CalibrationPlan, plan_from_args, valid_profiles


def selection_note(plan: CalibrationPlan, hw: Hardware) -> str:
    """Which profile automatic selection now picks on this hardware from the output directory."""
    if plan.device != hw.device:
        return ""
    try:
        chosen = select_profile(hw, valid_profiles([plan.output_path.parent]))
    except HardwareError as exc:
        return f"WARNING: automatic profile selection on this node now fails: {exc}"
    if chosen.name != plan.name:
        return (f"note: on this node automatic selection still picks {chosen.name} ({chosen.path}); "
                f"use --hardware {plan.name} for the new one")
    return f"automatic selection on this node picks {plan.name}"


def cli_calibrate(ns: argparse.Namespace) -> int:
    """``harness calibrate``: 0 when the profile was written, 1 when calibration failed, 4 on bad arguments."""
    try:
        hw = detect()
        plan = plan_from_args(ns, hw, thresholds_dir=Path(ns.thresholds_dir) if ns.thresholds_dir else None)
    except (CalibrationError, HardwareError) as exc:
        print(f"harness calibrate: {exc}", file=sys.stderr)
        return EXIT_USAGE_ERROR
    print(f"calibrate {plan.name}: {len(plan.models)} models x {len(plan.precisions)} precisions x GPU counts "
          f"{', '.join(map(str, plan.gpu_counts))} on {plan.device}, {plan.repeats} repeats = {plan.launches} "
          f"launches (warmup >= {plan.warmup_seconds:g} s, window {plan.measure_seconds:g} s); records in "
          f"{plan.records_dir}/")
    try:
        outcome = run_calibration(plan, hw)
    except CalibrationError as exc:
        print(f"harness calibrate: {exc}", file=sys.stderr)
        return 1
    print(f"\nwrote {outcome.path} (validated){' with WARNINGS (see above)' if outcome.warnings else ''}")
    note = selection_note(plan, hw)
    if note:
        print(note)
    extra = ""
    if plan.output_path.parent.resolve() != default_thresholds_dir().resolve():
        extra = f" --harness-thresholds-dir={plan.output_path.parent}"
    print(f'use it: make acceptance ARGS="--hardware {plan.name}{extra}"')
    return 0
