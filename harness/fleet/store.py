"""The history store: every session's facts in SQLite, safe for many nodes on one shared file system.

Layout, for a store path ``P`` (default ``reports/history.sqlite``):

- ``P.d/<node>.<run-id>.<random>.sqlite``: one file per session, written by that session alone
  to a dot-named temporary file in the same directory and renamed into place when complete.
- ``P``: the compacted store, which ``harness history --compact`` folds the per-session files
  into (under a ``P.lock`` directory, made with mkdir, so one compaction runs at a time), written
  as a new file and renamed over the old one.

So no file is ever written by two processes, and no reader ever takes a lock: SQLite's locks
rely on POSIX advisory locks, which many NFS setups get wrong, and WAL mode needs shared memory
that a network file system cannot give. Every file is complete and never changes once it has its
name, so readers open them ``immutable``. A reader takes ``P`` and every ``P.d/*.sqlite``; a
session found twice (a compaction that died before removing what it folded) counts once.

The schema is versioned with ``PRAGMA user_version`` and built only by ``MIGRATIONS``, in order:
a new store runs all of them, an older one the ones it lacks (a reader upgrades its in-memory
copy; a compaction upgrades the compacted file), and a store newer than this harness is refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import sqlite3
import time
import uuid
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from harness.fleet.facts import CheckFact, GpuFact, GpuFigure, SessionFacts

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: sessions, the GPUs each saw, and every check with its bound and verdict.
    ("""CREATE TABLE sessions (
            id INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL, node TEXT NOT NULL,
            verdict TEXT NOT NULL CHECK (verdict IN ('PASS', 'FAIL', 'INCOMPLETE')),
            started_at TEXT, finished_at TEXT, profile_name TEXT, profile_sha256 TEXT, device TEXT, gpu_name TEXT,
            driver_version TEXT, cuda_driver_version TEXT, cuda_runtime_version TEXT, nccl_version TEXT,
            torch_version TEXT, python_version TEXT, harness_version TEXT, git_commit TEXT, container TEXT,
            slurm_job_id TEXT, source TEXT NOT NULL, recorded_at TEXT NOT NULL,
            UNIQUE (node, run_id))""",
     """CREATE TABLE gpus (
            session_id INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            gpu_index INTEGER NOT NULL, uuid TEXT, serial TEXT, name TEXT, pci_bus_id TEXT, memory_gib REAL,
            PRIMARY KEY (session_id, gpu_index))""",
     "CREATE INDEX gpus_by_uuid ON gpus (uuid)",
     """CREATE TABLE checks (
            session_id INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            test TEXT NOT NULL, case_key TEXT NOT NULL, check_key TEXT NOT NULL, name TEXT NOT NULL, kind TEXT,
            measured REAL, bound REAL, unit TEXT, comparison TEXT,
            passed INTEGER CHECK (passed IN (0, 1)), note TEXT)""",
     "CREATE INDEX checks_by_session ON checks (session_id)"),
    # 2: each GPU's own figures, for its history by UUID and for outliers among GPUs; the reasons
    # behind a verdict. Sessions stored at schema 1 keep no per-GPU figures and no reasons.
    ("""CREATE TABLE gpu_figures (
            session_id INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            case_key TEXT NOT NULL, figure_key TEXT NOT NULL, name TEXT NOT NULL, host TEXT NOT NULL,
            rank INTEGER NOT NULL, gpu_index INTEGER, gpu_uuid TEXT, value REAL NOT NULL, unit TEXT,
            direction TEXT NOT NULL CHECK (direction IN ('higher', 'lower', 'either')))""",
     "CREATE INDEX gpu_figures_by_uuid ON gpu_figures (gpu_uuid)",
     "CREATE INDEX gpu_figures_by_session ON gpu_figures (session_id)",
     "ALTER TABLE sessions ADD COLUMN verdict_reasons TEXT NOT NULL DEFAULT '[]'"),
    # 3: what each session covered, so a partial, quick or CPU session is never taken for a sign-off.
    # Sessions stored before keep NULL: "scope not recorded", never a sign-off.
    ("ALTER TABLE sessions ADD COLUMN scope TEXT", "ALTER TABLE sessions ADD COLUMN level TEXT",
     "ALTER TABLE sessions ADD COLUMN sign_off INTEGER CHECK (sign_off IN (0, 1))",
     "ALTER TABLE sessions ADD COLUMN cpu_self_check INTEGER CHECK (cpu_self_check IN (0, 1))"),
)
SCHEMA_VERSION = len(MIGRATIONS)

_SESSION_COLUMNS = ("run_id", "node", "verdict", "started_at", "finished_at", "profile_name", "profile_sha256",
                    "device", "gpu_name", "driver_version", "cuda_driver_version", "cuda_runtime_version",
                    "nccl_version", "torch_version", "python_version", "harness_version", "git_commit", "container",
                    "slurm_job_id", "source", "scope", "level")
_FLAG_COLUMNS = ("sign_off", "cpu_self_check")
"""Booleans kept as 0/1, NULL when not recorded."""
_GPU_COLUMNS = {"index": "gpu_index", "uuid": "uuid", "serial": "serial", "name": "name",
                "pci_bus_id": "pci_bus_id", "memory_gib": "memory_gib"}
"""GpuFact field -> column ("index" is an SQL keyword)."""
_CHECK_COLUMNS = {f.name: ("check_key" if f.name == "key" else f.name) for f in fields(CheckFact)}
_FIGURE_COLUMNS = {f.name: ("figure_key" if f.name == "key" else f.name) for f in fields(GpuFigure)}


class StoreError(Exception):
    """The store cannot be read or written: ``str(err)`` names the file and says what to do."""


def incoming_dir(store: Path) -> Path:
    """Where sessions write their own files: ``P.d/`` beside the store ``P``."""
    return store.with_name(store.name + ".d")


def exists(store: Path) -> bool:
    """A compacted store, or per-session files not yet compacted."""
    return Path(store).is_file() or incoming_dir(Path(store)).is_dir()


def lock_dir(store: Path) -> Path:
    return store.with_name(store.name + ".lock")


# --- the schema ------------------------------------------------------------------------------


def schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, where: Path | str) -> None:
    """Bring ``conn`` (autocommit mode) to SCHEMA_VERSION, one transaction per migration."""
    version = schema_version(conn)
    if version > SCHEMA_VERSION:
        raise StoreError(f"{where}: history store schema {version} is newer than this harness reads "
                         f"(up to {SCHEMA_VERSION}); upgrade the harness to read it")
    for number in range(version + 1, SCHEMA_VERSION + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in MIGRATIONS[number - 1]:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


# --- writing ---------------------------------------------------------------------------------


def insert_session(conn: sqlite3.Connection, facts: SessionFacts) -> bool:
    """Add one session (one transaction); False when the store already holds it."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("SELECT 1 FROM sessions WHERE node = ? AND run_id = ?", facts.identity).fetchone():
            conn.execute("ROLLBACK")
            return False
        row = {column: getattr(facts, column) for column in _SESSION_COLUMNS}
        row["recorded_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")  # when this file got the row
        row["verdict_reasons"] = json.dumps(list(facts.verdict_reasons))
        row |= {column: getattr(facts, column) for column in _FLAG_COLUMNS}
        session_id = _insert(conn, "sessions", row)
        for gpu in facts.gpus:
            _insert(conn, "gpus", {"session_id": session_id} | {c: getattr(gpu, f) for f, c in _GPU_COLUMNS.items()})
        for check in facts.checks:
            row = {c: getattr(check, f) for f, c in _CHECK_COLUMNS.items()}
            _insert(conn, "checks", {"session_id": session_id} | row)
        for figure in facts.gpu_figures:
            row = {c: getattr(figure, f) for f, c in _FIGURE_COLUMNS.items()}
            _insert(conn, "gpu_figures", {"session_id": session_id} | row)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return True


