"""What one component launch runs: written once by the launcher (harness/kinds/components/launch.py, where
the defaults live), read once by every rank; and the result file rank 0 leaves."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from harness.files import write_json_atomic
from harness.workloads.plan import Device

COMPONENTS_RESULT_FILE = "components.json"
PARTS = ("gemm", "hbm", "host", "peer")
"""The parts a launch can run, in this order: compute first, so the GPUs are hot for the rest."""


@dataclass(frozen=True, kw_only=True, slots=True)
class GpuPlacement:
    """Where local rank ``local_rank``'s GPU sits: what the launcher read from NVML and sysfs."""

    local_rank: int
    pci_bus_id: str
    numa_node: int | None
    """None: unknown (``numa_node_note`` says why); the rank then keeps the affinity it was given."""
    numa_node_note: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ComponentSizes:
    """Problem sizes and timings of one device kind (the defaults: harness/kinds/components/launch.py)."""

    gemm_dtypes: tuple[str, ...]
    gemm_size: int
    """n of the n x n x n products."""
    gemm_warmup_seconds: float
    """Untimed products per dtype first, long enough for clocks and power to settle."""
    gemm_measure_seconds: float
    block_seconds: float
    """Timed GEMM blocks of about this length; a figure is the median of its blocks (the settled rate)."""
    hbm_bytes: int
    host_bytes: int
    peer_bytes: int
    latency_bytes: int
    bandwidth_seconds: float
    """Timed seconds per memory and host-link figure (each part, each direction)."""
    peer_seconds: float
    """Timed seconds per ordered pair: n x (n - 1) pairs must fit the quick level's minutes."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ComponentsPlan:
    device: Device
    parts: tuple[str, ...]
    sizes: ComponentSizes
    placements: tuple[GpuPlacement, ...]
    run_dir: Path
    run_id: str


def write_components_plan(path: Path, plan: ComponentsPlan) -> None:
    data = dataclasses.asdict(plan)
    data["run_dir"] = str(plan.run_dir)
    write_json_atomic(path, json.dumps({"kind": "ComponentsPlan", **data}, indent=1))


def read_components_plan(path: Path) -> ComponentsPlan:
    """The plan at ``path``; a wrong or damaged file stops the worker saying so."""
    try:
        data = json.loads(Path(path).read_text())
        if data.pop("kind", None) != "ComponentsPlan":
            raise ValueError("not a ComponentsPlan")
        sizes = ComponentSizes(**{**data["sizes"], "gemm_dtypes": tuple(data["sizes"]["gemm_dtypes"])})
        placements = tuple(GpuPlacement(**p) for p in data["placements"])
        return ComponentsPlan(**{**data, "parts": tuple(data["parts"]), "sizes": sizes, "placements": placements,
                                 "run_dir": Path(data["run_dir"])})
    except (OSError, ValueError, TypeError, KeyError) as err:
        raise SystemExit(f"{path}: not a readable ComponentsPlan ({err}); plans are written by the harness "
                         "launcher (harness/kinds/components/launch.py), not by hand") from None
