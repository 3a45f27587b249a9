"""Is each part of each GPU as fast as on a healthy node? Component checks, one test id per GPU (or pair).

One launch of harness.kinds.components.worker (every GPU at once, one process each) measures dense
GEMM TFLOP/s (bf16, fp16, tf32; fp32 on a CPU profile), memory bandwidth (copy, read-modify-write),
pinned host<->GPU bandwidth both ways (each GPU alone and all at once, bound to its NUMA node) and
rank 0 the GPU<->GPU copy matrix; each test judges its GPU's (pair's) figures against
``[components]`` of the profile. A bound the profile lacks is not evaluated, and the test is then
skipped saying so: never passed. docs/components.md.
"""

import pytest

from harness.plugin.cases import NO_GPU
from harness.kinds.components.runner import assert_evaluated


def test_gemm(harness, component_gpu):
    """Settled dense GEMM TFLOP/s per dtype >= [components] min_gemm_tflops; no thermal throttling."""
    assert_evaluated(harness.keep(harness.runner("components").gemm(component_gpu)))


def test_memory_bandwidth(harness, component_gpu):
    """Device-to-device copy and read-modify-write GB/s >= min_hbm_copy_gbps / min_hbm_rmw_gbps."""
    assert_evaluated(harness.keep(harness.runner("components").hbm(component_gpu)))


def test_host_link(harness, component_gpu):
    """Pinned host->GPU and GPU->host GB/s, alone and all at once, on the GPU's NUMA node."""
    if harness.profile.hardware.device != "cuda":
        pytest.skip(f"not applicable: {NO_GPU}")
    assert_evaluated(harness.keep(harness.runner("components").host_link(component_gpu)))


def test_peer_copy(harness, gpu_pair):
    """GPU->GPU copy GB/s >= min_peer_gbps and 4-byte copy time <= max_peer_latency_us, every ordered pair."""
    assert_evaluated(harness.keep(harness.runner("components").peer(*gpu_pair)))
