"""The node-shape checks: ``gpu_count`` (usable GPUs against the expected count, naming each missing GPU as
data) and ``node_shape`` (a node bigger than every shape its profile knows). The expected count itself is settled
when the session starts (harness/node/shape.py)."""

from __future__ import annotations

from harness.node.hardware import GpuInfo, Hardware
from harness.node.presence import NvidiaPresence, normal_bus_id
from harness.node.shape import ExpectedGpus, node_gpu_count, seen_text
from harness.results.check import Check
from harness.results.location import Location


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
                            note="" if fits else f"this node shows {seen_text(hw, presence)}, more than any node "
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
