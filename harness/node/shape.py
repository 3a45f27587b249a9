"""Node shape: how many GPUs this node must have usable, and the check that it has them.

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

from harness.results.check import Check
from harness.node.hardware import GpuInfo, Hardware
from harness.node.presence import NvidiaPresence, normal_bus_id
from harness.results.location import Location

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
    seen = _seen_text(hw, presence)
    if not shapes:
        return ExpectedGpus(count=node, stated=False,
                            source=f"this node's GPUs ({seen}); profile {profile_name} has no [node] gpus_per_node")
    holding = [shape for shape in shapes if shape >= node]
    count = min(holding) if holding else node
    return ExpectedGpus(count=count, stated=False,
                        source=f"profile {profile_name} [node] gpus_per_node = {list(shapes)}; this node shows {seen}")


def _seen_text(hw: Hardware, presence: NvidiaPresence | None) -> str:
    nvml = f"NVML {hw.nvml_gpu_count}" if hw.nvml_gpu_count is not None else "NVML unusable"
    pci = presence.pci_gpus if presence is not None else None
    return f"{nvml}, PCI {len(pci)}" if pci is not None else f"{nvml}, PCI not readable"


def node_shape_checks(expected: ExpectedGpus | None, *, hw: Hardware, presence: NvidiaPresence | None,
                      usable: int, shapes: tuple[int, ...] | None, profile_name: str, unit: str) -> list[Check]:
    """``gpu_count`` (usable >= expected, naming what is missing), and ``node_shape`` where the node
    shows more GPUs than any shape the profile knows (not when a partial node was stated)."""
    if expected is None:
        return [Check(key="gpu_count", name="usable GPUs", kind="health", measured=float(usable), bound=None,
                      unit=unit, comparison=">=", passed=None, source="nothing stated",
                      note="cpu profile: a harness self-check on CPU ranks, not a GPU sign-off; no GPU count is "
                           "expected (state --expect-gpus N to require N ranks)")]
    passed = usable >= expected.count
    missing: tuple[Location, ...] = ()
    if passed:
        note = ""
    elif unit == "GPUs":
        missing = missing_gpus(hw, expected)
        note = missing_gpus_note(hw, presence, usable, expected)
    else:
        note = (f"this process may use {usable} CPU cores, one per rank; {expected.count} ranks expected "
                f"({expected.source})")
    checks = [Check(key="gpu_count", name="usable GPUs" if unit == "GPUs" else "usable ranks", kind="health",
                    measured=float(usable), bound=float(expected.count), unit=unit, comparison=">=", passed=passed,
                    source=expected.source, note=note, locations=missing)]
    if shapes and not expected.stated:
        node = node_gpu_count(hw, presence)
        fits = node <= max(shapes)
        checks.append(Check(key="node_shape", name="GPUs on the node", kind="health", measured=float(node),
                            bound=float(max(shapes)), unit="GPUs", comparison="<=", passed=fits,
                            source=f"profile {profile_name} [node] gpus_per_node = {list(shapes)}",
                            note="" if fits else f"this node shows {_seen_text(hw, presence)}, more than any node "
                            f"shape profile {profile_name} describes: it is not a node of this kind, or the profile "
                            "needs this shape (a published figure, docs/references.md)"))
    return checks


def missing_gpus(hw: Hardware, expected: ExpectedGpus) -> tuple[Location, ...]:
    """The GPUs the node lacks: those CUDA_VISIBLE_DEVICES hides (index and UUID), then each index of
    the expected count NVML shows no usable GPU at (NVML counts it but cannot read it, or it is absent)."""
    hidden = tuple(Location(gpu_index=gpu.index, gpu_uuid=gpu.uuid, detail="hidden by CUDA_VISIBLE_DEVICES")
                   for gpu in hw.hidden_gpus)
    known = {gpu.index for gpu in hw.gpus + hw.hidden_gpus}
    counted = hw.nvml_gpu_count or 0
    absent = tuple(Location(gpu_index=index, detail="NVML counts it but cannot read it" if index < counted
                            else "not seen by NVML")
                   for index in range(max(expected.count, counted)) if index not in known)
    return hidden + absent


def missing_gpus_note(hw: Hardware, presence: NvidiaPresence | None, usable: int, expected: ExpectedGpus) -> str:
    """What NVML sees, and which GPUs are missing: hidden, lost by NVML (on the PCI bus only), or absent."""
    parts = [f"{usable} usable, {expected.count} expected ({expected.source})"]
    if hw.nvml_gpu_count is not None:
        parts.append(f"NVML sees {hw.nvml_gpu_count} GPU(s)")
    parts.append(f"usable: {_gpu_list(hw.gpus)}" if hw.gpus else f"no GPU is usable ({hw.nvml_unavailable_reason})")
    if hw.hidden_gpus:
        parts.append(f"hidden by CUDA_VISIBLE_DEVICES={hw.cuda_visible_devices!r}: {_gpu_list(hw.hidden_gpus)}")
    unread = (hw.nvml_gpu_count or 0) - len(hw.gpus) - len(hw.hidden_gpus)
    if unread > 0:
        parts.append(f"{unread} more GPU(s) NVML counts but cannot read (run `nvidia-smi -q`, look for Xid errors)")
    known = {normal_bus_id(gpu.pci_bus_id) for gpu in hw.gpus + hw.hidden_gpus}
    pci_only = [bus for bus in (presence.pci_gpus or ()) if normal_bus_id(bus) not in known] if presence else []
    if pci_only and hw.nvml_gpu_count is not None:
        parts.append(f"on the PCI bus but not seen by NVML: {', '.join(pci_only)} (fallen off the bus, not bound "
                     "to the driver, or not given to this container)")
    absent = [location for location in missing_gpus(hw, expected) if location.gpu_uuid is None]
    for why in dict.fromkeys(location.detail for location in absent):
        indices = ", ".join(str(location.gpu_index) for location in absent if location.detail == why)
        parts.append(f"missing GPU {indices} ({why})")
    if not expected.stated:
        parts.append("to test part of a node on purpose, state it with --expect-gpus N")
    return "; ".join(parts)


def _gpu_list(gpus: tuple[GpuInfo, ...]) -> str:
    return ", ".join(f"GPU {gpu.index} {gpu.uuid} (PCI {gpu.pci_bus_id})" for gpu in gpus)
