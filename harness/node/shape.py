"""Node shape: how many GPUs this node must have usable, settled when the session starts (the check that it has
them is the node-shape kind's, harness/kinds/node_shape/checks.py).

The expected count, first rule that applies (docs/usage.md, "Node shape"):

1. ``--expect-gpus N``: the user states the node (or the part of it under test).
2. The Slurm allocation's GPUs on this node (``SLURM_GPUS_ON_NODE``, else what the job asked for:
   ``SLURM_GPUS_PER_NODE``, ``SLURM_JOB_GPUS`` / ``SLURM_STEP_GPUS``): the scheduler states a partial node.
3. Nothing stated: the node's own GPU count, the larger of what NVML counts (hidden GPUs included)
   and the NVIDIA GPUs on the PCI bus (a GPU NVML lost still sits there), raised to the smallest
   of the profile's ``[node] gpus_per_node`` shapes that holds it: a node of 7 GPUs under a profile
   of 8-GPU nodes is an 8-GPU node missing one. Without a ``[node]`` section the count itself.

GPUs that ``CUDA_VISIBLE_DEVICES`` hides are therefore missing unless a partial node was stated.
On the cpu profile only ``--expect-gpus`` is checked (against the CPU ranks this host can run);
without one the check is not evaluated, saying why: a CPU session is a harness self-check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Mapping

from harness.node.hardware import Hardware
from harness.node.presence import NvidiaPresence

SLURM_GPU_VARIABLES = ("SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "SLURM_GPUS")
"""Where harness/launch/slurm.py reads a job's GPUs per node from, in its order; named in the check's source."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ExpectedGpus:
    count: int
    """GPUs (CPU ranks on the cpu profile) that must be usable."""
    source: str
    """Where the count came from, as the check's source says it."""
    stated: bool
    """Stated by the user or the scheduler (a partial node may be meant), not inferred from the node."""


def node_gpu_count(hw: Hardware, presence: NvidiaPresence | None) -> int:
    """The GPUs this node shows: NVML's count (hidden ones included) or the PCI bus's, the larger."""
    pci = len(presence.pci_gpus or ()) if presence is not None else 0
    return max(hw.nvml_gpu_count or 0, hw.gpu_count, pci)


def expected_gpus(*, device: Literal["cuda", "cpu"], stated: int | None, slurm_gpus: int | None,
                  env: Mapping[str, str], hw: Hardware, presence: NvidiaPresence | None,
                  shapes: tuple[int, ...] | None, profile_name: str) -> ExpectedGpus | None:
    """The count the node-shape check holds the usable GPUs to; None: nothing to hold them to (cpu)."""
    if stated is not None:
        return ExpectedGpus(count=stated, source=f"--expect-gpus {stated}", stated=True)
    if device == "cpu":
        return None  # CPU ranks: only a stated count means anything (Slurm's GPUs are not ranks)
    if slurm_gpus:
        variable = next((name for name in SLURM_GPU_VARIABLES if env.get(name)), "the Slurm job")
        source = f"the Slurm allocation: {slurm_gpus} GPUs on this node ({variable}={env.get(variable)})"
        return ExpectedGpus(count=slurm_gpus, stated=True, source=source)
    node = node_gpu_count(hw, presence)
    seen = seen_text(hw, presence)
    if not shapes:
        return ExpectedGpus(count=node, stated=False,
                            source=f"this node's GPUs ({seen}); profile {profile_name} has no [node] gpus_per_node")
    holding = [shape for shape in shapes if shape >= node]
    count = min(holding) if holding else node
    return ExpectedGpus(count=count, stated=False,
                        source=f"profile {profile_name} [node] gpus_per_node = {list(shapes)}; this node shows {seen}")


def seen_text(hw: Hardware, presence: NvidiaPresence | None) -> str:
    """What NVML and the PCI bus show: ``NVML 4, PCI 4``."""
    nvml = f"NVML {hw.nvml_gpu_count}" if hw.nvml_gpu_count is not None else "NVML unusable"
    pci = presence.pci_gpus if presence is not None else None
    return f"{nvml}, PCI {len(pci)}" if pci is not None else f"{nvml}, PCI not readable"
