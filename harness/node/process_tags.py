"""Which processes are a harness launch's: the tags a launch puts in its processes' environment, and how
to read a process's identity back from /proc. The launcher's orphan sweep (harness/launch/cleanup.py) and
the node's load watch (harness/node/load_watch.py) both read them, so they live below both."""

from __future__ import annotations

from pathlib import Path

RUN_ID_ENV = "HARNESS_RUN_ID"
OWNER_ENV = "HARNESS_OWNER"
"""``<pid>:<start time in clock ticks>`` of the process that started the launch (a pid alone may be reused)."""
OWNER_WHERE_ENV = "HARNESS_OWNER_WHERE"
"""``<PID namespace inode>:<boot id>`` of that process: where its pid means something. A variable of its
own, so that an older harness's sweep, which reads HARNESS_OWNER as pid:start, still reads it right."""
LAUNCH_DIR_ENV = "HARNESS_LAUNCH_DIR"
"""The launch's directory under ``<run-dir>/logs/``: where an orphan's output and records are."""


def start_time_ticks(pid: int | str) -> str | None:
    """Field 22 of /proc/PID/stat (clock ticks since boot): with the pid, names one process for ever."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]


def process_start_time(pid: int) -> str | None:
    """A process's start time (with its pid, it names one process for ever); None where it is gone or not
    visible from here."""
    return start_time_ticks(pid)


def process_owner(pid: int) -> str | None:
    """The owner tag a process carries; None where it has none or its environment cannot be read (gone, or
    another user's)."""
    return harness_environ(str(pid)).get(OWNER_ENV)


def harness_environ(pid: str) -> dict[str, str]:
    """The harness's tags in a process's environment (only those: another program's secrets stay unread)."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}  # gone, or another user's
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    wanted = (RUN_ID_ENV.encode(), OWNER_ENV.encode(), OWNER_WHERE_ENV.encode(), LAUNCH_DIR_ENV.encode())
    return {key.decode(): value.decode(errors="replace") for key, value in pairs if key in wanted}
