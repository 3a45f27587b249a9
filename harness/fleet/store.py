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
import math
import os
import re
import sqlite3
import time
import typing
import uuid
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from harness.files import parse_json_bounded, path_kind
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


STORE_MAX_BYTES = 4 * 1024**3
"""The largest store file read: a session's file is tens of KiB, so this holds about 100,000 sessions."""
QUERY_LIMIT_S = 60.0
"""The most time one store file may take to read (SQLite's progress handler stops it): a damaged schema
(a view that never ends) makes SQLite loop in C, where neither SIGTERM nor Ctrl-C reach it."""
MAX_ROWS = 5_000_000
"""The most rows read from one store file, whatever its size says (a view can yield rows for ever)."""
BUSY_TIMEOUT_S = 60.0
"""How long compaction waits for another process's SQLite lock on the compacted store."""


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
    """A file-name part; never starting with ".", which marks a temporary file readers skip (a node named
    ".n1" was written and never read)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:80] or "_"
    return "_" + safe if safe.startswith(".") else safe


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
    """The compacted store (when it exists) and every complete per-session file: regular files only
    (``special_files`` lists the others, which are never opened: a FIFO would block for ever)."""
    store = Path(store)
    files = [store] if store.is_file() and path_kind(store) is None else []
    incoming = incoming_dir(store)
    if incoming.is_dir():
        files += sorted(p for p in incoming.glob("*.sqlite") if not p.name.startswith(".") and path_kind(p) is None)
    return files


def special_files(store: Path) -> list[str]:
    """One line for the store or each per-session name that is not a regular file (a FIFO named
    ``x.sqlite``, a link, a device): never opened, and named so that someone moves it away."""
    store = Path(store)
    incoming = incoming_dir(store)
    names = [store] + (sorted(p for p in incoming.glob("*.sqlite") if not p.name.startswith("."))
                       if incoming.is_dir() else [])
    return [f"{path}: is {kind}, not a regular file, so it was not read; move it out of the store directory"
            for path in names if (kind := path_kind(path)) is not None]


def _open_bounded(path: Path) -> sqlite3.Connection:
    """A read-only connection to a regular store file of at most STORE_MAX_BYTES whose statements stop
    after QUERY_LIMIT_S (SQLite's progress handler: it runs inside SQLite's own loops). Raises StoreError."""
    kind = path_kind(path)
    if kind is not None:
        raise StoreError(f"{path}: is {kind}, not a regular file; move it out of the store directory")
    try:
        size = Path(path).stat().st_size
    except OSError as exc:
        raise StoreError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if size > STORE_MAX_BYTES:
        raise StoreError(f"{path}: is {size:,} bytes, more than the {STORE_MAX_BYTES:,} a store file may be; move it "
                         "out of the store directory")
    try:
        conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro&immutable=1", uri=True,
                               isolation_level=None)
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: cannot be opened ({exc})") from None
    _limit_time(conn)
    return conn


def _limit_time(conn: sqlite3.Connection) -> None:
    deadline = time.monotonic() + QUERY_LIMIT_S
    conn.set_progress_handler(lambda: time.monotonic() > deadline, 10_000)


def read_file(path: Path) -> list[SessionFacts]:
    """The sessions of one store file, upgraded in memory when its schema is older. Raises StoreError,
    also for a row that cannot be read (``read_file_rows`` reads around those)."""
    sessions, problems = read_file_rows(path)
    if problems:
        raise StoreError(problems[0])
    return sessions


def read_file_rows(path: Path) -> tuple[list[SessionFacts], list[str]]:
    """The sessions of one store file and one line per row left out (a 'NaN' text where a number belongs,
    a verdict that is none, reasons nested 100,000 deep). Raises StoreError when the file cannot be read."""
    conn = _open_bounded(path)
    try:
        if schema_version(conn) != SCHEMA_VERSION:
            memory = sqlite3.connect(":memory:", isolation_level=None)
            conn.backup(memory)
            conn.close()
            conn = memory
            _limit_time(conn)
            migrate(conn, path)
        return _sessions(conn, path)
    except sqlite3.OperationalError as exc:
        if "interrupted" in str(exc):
            raise StoreError(f"{path}: reading it took more than {QUERY_LIMIT_S:.0f} s and was stopped (a damaged "
                             "schema, e.g. a view that never ends); move it out of the store directory") from None
        raise StoreError(f"{path}: not a readable history store ({exc}); move it out of the store "
                         "directory") from None
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: not a readable history store ({exc}); move it out of the store "
                         "directory") from None
    finally:
        conn.close()


class _BadRow(ValueError):
    pass


def _typed(cls: type, values: dict[str, Any]) -> Any:
    """``cls(**values)`` with every value checked against the field's type: a store file comes from
    anywhere, and SQLite keeps 'NaN' text in a REAL column. Raises _BadRow naming the column."""
    hints = typing.get_type_hints(cls)
    for name, value in values.items():
        values[name] = _coerce(hints[name], value, name)
    return cls(**values)


def _coerce(hint: Any, value: Any, name: str) -> Any:
    args = typing.get_args(hint)
    optional = type(None) in args
    if value is None:
        if optional:
            return None
        raise _BadRow(f"{name} is empty")
    base = next((a for a in args if a is not type(None)), hint) if optional else hint
    if typing.get_origin(base) is typing.Literal:
        if value in typing.get_args(base):
            return value
        raise _BadRow(f"{name} = {str(value)[:40]!r} is none of {', '.join(typing.get_args(base))}")
    if base is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
        raise _BadRow(f"{name} = {str(value)[:40]!r} is not a finite number")
    if base is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _BadRow(f"{name} = {str(value)[:40]!r} is not an integer")
    if base is bool:
        if value in (0, 1):
            return bool(value)
        raise _BadRow(f"{name} = {str(value)[:40]!r} is neither 0 nor 1")
    if base is str:
        if isinstance(value, str):
            return value
        raise _BadRow(f"{name} = {str(value)[:40]!r} is not text")
    return value


def _rows(conn: sqlite3.Connection, sql: str, parameters: tuple = ()) -> list[sqlite3.Row]:
    rows = []
    for row in conn.execute(sql, parameters):
        rows.append(row)
        if len(rows) > MAX_ROWS:
            raise StoreError(f"more than {MAX_ROWS:,} rows from {sql.split(' FROM ')[1].split()[0]}")
    return rows


def _sessions(conn: sqlite3.Connection, path: Path) -> tuple[list[SessionFacts], list[str]]:
    conn.row_factory = sqlite3.Row
    sessions, problems = [], []
    try:
        session_rows = _rows(conn, "SELECT * FROM sessions ORDER BY id")
    except StoreError as exc:
        raise StoreError(f"{path}: {exc}; move it out of the store directory") from None
    for row in session_rows:
        where = f"{path}: session row {row['id']}"
        try:
            gpus = tuple(_typed(GpuFact, {f: gpu[c] for f, c in _GPU_COLUMNS.items()}) for gpu in _rows(
                conn, "SELECT * FROM gpus WHERE session_id = ? ORDER BY gpu_index", (row["id"],)))
            checks = tuple(_check(check) for check in _rows(
                conn, "SELECT * FROM checks WHERE session_id = ? ORDER BY rowid", (row["id"],)))
            figures = tuple(_typed(GpuFigure, {f: figure[c] for f, c in _FIGURE_COLUMNS.items()})
                            for figure in _rows(conn, "SELECT * FROM gpu_figures WHERE session_id = ? ORDER BY rowid",
                                                (row["id"],)))
            values = {column: row[column] for column in _SESSION_COLUMNS}
            values |= {column: None if row[column] is None else bool(row[column]) for column in _FLAG_COLUMNS}
            sessions.append(_typed(SessionFacts, {**values, "verdict_reasons": _reasons(row["verdict_reasons"]),
                                                  "gpus": gpus, "checks": checks, "gpu_figures": figures}))
        except (_BadRow, StoreError) as exc:
            problems.append(f"{where} was left out: {exc}; fix or remove that session (or move the file out of "
                            "the store directory)")
    return sessions, problems


def _reasons(text: Any) -> tuple[str, ...]:
    if not isinstance(text, str):
        raise _BadRow(f"verdict_reasons = {str(text)[:40]!r} is not JSON text")
    try:
        reasons = parse_json_bounded(text, "verdict_reasons")
    except (ValueError, RecursionError):
        return (f"unreadable verdict reasons in the store: {text[:200]!r}",)
    return tuple(str(r)[:4000] for r in reasons) if isinstance(reasons, list) else ()


def _check(row: sqlite3.Row) -> CheckFact:
    values = {f: row[c] for f, c in _CHECK_COLUMNS.items()}
    return _typed(CheckFact, values)


def load(store: Path) -> StoreContents:
    """Every session in the store, each once. Raises StoreError when there is no store at all.

    The per-session files are listed and read before the compacted store: a compaction that runs
    meanwhile renames the new compacted store into place before it removes the files it folded,
    so a file that vanished is in the compacted store read after it.
    """
    store = Path(store)
    files = store_files(store)
    special = special_files(store)
    if not files and not incoming_dir(store).is_dir():
        if special:
            raise StoreError(special[0])
        raise StoreError(f"no history store at {store} (neither {store} nor {incoming_dir(store)}/ exists); "
                         "sessions write it when they end (--harness-store, HARNESS_STORE): pass the path they used")
    ordered = [p for p in files if p != store] + [store]
    contents = StoreContents(files=files, problems=special)
    seen: set[tuple[str, str]] = set()
    for path in ordered:
        if not path.is_file():
            continue  # no compacted store yet, or a per-session file folded meanwhile (read from the store)
        try:
            sessions, problems = read_file_rows(path)
        except StoreError as exc:
            if path.exists():
                contents.problems.append(str(exc))
            continue  # a vanished per-session file was folded into the compacted store
        contents.problems += problems
        for session in sessions:
            if session.identity not in seen:
                seen.add(session.identity)
                contents.sessions.append(session)
    contents.sessions.sort(key=lambda s: (s.when, s.node, s.run_id))
    return contents
