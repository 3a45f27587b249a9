"""The session's run directory: ``REPORT_DIR/<run-id>/`` with runs/ and logs/, and ``latest`` pointing at it."""

from __future__ import annotations

import os
import socket
from datetime import datetime
from pathlib import Path

import pytest


def make_run_id(started: datetime, profile_name: str) -> str:
    """``20261121-142530-node17-h200``: when, where and against which profile."""
    return f"{started.strftime('%Y%m%d-%H%M%S')}-{socket.gethostname()}-{profile_name}"


def make_run_dir(report_root: Path, run_id: str) -> Path:
    """Make the run directory, proving it writable before any benchmark starts; point ``latest`` at it."""
    run_dir = report_root / run_id
    try:
        (run_dir / "runs").mkdir(parents=True, exist_ok=True)
        (run_dir / "logs").mkdir(parents=True, exist_ok=True)
        probe = run_dir / ".writable"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise pytest.UsageError(
            f"cannot write the report directory {run_dir}: {exc.strerror or exc}; no benchmark was started. "
            "Point --harness-report-dir at a writable directory (in a container, mount one at reports/).") from None
    _point_latest(report_root, run_dir)
    return run_dir


def _point_latest(report_root: Path, run_dir: Path) -> None:
    latest = report_root / "latest"
    tmp = report_root / f".latest.{os.getpid()}"
    try:
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(run_dir.name)
        os.replace(tmp, latest)
    except OSError:
        tmp.unlink(missing_ok=True)  # a filesystem without symlinks: the run dir is still there
