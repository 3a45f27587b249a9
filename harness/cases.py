"""One case's identity: model × precision × GPUs per node × nodes × scaling.

Every place that names a case takes it from here: the plugin's test parameters
(``resnet50-bf16-4gpu``), the launcher's run ids and log directories, ``runs/<key>.json``, the
report and ``harness compare`` (``resnet50-bf16-weak-4gpu``). The report reads a case back from
its ``to_dict()`` in session.json and report.json, never by parsing an id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

Scaling = Literal["weak", "strong"]
SCALINGS: tuple[Scaling, ...] = ("weak", "strong")


@dataclass(frozen=True, kw_only=True, slots=True)
class CaseId:
    model: str
    """Key of the model catalog (harness.catalog)."""
    precision: str
    """fp32, fp16 or bf16."""
    gpus: int
    """GPUs per node."""
    scaling: Scaling = "weak"
    nodes: int = 1

    def __post_init__(self) -> None:
        if self.scaling not in SCALINGS:
            raise ValueError(f"scaling must be one of {', '.join(SCALINGS)}, not {self.scaling!r}")
        if self.gpus < 1 or self.nodes < 1:
            raise ValueError(f"gpus and nodes must be >= 1, not gpus={self.gpus} nodes={self.nodes}")

    @property
    def world_size(self) -> int:
        return self.gpus * self.nodes

    def one_gpu(self) -> CaseId:
        """The same model, precision and scaling on one GPU of one node: this case's baseline."""
        return CaseId(model=self.model, precision=self.precision, gpus=1, scaling=self.scaling)

    @property
    def gpu_label(self) -> str:
        """``4gpu``, or ``2x4gpu`` for 2 nodes of 4 GPUs."""
        return f"{self.nodes}x{self.gpus}gpu" if self.nodes > 1 else f"{self.gpus}gpu"

    @property
    def test_param(self) -> str:
        """The pytest parameter id (the scaling is in the test's name): ``resnet50-bf16-4gpu``."""
        return f"{self.model}-{self.precision}-{self.gpu_label}"

    @property
    def key(self) -> str:
        """Unique within a session: run ids, log directories, ``runs/<key>.json``, compare."""
        return f"{self.model}-{self.precision}-{self.scaling}-{self.gpu_label}"

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "model": self.model, "precision": self.precision, "gpus": self.gpus,
                "nodes": self.nodes, "world_size": self.world_size, "scaling": self.scaling}

    @classmethod
    def from_dict(cls, data: Any) -> CaseId | None:
        """The case written by ``to_dict``; None for anything else (a damaged or foreign file)."""
        if not isinstance(data, dict):
            return None
        try:
            return cls(model=str(data["model"]), precision=str(data["precision"]), gpus=int(data["gpus"]),
                       scaling=data.get("scaling", "weak"), nodes=int(data.get("nodes", 1)))
        except (KeyError, TypeError, ValueError, OverflowError):  # OverflowError: int(float('inf'))
            return None


# --- a re-measure's run label (confirm before a FAIL; a calibration session's unsettled window) ------------------

def remeasure_label(case_label: str, attempt: int, *, reference_for_gpus: int | None = None) -> str:
    """The run label of re-measure ``attempt`` of a case (``<case>-confirmN``), or of the 1-GPU reference measured with
    it for a case of ``reference_for_gpus`` GPUs (``<reference case>-confirmN-for-Ggpu``). Written by the launcher
    (harness/kinds/ddp_scaling/launcher.py), read back by ``remeasure_of``: a fit pairs each re-measure with its
    reference."""
    label = f"{case_label}-confirm{attempt}"
    return label if reference_for_gpus is None else f"{label}-for-{reference_for_gpus}gpu"


_REMEASURE = re.compile(r"-confirm(?P<attempt>[0-9]+)(?:-for-(?P<gpus>[0-9]+)gpu)?$")


def remeasure_of(run_id: str) -> tuple[int, int | None] | None:
    """(attempt, the GPU count of the case it is the reference of, or None) of a run labelled by ``remeasure_label``
    (a run id ends with its label); None for a first attempt."""
    found = _REMEASURE.search(run_id)
    if found is None:
        return None
    return int(found["attempt"]), int(found["gpus"]) if found["gpus"] else None
