"""slurm/node-check.sh, the Slurm health check / prolog (NHC's conventions): every exit code of the
check mapped; a FAIL drains with the cause in the reason; a node the harness drained is resumed
after a passing re-check, one someone else drained never is; it runs with no PATH, as Slurm starts
it. A stand-in Python (the check's exit code, its session.json) and a stand-in scontrol that keeps
the node's state in a file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.launch.node_check import DRAIN_PREFIX, MAX_REASON_CHARS, drain_reason

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "slurm" / "node-check.sh"

FOREIGN_FAIL = {"verdict": "FAIL", "scope": "full", "exit_code": 1,
                "causes": [{"key": "foreign_processes", "count": 1, "where": ["pid 812 (python) on GPU 2 ×1"],
                            "text": "foreign_processes ×1, on pid 812 (python) on GPU 2"}]}

SCONTROL = """#!/bin/bash
state={state}
echo "$@" >> {state}.calls
if [ "$1" = show ]; then
    echo "NodeName=gpu07 Arch=x86_64"
    if [ -s $state ]; then echo "   State=IDLE+DRAIN"; echo "   Reason=$(cat $state) [root@2026-11-27T06:00:00]"
    else echo "   State=IDLE"; fi
    exit 0
fi
for arg in "$@"; do
    case $arg in
        state=resume) : > $state ;;
        reason=*) printf '%s' "${{arg#reason=}}" > $state ;;
    esac
done
"""

PYTHON = """#!/bin/bash
if [ "$1" = -m ] && [ "$2" = harness.launch.node_check ]; then
    PYTHONPATH={root} exec {python} "$@"
fi
echo "$@" >> {calls}
run={reports}/20261127-060000-gpu07-h200
mkdir -p $run && cp {session} $run/session.json && ln -sfn $run {reports}/latest
exit {code}
"""


def run_check(tmp_path: Path, code: int, *, drained_by: str = "", verdict: dict | None = None,
              no_path: bool = False) -> tuple[int, str, str, str]:
    """(exit status, stderr, the node's drain reason afterwards, the scontrol calls)."""
    bin_dir = tmp_path / "slurm-bin"
    bin_dir.mkdir(exist_ok=True)
    state = tmp_path / "node-state"
    state.write_text(drained_by)
    (bin_dir / "scontrol").write_text(SCONTROL.format(state=state))
    session = tmp_path / "session.json"
    session.write_text(json.dumps({"session_verdict": verdict or FOREIGN_FAIL}))
    python = tmp_path / "python"
    python.write_text(PYTHON.format(root=ROOT, python=sys.executable, calls=tmp_path / "python.calls",
                                    reports=tmp_path / "reports", session=session, code=code))
    for stub in (python, bin_dir / "scontrol"):
        stub.chmod(0o755)
    env = {"HARNESS_PYTHON": str(python), "HARNESS_REPORT_DIR": str(tmp_path / "reports"),
           "SLURMD_NODENAME": "gpu07", "SLURM_JOB_ID": "42", "HARNESS_SLURM_BIN": str(bin_dir)}
    if not no_path:
        env["PATH"] = f"{bin_dir}:/usr/bin:/bin"
    done = subprocess.run(["/bin/bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    calls = Path(f"{state}.calls")
    return done.returncode, done.stderr, state.read_text(), calls.read_text() if calls.exists() else ""


def test_a_fail_drains_with_the_cause_and_the_report_in_the_reason(tmp_path):
    status, err, reason, _ = run_check(tmp_path, 1)
    assert status == 1, err
    run_dir = tmp_path / "reports" / "20261127-060000-gpu07-h200"
    assert reason == f"gpu-acceptance: FAIL foreign_processes pid 812 (python) on GPU 2; report {run_dir}/report.html"
    assert f"node-check: gpu07: draining: {reason}" in err
    assert "-m pytest acceptance --harness-level quick" in (tmp_path / "python.calls").read_text()


def test_it_runs_with_no_path_as_slurm_starts_it(tmp_path):
    status, err, reason, calls = run_check(tmp_path, 1, no_path=True)
    assert status == 1 and "command not found" not in err, err
    assert reason.startswith("gpu-acceptance: FAIL foreign_processes") and "update nodename=gpu07" in calls


def test_a_pass_resumes_a_node_the_harness_drained(tmp_path):
    status, err, reason, calls = run_check(tmp_path, 0, drained_by="gpu-acceptance: FAIL gpu_count; report /x")
    assert (status, reason) == (0, "")
    assert "update nodename=gpu07 state=resume" in calls
    assert "PASS on re-check: resumed (the harness had drained it: gpu-acceptance: FAIL gpu_count" in err


def test_a_pass_never_resumes_a_node_someone_else_drained(tmp_path):
    status, err, reason, calls = run_check(tmp_path, 0, drained_by="bad DIMM, ticket 4711")
    assert (status, reason) == (0, "bad DIMM, ticket 4711")
    assert "update" not in calls
    assert "left as it is: drained by someone else (bad DIMM, ticket 4711" in err


def test_a_pass_on_a_node_in_service_changes_nothing(tmp_path):
    status, err, reason, calls = run_check(tmp_path, 0)
    assert (status, reason, err) == (0, "", "")
    assert "update" not in calls


@pytest.mark.parametrize(("code", "says"), [
    (2, "INCOMPLETE: interrupted"), (3, "INCOMPLETE: internal error"), (5, "INCOMPLETE: no test collected"),
    (6, "INCOMPLETE: a case the node must run did not run"), (4, "usage error: the check could not start"),
    (7, "could not record"), (127, "harness error 127")])
def test_anything_but_pass_or_fail_is_said_and_never_drains(tmp_path, code, says):
    status, err, reason, calls = run_check(tmp_path, code)
    assert (status, reason) == (0, ""), err
    assert "update" not in calls
    assert f"node-check: gpu07: {says}" in err and f"(exit {code}); node not drained; report " in err


def test_an_incomplete_re_check_does_not_resume_a_node_the_harness_drained(tmp_path):
    status, _, reason, calls = run_check(tmp_path, 6, drained_by="gpu-acceptance: FAIL xid_events; report /x")
    assert (status, reason) == (0, "gpu-acceptance: FAIL xid_events; report /x") and "update" not in calls


def test_the_drain_reason_fits_names_at_most_three_causes_and_survives_a_damaged_session(tmp_path):
    causes = [{"key": f"check_{i}", "where": [f"GPU {i} (UUID GPU-{'x' * 40}) ×2"]} for i in range(6)]
    (tmp_path / "session.json").write_text(json.dumps({"session_verdict": {"verdict": "FAIL", "causes": causes}}))
    reason = drain_reason(tmp_path)
    assert reason.startswith(f"{DRAIN_PREFIX} FAIL check_0 GPU 0 (UUID GPU-") and len(reason) <= MAX_REASON_CHARS
    assert reason.endswith(f"; report {tmp_path}/report.html")
    (tmp_path / "session.json").write_text("{not json")
    assert drain_reason(tmp_path) == f"{DRAIN_PREFIX} FAIL (session.json not readable: JSONDecodeError); report " \
                                     f"{tmp_path}/report.html"
