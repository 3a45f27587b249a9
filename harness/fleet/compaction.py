"""Compaction of the history store: the files sessions wrote one each, folded into the store itself under
its SQLite write lock (harness/fleet/store.py has the schema, the writers and the bounded reader)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sqlite3
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from harness.files import path_kind
from harness.fleet.store import (BUSY_TIMEOUT_S, StoreError, insert_session, lock_dir, migrate, read_file_rows,
                                 special_files, store_files)


@dataclass(kw_only=True)
class Compaction:
    folded: list[Path] = field(default_factory=list)
    added: int = 0
    """Sessions new to the compacted store (a session already in it is not added twice)."""
    problems: list[str] = field(default_factory=list)


def compact(store: Path) -> Compaction:
    """Fold every per-session file into the compacted store ``P``; one compaction at a time."""
    store = Path(store)
    kind = path_kind(store)
    if kind is not None:
        raise StoreError(f"{store}: is {kind}, not a regular file, and compacting would replace it; move it away "
                         "or pass another --store")
    lock = lock_dir(store)
    try:
        lock.mkdir(parents=True)
    except FileExistsError:
        holder = _read_holder(lock)
        raise StoreError(f"{lock} exists: another compaction ({holder}) is running or died; if none is running, "
                         f"remove {lock} and run it again") from None
    except OSError as exc:
        raise StoreError(f"cannot make {lock}: {exc}; the store's directory must be writable") from None
    try:
        (lock / "holder").write_text(f"host {socket.gethostname()}, pid {os.getpid()}, since "
                                     f"{time.strftime('%Y-%m-%d %H:%M:%S')}")
        result = _fold(store, [p for p in store_files(store) if p != store])
        result.problems[:0] = special_files(store)
        return result
    finally:
        shutil.rmtree(lock, ignore_errors=True)


def _read_holder(lock: Path) -> str:
    try:
        return (lock / "holder").read_text().strip() or "holder unknown"
    except OSError:
        return "holder unknown"


def _hold(store: Path) -> sqlite3.Connection | None:
    """A connection holding SQLite's write lock on the compacted store (None when there is none yet): a
    process that writes it directly (an older harness, a person with sqlite3) either committed before the
    copy is taken or cannot commit until the new file has replaced it. Copying without the lock dropped a
    write committed meanwhile."""
    if not store.is_file():
        return None
    conn = sqlite3.connect(store, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error:
        conn.close()
        raise
    return conn


def _fold_file(conn: sqlite3.Connection, path: Path, result: Compaction) -> None:
    """Fold one per-session file; a row that cannot be read or inserted is named with its file, which is
    then kept (the rest of it, and every other file, is folded all the same)."""
    try:
        sessions, problems = read_file_rows(path)
    except StoreError as exc:
        result.problems.append(str(exc))
        return
    for session in sessions:
        try:
            result.added += insert_session(conn, session)
        except (sqlite3.IntegrityError, sqlite3.InterfaceError, sqlite3.ProgrammingError) as exc:
            problems.append(f"{path}: session {session.node} {session.run_id} cannot be folded ({exc}); fix or "
                            "remove it (or move the file out of the store directory)")
    if problems:
        result.problems += [f"{problem}; the file is kept" for problem in problems]
    else:
        result.folded.append(path)


def _fold(store: Path, files: list[Path]) -> Compaction:
    result = Compaction()
    if not files:
        return result
    tmp = store.with_name(f".{store.name}.compact-{uuid.uuid4().hex[:8]}")
    held = None
    try:
        held = _hold(store)
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            if held is not None:  # read beside the lock (a reader may share it), through SQLite: a WAL comes along
                source = sqlite3.connect(store, timeout=BUSY_TIMEOUT_S, isolation_level=None)
                try:
                    source.backup(conn)
                finally:
                    source.close()
            migrate(conn, store)
            for path in files:
                _fold_file(conn, path, result)
        finally:
            conn.close()
        os.replace(tmp, store)
    except (OSError, sqlite3.Error) as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        locked = isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)
        raise StoreError(f"cannot write {store}: {exc}"
                         + (f" (another process held its write lock for {BUSY_TIMEOUT_S:.0f} s)" if locked else "")
                         + "; nothing was folded, the per-session files are kept") from None
    finally:
        if held is not None:
            held.close()
    for path in result.folded:
        path.unlink(missing_ok=True)
    return result
