"""The README's command and the one table of exit codes: ./acceptance.sh returns the harness's code
and last line; `make acceptance` returns what GNU make can (0 or 2) and names the code; every
subcommand uses the table's code for the same kind of mistake; --lf/--ff are refused with a reason."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.exitcodes import EXIT_CODES, EXIT_NOT_RECORDED, EXIT_USAGE_ERROR

REPO = Path(__file__).resolve().parent.parent
VERDICTS_MD = REPO / "docs" / "verdicts.md"


def _stub_python(venv: Path, *, line: str, code: int) -> None:
    """A venv whose Python prints the harness's last line and exits with ``code``, newer than the
    files make's stamp depends on (so make installs nothing)."""
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(f"#!/bin/sh\necho 'pytest args:' \"$@\"\necho '{line}'\nexit {code}\n")
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    (venv / ".installed").write_text("")


def _env(venv: Path) -> dict[str, str]:
    return {**os.environ, "VENV": str(venv), "HARNESS_VENV_READY": "1"}


@pytest.mark.parametrize("code", [0, 1, 4, 6, 7])
def test_acceptance_sh_returns_the_harness_code_and_its_last_line(tmp_path, code):
    venv = tmp_path / "venv"
    _stub_python(venv, line=f"harness: VERDICT {code}", code=code)
    done = subprocess.run([str(REPO / "acceptance.sh"), "--models", "resnet50"], env=_env(venv), cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == code, done.stderr
    assert done.stdout.splitlines() == ["pytest args: -m pytest acceptance --models resnet50",
                                        f"harness: VERDICT {code}"]
    assert done.stderr == ""


@pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")
@pytest.mark.parametrize(("code", "make_code"), [(0, 0), (1, 2), (6, 2), (7, 2)])
def test_make_acceptance_passes_pass_or_not_and_names_the_harness_code(tmp_path, code, make_code):
    venv = tmp_path / "venv"
    _stub_python(venv, line=f"harness: VERDICT {code}", code=code)
    done = subprocess.run(["make", "--no-print-directory", "-C", str(REPO), "acceptance", f"VENV={venv}",
                           "LEVEL=quick", "ARGS=--models resnet50"],
                          env=_env(venv), capture_output=True, text=True, timeout=60)
    assert done.returncode == make_code, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == f"harness: VERDICT {code}", "the verdict is stdout's last line"
    assert "--harness-level quick --models resnet50" in done.stdout
    if code:
        assert f"make acceptance: the harness exited {code} (above: its verdict)" in done.stderr
        assert done.stderr.rstrip().endswith(f"Error {code}"), "make's own last line names the harness's code"
    else:
        assert done.stderr == ""


def test_the_exit_code_table_in_docs_is_the_code_table():
    text = VERDICTS_MD.read_text()
    section = text[text.index("## Exit codes"):]
    rows = re.findall(r"^\| (\d) \| ([^|]+) \|", section, re.MULTILINE)
    assert {int(code): name.strip() for code, name in rows} == {code: name for code, (name, _) in EXIT_CODES.items()}
    assert EXIT_NOT_RECORDED == 7 and EXIT_USAGE_ERROR == 4


@pytest.mark.parametrize("argv", [
    ["run", "--no-such-option"],
    ["fleet", "--outlier-z"],
    ["history"],
    ["compare", "only-one"],
    ["selftest", "--timeout", "soon"],
    ["no-such-command"],
])
def test_a_mistake_argparse_finds_is_the_usage_code_in_every_subcommand(argv, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == EXIT_USAGE_ERROR
    assert "error:" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "says"), [
    (["compare", "/no/such/a", "/no/such/b"], "harness compare: "),
    (["report", "/no/such/run"], "harness report: "),
    (["fleet", "/no/such/dir"], "harness fleet: /no/such/dir: no such directory"),
    (["history", "--node", "x", "--store", "/no/such.sqlite"], "harness history: no history store"),
    (["thresholds", "check", str(REPO / "docs" / "ci")], "harness thresholds check: no threshold files"),
    (["detect", "--thresholds-dir", "/no/such/dir"], "error: "),
    (["selftest", "--rows", "nope"], "harness selftest: --rows 'nope': unknown row"),
])
def test_an_input_a_subcommand_cannot_use_is_the_usage_code_and_one_line(argv, says, capsys):
    assert main(argv) == EXIT_USAGE_ERROR
    err = capsys.readouterr().err
    assert err.startswith(says) and "Traceback" not in err


def test_fleet_and_history_say_could_not_record_when_the_output_cannot_be_written(tmp_path, capsys):
    from fleet_sessions import NodePlan, write_node

    write_node(tmp_path / "reports", NodePlan(node="gpu-node01"))
    (tmp_path / "file").write_text("")
    assert main(["fleet", str(tmp_path / "reports"), "--output", str(tmp_path / "file" / "out")]) == EXIT_NOT_RECORDED
    assert capsys.readouterr().err.startswith("harness fleet: could not record: cannot write ")
    assert main(["history", "--store", str(tmp_path / "file" / "h.sqlite"), "--add",
                 str(tmp_path / "reports")]) == EXIT_NOT_RECORDED
    assert capsys.readouterr().err.startswith("harness history: could not record: ")


@pytest.mark.parametrize("flag", ["--lf", "--ff", "--last-failed", "--sw"])
def test_lf_and_ff_are_refused_with_a_reason_not_ignored(flag):
    done = subprocess.run([sys.executable, "-m", "pytest", "acceptance", flag, "--co", "-q"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == EXIT_USAGE_ERROR, done.stdout + done.stderr
    shown = {"--last-failed": "--lf"}.get(flag, flag)
    assert f"{shown}: refused: the acceptance suite keeps no pytest cache between sessions" in done.stderr
    assert "name it" in done.stderr and "not a node sign-off" in done.stderr
