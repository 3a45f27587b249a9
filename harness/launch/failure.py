"""Why a launch ended badly, in one line a person can act on, blaming the cause, not its echoes.

Sources, best first: a rank's own explanation (rank<R>.failure.json: OOM, NaN, an exception),
torchrun's "Root Cause" block (which rank, which signal), the stall that made the launcher kill
the run (harness/launch/stall.py); the tails of every rank's log and of torchrun's go with it.
"""

from __future__ import annotations

import errno
import os
import re
import signal
from pathlib import Path
from typing import Any

from harness.files import KEPT_DIR_NAME, NotRecorded
from harness.launch.stall import Stall
from harness.rank import rank_identity, read_failures
from harness.results.job import Failure, Status

LOG_TAIL_LINES = 40
PHASE_ORDER = ("setup", "warmup", "probe", "measure", "gather", "done")

# One failure entry of torchrun's ChildFailedError message (the "Failures:" list and the
# "Root Cause" block use the same layout); the root cause is printed last.
_TORCHRUN_FAILURE = re.compile(
    r"host\s*:\s*(?P<host>\S+)\s*\n\s*rank\s*:\s*(?P<rank>\d+)[^\n]*\n\s*exitcode\s*:\s*(?P<exitcode>-?\d+)")

# What a rank reports when a *peer* died: a symptom, never the cause.
_PEER_LOSS = re.compile(
    r"Connection closed by peer|Connection reset by peer|Broken pipe|remote process exited|DistBackendError|"
    r"DistNetworkError|NCCL communicator was aborted|ProcessGroupNCCL.*(?:abort|timed? ?out)", re.I)


FULL_BELOW_BYTES = 1024 * 1024
"""A file system with less than this free is full for a launch: a rank's record and logs need more."""
_STORAGE_TEXT = re.compile(r"No space left on device|Disk quota exceeded|\[Errno (?:28|122)\]")


def storage_full(run_dir: Path) -> str | None:
    """"N KiB free" when the file system holding ``run_dir`` is full (bytes or inodes); None otherwise."""
    try:
        fs = os.statvfs(run_dir)
    except OSError:
        return None
    free = fs.f_bavail * fs.f_frsize
    if free < FULL_BELOW_BYTES:
        return f"{free // 1024} KiB free"
    if fs.f_files and fs.f_favail == 0:
        return "no free inodes"
    return None


def _storage_failure(run_dir: Path, rank_failures: list[dict], tails: dict[str, str]) -> NotRecorded | None:
    """A launch that failed because its run directory's file system filled: a storage failure, never the
    node's. Both must hold: the file system is full now, and a rank said so (or could not even write why).
    ENOSPC on another file system (/dev/shm for NCCL) is the node's own problem and stays a failure."""
    full = storage_full(run_dir)
    said = any(_STORAGE_TEXT.search(str(f.get("reason", ""))) for f in rank_failures) or any(
        _STORAGE_TEXT.search(tail) for tail in tails.values())
    if full is None or not (said or not rank_failures):
        return None
    return NotRecorded(errno.ENOSPC, f"could not record: the file system of {run_dir} is full ({full}) and the "
                                     "launch failed writing to it (a storage failure, not the node's); what a rank "
                                     "measured before that is kept in the temporary directory's "
                                     f"{KEPT_DIR_NAME}/. Free space there, or pass another report directory, and "
                                     "run again", str(run_dir))


def oom_kills() -> int | None:
    """The kernel's count of processes its out-of-memory killer has killed since boot (/proc/vmstat)."""
    try:
        for line in Path("/proc/vmstat").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _host_oom(reason: str, exitcode: int, oom_kills_before: int | None) -> str:
    """``reason`` with the cause named when a rank died by SIGKILL and the kernel's OOM killer ran during the
    launch: host memory ran out (a CPU rank's model, or pinned host buffers), not the GPU's."""
    after = oom_kills()
    if exitcode != -signal.SIGKILL or oom_kills_before is None or after is None or after <= oom_kills_before:
        return reason
    return (f"{reason}: the kernel's out-of-memory killer ran during this launch ({after - oom_kills_before} "
            "process(es) killed): the host ran out of memory (CPU RAM, not the GPU's); use a smaller batch, "
            "fewer ranks, or free host memory")


def log_tails(run_dir: Path, lines: int = LOG_TAIL_LINES) -> dict[str, str]:
    tails = {}
    for path in sorted(run_dir.glob("rank*.log"), key=lambda p: int(p.stem.removeprefix("rank"))) + [
            run_dir / "torchrun.log"]:
        if path.exists():
            text = path.read_text(errors="replace").splitlines()
            tails[path.name] = "\n".join(text[-lines:])
    return tails


