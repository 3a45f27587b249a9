"""Every process of a launch, and nothing else, is gone when the launch ends.

torchrun starts each worker in a session of its own, so killing torchrun's process group does
not reach them. Every process of a launch therefore carries ``HARNESS_RUN_ID`` in its
environment, and the launcher sweeps /proc for that tag on timeout, on interrupt, and after a
normal exit: whatever the workers spawned (compile workers, NCCL proxies) goes with them.

A launcher killed outright (SIGKILL: the OOM killer, a CI runner's hard kill) cleans nothing up.
Every process of a launch therefore also carries its launcher (``HARNESS_OWNER``: pid and start
time) and its run directory (``HARNESS_LAUNCH_DIR``): the next session finds the processes whose
launcher is gone (``find_orphans``) and stops them (``stop_orphans``); a process whose launcher
still runs, another session's, is never touched.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

RUN_ID_ENV = "HARNESS_RUN_ID"
OWNER_ENV = "HARNESS_OWNER"
"""``<pid>:<start time in clock ticks>`` of the process that started the launch (a pid alone may be reused)."""
LAUNCH_DIR_ENV = "HARNESS_LAUNCH_DIR"
"""The launch's directory under ``<run-dir>/logs/``: where an orphan's output and records are."""
KILL_GRACE_S = 5.0
"""How long SIGTERMed processes get to exit before SIGKILL."""


def clear_run_dir(run_dir: Path, *also: str) -> None:
    """Make ``run_dir`` and remove what an earlier launch left in it (phase, failure and log files,
    the record, and the named result files ``also``), so nothing stale is read as this launch's."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for stale in (*run_dir.glob("rank*"), run_dir / "record.json", *(run_dir / name for name in also)):
        stale.unlink(missing_ok=True)


def _start_time(pid: int) -> str | None:
    """Field 22 of /proc/PID/stat (clock ticks since boot): with the pid, names one process for ever."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]


def session_owner() -> str:
    """``<pid>:<start time>`` of this process: the owner tag of every launch it starts (one per session,
    the pytest process), on whichever node a launch's processes run (srun passes the environment on)."""
    return f"{os.getpid()}:{_start_time(os.getpid())}"


def owner_env(run_dir: Path) -> dict[str, str]:
    """What a launch's processes carry so that a later session can tell whether their launcher is gone."""
    return {OWNER_ENV: session_owner(), LAUNCH_DIR_ENV: str(Path(run_dir).resolve())}


def process_start_time(pid: int) -> str | None:
    """A process's start time (with its pid, it names one process for ever); None where it is gone or not
    visible from here."""
    return _start_time(pid)


def process_owner(pid: int) -> str | None:
    """The owner tag a process carries; None where it has none or its environment cannot be read (gone, or
    another user's)."""
    return _environ(str(pid)).get(OWNER_ENV)


@dataclass(frozen=True, kw_only=True, slots=True)
class Orphan:
    """A process of a launch whose launcher is gone."""

    pid: int
    command: str
    """Its command line, cut at 300 characters."""
    run_id: str
    launch_dir: str
    """Where its launch kept its logs and records."""

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        return f"pid {self.pid} ({self.command}) of launch {self.run_id} in {self.launch_dir}"


def _environ(pid: str) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}  # gone, or another user's
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    wanted = (RUN_ID_ENV.encode(), OWNER_ENV.encode(), LAUNCH_DIR_ENV.encode())
    return {key.decode(): value.decode(errors="replace") for key, value in pairs if key in wanted}


def find_orphans() -> list[Orphan]:
    """Every tagged process whose launcher (pid and start time in ``HARNESS_OWNER``) no longer runs."""
    orphans = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        env = _environ(entry.name)
        owner_pid, _, owner_start = env.get(OWNER_ENV, "").partition(":")
        if RUN_ID_ENV not in env or not owner_pid.isdigit():
            continue  # not a launch's, or from a harness without the owner tag: not provably orphaned
        if _start_time(int(owner_pid)) == owner_start:
            continue  # its launcher still runs: another session's launch
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        orphans.append(Orphan(pid=int(entry.name), command=command[:300], run_id=env[RUN_ID_ENV],
                              launch_dir=env.get(LAUNCH_DIR_ENV, "?")))
    return sorted(orphans, key=lambda orphan: orphan.pid)


def stop_orphans(orphans: list[Orphan], grace_s: float = KILL_GRACE_S) -> list[Orphan]:
    """SIGTERM (and SIGCONT) the orphans, SIGKILL what is left after ``grace_s``; the ones still there after."""
    def alive() -> list[Orphan]:
        still = {orphan.pid for orphan in find_orphans()}
        return [orphan for orphan in orphans if orphan.pid in still]

    for sig in (signal.SIGTERM, signal.SIGCONT):
        for orphan in orphans:
            try:
                os.kill(orphan.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
    deadline = time.time() + grace_s
    while alive() and time.time() < deadline:
        time.sleep(0.1)
    for orphan in alive():
        try:
            os.kill(orphan.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.time() + grace_s
    while alive() and time.time() < deadline:
        time.sleep(0.1)
    return alive()


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
