"""What a session leaves for the fleet when it ends: its facts in the history store and its
Prometheus textfile. The plugin's one call (``record_session``), after session.json, report.json
and report.html are written; it never raises, so a store on a full or unmounted file system costs
a warning line, never the verdict or the report.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from harness.fleet.collect import CollectError, read_session
from harness.fleet.prometheus import RUN_DIR_NAME, TEXTFILE_NAME, exposition
from harness.fleet.store import StoreError, write_session
from harness.fleet.textfile import write_text_atomic

STORE_ENV = "HARNESS_STORE"
"""The history store's path when --harness-store is not given: one path on a shared file system
for every node."""
PROMETHEUS_ENV = "HARNESS_PROMETHEUS_DIR"
"""node_exporter's textfile directory when --harness-prometheus-dir is not given."""
STORE_NAME = "history.sqlite"


def store_path(option: str | Path | None, report_root: str | Path, environ: Mapping[str, str] = os.environ) -> Path:
    """--harness-store, else $HARNESS_STORE, else REPORT_DIR/history.sqlite."""
    return Path(option or environ.get(STORE_ENV) or Path(report_root) / STORE_NAME)


def prometheus_dir(option: str | Path | None, environ: Mapping[str, str] = os.environ) -> Path | None:
    chosen = option or environ.get(PROMETHEUS_ENV)
    return Path(chosen) if chosen else None


def record_session(run_dir: Path, *, store: Path, textfile_dir: Path | None = None) -> list[str]:
    """Add the session in ``run_dir`` to ``store`` and write its Prometheus file(s); one line each,
    saying what was written or what failed, where, and how to redo it."""
    redo = f"add it later with `harness history --store {store} --add {run_dir}`"
    try:
        facts = read_session(run_dir)
    except CollectError as exc:
        return [f"harness: fleet facts not recorded: {exc}; {redo}"]
    except Exception as exc:  # noqa: BLE001 - a bug here must not cost the session its verdict or report
        return [f"harness: fleet facts not recorded ({type(exc).__name__}: {exc}); {redo}"]
    lines = []
    try:
        lines.append(f"harness: history store {write_session(store, facts)}")
    except StoreError as exc:
        lines.append(f"harness: history store not written: {exc}; {redo}")
    except Exception as exc:  # noqa: BLE001 - as above
        lines.append(f"harness: history store {store} not written ({type(exc).__name__}: {exc}); {redo}")
    text = exposition(facts)
    # The run directory's copy goes without a line (the report directory is printed already).
    targets = [(run_dir / RUN_DIR_NAME, False)] + ([(textfile_dir / TEXTFILE_NAME, True)] if textfile_dir else [])
    for target, say in targets:
        try:
            write_text_atomic(target, text)
        except OSError as exc:
            lines.append(f"harness: Prometheus file not written: cannot write {target}: {exc.strerror or exc}; "
                         f"point --harness-prometheus-dir (or {PROMETHEUS_ENV}) at a writable directory")
            continue
        if say:
            lines.append(f"harness: Prometheus textfile {target}")
    return lines
