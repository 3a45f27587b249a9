"""Every process of a launch, and nothing else, is gone when the launch ends.

torchrun starts each worker in a session of its own, so killing torchrun's process group does
not reach them. Every process of a launch therefore carries ``HARNESS_RUN_ID`` in its
environment, and the launcher sweeps /proc for that tag on timeout, on interrupt, and after a
normal exit: whatever the workers spawned (compile workers, NCCL proxies) goes with them.

A launcher killed outright (SIGKILL: the OOM killer, a CI runner's hard kill) cleans nothing up.
Every process of a launch therefore also carries its launcher (``HARNESS_OWNER``: pid, start
time, PID namespace and boot id) and its run directory (``HARNESS_LAUNCH_DIR``): the next session
finds the processes whose launcher is provably gone in the launcher's own PID namespace
(``survey``) and stops them (``stop_orphans``); a process whose launcher still runs, another
session's, in a container or not, is never touched; one whose launcher cannot be looked up from
here (another host's or boot's tag, a namespace not visible, an old tag from a container) is
never touched either: the session refuses to start and names it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.node.process_tags import (LAUNCH_DIR_ENV, OWNER_ENV, OWNER_WHERE_ENV, RUN_ID_ENV, harness_environ,
                                        start_time_ticks)

KILL_GRACE_S = 5.0
"""How long SIGTERMed processes get to exit before SIGKILL."""


def clear_run_dir(run_dir: Path, *also: str) -> None:
    """Make ``run_dir`` and remove what an earlier launch left in it (phase, failure and log files,
    the record, and the named result files ``also``), so nothing stale is read as this launch's."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for stale in (*run_dir.glob("rank*"), run_dir / "record.json", *(run_dir / name for name in also)):
        stale.unlink(missing_ok=True)


def _namespace(pid: int | str, kind: str = "pid") -> int | None:
    """The inode of a process's namespace of ``kind`` (``/proc/PID/ns/pid``); None where it cannot be read."""
    try:
        return os.stat(f"/proc/{pid}/ns/{kind}").st_ino
    except OSError:
        return None


def _boot_id() -> str:
    """This kernel's boot id: the same in every container of the host, new at every boot."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "?"


def session_owner() -> str:
    """``<pid>:<start time>`` of this process: the owner tag of every launch it starts (one per session,
    the pytest process), on whichever node a launch's processes run (srun passes the environment on)."""
    return f"{os.getpid()}:{start_time_ticks(os.getpid())}"


def session_where() -> str:
    """``<PID namespace inode>:<boot id>`` of this process. A pid names nothing outside its own PID
    namespace (a container's launcher is pid 57 there and another process on the host), nor on another
    host or boot: this says where the owner can be looked up at all (``survey``)."""
    return f"{_namespace('self') or '?'}:{_boot_id()}"


def owner_env(run_dir: Path) -> dict[str, str]:
    """What a launch's processes carry so that a later session can tell whether their launcher is gone."""
    return {OWNER_ENV: session_owner(), OWNER_WHERE_ENV: session_where(),
            LAUNCH_DIR_ENV: str(Path(run_dir).resolve())}


@dataclass(frozen=True, kw_only=True, slots=True)
class Orphan:
    """A process of a launch whose launcher is gone (or, with ``unsure``, may be)."""

    pid: int
    command: str
    """Its command line, cut at 300 characters."""
    run_id: str
    launch_dir: str
    """Where its launch kept its logs and records."""
    unsure: str = ""
    """Why this session cannot tell whether its launcher still runs; empty for a proven orphan."""

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        text = f"pid {self.pid} ({self.command}) of launch {self.run_id} in {self.launch_dir}"
        return f"{text}: {self.unsure}" if self.unsure else text


