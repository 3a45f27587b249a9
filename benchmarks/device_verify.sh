#!/usr/bin/env bash
# One lent multi-GPU machine, the checks of issues 27 and 28 in one call: a default session against
# the fitted profile (a host the bounds were not fitted on), the quick level on the whole node and
# with GPU 3 hidden, a partial interconnect degradation (one NCCL channel) on the BERT cases, and a
# bare DDP loop beside the session's figures. Run from the repository root there, the wheels of
# pytest-json-report and pytest-metadata in .whl/:   bash benchmarks/device_verify.sh
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out" /tmp/v
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 3
export PYTHONPATH=/tmp/site:$PWD
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=index,name,uuid,power.limit --format=csv > "$out/gpus.txt" 2>&1
session() {  # NAME, then pytest arguments: the session's last lines and its wall time into NAME.txt
    local name=$1; shift
    local start=$SECONDS
    python3 -m pytest -p harness.plugin acceptance -q -rfEs --harness-report-dir "/tmp/v/$name" "$@" \
        > "/tmp/v/$name.log" 2>&1
    local status=$?
    { echo "== $name: exit $status, $((SECONDS - start)) s wall"; grep -E "^(FAILED|harness: (PASS|FAIL|INCOMPLETE|failed|did not run|NOT JUDGED))| passed| failed" "/tmp/v/$name.log" | tail -n 25; } \
        | tee -a "$out/verify.txt"
    # Each session's records and verdicts come back even when a later step runs past the call's limit.
    tar czf "$out/$name.tgz" -C /tmp/v "$name" --exclude='*/logs/*/rank*.log' --exclude='*.sqlite*' \
        --exclude='history.sqlite.d' 2>/dev/null
}
session default -k "not soak"
CUDA_VISIBLE_DEVICES=0,1,2 session hidden-gpu3 --harness-level quick
session quick --harness-level quick
NCCL_MAX_NCHANNELS=1 session one-nccl-channel -k "weak_scaling and bert_large"
torchrun --standalone --nproc-per-node=4 benchmarks/reference_loop.py --configs resnet50:bf16:256 \
    bert_large:bf16:128 --seconds 5 --output /tmp/v/reference-4gpu.json > /tmp/v/reference.log 2>&1
{ echo "== bare DDP loop, 4 GPUs"; cat /tmp/v/reference-4gpu.json; } >> "$out/verify.txt" 2>&1
tail -n 80 "$out/verify.txt"
