"""harness.fleet.store: the schema and its migrations, per-session files, compaction, concurrent writers."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from harness.fleet import compaction, store
from harness.fleet.facts import CheckFact, GpuFact, GpuFigure, SessionFacts

REPO = Path(__file__).resolve().parent.parent


def session(node: str = "gpu-node01", run_id: str = "20261120-100000-gpu-node01-h200", **overrides) -> SessionFacts:
    facts = SessionFacts(
        run_id=run_id, node=node, verdict="PASS", verdict_reasons=("a reason",), started_at="2026-11-20T10:00:00+00:00",
        finished_at="2026-11-20T10:05:00+00:00", profile_name="h200", profile_sha256="ab" * 32, device="cuda",
        gpu_name="NVIDIA H200", driver_version="580.95.05", torch_version="2.9.0", python_version="3.11.7",
        gpus=(GpuFact(index=0, uuid="GPU-0", serial="1650924060000", name="NVIDIA H200", memory_gib=139.8),
              GpuFact(index=1, uuid="GPU-1")),
        checks=(CheckFact(test="t::a[x]", case_key="resnet50-bf16-weak-2gpu", key="throughput_per_gpu",
                          name="per-GPU throughput", kind="performance", measured=4600.5, bound=4176.0,
                          unit="images/s", comparison=">=", passed=True),
                CheckFact(test="t::a[x]", case_key="resnet50-bf16-weak-2gpu", key="ecc", name="no new ECC errors",
                          kind="health", measured=None, bound=None, unit="", comparison="==", passed=None,
                          note="no telemetry")),
        gpu_figures=(GpuFigure(case_key="resnet50-bf16-weak-2gpu", key="compute_throughput", name="compute",
                               host=node, rank=1, gpu_index=1, gpu_uuid="GPU-1", value=4620.0, unit="images/s",
                               direction="higher"),),
        source="/reports/x", scope="full", level="standard", sign_off=True, cpu_self_check=False)
    return replace(facts, **overrides)


def test_a_session_comes_back_from_the_store_as_it_went_in(tmp_path):
    path = store.write_session(tmp_path / "history.sqlite", session())
    assert path.parent == tmp_path / "history.sqlite.d" and path.suffix == ".sqlite"
    contents = store.load(tmp_path / "history.sqlite")
    assert contents.sessions == [session()] and contents.problems == []
    assert not list(path.parent.glob(".*")), "no temporary file is left behind"


def test_a_new_store_file_is_at_the_current_schema_with_every_table(tmp_path):
    path = store.write_session(tmp_path / "h.sqlite", session())
    conn = sqlite3.connect(path)
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert store.schema_version(conn) == store.SCHEMA_VERSION == 3
    assert tables == {"sessions", "gpus", "checks", "gpu_figures"}


def test_the_store_refuses_a_verdict_that_is_not_one_of_the_three(tmp_path):
    conn = sqlite3.connect(tmp_path / "h.sqlite", isolation_level=None)
    store.migrate(conn, "h.sqlite")
    with pytest.raises(sqlite3.IntegrityError):
        store.insert_session(conn, session(verdict="MOSTLY"))
    assert conn.execute("SELECT count(*) FROM sessions").fetchone() == (0,), "the failed insert left nothing"


def write_schema_1_store(path: Path) -> None:
    """A store as schema 1 wrote it: its migration alone, and one session's rows."""
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in store.MIGRATIONS[0]:
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO sessions (run_id, node, verdict, source, recorded_at, profile_name) "
                 "VALUES ('run-old', 'gpu-node01', 'FAIL', '/reports/old', '2026-01-01', 'h200')")
    conn.execute("INSERT INTO gpus (session_id, gpu_index, uuid) VALUES (1, 0, 'GPU-0')")
    conn.execute("INSERT INTO checks (session_id, test, case_key, check_key, name, kind, measured, bound, unit, "
                 "comparison, passed, note) VALUES (1, 't', 'c', 'k', 'per-GPU throughput', 'performance', 3900, "
                 "4176, 'images/s', '>=', 0, '')")
    conn.close()


def test_a_schema_1_store_is_read_upgraded_and_compacted_into_the_current_schema(tmp_path):
    path = tmp_path / "history.sqlite"
    write_schema_1_store(path)
    old = store.load(path).sessions
    assert [(s.run_id, s.verdict, s.gpu_figures, s.verdict_reasons) for s in old] == [("run-old", "FAIL", (), ())]
    assert (old[0].scope, old[0].sign_off, old[0].full_gpu_session) == (None, None, False), \
        "a session stored before scope was kept is never taken for a full sign-off"
    assert old[0].scope_text == "scope not recorded"
    assert old[0].checks[0].passed is False and old[0].gpus[0].uuid == "GPU-0"
    assert store.schema_version(sqlite3.connect(path)) == 1, "reading never writes"
    store.write_session(path, session())
    result = compaction.compact(path)
    assert (len(result.folded), result.added, result.problems) == (1, 1, [])
    assert store.schema_version(sqlite3.connect(path)) == store.SCHEMA_VERSION
    by_run = {s.run_id: s for s in store.load(path).sessions}
    assert set(by_run) == {"run-old", session().run_id}
    assert by_run[session().run_id] == session()


