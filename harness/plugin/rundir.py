"""The session's run directory: ``REPORT_DIR/<run-id>/`` with runs/ and logs/, and ``latest`` pointing at it.

Two sessions never share one: the run id carries the session's pid, the directory is made by
this session alone (``mkdir`` fails on one that exists), and the session holds an exclusive lock
on ``<run-dir>/.session.lock`` while it runs, so a second session that reaches the same
directory is refused instead of mixing its records, reports and kill sweep with the first's.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
from datetime import datetime
from pathlib import Path
from typing import IO

import pytest

LOCK_FILE = ".session.lock"
MIN_FREE_BYTES = 64 * 1024 * 1024
"""Free space a session needs in the report directory before its first benchmark. The default CPU
matrix's run directory measured 0.46 MiB here (reports/20261124-022215-vm-cpu: records, rank logs,
report.html); GPU sessions add telemetry CSVs and NCCL logs per GPU. 64 MiB is that with room for an
8-GPU node's telemetry; a disk with less is full in practice, and a run that cannot write its
verdict is an hour lost."""

_held_locks: list[IO[str]] = []
"""The open lock files of this process's sessions: the lock lasts as long as they stay open."""


def make_run_id(started: datetime, profile_name: str, pid: int | None = None) -> str:
    """``20261121-142530-node17-h200-4711``: when, where, against which profile, and which session
    (the pid: two sessions started in the same second on one host differ)."""
    return f"{started.strftime('%Y%m%d-%H%M%S')}-{socket.gethostname()}-{profile_name}-{pid or os.getpid()}"


MAX_RUN_DIR_TRIES = 100
"""Run ids tried (``<id>``, ``<id>-2``, ...) before giving up: only sessions of one process (pytest.main
called again within the second) or a pid reused across containers sharing a volume collide."""


def make_run_dir(report_root: Path, run_id: str) -> tuple[Path, str | None]:
    """Make and lock a new run directory (``run_id``, or ``run_id-N`` when that exists: the directory's
    name is the session's run id), proving it writable and roomy before any benchmark starts; point
    ``latest`` at it. Returns the directory and a warning when ``latest`` could not be moved."""
    try:
        report_root.mkdir(parents=True, exist_ok=True)
        _check_free_space(report_root)
        run_dir = _new_dir(report_root, run_id)
        _lock(run_dir)
        (run_dir / "runs").mkdir()
        (run_dir / "logs").mkdir()
        probe = run_dir / ".writable"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise pytest.UsageError(
            f"cannot write the report directory {report_root / run_id}: {exc.strerror or exc}; no benchmark was "
            "started. Point --harness-report-dir at a writable directory (in a container, mount one at "
            "reports/).") from None
    return run_dir, _point_latest(report_root, run_dir)


def _new_dir(report_root: Path, run_id: str) -> Path:
    """A directory no other session made: mkdir fails on one that exists, so two never share one."""
    for attempt in range(1, MAX_RUN_DIR_TRIES + 1):
        run_dir = report_root / (run_id if attempt == 1 else f"{run_id}-{attempt}")
        try:
            run_dir.mkdir()
            return run_dir
        except FileExistsError:
            continue
    raise pytest.UsageError(f"{report_root} already holds {run_id} and {MAX_RUN_DIR_TRIES - 1} numbered copies; "
                            "no benchmark was started. Clean up the report directory.")


def _lock(run_dir: Path) -> None:
    """Hold an exclusive lock on the run directory for this process's life, or refuse the session."""
    lock_file = open(run_dir / LOCK_FILE, "a+")  # noqa: SIM115 - held open for the session: that is the lock
    try:
        fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock_file.seek(0)
        holder = lock_file.read().strip() or "unknown"
        lock_file.close()
        raise pytest.UsageError(f"another session (pid {holder}) is writing {run_dir}; no benchmark was started. "
                                "Wait for it to end, or use another --harness-report-dir.") from None
    lock_file.truncate(0)
    lock_file.write(f"{os.getpid()}\n")
    lock_file.flush()
    _held_locks.append(lock_file)


def _check_free_space(report_root: Path) -> None:
    free = shutil.disk_usage(report_root).free
    if free < MIN_FREE_BYTES:
        raise pytest.UsageError(
            f"the report directory {report_root} has {free / 2**20:.1f} MiB free; a session needs at least "
            f"{MIN_FREE_BYTES / 2**20:.0f} MiB for its records, logs and reports; no benchmark was started. "
            "Free some space, or point --harness-report-dir at a larger file system.")


def _point_latest(report_root: Path, run_dir: Path) -> str | None:
    """``latest`` -> this run; a warning naming it when it is something else than a link we may replace."""
    latest = report_root / "latest"
    if latest.exists() and not latest.is_symlink():
        return (f"{latest} is a real {'directory' if latest.is_dir() else 'file'}, not a link: it was not "
                f"pointed at this run ({run_dir.name}). Move it away so that `latest` follows the runs.")
    tmp = report_root / f".latest.{os.getpid()}"
    try:
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(run_dir.name)
        os.replace(tmp, latest)
    except OSError as exc:
        tmp.unlink(missing_ok=True)  # a filesystem without symlinks: the run dir is still there
        return f"{latest} was not pointed at this run ({exc.strerror or exc}); the run is in {run_dir}"
    return None
