"""The node-shape test's session side: the GPUs this node can use against the GPUs it must have.

The expected count was settled at session start (``SessionContext.expected_gpus``, the rules in
harness/node/shape.py); here it meets what detection found. Cases needing more GPUs than are usable are skipped as
before; this result is what fails, naming what NVML sees and what is missing. In a multi-node session it also holds
``remote_gpu_count`` and ``remote_gpu_model``: the other nodes' GPUs, as their GPU-state probes showed them at
session start (plugin/remote_gpu_state.py), against the same expected count and the driver's GPU model. The test
reaches it as ``harness.runner("node_shape")``.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.jobs.job import KindRunner
from harness.kinds.node_shape.checks import node_shape_checks
from harness.node.shape import ExpectedGpus
from harness.plugin.context import SessionContext
from harness.plugin.remote_gpu_state import RemoteGpuState
from harness.plugin.results import CheckedResult


@dataclass(kw_only=True)
class NodeShapeRuns(KindRunner):
    ctx: SessionContext

    def check(self, remote: RemoteGpuState | None = None) -> CheckedResult:
        """The node's shape judged; ``remote``: the other nodes' GPU-state probes of a multi-node session."""
        ctx = self.ctx
        expected = None
        if ctx.expected_gpus is not None:
            expected = ExpectedGpus(count=ctx.expected_gpus, source=ctx.expected_gpus_source or "",
                                    stated=ctx.expected_gpus_stated)
        shapes = ctx.profile.node.gpus_per_node if ctx.profile.node is not None else None
        unit = "GPUs" if ctx.device == "cuda" else "ranks"
        checks = node_shape_checks(expected, hw=ctx.hardware, presence=ctx.nvidia_presence,
                                   usable=ctx.available_gpus, shapes=shapes, profile_name=ctx.profile.name, unit=unit)
        if remote is not None:
            checks += [remote.gpu_count_check(ctx.expected_gpus_source or "this node's usable GPUs"),
                       remote.gpu_model_check(ctx.hardware.gpu_names, ctx.profile.name)]
        hw = ctx.hardware
        data = {"expected_gpus": ctx.expected_gpus, "expected_gpus_source": ctx.expected_gpus_source,
                "expected_gpus_stated": ctx.expected_gpus_stated, "usable": ctx.available_gpus,
                "nvml_gpu_count": hw.nvml_gpu_count, "cuda_visible_devices": hw.cuda_visible_devices,
                "gpus": [{"index": gpu.index, "uuid": gpu.uuid, "pci_bus_id": gpu.pci_bus_id} for gpu in hw.gpus],
                "hidden_gpus": [{"index": gpu.index, "uuid": gpu.uuid, "pci_bus_id": gpu.pci_bus_id}
                                for gpu in hw.hidden_gpus],
                "nvidia_presence": ctx.nvidia_presence.to_dict() if ctx.nvidia_presence is not None else None,
                **({"other_nodes": {node: remote.start.get(node, {}).get("gpus") for node in remote.nodes}}
                   if remote is not None else {})}
        return CheckedResult(name="node shape", context=f"{ctx.profile.name}, {hw.hostname}", checks=checks,
                             bounds=ctx.profile.node.to_dict() if ctx.profile.node is not None else None, data=data)
