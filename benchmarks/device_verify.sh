#!/usr/bin/env bash
# One lent multi-GPU machine, the checks of issues 27 and 28 in one call. Run from the repository root
# there, the wheels of pytest-json-report and pytest-metadata in .whl/:
#
#     bash benchmarks/device_verify.sh [STEP...]
#
# Steps, in the order given (default: default hidden-gpu3 quick one-nccl-channel reference):
#   default            the default session against the shipped profile (a host the bounds were not fitted on)
#   default2, default3 the same again (a second and third session on this host)
#   default-off        the default session with --harness-prestart off (every launch starts at its turn): the
#                      layout before issue 28's early start, for a same-host comparison
#   settle-doubled     the DDP cases again with every settle time doubled (--harness-warmup-seconds SETTLE_DOUBLED_S,
#                      default 4: twice h200's 2 s; give 6 for h100-80gb's 3 s; a hot case's quarter doubles with it):
#                      run after `default` on the same host, `harness compare` of the two shows whether any case's
#                      figure moved beyond its noise (issue 28 item 2: warm-up proven settled, on >= 2 hosts)
#   fresh-jit-cache    the default session with an empty CUDA JIT cache (CUDA_CACHE_PATH a new directory), run after
#                      a first session: if its cold warm-ups come back to a fresh machine's (ResNet-50 1-GPU ~14 s
#                      against ~7 s), the first session's extra ~20 s is kernel compilation, not the page cache
#   quick, quick2, quick3  the quick level on the whole node (issue 28 times three sessions)
#   hidden-gpu3        the quick level with GPU 3 hidden (the missing GPU must be named)
#   one-nccl-channel   the all-reduce tests with NCCL_MAX_NCHANNELS=1 (a partial interconnect degradation)
#   nccl-channels      the all-reduce tests with NCCL_MAX_NCHANNELS=16, 8 and 4 (milder degradations: where does the
#                      2 % all-reduce floor begin to fail?), one session each
#   reference          a bare DDP loop on every GPU (benchmarks/reference_loop.py), beside the sessions' figures
#   selftest           harness selftest --rows foreign_load,hidden_gpu (the headline must name the GPU)
#   soak               the soak alone, with the node-shape and GPU-state tests, for SOAK_DURATION (default 2m): the
#                      burn-in's launch, windows and decay check on every GPU
#   host-confirm       the host-link tests against a copy of the profiles whose GPU-to-host floor is 80 GB/s (a
#                      healthy link reads ~55: a miss in doubt), so the confirm-before-FAIL path runs on the GPUs:
#                      two re-measures of the host-link part alone, then "FAIL, confirmed 2 of 2"
#   calibration, calibration2, calibration3
#                      a default session with --harness-calibration: measurements for `harness calibrate-fit`
#                      (no confirm-before-FAIL; a window that never settled re-measured; the all-reduce measured
#                      where the profile has no bound yet); never a sign-off
# Each step's records come back as $OUT/STEP.tgz and its last lines in $OUT/verify.txt.
# SESSION_LIMIT_S=N interrupts a session after N s (SIGINT: the harness writes what it measured), so that a
# session which runs past what is left of the call still returns its records (2026-11-27: a default session
# cut by the call's own limit returned nothing).
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out" /tmp/v
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 3
export PYTHONPATH=/tmp/site:$PWD
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
{ nvidia-smi --query-gpu=index,name,uuid,power.limit,clocks.max.sm --format=csv; nvidia-smi topo -m; } \
    > "$out/gpus.txt" 2>&1
gpus=$(nvidia-smi -L | wc -l)
session() {  # NAME, then pytest arguments: the session's last lines and its wall time into NAME.txt
    local name=$1; shift
    local start=$SECONDS
    timeout --signal=INT --kill-after=30 "${SESSION_LIMIT_S:-86400}" \
        python3 -m pytest -p harness.plugin acceptance -q -rfEs --harness-report-dir "/tmp/v/$name" "$@" \
        > "/tmp/v/$name.log" 2>&1
    local status=$?
    { echo "== $name: exit $status, $((SECONDS - start)) s wall"; grep -E "^(FAILED|harness: (PASS|FAIL|INCOMPLETE|failed|did not run|NOT JUDGED|time))| passed| failed" "/tmp/v/$name.log" | tail -n 25; } \
        | tee -a "$out/verify.txt"
    # Each session's records and verdicts come back even when a later step runs past the call's limit.
    tar czf "$out/$name.tgz" --exclude='*/logs/*/rank*.log' --exclude='*.sqlite*' \
        --exclude='history.sqlite.d' -C /tmp/v "$name" 2>/dev/null
}
[ $# -gt 0 ] || set -- default hidden-gpu3 quick one-nccl-channel reference
for step in "$@"; do
    case $step in
        default|default2|default3) session "$step" -k "not soak" ;;
        default-off) session "$step" -k "not soak" --harness-prestart off ;;
        settle-doubled) session "$step" -k "scaling" --harness-warmup-seconds "${SETTLE_DOUBLED_S:-4}"
            first=$(ls -d /tmp/v/default/2* 2>/dev/null | head -1); second=$(ls -d /tmp/v/settle-doubled/2* | head -1)
            [ -n "$first" ] && python3 -m harness compare "$first" "$second" > "$out/settle-compare.txt" 2>&1 ;;
        fresh-jit-cache) CUDA_CACHE_PATH=$(mktemp -d /tmp/v/jit-cache.XXXX) session "$step" -k "not soak" ;;
        calibration|calibration2|calibration3) session "$step" -k "not soak" --harness-calibration ;;
        quick|quick2|quick3) session "$step" --harness-level quick ;;
        hidden-gpu3) CUDA_VISIBLE_DEVICES=0,1,2 session hidden-gpu3 --harness-level quick ;;
        one-nccl-channel) NCCL_MAX_NCHANNELS=1 session one-nccl-channel -k allreduce ;;
        nccl-channels) for n in 16 8 4; do NCCL_MAX_NCHANNELS=$n session "nccl-channels-$n" -k allreduce; done ;;
        host-confirm)
            mkdir -p /tmp/th && cp thresholds/*.toml /tmp/th/ && sed -i 's/^min_d2h_gbps = .*/min_d2h_gbps = 80.0/' /tmp/th/*.toml
            session host-confirm -k host_link --harness-thresholds-dir /tmp/th ;;
        reference)
            torchrun --standalone --nproc-per-node="$gpus" benchmarks/reference_loop.py \
                --configs resnet50:bf16:256 bert_large:bf16:128 --seconds 5 --output /tmp/v/reference.json \
                > /tmp/v/reference.log 2>&1
            { echo "== bare DDP loop, $gpus GPUs"; cat /tmp/v/reference.json; } >> "$out/verify.txt" 2>&1 ;;
        soak) session soak -k "soak or node_shape or gpu_state" --soak "${SOAK_DURATION:-2m}" ;;
        selftest)
            start=$SECONDS
            python3 -m harness selftest --rows foreign_load,hidden_gpu > /tmp/v/selftest.log 2>&1
            { echo "== selftest: exit $?, $((SECONDS - start)) s wall"; tail -n 30 /tmp/v/selftest.log; } >> "$out/verify.txt"
            tar czf "$out/selftest.tgz" --exclude='*/logs/*/rank*.log' --exclude='*.sqlite*' \
                --exclude='history.sqlite.d' reports/selftest-* /tmp/v/selftest.log 2>/dev/null ;;
        *) echo "unknown step $step" >&2; exit 2 ;;
    esac
done
tail -n 80 "$out/verify.txt"
