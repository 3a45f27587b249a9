"""Issue 31 (reliability, pass 3): outputs that replace device nodes, FIFOs and links; bounded, typed reads
of run directories and history stores; the newer commands' edges. Every device node here is a ``mknod``
twin of /dev/null in a temporary directory, never a real device."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from fleet_sessions import NodePlan, write_node
from harness.cli import main
from harness.files import OutputPathError
from harness.records import write_text_atomic

NODE = "gpu-node09"


def _devnull_twin(path: Path) -> Path:
    """A character device with /dev/null's numbers, made in a temporary directory (needs root)."""
    null = os.stat("/dev/null")
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, null.st_rdev)
    except PermissionError:
        pytest.skip("mknod needs root (CAP_MKNOD)")
    return path


def _special(kind: str, path: Path, tmp_path: Path) -> Path:
    if kind == "device":
        return _devnull_twin(path)
    if kind == "fifo":
        os.mkfifo(path)
        return path
    target = tmp_path / "target.txt"
    target.write_text("the link's target\n")
    path.symlink_to(target)
    return path


def _untouched(kind: str, path: Path, tmp_path: Path) -> None:
    mode = path.lstat().st_mode
    expected = {"device": stat.S_ISCHR, "fifo": stat.S_ISFIFO, "link": stat.S_ISLNK}[kind]
    assert expected(mode), f"{path} was replaced ({oct(mode)})"
    if kind == "link":
        assert (tmp_path / "target.txt").read_text() == "the link's target\n"


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pass3") / "reports"
    for day in ("2026-10-01", "2026-11-01"):
        write_node(root, NodePlan(node=NODE, started_at=f"{day}T10:00:00+00:00"))
    return root


KINDS = ("device", "fifo", "link")
WHAT = {"device": "a character device", "fifo": "a named pipe", "link": "a symbolic link"}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("option", ("--json", "--html"))
def test_history_refuses_to_replace_a_device_a_fifo_or_a_link(reports, tmp_path, capsys, kind, option):
    target = _special(kind, tmp_path / "out", tmp_path)
    code = main(["history", "--node", NODE, "--store", str(tmp_path / "none.sqlite"), str(reports),
                 option, str(target)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{option} {target}: is {WHAT[kind]}, not a regular file" in err
    assert "name a regular file or a new path" in err
    _untouched(kind, target, tmp_path)


@pytest.mark.parametrize("kind", KINDS)
def test_fleet_refuses_to_replace_a_device_a_fifo_or_a_link_in_its_output_directory(reports, tmp_path, capsys, kind):
    out = tmp_path / "fleet"
    out.mkdir()
    target = _special(kind, out / "fleet.json", tmp_path)
    code = main(["fleet", str(reports), "--output", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"--output {target}: is {WHAT[kind]}, not a regular file" in err
    _untouched(kind, target, tmp_path)
    assert not (out / "fleet.html").exists(), "nothing is written when one output is refused"


def test_fleet_refuses_an_output_directory_that_is_a_device(reports, tmp_path, capsys):
    target = _devnull_twin(tmp_path / "fleet")
    assert main(["fleet", str(reports), "--output", str(target)]) == 2
    assert f"--output {target}: is a character device" in capsys.readouterr().err
    assert stat.S_ISCHR(target.lstat().st_mode)


@pytest.mark.parametrize("kind", KINDS)
def test_the_one_writer_never_replaces_a_special_file(tmp_path, kind):
    """Every writer (report.html, session.json, calibrate's profile, selftest's tables) goes through it."""
    target = _special(kind, tmp_path / "report.html", tmp_path)
    with pytest.raises(OutputPathError, match=f"is {WHAT[kind]}, not a regular file"):
        write_text_atomic(target, "<html>")
    _untouched(kind, target, tmp_path)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == [], "no temporary file left"


def test_fleet_and_history_outputs_follow_the_umask(reports, tmp_path, capsys):
    """They name GPU serials: under umask 077 nobody else may read them (they were forced to 0644)."""
    old = os.umask(0o077)
    try:
        assert main(["fleet", str(reports), "--output", str(tmp_path / "fleet")]) in (0, 1)
        assert main(["history", "--node", NODE, "--store", str(tmp_path / "none.sqlite"), str(reports),
                     "--json", str(tmp_path / "h.json"), "--html", str(tmp_path / "h.html")]) in (0, 1)
    finally:
        os.umask(old)
    capsys.readouterr()
    for path in [*(tmp_path / "fleet").iterdir(), tmp_path / "h.json", tmp_path / "h.html"]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