def torchrun_failures(log_text: str) -> list[dict[str, Any]]:
    """Failed ranks as torchrun reports them, the root cause first, one entry per rank."""
    entries: list[dict[str, Any]] = [{"rank": int(m["rank"]), "exitcode": int(m["exitcode"]), "host": m["host"]}
               for m in _TORCHRUN_FAILURE.finditer(log_text)]
    if "Root Cause" in log_text and entries:
        entries.insert(0, entries.pop())
    unique: dict[int, dict[str, Any]] = {}
    for entry in entries:
        unique.setdefault(entry["rank"], entry)
    return list(unique.values())


def _how_it_ended(exitcode: int) -> str:
    if exitcode < 0 and -exitcode in {s.value for s in signal.Signals}:
        return f"was killed by {signal.Signals(-exitcode).name}"
    return f"exited with code {exitcode}"


def _earliest(failures: list[dict]) -> dict:
    return min(failures, key=lambda f: (f.get("time", float("inf")), f.get("rank", 0)))


def _root_cause(run_dir: Path, rank_failures: list[dict], phases: dict[int, dict], returncode: int | None,
                tails: dict[str, str],
                oom_kills_before: int | None = None) -> tuple[Status, int | None, str | None, str]:
    """(status, rank, phase, reason) of a run that ended badly, blaming the cause, not its echoes.

    When one rank dies its peers fail too ("Connection closed by peer"), often first from
    torchrun's point of view. So: a rank's own explanation (OOM, NaN, an exception) that is not
    a peer-loss symptom wins, earliest first; then a rank killed by a signal that wrote nothing;
    then torchrun's root cause; then the earliest symptom.
    """
    log_path = run_dir / "torchrun.log"
    deaths = torchrun_failures(log_path.read_text(errors="replace") if log_path.exists() else "")
    for death in deaths:
        phases.setdefault(death["rank"], {}).setdefault("host", death["host"])
    explained = {f.get("rank") for f in rank_failures}
    causes = [f for f in rank_failures if not _PEER_LOSS.search(str(f.get("reason", "")))]
    killed = [d for d in deaths if d["exitcode"] < 0 and d["rank"] not in explained]
    if causes:
        first = _earliest(causes)
        rank = first.get("rank")
        return (first.get("status", "failed"), rank, first.get("phase"),
                f"{rank_identity(phases, rank)}: {first.get('reason')}")
    for death in killed or deaths:
        rank = death["rank"]
        phase = phases.get(rank, {}).get("phase")
        reason = f"{rank_identity(phases, rank)} {_how_it_ended(death['exitcode'])}"
        reason += f" in phase {phase}" if phase else ""
        return "failed", rank, phase, _host_oom(reason, death["exitcode"], oom_kills_before)
    if rank_failures:
        first = _earliest(rank_failures)
        rank = first.get("rank")
        return "failed", rank, first.get("phase"), f"{rank_identity(phases, rank)}: {first.get('reason')}"
    reason = f"torchrun exited with code {returncode} before any rank reported a result"
    torchrun_tail = tails.get("torchrun.log", "")
    if "Error" in torchrun_tail:
        reason += f": {torchrun_tail.strip().splitlines()[-1][:300]}"
    return "failed", None, None, reason


def _timeout(stall: Stall, phases: dict[int, dict], elapsed_s: float) -> tuple[int | None, str, str]:
    """(rank, phase, reason) of a launch the launcher killed: the earliest phase any rank was stuck in."""
    by_phase: dict[str, list[int]] = {}
    for r, info in sorted(phases.items()):
        by_phase.setdefault(info.get("phase", "unknown"), []).append(r)
    stuck = stall.phase or (min(by_phase, key=lambda p: PHASE_ORDER.index(p) if p in PHASE_ORDER else -1)
                            if by_phase else "setup")
    phase = "warmup" if stuck == "probe" else stuck
    where = "; ".join(f"{p}: ranks {', '.join(map(str, rs))}" for p, rs in by_phase.items())
    reason = (f"timed out in phase {phase} after {elapsed_s:.0f} s: {stall.reason}; every process of the "
              f"run was killed ({where or 'no rank reported a phase'})")
    return (stall.ranks[0] if stall.ranks else None), phase, reason


def explain_failure(run_dir: Path, *, returncode: int | None, stall: Stall | None, elapsed_s: float,
                    phases: dict[int, dict], oom_kills_before: int | None = None) -> tuple[Status, Failure]:
    """(status, Failure) of a launch that ended badly, for any worker module that writes phase files.

    ``phases`` gains the host torchrun names for a rank that never wrote one. Raises NotRecorded when
    the launch failed because its run directory's file system is full: that is no result of the node.
    """
    tails = log_tails(run_dir)
    storage = _storage_failure(run_dir, read_failures(run_dir), tails) if stall is None else None
    if storage is not None:
        raise storage
    if stall is not None:
        rank, phase, reason = _timeout(stall, phases, elapsed_s)
        return "timeout", Failure(reason=reason, phase=phase, rank=rank, log_tails=tails)
    status, rank, phase_name, reason = _root_cause(run_dir, read_failures(run_dir), phases, returncode, tails,
                                                   oom_kills_before)
    return status, Failure(reason=reason, phase=phase_name, rank=rank, log_tails=tails)
