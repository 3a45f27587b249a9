#!/usr/bin/env bash
# Slurm Prolog / Epilog: the quick acceptance level on this node, draining it on anything but PASS
# (docs/slurm.md). In slurm.conf:
#
#   Prolog=/opt/gpu-acceptance-harness/slurm/node-check.sh      (before each job: exclusive nodes)
#   Epilog=/opt/gpu-acceptance-harness/slurm/node-check.sh      (after each job)
#
# or nightly from cron / a HealthCheckProgram wrapper. The quick level runs node shape, GPU state,
# GEMM, memory, host<->GPU and peer bandwidth and topology (under 2 minutes on 8 GPUs).
#
# Environment (all optional):
#   HARNESS_HOME        the installed checkout (default: this script's directory's parent)
#   HARNESS_PYTHON      its Python (default: $HARNESS_HOME/.venv/bin/python)
#   HARNESS_REPORT_DIR  where reports/<run-id>/ goes (default: /var/lib/gpu-acceptance/reports)
#   HARNESS_SCONTROL    the scontrol command (default: scontrol)
#   HARNESS_NODE_CHECK_ARGS  extra pytest arguments, e.g. "--hardware h100-80gb"
#
# Exit status: 0 when the node passed; otherwise the node is drained with the reason and the
# report's path, and the script exits 1 (a failing Prolog also makes Slurm requeue the job).
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
home=${HARNESS_HOME:-$(dirname "$here")}
python=${HARNESS_PYTHON:-$home/.venv/bin/python}
report_dir=${HARNESS_REPORT_DIR:-/var/lib/gpu-acceptance/reports}
scontrol=${HARNESS_SCONTROL:-scontrol}
node=${SLURMD_NODENAME:-$(hostname -s)}

mkdir -p "$report_dir" || { echo "node-check: cannot make $report_dir" >&2; }
# The check judges this node alone: the job's allocation (a Prolog sees the job's environment)
# must not turn it into a multi-node session.
cd "$home" || exit 1
# shellcheck disable=SC2086  # HARNESS_NODE_CHECK_ARGS is a list of words
env -u SLURM_JOB_ID -u SLURM_JOBID -u SLURM_JOB_NODELIST -u SLURM_NODELIST \
    "$python" -m pytest acceptance --harness-level quick --harness-report-dir "$report_dir" -q \
    ${HARNESS_NODE_CHECK_ARGS:-}
status=$?
if [ "$status" -eq 0 ]; then
    exit 0
fi
case $status in
    1) what="FAIL" ;;
    2) what="interrupted" ;;
    4) what="could not start (usage error: see the log)" ;;
    5) what="no test collected" ;;
    *) what="harness error $status" ;;
esac
reason="gpu-acceptance quick: $what; report $report_dir/latest/report.html"
echo "node-check: draining $node: $reason" >&2
"$scontrol" update nodename="$node" state=drain reason="$reason"
exit 1
