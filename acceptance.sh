#!/usr/bin/env bash
# The sign-off run with the harness's own exit code and last line (docs/verdicts.md, "Exit codes").
# `make acceptance` runs this script, but GNU make turns every failing code into 2 and prints its own
# error line last; call this script directly where the code matters (a Slurm prolog, CI, a script).
#
#   ./acceptance.sh [--harness-level quick|standard|long] [pytest arguments, e.g. --models resnet50 -x]
#
# First use: makes the virtual environment ($VENV, default .venv) with `make venv`, which says what it
# installs before it starts. Exit status: the verdict's (0 PASS, 1 FAIL, 2/3/5/6 INCOMPLETE, 4 usage
# error, 7 could not record); 4 when the environment cannot be made.
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 4
cd "$here" || exit 4
venv=${VENV:-.venv}
if [ -z "${HARNESS_VENV_READY:-}" ]; then
    make --no-print-directory -s venv VENV="$venv" || {
        echo "acceptance.sh: could not make the virtual environment $venv (see above); fix that, or run \`make clean-venv\` and retry" >&2
        exit 4
    }
fi
if [ ! -x "$venv/bin/python" ]; then
    echo "acceptance.sh: no Python at $here/$venv/bin/python; run \`make venv\`" >&2
    exit 4
fi
# exec: the harness's exit code and its last line ("harness: PASS — …") are this script's.
exec "$venv/bin/python" -m pytest acceptance "$@"