def _insert(conn: sqlite3.Connection, table: str, row: dict[str, Any]) -> int:
    columns = ", ".join(row)
    marks = ", ".join("?" for _ in row)
    row_id = conn.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})", tuple(row.values())).lastrowid
    if row_id is None:  # sqlite3 sets it after every INSERT into a rowid table
        raise sqlite3.DatabaseError(f"no row id after an INSERT into {table}")
    return row_id


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:80] or "_"


def write_session(store: Path, facts: SessionFacts) -> Path:
    """Write ``facts`` as a new per-session file under ``P.d/``; returns its path. Raises StoreError."""
    directory = incoming_dir(Path(store))
    name = f"{_safe_name(facts.node)}.{_safe_name(facts.run_id)}.{uuid.uuid4().hex[:8]}.sqlite"
    final, tmp = directory / name, directory / f".{name}.tmp"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = MEMORY")  # a half-written temporary file is thrown away anyway
            migrate(conn, final)
            insert_session(conn, facts)
        finally:
            conn.close()
        os.replace(tmp, final)
        _sync_directory(directory)
    except (OSError, sqlite3.Error) as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise StoreError(f"cannot write {final}: {exc}; point --harness-store (or HARNESS_STORE) at a writable "
                         "path") from None
    return final


def _sync_directory(directory: Path) -> None:
    """Make the rename durable (a crash right after it must not lose the file's name)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some network file systems refuse fsync on a directory; the rename itself is atomic
    finally:
        os.close(fd)


# --- reading ---------------------------------------------------------------------------------


@dataclass(kw_only=True)
class StoreContents:
    sessions: list[SessionFacts] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """One line per file that could not be read (it is left in place)."""
    files: list[Path] = field(default_factory=list)
    """Every file read, the compacted store first."""


def store_files(store: Path) -> list[Path]:
    """The compacted store (when it exists) and every complete per-session file."""
    store = Path(store)
    files = [store] if store.is_file() else []
    incoming = incoming_dir(store)
    if incoming.is_dir():
        files += sorted(p for p in incoming.glob("*.sqlite") if not p.name.startswith("."))
    return files


def read_file(path: Path) -> list[SessionFacts]:
    """The sessions of one store file, upgraded in memory when its schema is older. Raises StoreError."""
    try:
        conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro&immutable=1", uri=True,
                               isolation_level=None)
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: cannot be opened ({exc})") from None
    try:
        if schema_version(conn) != SCHEMA_VERSION:
            memory = sqlite3.connect(":memory:", isolation_level=None)
            conn.backup(memory)
            conn.close()
            conn = memory
            migrate(conn, path)
        return _sessions(conn)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: not a readable history store ({exc}); move it out of the store "
                         "directory") from None
    finally:
        conn.close()


def _sessions(conn: sqlite3.Connection) -> list[SessionFacts]:
    conn.row_factory = sqlite3.Row
    sessions = []
    for row in conn.execute("SELECT * FROM sessions ORDER BY id"):
        gpus = tuple(GpuFact(**{f: gpu[c] for f, c in _GPU_COLUMNS.items()}) for gpu in conn.execute(
            "SELECT * FROM gpus WHERE session_id = ? ORDER BY gpu_index", (row["id"],)))
        checks = tuple(_check(check) for check in conn.execute(
            "SELECT * FROM checks WHERE session_id = ? ORDER BY rowid", (row["id"],)))
        figures = tuple(GpuFigure(**{f: figure[c] for f, c in _FIGURE_COLUMNS.items()}) for figure in conn.execute(
            "SELECT * FROM gpu_figures WHERE session_id = ? ORDER BY rowid", (row["id"],)))
        values = {column: row[column] for column in _SESSION_COLUMNS}
        values |= {column: None if row[column] is None else bool(row[column]) for column in _FLAG_COLUMNS}
        sessions.append(SessionFacts(**values, verdict_reasons=_reasons(row["verdict_reasons"]), gpus=gpus,
                                     checks=checks, gpu_figures=figures))
    return sessions


def _reasons(text: str) -> tuple[str, ...]:
    try:
        reasons = json.loads(text)
    except ValueError:
        return (f"unreadable verdict reasons in the store: {text[:200]!r}",)
    return tuple(str(r) for r in reasons) if isinstance(reasons, list) else ()


def _check(row: sqlite3.Row) -> CheckFact:
    values = {f: row[c] for f, c in _CHECK_COLUMNS.items()}
    values["passed"] = None if row["passed"] is None else bool(row["passed"])
    return CheckFact(**values)


def load(store: Path) -> StoreContents:
    """Every session in the store, each once. Raises StoreError when there is no store at all.

    The per-session files are listed and read before the compacted store: a compaction that runs
    meanwhile renames the new compacted store into place before it removes the files it folded,
    so a file that vanished is in the compacted store read after it.
    """
    store = Path(store)
    files = store_files(store)
    if not files and not incoming_dir(store).is_dir():
        raise StoreError(f"no history store at {store} (neither {store} nor {incoming_dir(store)}/ exists); "
                         "sessions write it when they end (--harness-store, HARNESS_STORE): pass the path they used")
    ordered = [p for p in files if p != store] + [store]
    contents = StoreContents(files=files)
    seen: set[tuple[str, str]] = set()
    for path in ordered:
        try:
            sessions = read_file(path)
        except StoreError as exc:
            if path.exists():
                contents.problems.append(str(exc))
            continue  # a vanished per-session file was folded into the compacted store
        for session in sessions:
            if session.identity not in seen:
                seen.add(session.identity)
                contents.sessions.append(session)
    contents.sessions.sort(key=lambda s: (s.when, s.node, s.run_id))
    return contents


# --- compaction ------------------------------------------------------------------------------


@dataclass(kw_only=True)
class Compaction:
    folded: list[Path] = field(default_factory=list)
    added: int = 0
    """Sessions new to the compacted store (a session already in it is not added twice)."""
    problems: list[str] = field(default_factory=list)


def compact(store: Path) -> Compaction:
    """Fold every per-session file into the compacted store ``P``; one compaction at a time."""
    store = Path(store)
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
        return _fold(store, [p for p in store_files(store) if p != store])
    finally:
        shutil.rmtree(lock, ignore_errors=True)


def _read_holder(lock: Path) -> str:
    try:
        return (lock / "holder").read_text().strip() or "holder unknown"
    except OSError:
        return "holder unknown"


def _fold(store: Path, files: list[Path]) -> Compaction:
    result = Compaction()
    if not files:
        return result
    tmp = store.with_name(f".{store.name}.compact-{uuid.uuid4().hex[:8]}")
    try:
        if store.is_file():
            shutil.copyfile(store, tmp)
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            migrate(conn, store)
            for path in files:
                try:
                    sessions = read_file(path)
                except StoreError as exc:
                    result.problems.append(str(exc))
                    continue
                result.added += sum(insert_session(conn, s) for s in sessions)
                result.folded.append(path)
        finally:
            conn.close()
        os.replace(tmp, store)
    except (OSError, sqlite3.Error) as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise StoreError(f"cannot write {store}: {exc}; nothing was folded, the per-session files are kept") from None
    for path in result.folded:
        path.unlink(missing_ok=True)
    return result