@pytest.mark.parametrize("scope", [
    {"scope": "partial: 2 of 20 profile cases", "level": "standard", "sign_off": False, "cpu_self_check": False},
    {"scope": "full", "level": "quick", "sign_off": False, "cpu_self_check": False},
    {"scope": "full", "level": "standard", "sign_off": False, "cpu_self_check": True}])
def test_what_a_session_covered_comes_back_from_the_store(tmp_path, scope):
    store.write_session(tmp_path / "h.sqlite", session(**scope))
    (back,) = store.load(tmp_path / "h.sqlite").sessions
    assert (back.scope, back.level, back.sign_off, back.cpu_self_check) == tuple(scope.values())
    assert not back.full_gpu_session


def test_a_store_newer_than_the_harness_is_refused_naming_the_file(tmp_path):
    path = store.write_session(tmp_path / "h.sqlite", session())
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {store.SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    contents = store.load(tmp_path / "h.sqlite")
    assert contents.sessions == []
    assert contents.problems == [f"{path}: history store schema {store.SCHEMA_VERSION + 1} is newer than this "
                                 f"harness reads (up to {store.SCHEMA_VERSION}); upgrade the harness to read it"]


def test_a_file_that_is_not_a_store_is_a_problem_line_and_the_rest_is_read(tmp_path):
    store.write_session(tmp_path / "h.sqlite", session())
    junk = tmp_path / "h.sqlite.d" / "junk.sqlite"
    junk.write_text("not a database at all, " * 100)
    contents = store.load(tmp_path / "h.sqlite")
    assert [s.node for s in contents.sessions] == ["gpu-node01"]
    assert len(contents.problems) == 1 and contents.problems[0].startswith(f"{junk}: not a readable history store")


def test_no_store_at_all_says_where_it_looked_and_what_to_pass(tmp_path):
    with pytest.raises(store.StoreError, match=r"no history store at .*h\.sqlite .*pass the path they used"):
        store.load(tmp_path / "h.sqlite")


def test_an_unwritable_store_says_which_file_and_what_to_do(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(store.StoreError, match=r"cannot write .*file/h\.sqlite\.d/.*point --harness-store"):
        store.write_session(blocker / "h.sqlite", session())


def test_a_session_found_twice_counts_once(tmp_path):
    for _ in range(2):
        store.write_session(tmp_path / "h.sqlite", session())
    assert len(store.load(tmp_path / "h.sqlite").sessions) == 1
    result = compaction.compact(tmp_path / "h.sqlite")
    assert (len(result.folded), result.added) == (2, 1)
    assert len(store.load(tmp_path / "h.sqlite").sessions) == 1


def test_compaction_folds_the_files_in_and_removes_them(tmp_path):
    for n in range(3):
        store.write_session(tmp_path / "h.sqlite", session(node=f"n{n}"))
    compaction.compact(tmp_path / "h.sqlite")
    assert store.store_files(tmp_path / "h.sqlite") == [tmp_path / "h.sqlite"]
    assert [s.node for s in store.load(tmp_path / "h.sqlite").sessions] == ["n0", "n1", "n2"]
    assert not (tmp_path / "h.sqlite.lock").exists()


def test_a_second_compaction_is_refused_naming_the_one_that_holds_the_lock(tmp_path):
    store.write_session(tmp_path / "h.sqlite", session())
    lock = tmp_path / "h.sqlite.lock"
    lock.mkdir()
    (lock / "holder").write_text("host n7, pid 42, since 2026-11-20 10:00:00")
    with pytest.raises(store.StoreError, match=r"another compaction \(host n7, pid 42.*\) is running or died; "
                                               r"if none is running, remove .*h\.sqlite\.lock"):
        compaction.compact(tmp_path / "h.sqlite")
    assert len(store.store_files(tmp_path / "h.sqlite")) == 1, "nothing was folded"


WRITER = textwrap.dedent("""
    import sys
    from dataclasses import replace
    sys.path.insert(0, {tests!r})
    from test_fleet_store import session
    from harness.fleet import store
    writer, count = sys.argv[1], int(sys.argv[2])
    for n in range(count):
        store.write_session({path!r}, session(node=f"node-{{writer}}", run_id=f"run-{{n}}"))
""")
COMPACTOR = textwrap.dedent("""
    import sys, time
    from harness.fleet import compaction, store
    for _ in range(int(sys.argv[1])):
        try:
            compaction.compact({path!r})
        except store.StoreError as exc:
            assert "another compaction" in str(exc), exc  # the other compactor holds the lock: fine
        time.sleep(0.01)
""")


def test_many_writers_and_compactions_at_once_lose_no_session_and_count_none_twice(tmp_path):
    path = tmp_path / "shared" / "history.sqlite"
    writers, per_writer = 6, 5
    processes = [subprocess.Popen([sys.executable, "-c", WRITER.format(tests=str(REPO / "tests"), path=str(path)),
                                   str(w), str(per_writer)]) for w in range(writers)]
    processes += [subprocess.Popen([sys.executable, "-c", COMPACTOR.format(path=str(path)), "15"]) for _ in range(2)]
    assert [p.wait(timeout=300) for p in processes] == [0] * len(processes)
    sessions = store.load(path).sessions
    assert sorted(s.identity for s in sessions) == sorted((f"node-{w}", f"run-{n}") for w in range(writers)
                                                          for n in range(per_writer))
    compaction.compact(path)
    assert len(store.load(path).sessions) == writers * per_writer
    assert not [p for p in path.parent.rglob("*") if p.name.startswith(".")], "no temporary file is left"
