"""The edge where the harness meets a path someone named: what it writes there and what it reads from it.

Writing: every file the harness writes is written to a new file in the same directory and renamed
over the path (``write_text_atomic`` below). A rename replaces whatever has the name, so a
device node (``/dev/full`` as root), a named pipe or a symbolic link would silently become a regular
file. ``refuse_special_output`` is the one guard in front of every such rename: ``harness run
--output``, ``harness history --json/--html``, ``harness fleet --output``, ``harness report``'s page,
calibrate's profile, selftest's tables, the session's own files.

Reading: run directories and history stores come from other hosts, older harnesses and people. The
readers here never follow a name to something that is not a regular file (a FIFO blocks ``open``
for ever, ``/dev/zero`` reads until MemoryError), never read more than a cap, and never hand back a
JSON document nested deeper than a cap (Python's parser recurses). Each refusal is an
``InputFileError`` whose text names the file, what it is and what to do.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Any, Callable

NOT_REGULAR: tuple[tuple[Callable[[int], bool], str], ...] = (
    (stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))

JSON_MAX_BYTES = 64 * 1024 * 1024
"""The largest run-directory JSON read. The largest measured: a 4-GPU sign-off's report.json, about
2 MiB (docs/data/2026-11-21-h200x4-acceptance); 64 MiB leaves room for 8-GPU soaks with long logs."""
JSON_MAX_DEPTH = 64
"""The deepest nesting of lists and objects accepted; the harness writes at most about 8 levels."""


class OutputPathError(OSError):
    """A path that names something a write would replace and must not (a device, a FIFO, a link).

    An OSError, so every writer's existing ``except OSError`` reports it with the path; ``strerror``
    is the whole sentence (what is there, and what to do)."""

    def __init__(self, path: Path, kind: str, option: str | None = None):
        named = f"{option} {path}" if option else str(path)
        what = (f"{named}: is {kind}, not a regular file, and writing would replace it; name a regular file or a "
                "new path")
        super().__init__(errno.EEXIST, what, str(path))
        self.kind = kind

    def __str__(self) -> str:
        return self.strerror or ""


STORAGE_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
"""A full file system or an exhausted quota: the storage's failure, never the node's."""
KEPT_DIR_NAME = "harness-not-recorded"


class NotRecorded(OSError):
    """What was measured could not be written for want of space: a storage failure, never the node's.

    The session's verdict says "could not record" with its own exit status (``EXIT_NOT_RECORDED``);
    ``strerror`` says what could not be written, where its content was kept instead, and what to do."""

    def __str__(self) -> str:
        return self.strerror or ""


def is_storage_full(exc: BaseException) -> bool:
    return isinstance(exc, NotRecorded) or (isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS)


def keep_elsewhere(path: Path, text: str) -> str:
    """Put ``text``, which could not be written to ``path``, where it survives: a file in the temporary
    directory (another file system, usually), else this process's stderr. Returns where it went."""
    directory = Path(tempfile.gettempdir()) / KEPT_DIR_NAME
    try:
        directory.mkdir(mode=0o700, exist_ok=True)
        kept = directory / f"{os.getpid()}-{Path(path).name}"
        with open(kept, "w", encoding="utf-8") as handle:
            handle.write(text)
        return str(kept)
    except OSError:
        pass
    try:
        sys.stderr.write(f"harness: {path} could not be written; its content follows\n{text}\n"
                         f"harness: end of {path}\n")
        sys.stderr.flush()
        return "this process's standard error"
    except (OSError, ValueError):
        return "nowhere (the temporary directory and standard error failed too)"


def not_recorded(path: Path, exc: OSError, text: str) -> NotRecorded:
    """The NotRecorded for a write of ``text`` to ``path`` that failed with ``exc``, its text kept elsewhere."""
    kept = keep_elsewhere(path, text)
    return NotRecorded(exc.errno, f"could not record {path}: {exc.strerror or exc} (a storage failure, not the "
                                  f"node's); its content is kept in {kept}. Free space there, or point the "
                                  "harness at another directory, and run again", str(path))


class InputFileError(Exception):
    """A file that cannot be read safely: ``str(err)`` names it, says what it is and what to do."""


def path_kind(path: Path) -> str | None:
    """What is at ``path`` when it is not a regular file ("a symbolic link", "a named pipe", ...); None when
    it is one or nothing is there (the link itself is looked at, never followed)."""
    try:
        mode = Path(path).lstat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    return next((kind for is_kind, kind in NOT_REGULAR if is_kind(mode)), None)


def refuse_special_output(path: Path, option: str | None = None) -> None:
    """OutputPathError unless ``path`` is a regular file or free: called before any work (so nothing is
    measured for nothing) and again right before the rename (something may have taken the name since)."""
    kind = path_kind(path)
    if kind is not None:
        raise OutputPathError(Path(path), kind, option)


