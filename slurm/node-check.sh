#!/usr/bin/env bash
# Slurm node health check: the quick acceptance level on this node, in the manner of NHC (LBNL Node
# Health Check): drain the node on a FAIL with the cause in the reason, resume it after a passing
# re-check only if this script drained it, never touch a node someone else drained. Wiring
# (docs/slurm.md):
#
#   HealthCheckProgram=/opt/gpu-acceptance-harness/slurm/node-check.sh
#   HealthCheckInterval=3600
#   HealthCheckNodeState=IDLE            (never beside a running job: the check loads every GPU)
#
# or as the Prolog of whole-node jobs (PrologFlags=Alloc: at allocation, before the job starts).
# The quick level runs node shape, GPU state, GEMM, memory, host<->GPU and peer bandwidth and
# topology (under 2 minutes on 8 GPUs).
#
# Environment (all optional):
#   HARNESS_HOME        the installed checkout (default: this script's directory's parent)
#   HARNESS_PYTHON      its Python (default: $HARNESS_HOME/.venv/bin/python)
#   HARNESS_REPORT_DIR  where reports/<run-id>/ goes (default: /var/lib/gpu-acceptance/reports)
#   HARNESS_SCONTROL    the scontrol command (default: scontrol, on PATH)
#   HARNESS_SLURM_BIN   a directory put first on PATH for scontrol (e.g. /opt/slurm/bin)
#   HARNESS_NODE_CHECK_ARGS  extra pytest arguments, e.g. "--hardware h100-80gb"
#
# Exit codes of the check, and what this script does (docs/verdicts.md has the table):
#   0     PASS: resume the node if the harness drained it (reason "gpu-acceptance: ..."); exit 0
#   1     FAIL: drain it, reason "gpu-acceptance: FAIL <causes>; report <path>"; exit 1 (a failing
#         Prolog also makes Slurm requeue the job; the reason is already set)
#   2 3 5 6  INCOMPLETE (interrupted, internal error, nothing collected, a required case did not run):
#         not drained, said on stderr; exit 0
#   4     usage error (the check could not start: a bad argument, no profile): not drained, said; exit 0
#   7     could not record (the report directory or store could not be written): not drained; exit 0
#   other (the Python missing, killed): not drained, said; exit 0
set -u
# Slurm runs a Prolog and the health check with no PATH to speak of: give the usual directories,
# after whatever PATH there is. HARNESS_SLURM_BIN goes first: the directory the admin named must win
# over another scontrol on the default PATH (bash supplies a default PATH when Slurm gives none).
export PATH="${HARNESS_SLURM_BIN:+$HARNESS_SLURM_BIN:}${PATH:+$PATH:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

prefix="gpu-acceptance:"   # harness/launch/node_check.py DRAIN_PREFIX
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
home=${HARNESS_HOME:-$(dirname "$here")}
python=${HARNESS_PYTHON:-$home/.venv/bin/python}
report_dir=${HARNESS_REPORT_DIR:-/var/lib/gpu-acceptance/reports}
scontrol=${HARNESS_SCONTROL:-scontrol}
node=${SLURMD_NODENAME:-$(hostname -s)}

say() { echo "node-check: $node: $*" >&2; }

mkdir -p "$report_dir" || say "cannot make $report_dir"
cd "$home" || { say "no checkout at $home (HARNESS_HOME): the check did not run; node not drained"; exit 0; }
# The check judges this node alone: the job's allocation (a Prolog sees the job's environment)
# must not turn it into a multi-node session.
# shellcheck disable=SC2086  # HARNESS_NODE_CHECK_ARGS is a list of words
env -u SLURM_JOB_ID -u SLURM_JOBID -u SLURM_JOB_NODELIST -u SLURM_NODELIST \
    "$python" -m pytest acceptance --harness-level quick --harness-report-dir "$report_dir" -q \
    ${HARNESS_NODE_CHECK_ARGS:-}
status=$?
run_dir=$(readlink -f "$report_dir/latest" 2>/dev/null || echo "$report_dir/latest")
report="$run_dir/report.html"

current_reason() {
    "$scontrol" show node "$node" 2>/dev/null | sed -n 's/^ *Reason=\(.*\)$/\1/p' | head -n 1
}

case $status in
    0)
        reason=$(current_reason)
        if [[ $reason == "$prefix"* ]]; then
            "$scontrol" update nodename="$node" state=resume &&
                say "PASS on re-check: resumed (the harness had drained it: $reason)"
        elif [ -n "$reason" ]; then
            say "PASS; left as it is: drained by someone else ($reason)"
        fi
        exit 0 ;;
    1)
        reason=$("$python" -m harness.launch.node_check "$run_dir" 2>/dev/null) ||
            reason="$prefix FAIL (causes not readable); report $report"
        say "draining: $reason"
        "$scontrol" update nodename="$node" state=drain reason="$reason"
        exit 1 ;;
    2) what="INCOMPLETE: interrupted" ;;
    3) what="INCOMPLETE: internal error of pytest or the harness" ;;
    5) what="INCOMPLETE: no test collected" ;;
    6) what="INCOMPLETE: a case the node must run did not run" ;;
    4) what="usage error: the check could not start (see above; HARNESS_NODE_CHECK_ARGS, the profile)" ;;
    7) what="could not record: the report directory or the store could not be written (fix the storage)" ;;
    *) what="harness error $status (not a verdict: is $python there?)" ;;
esac
say "$what (exit $status); node not drained; report $report"
exit 0
