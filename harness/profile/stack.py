"""Is this run on the software stack the profile's bounds were measured on?

A profile records its stack (``[stack]``: torch, CUDA, NCCL, driver). A session on another stack is
not a node fault, so it fails nothing; but a throughput bound measured on torch 2.11 says less about
a run on torch 2.14, so the verdict header, session.json and the report say so, side by side.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.node.hardware import Hardware
from harness.profile.bounds import MeasuredStack

STACK_PARTS = (("torch", "torch", "torch_version"), ("cuda", "CUDA", "cuda_runtime_version"),
               ("nccl", "NCCL", "nccl_version"), ("driver", "driver", "driver_version"))
"""(``[stack]`` key, the name shown, the ``Hardware`` field holding this run's value)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class StackComparison:
    measured_on: dict[str, str]
    """``[stack]`` key -> the version the profile was measured on (only the keys it records)."""
    this_run: dict[str, str | None]
    """The same keys -> this run's version (None: not known here, e.g. no driver on a CPU run)."""
    differs: tuple[str, ...]
    """The keys whose versions differ."""

    @property
    def same(self) -> bool:
        return not self.differs

    def describe(self) -> str:
        """``profile measured on torch 2.11.0+cu130 / NCCL 2.28.9; this run torch 2.14.1 / NCCL 2.27.5``."""
        names = {key: shown for key, shown, _ in STACK_PARTS}
        keys = self.differs or tuple(self.measured_on)
        then = " / ".join(f"{names[k]} {self.measured_on[k]}" for k in keys)
        now = " / ".join(f"{names[k]} {self.this_run[k] or 'unknown'}" for k in keys)
        if self.same:
            return f"same software stack as the profile was measured on ({then})"
        return f"profile measured on {then}; this run {now}"

    def to_dict(self) -> dict:
        return {"measured_on": dict(self.measured_on), "this_run": dict(self.this_run),
                "differs": list(self.differs), "text": self.describe()}


def compare_stack(stack: MeasuredStack | None, hardware: Hardware) -> StackComparison | None:
    """This run's versions against the profile's ``[stack]``; None when the profile records none."""
    if stack is None:
        return None
    measured_on = {key: getattr(stack, key) for key, _, _ in STACK_PARTS if getattr(stack, key) is not None}
    if not measured_on:
        return None
    this_run = {key: getattr(hardware, field) for key, _, field in STACK_PARTS if key in measured_on}
    differs = tuple(key for key in measured_on if this_run[key] != measured_on[key])
    return StackComparison(measured_on=measured_on, this_run=this_run, differs=differs)
