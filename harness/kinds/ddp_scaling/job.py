"""The DDP scaling kind's declaration: the weak- and strong-scaling tests at the standard level, one case per model
x precision x GPU count of the profile's matrix (params.py), its runner the session's grouped launches (runner.py).
Its figures are on the page's matrix, scaling and case sections (harness/report/sections/), which every session
with a benchmark case shows."""

from __future__ import annotations

from harness.cases import SCALINGS, CaseId
from harness.jobs.job import Job, Requirement
from harness.kinds.ddp_scaling.params import CASE_FIXTURES, session_params
from harness.kinds.ddp_scaling.runner import SECTION, ScalingRuns


def _ddp_scaling(need: Requirement) -> list[str]:
    """Every case the profile asks of the node (``Profile.asks_for``) at the GPU counts it holds, weak then
    strong."""
    profile = need.profile
    return [f"test_{scaling}_scaling[{case.test_param}]"
            for scaling in SCALINGS for count in need.gpu_counts for model in profile.models
            for precision in profile.precisions
            for case in (CaseId(model=model, precision=precision, gpus=count, scaling=scaling),)
            if profile.asks_for(case, need.native_bf16)]


GPU_COLUMNS = (("throughput_per_gpu", "throughput / GPU"), ("gpu_uniformity", "GPU uniformity"))
"""Its per-GPU figures on the page's per-GPU table: a failed check fills the cells of the GPUs it names, a passed one
every GPU's."""

DDP_SCALING = Job(name="DDP scaling", tests=("test_weak_scaling", "test_strong_scaling"), level="standard",
                  required=_ddp_scaling, narrowed_by_matrix=True, section=SECTION, runner=ScalingRuns,
                  params={CASE_FIXTURES["weak"]: lambda session: session_params(session, "weak"),
                          CASE_FIXTURES["strong"]: lambda session: session_params(session, "strong")},
                  gpu_columns=GPU_COLUMNS)