@dataclass(frozen=True, kw_only=True, slots=True)
class OwnerTag:
    """``HARNESS_OWNER`` and ``HARNESS_OWNER_WHERE`` read back; ``namespace`` and ``boot_id`` are None in a
    tag from before they were kept."""

    pid: int
    start: str
    namespace: int | None
    boot_id: str | None

    @classmethod
    def parse(cls, owner: str, where: str = "") -> OwnerTag | None:
        pid, _, start = owner.partition(":")
        if not pid.isdigit() or not start:
            return None
        namespace, _, boot_id = where.partition(":")
        return cls(pid=int(pid), start=start, namespace=int(namespace) if namespace.isdigit() else None,
                   boot_id=boot_id if boot_id and boot_id != "?" else None)


class _Processes:
    """What /proc shows of processes in other PID namespaces: ``(namespace, pid there) -> start time``,
    read once per survey and only when a tagged process's owner lives in another namespace."""

    def __init__(self) -> None:
        self._index: dict[tuple[int, int], str | None] | None = None
        self.namespaces: set[int] = set()

    def index(self) -> dict[tuple[int, int], str | None]:
        if self._index is None:
            self._index = {}
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit():
                    continue
                namespace, inner = _namespace(entry.name), _pid_in_own_namespace(entry.name)
                if namespace is None or inner is None:
                    continue
                self.namespaces.add(namespace)
                self._index[(namespace, inner)] = start_time_ticks(entry.name)
        return self._index


def _pid_in_own_namespace(pid: str) -> int | None:
    """The last field of NSpid in /proc/PID/status: the process's pid in its innermost PID namespace."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _owner_state(pid: str, tag: OwnerTag, processes: _Processes) -> str | None:
    """None: the owner runs (leave the process alone); "" it is provably gone (an orphan); else why
    this session cannot tell (then nothing is stopped and the session refuses to start)."""
    here = _namespace("self")
    if tag.boot_id is not None and tag.boot_id != _boot_id():
        return (f"its session ran on another host or an earlier boot (boot id {tag.boot_id}), where this "
                "session cannot look it up")
    if tag.namespace is None:  # a tag from before namespaces were kept: its pid means something only in ours
        if _namespace(pid) != here:
            return (f"it runs in another PID namespace (a container) and its owner tag names pid {tag.pid} "
                    "without saying in which namespace")
        tag = OwnerTag(pid=tag.pid, start=tag.start, namespace=here, boot_id=None)
    if _namespace(pid, "time") != _namespace("self", "time"):
        return "it runs in another time namespace, where start times read differently"
    if tag.namespace is None or tag.namespace == here:
        return None if start_time_ticks(tag.pid) == tag.start else ""
    index = processes.index()
    if (tag.namespace, tag.pid) in index:
        return None if index[(tag.namespace, tag.pid)] == tag.start else ""
    if tag.namespace in processes.namespaces:
        return ""  # its namespace is visible from here, and no process of it has the owner's pid
    return (f"its owner is pid {tag.pid} of PID namespace {tag.namespace}, which is not visible from here "
            "(another container)")


def survey() -> tuple[list[Orphan], list[Orphan]]:
    """(proven orphans, unsure): every tagged process whose launcher is provably gone in *its* PID
    namespace, and every tagged process whose launcher this session cannot look up. A process whose
    launcher still runs, another session's (in a container or not), is in neither."""
    orphans: list[Orphan] = []
    unsure: list[Orphan] = []
    processes = _Processes()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        env = harness_environ(entry.name)
        tag = OwnerTag.parse(env.get(OWNER_ENV, ""), env.get(OWNER_WHERE_ENV, ""))
        if RUN_ID_ENV not in env or tag is None:
            continue  # not a launch's, or from a harness without the owner tag: not provably orphaned
        state = _owner_state(entry.name, tag, processes)
        if state is None:
            continue  # its launcher still runs: another session's launch
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        found = Orphan(pid=int(entry.name), command=command[:300], run_id=env[RUN_ID_ENV],
                       launch_dir=env.get(LAUNCH_DIR_ENV, "?"), unsure=state)
        (unsure if state else orphans).append(found)
    return sorted(orphans, key=lambda o: o.pid), sorted(unsure, key=lambda o: o.pid)


def find_orphans() -> list[Orphan]:
    """Every tagged process whose launcher is provably gone (``survey``)."""
    return survey()[0]


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
