"""Run one selftest row: its acceptance session (a pytest subprocess), and beside it the foreign
load where the row has one; then read the session.json the session left.

Each session writes under the row's own report directory, and its history store and Prometheus
file are switched off (HARNESS_STORE / HARNESS_PROMETHEUS_DIR removed, the store kept in that
directory): a degraded session on purpose must never enter the fleet's history as this node's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from harness.fleet.session_end import PROMETHEUS_ENV, STORE_ENV
from harness.launch.command import die_with_launcher
from harness.run_directory import read_json_object
from harness.selftest.judge import RowRun
from harness.selftest.rows import NODE_TEST, ForeignLoad, RowSpec

STOP_GRACE_S = 30.0
"""After SIGTERM, how long a session has to stop its launches (their own sweep) before SIGKILL."""
OUTPUT_TAIL_CHARS = 6000
STARTED_FILE = "foreign_load.started.json"
"""Written by foreign_load.py once its load runs: its pids, so the row knows it really landed."""


def session_command(spec: RowSpec, row_dir: Path) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "harness.plugin", *spec.pytest_args,
            "--harness-report-dir", str(row_dir), "-q"]


def session_env(spec: RowSpec, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    for name in (STORE_ENV, PROMETHEUS_ENV):
        env.pop(name, None)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(spec.env)
    return env


def foreign_load_command(load: ForeignLoad, row_dir: Path, seconds: float) -> list[str]:
    command = [sys.executable, "-m", "harness.selftest.foreign_load", "--device", load.device,
               "--watch", str(row_dir), "--seconds", f"{seconds:g}", "--started", str(row_dir / STARTED_FILE)]
    if load.device == "cpu":
        command += ["--cores", ",".join(map(str, load.cores)), "--per-core", str(load.burners_per_core)]
    if load.case is not None:
        command += ["--case", load.case]
    return command


def foreign_load_env(load: ForeignLoad) -> dict[str, str]:
    env = dict(os.environ)
    if load.device == "cuda" and load.gpu_uuid:
        env["CUDA_VISIBLE_DEVICES"] = load.gpu_uuid  # by UUID: no numbering to get wrong
    return env


def run_row(spec: RowSpec, *, repo_root: Path, row_dir: Path, timeout_s: float) -> RowRun:
    """Run the row's session (and foreign load) to its end or ``timeout_s``; never leaves a process."""
    if NODE_TEST in " ".join(spec.pytest_args) and not (repo_root / NODE_TEST).exists():
        return RowRun(exit_code=-1, problem=f"check not found: {NODE_TEST} is missing from {repo_root} "
                                            "(this harness has no node-shape test)")
    row_dir.mkdir(parents=True, exist_ok=True)
    log_path = row_dir / "selftest-session.log"
    load_proc = None
    with open(log_path, "wb") as log:
        if spec.foreign_load is not None:
            load_log = open(row_dir / "foreign_load.log", "wb")  # noqa: SIM115 - closed with the process below
            load_proc = subprocess.Popen(foreign_load_command(spec.foreign_load, row_dir, timeout_s),
                                         env=foreign_load_env(spec.foreign_load), cwd=repo_root,
                                         stdout=load_log, stderr=subprocess.STDOUT, start_new_session=True,
                                         preexec_fn=_child_setup(None))
            load_log.close()
        try:
            session = subprocess.Popen(session_command(spec, row_dir), env=session_env(spec), cwd=repo_root,
                                       stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                       preexec_fn=_child_setup(spec.affinity))
            try:
                exit_code = _wait_or_stop(session, timeout_s)
            except BaseException:
                _stop(session)
                raise
        finally:
            if load_proc is not None:
                _stop(load_proc)
    output = log_path.read_text(errors="replace")[-OUTPUT_TAIL_CHARS:]
    tokens: tuple[str, ...] = ()
    problem = ""
    if spec.foreign_load is not None:
        tokens, problem = _foreign_load_facts(spec.foreign_load, row_dir)
    if exit_code is None:
        problem = problem or f"the session ran past {timeout_s:g} s and was stopped"
    return RowRun(exit_code=-1 if exit_code is None else exit_code, output_tail=output,
                  session=read_session(row_dir), cause_tokens=tokens, problem=problem)


def _child_setup(cores: tuple[int, ...] | None) -> Callable[[], None]:
    """In the child before it starts: SIGTERM when the selftest dies, even by SIGKILL (the session then
    stops its launches, the load its busy processes; each runs in a session of its own, so nothing else
    would reach them: before, a SIGKILLed selftest left 7 processes running for up to 15 minutes), and
    the session's CPU affinity (its ranks inherit it)."""
    die_with_selftest = die_with_launcher(os.getpid(), signal.SIGTERM)

    def setup() -> None:
        die_with_selftest()
        if cores is not None:
            os.sched_setaffinity(0, cores)
    return setup


def _foreign_load_facts(load: ForeignLoad, row_dir: Path) -> tuple[tuple[str, ...], str]:
    """(the pids that name the cause, a problem when the load never ran)."""
    try:
        started = json.loads((row_dir / STARTED_FILE).read_text())
    except (OSError, ValueError):
        return (), ("the foreign load never started (no rank of the session reached warmup, or the load "
                    f"failed: see {row_dir / 'foreign_load.log'}), so nothing was injected")
    pids = tuple(str(pid) for pid in started.get("pids", []))
    # A CPU load is many processes and no check can name them (rows.py says why): only the GPU's is a cause.
    return (pids if load.device == "cuda" else ()), ""


def read_session(row_dir: Path) -> dict[str, Any] | None:
    """The newest session.json under ``row_dir`` (one run directory per row); None if none or unreadable."""
    found = sorted((p for p in row_dir.glob("*/session.json") if not p.parent.is_symlink()),
                   key=lambda p: p.stat().st_mtime)
    if not found:
        return None
    data, _ = read_json_object(found[-1])  # the run directories' one bounded reader (harness/run_directory.py)
    return data


def _wait_or_stop(proc: subprocess.Popen, timeout_s: float) -> int | None:
    """The exit status, or None when it ran past ``timeout_s`` (then it has been stopped)."""
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _stop(proc)
        return None


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the process (a harness session then stops every launch it started), SIGKILL to its
    process group after STOP_GRACE_S; the group is the one this module started for it."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # what is left of the group (a CPU load's busy children)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
