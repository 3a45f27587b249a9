#!/usr/bin/env bash
# Default acceptance sessions on a lent GPU machine, their data packed for docs/data (the device tool's
# $OUT comes back here). Run from the repository root there, with the wheels of pytest-json-report and
# pytest-metadata in .whl/ (the device README says how to carry them):
#
#     bash benchmarks/device_sessions.sh NAME TIMES [pytest arguments...]
#
# NAME names the sessions' folder and tarball; TIMES sessions run back to back through
# benchmarks/signoff_time.py (its summary, per-phase time and per-case CIs go to $OUT/NAME.txt).
set -u
name=$1; times=$2; shift 2
out=${OUT:-/tmp/out}
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 3
export PYTHONPATH=/tmp/site:$PWD
# NVLink multicast stays off on the lent machines (the device README says why).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
{ nvidia-smi --query-gpu=index,name,uuid,power.limit,clocks.max.sm --format=csv; nvidia-smi topo -m; } \
    > "$out/$name-gpus.txt" 2>&1
python3 benchmarks/signoff_time.py --times "$times" --report-dir "/tmp/sessions/$name" -- "$@" > "$out/$name.txt" 2>&1
status=$?
# The sessions' records, verdicts and reports; rank logs only of launches that failed (they are large).
tar czf "$out/$name.tgz" --exclude='*/logs/*/rank*.log' --exclude='*.sqlite*' \
    --exclude='history.sqlite.d' -C /tmp/sessions "$name" 2>/dev/null
tail -n 60 "$out/$name.txt"
exit $status
