"""Re-judge the first attempts of archived sessions against a profile, offline: which cases miss a bound, and
which the harness would re-measure before judging (harness/checks/confirm.py).

A session cut short by its call's time limit leaves its run records but no verdict for the cases it did not
reach; this says what their first measurements show under a profile (the shipped one, or a refit), without a
GPU. A launch cut before the session collected its records left them in its case directories
(``logs/<case>/record.json``, packed or not): those are read too, and the line says how many. It is not a
session verdict: re-measures are not taken, and a session's GPU-state, component and all-reduce tests are not
re-judged here.

    python benchmarks/rejudge_sessions.py --profile thresholds/h100-80gb-x2.toml \\
        docs/data/2026-11-27-h100x2-unfitted/sessions/20261127-180056-vm-h100-80gb-x2-589

One line per session: its training cases, those in doubt (case: the check in doubt), and every check a first
attempt misses (measured [bound]).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness.checks import confirm  # noqa: E402
from harness.kinds.ddp_scaling.checks import strong_scaling_checks, weak_scaling_checks  # noqa: E402
from harness.kinds.shipped import load_shipped_profile  # noqa: E402
from harness.profile.load import ThresholdError  # noqa: E402
from harness.run_directory import RunDirectoryError, read_run_directory, run_record  # noqa: E402
from harness.tools.calibrate.sessions import first_attempts, reference_of, references_of  # noqa: E402


def rejudge(run_dir: Path, profile_path: Path) -> str:
    profile = load_shipped_profile(profile_path)
    directory = read_run_directory(run_dir, launch_records=True)
    left = first_attempts([run_record(found.data) for found in directory.launch_records])
    records = first_attempts([run_record(found.data) for found in directory.records]) + left
    references = references_of(records)
    doubted, missed = [], []
    for record in sorted(records, key=lambda r: r.run_id):
        bounds = profile.bounds(record.model, record.precision)
        if bounds is None:
            continue
        name = f"{record.model}-{record.precision}-{record.scaling}-{record.world_size}gpu"
        reference = reference_of(record, references)  # a 1-GPU weak case's own record: no ratio is taken of it
        rules = weak_scaling_checks if record.scaling == "weak" else strong_scaling_checks
        checks = rules(record, reference, bounds, telemetry_note="re-judged offline")
        key = confirm.doubted_key(checks, record, reference)
        if key is not None:
            doubted.append(f"{name}: {key}")
        missed += [f"{name}: {c.key} {c.measured:.4g} [{c.bound:.4g}]" for c in checks
                   if c.passed is False and c.measured is not None and c.bound is not None]
    cut = f" ({len(left)} read from a cut launch's case directories)" if left else ""
    return (f"{run_dir.name}: {len(records)} cases{cut}; in doubt {len(doubted)}: {', '.join(doubted) or '-'}; "
            f"first-attempt misses {len(missed)}: {', '.join(missed) or '-'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", type=Path, required=True, help="the threshold file to judge against")
    parser.add_argument("sessions", type=Path, nargs="+", help="run directories (reports/<run-id>/ or docs/data/…)")
    ns = parser.parse_args(argv)
    try:
        for run_dir in ns.sessions:
            print(rejudge(run_dir, ns.profile))
    except (ThresholdError, RunDirectoryError) as error:
        print(f"rejudge_sessions: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
