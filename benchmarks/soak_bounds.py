"""The soak's throughput-decay bound from healthy soaks (issue 17 item 3: no harness default in a
measured profile).

Reads the ``session.json[.gz]`` of acceptance sessions that ran ``--soak`` (docs/data keeps them),
prints each soak (GPU, duration, windows, first and last window, decay) and the bound the rule gives:

  [soak] max_throughput_decay = SOAK_DECAY_FACTOR x the highest decay of any soak, rounded up to 0.001

(harness/tools/calibrate/health.py, where the rule and its factor live.)

    python benchmarks/soak_bounds.py docs/data/2026-11-24-soak/h200-*.json.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness.tools.calibrate.health import SOAK_DECAY_FACTOR, soak_decay_bound  # noqa: E402


def read_soak(path: Path) -> dict | None:
    """The soak result of one session (None when the session ran no soak), with its GPUs."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as handle:
        session = json.load(handle)
    for result in session.get("results", {}).values():
        soak = result.get("soak") if isinstance(result, dict) else None
        if isinstance(soak, dict) and soak.get("windows"):
            gpus = session.get("hardware", {}).get("gpus", [])
            return {**soak, "gpus_seen": [f"{g.get('name')} {g.get('uuid')}" for g in gpus]}
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, help="session.json[.gz] files of soak sessions")
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.paths if not p.exists()]
    if missing:
        print(f"soak_bounds: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    soaks = [soak for soak in map(read_soak, args.paths) if soak is not None and soak.get("status") == "ok"]
    if not soaks:
        print("soak_bounds: no completed soak in " + ", ".join(map(str, args.paths)), file=sys.stderr)
        return 1
    print("| GPU | case | duration s | windows | first /s | last /s | decay |")
    print("|---|---|---|---|---|---|---|")
    decays = []
    for soak in soaks:
        windows = soak["windows"]
        decays.append(soak["throughput_decay"])
        print(f"| {', '.join(soak['gpus_seen'])} | {soak['model']} {soak['precision']} | {soak['duration_s']:.0f} | "
              f"{len(windows)} × {soak['window_s']:.0f} s | {windows[0]['throughput']:,.1f} | "
              f"{windows[-1]['throughput']:,.1f} | {100 * soak['throughput_decay']:.2f} % |")
    bound = soak_decay_bound(decays)
    print(f"\nhighest decay {100 * max(decays):.2f} % of {len(decays)} soaks; [soak] max_throughput_decay = "
          + (f"{bound} ({SOAK_DECAY_FACTOR:g} x the highest, rounded up to 0.001)" if bound is not None
             else "none: no soak slowed, so the rule has nothing to double"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
