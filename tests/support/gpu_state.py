"""The GPU-state kind judging what a session's GPU-state watch read, as the session's runner does."""

from __future__ import annotations

from typing import Any

from harness.kinds.gpu_state.runner import GpuStateChecks
from harness.plugin.gpu_state import GpuStateWatcher
from harness.plugin.results import CheckedResult


def check_gpu(watch: GpuStateWatcher, target: Any, nvml: Any = None) -> CheckedResult:
    """The GPU-state test's result of ``target`` (an index or a NodeGpu), judged from ``watch``."""
    return GpuStateChecks(ctx=watch.ctx, watch=watch).check(target, nvml=nvml)