def refuse_special_output_dir(directory: Path, names: tuple[str, ...], option: str) -> None:
    """For an option naming a directory the harness writes ``names`` into: the directory is one (or is
    missing) and none of the names in it is anything but a regular file."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise OutputPathError(directory, path_kind(directory) or "a file", option)
    for name in names:
        refuse_special_output(directory / name, option)


# --- bounded reads -----------------------------------------------------------------------------


def read_regular_bytes(path: Path, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``. Raises FileNotFoundError when nothing is
    there, InputFileError for anything else that is wrong (a link, a FIFO, a device, too large) and
    OSError when reading fails.

    Opened with O_NOFOLLOW | O_NONBLOCK and checked with fstat on the descriptor: a name swapped for a
    FIFO between a check and the open can neither block nor be read."""
    path = Path(path)
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputFileError(f"{path}: is a symbolic link; the harness reads only regular files here. Replace "
                                 "it with the file it points at") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((k for is_kind, k in NOT_REGULAR if is_kind(info.st_mode)), "not a regular file")
            raise InputFileError(f"{path}: is {kind}, not a regular file; move it out of the way")
        if info.st_size > max_bytes:
            raise InputFileError(f"{path}: is {info.st_size:,} bytes, more than the {max_bytes:,} this reader takes; "
                                 "it is not a file the harness wrote: move it out of the way")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:  # it grew while read
                raise InputFileError(f"{path}: grew beyond {max_bytes:,} bytes while read; move it out of the way")
        return b"".join(chunks)
    finally:
        os.close(fd)


def json_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in JSON text, brackets inside strings not counted; linear,
    no recursion, so a 100,000-deep document is measured before Python's parser sees it."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def parse_json_bounded(text: str, where: str, max_depth: int = JSON_MAX_DEPTH) -> Any:
    """``json.loads`` of text that is not nested beyond ``max_depth``; ValueError (with ``where``) otherwise."""
    if ("[" in text or "{" in text) and json_depth(text) > max_depth:
        raise ValueError(f"{where}: not readable JSON: nested too deeply (more than {max_depth} levels; the harness "
                         "writes no such file)")
    return json.loads(text)


def read_json_file(path: Path, max_bytes: int = JSON_MAX_BYTES, max_depth: int = JSON_MAX_DEPTH) -> Any:
    """A run directory's JSON file: regular, at most ``max_bytes``, nested at most ``max_depth`` deep.

    Raises FileNotFoundError (nothing there), InputFileError (not a regular file, too large, too deep),
    OSError (cannot be read) and ValueError (not JSON; json.JSONDecodeError carries the line)."""
    raw = read_regular_bytes(path, max_bytes)
    if Path(path).name.endswith(".gz"):
        raw = _gunzip_bounded(path, raw, max_bytes)
    text = raw.decode("utf-8", errors="replace")
    try:
        return parse_json_bounded(text, str(path), max_depth)
    except RecursionError:  # a smaller stack than the depth cap assumes
        raise InputFileError(f"{path}: not readable JSON: nested too deeply") from None
    except ValueError as exc:
        if not isinstance(exc, json.JSONDecodeError) and "nested too deeply" in str(exc):
            raise InputFileError(str(exc)) from None
        raise


def _gunzip_bounded(path: Path, packed: bytes, max_bytes: int) -> bytes:
    """``packed`` (a run directory archived as ``*.json.gz``, as docs/data keeps them) unpacked, at most
    ``max_bytes`` of it: a small file that unpacks to gigabytes is refused like a large one."""
    unpacker = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        data = unpacker.decompress(packed, max_bytes + 1)
    except zlib.error as exc:
        raise InputFileError(f"{path}: is not a readable gzip file ({exc}); unpack it or write it again") from None
    if len(data) > max_bytes or unpacker.unconsumed_tail:
        raise InputFileError(f"{path}: unpacks to more than the {max_bytes:,} bytes this reader takes; "
                             "it is not a file the harness wrote: move it out of the way")
    return data


def default_file_mode() -> int:
    """The mode ``open()`` gives a new file: 0666 less this process's umask.

    Every file of a run directory (session.json, runs/*.json, record.json, report.html) gets this
    one mode: the report page shows what the JSON holds, so hiding the JSON alone (mkstemp's 0600)
    protected nothing; who may read a run is the report directory's permissions and the umask
    (``umask 077`` keeps it private), as for any file the user writes."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # no /proc: read it by setting it, and put it back at once
    os.umask(mask)
    return 0o666 & ~mask


def write_text_atomic(path: Path, text: str, *, mode: int | None = None) -> None:
    """Write-then-rename, so a reader never sees half a file even if we die mid-write.

    ``mode``: None gives the run directory's one mode (``default_file_mode``); 0o644 for files that
    another user's daemon must read whatever the umask (node_exporter's textfile). Raises OSError;
    ``harness.files.OutputPathError`` (an OSError) where ``path`` is a device, a FIFO, a link or a
    directory, which the rename would otherwise replace; ``harness.files.NotRecorded`` (an OSError)
    where the file system is full, after keeping ``text`` elsewhere (the temporary directory, else stderr).
    """
    refuse_special_output(path)
    try:
        _write_then_rename(path, text, mode)
    except OSError as exc:
        if exc.errno in STORAGE_ERRNOS and not isinstance(exc, NotRecorded):
            raise not_recorded(path, exc, text) from None
        raise


def _write_then_rename(path: Path, text: str, mode: int | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, default_file_mode() if mode is None else mode)
        refuse_special_output(path)  # again: something may have taken the name while we wrote
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, text: str) -> None:
    write_text_atomic(path, text)
