"""The components kind's declaration: the per-GPU component tests at the quick level, one case per GPU (``cpu0``
on a CPU profile) and per ordered GPU pair, its runner the session's one component launch. Its runner writes no
section of session.json (each test's result carries its figures), and it has no page section of its own: its
figures are columns of the page's per-GPU table (``GPU_COLUMNS``), beside the other kinds' per GPU."""

from __future__ import annotations

from harness.jobs.job import Job, Requirement, gpu_id, pair_id
from harness.kinds.components.bounds import COMPONENTS_BOUNDS
from harness.kinds.components.params import CPU_RANK_ID, gpu_params, pair_params
from harness.kinds.components.runner import ComponentRuns

SECTION = "components"

PER_GPU_COMPONENT_TESTS = ("test_gemm", "test_memory_bandwidth", "test_host_link")
"""One case per GPU (``cpu0`` on a CPU profile: GEMM and memory only)."""


def _components(need: Requirement) -> list[str]:
    components = need.profile.table(COMPONENTS_BOUNDS)
    if components is None:
        return []
    if not need.on_gpus:
        return [f"{test}[{CPU_RANK_ID}]" for test in PER_GPU_COMPONENT_TESTS[:2]]
    gpus = range(need.expected_gpus)
    names = [f"{test}[{gpu_id(index)}]" for test in PER_GPU_COMPONENT_TESTS for index in gpus]
    # Peer copies are required only where the profile bounds them; the all-reduce's bound judges the links.
    if components.min_peer_gbps is not None or components.max_peer_latency_us is not None:
        names += [f"test_peer_copy[{pair_id(a, b)}]" for a in gpus for b in gpus if a != b]
    return names


GPU_COLUMNS = (
    ("gemm_bf16", "GEMM bf16"), ("gemm_fp16", "GEMM fp16"), ("gemm_tf32", "GEMM tf32"), ("gemm_fp32", "GEMM fp32"),
    ("hbm_copy", "HBM copy"), ("hbm_rmw", "HBM RMW"), ("h2d_alone", "H2D"), ("d2h_alone", "D2H"),
    ("peer_bandwidth", "peer min"),
)
"""Its figures on the page's per-GPU table; a pair's peer copy counts for both its GPUs (the lowest one shown)."""

COMPONENTS = Job(name="components", tests=(*PER_GPU_COMPONENT_TESTS, "test_peer_copy"), level="quick",
                 required=_components, section=SECTION, runner=ComponentRuns,
                 params={"component_gpu": lambda session: gpu_params(session.ctx),
                         "gpu_pair": lambda session: pair_params(session.ctx)},
                 gpu_columns=GPU_COLUMNS, bounds=COMPONENTS_BOUNDS)
