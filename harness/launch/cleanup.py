"""Every process of a launch, and nothing else, is gone when the launch ends.

torchrun starts each worker in a session of its own, so killing torchrun's process group does
not reach them. Every process of a launch therefore carries ``HARNESS_RUN_ID`` in its
environment, and the launcher sweeps /proc for that tag on timeout, on interrupt, and after a
normal exit: whatever the workers spawned (compile workers, NCCL proxies) goes with them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

RUN_ID_ENV = "HARNESS_RUN_ID"
KILL_GRACE_S = 5.0
"""How long SIGTERMed processes get to exit before SIGKILL."""


def clear_run_dir(run_dir: Path, *also: str) -> None:
    """Make ``run_dir`` and remove what an earlier launch left in it (phase, failure and log files,
    the record, and the named result files ``also``), so nothing stale is read as this launch's."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for stale in (*run_dir.glob("rank*"), run_dir / "record.json", *(run_dir / name for name in also)):
        stale.unlink(missing_ok=True)


def tagged_pids(run_id: str) -> list[int]:
    """Processes whose environment carries HARNESS_RUN_ID=run_id (our launch's whole tree)."""
    needle = f"{RUN_ID_ENV}={run_id}".encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except (OSError, PermissionError):
            continue  # gone, or not ours
    return [pid for pid in found if pid != os.getpid()]


def process_stopped(pid: int | str | None) -> bool:
    """Whether a local process is stopped (state T), as a SIGSTOPped or traced rank is."""
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
    except (OSError, ValueError):
        return False
    return stat.rsplit(")", 1)[-1].split()[0] in ("T", "t")


def _signal_all(proc: subprocess.Popen, run_id: str, sig: int) -> list[int]:
    """Send ``sig`` to every tagged process (and its process group, unless it is ours) and to torchrun."""
    own_group = os.getpgrp()
    pids = set(tagged_pids(run_id))
    if proc.poll() is None:
        pids.add(proc.pid)
    for pid in pids:
        try:
            if os.getpgid(pid) != own_group:
                os.killpg(os.getpgid(pid), sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    return sorted(pids)


def kill_run(proc: subprocess.Popen, run_id: str, grace_s: float = KILL_GRACE_S) -> None:
    """SIGTERM everything of this launch, then SIGKILL what is left after the grace period."""
    if not _signal_all(proc, run_id, signal.SIGTERM):
        proc.wait()
        return
    for pid in tagged_pids(run_id):
        try:
            os.kill(pid, signal.SIGCONT)  # a stopped process cannot act on SIGTERM until continued
        except ProcessLookupError:
            pass
    deadline = time.time() + grace_s
    while time.time() < deadline and (proc.poll() is None or tagged_pids(run_id)):
        time.sleep(0.1)
    if proc.poll() is None or tagged_pids(run_id):
        _signal_all(proc, run_id, signal.SIGKILL)
    proc.wait()
    deadline = time.time() + grace_s
    while tagged_pids(run_id) and time.time() < deadline:
        time.sleep(0.1)
