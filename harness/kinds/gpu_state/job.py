"""The GPU-state kind's declaration: one test per GPU the node should have (per node and GPU in a multi-node
session), at the quick level, run last (its end snapshot follows all the session's load); its runner judges what
the session's GPU-state watch read (runner.py; the watch, harness/plugin/gpu_state.py, serves every kind)."""

from __future__ import annotations

from harness.jobs.job import Job, Requirement, gpu_id, node_gpu_id
from harness.kinds.gpu_state.bounds import GPU_STATE_BOUNDS
from harness.kinds.gpu_state.params import GPU_STATE_FIXTURE, gpu_state_params
from harness.kinds.gpu_state.runner import SECTION, GpuStateChecks


def _gpu_state(need: Requirement) -> list[str]:
    gpus = range(need.expected_gpus)
    if not need.on_gpus:
        return []
    if not need.nodes:
        return [f"test_gpu_state[{gpu_id(index)}]" for index in gpus]
    return [f"test_gpu_state[{node_gpu_id(node, index)}]" for node in need.nodes for index in gpus]


GPU_COLUMNS = (("power_limit", "power limit"), ("clocks", "clocks"), ("ecc_mode", "ECC mode"),
               ("remapped_rows", "remapped rows"), ("xid_events", "XID events"))
"""Its checks shown per GPU on the page's per-GPU table."""

GPU_STATE = Job(name="GPU state", tests=("test_gpu_state",), level="quick", required=_gpu_state,
                missing_hint=" (a GPU the node should have is not visible)", order="last", section=SECTION,
                runner=GpuStateChecks, gpu_columns=GPU_COLUMNS, bounds=GPU_STATE_BOUNDS,
                params={GPU_STATE_FIXTURE: lambda session: gpu_state_params(session.ctx, session.gpu_state.remote)})
