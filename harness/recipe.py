"""The training recipe shared by the worker and the reference loop: optimizer, loss scaler, autocast.

SGD with momentum, as the study this harness descends from. Which SGD implementation runs
depends on the precision, because of a trap in the fused kernel:

* bf16 / fp32 need no loss scaling: the fused SGD kernel (one launch for all parameters) is used.
* fp16 needs ``GradScaler``, which must *skip* the update on steps whose gradients overflowed
  (routine in the first steps, while it finds its scale). With ``fused=True`` the scaler hands
  that decision to the kernel, and the fused SGD kernel still writes the overflowed gradient into
  the momentum buffer: the weights turn NaN a step later (seen here on H200 with torch 2.11 for
  ResNet-50/152 fp16; also reported in LibreYOLO/libreyolo#771). So fp16 uses the multi-tensor
  (foreach) SGD, and the scaler reads its overflow flag on the host once per step — a sync that
  belongs to the standard fp16 recipe, not to our measuring.
"""

from __future__ import annotations

import torch

LEARNING_RATE = 1e-3
MOMENTUM = 0.9


def autocast_dtype(precision: str) -> torch.dtype | None:
    """The autocast dtype for a precision; None means full fp32 (autocast off)."""
    return {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": None}[precision]


def make_optimizer(params, precision: str) -> torch.optim.Optimizer:
    fused = precision != "fp16"
    return torch.optim.SGD(params, lr=LEARNING_RATE, momentum=MOMENTUM, fused=fused, foreach=None if fused else True)


def make_scaler(precision: str, device: torch.device) -> torch.amp.GradScaler:
    return torch.amp.GradScaler(device.type, enabled=precision == "fp16")


def describe(precision: str) -> str:
    kind = "foreach" if precision == "fp16" else "fused"
    scaler = ", GradScaler" if precision == "fp16" else ""
    return f"SGD(lr={LEARNING_RATE}, momentum={MOMENTUM}, {kind}){scaler}"
