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


def build_ddp(spec, device: torch.device):
    """The model of ``spec`` on ``device`` (channels_last for CNNs), wrapped in DDP.

    The process group must exist. Gradients alias DDP's all-reduce buckets
    (``gradient_as_bucket_view``): one copy fewer per step, as large jobs run.
    """
    from torch.nn.parallel import DistributedDataParallel

    model = spec.build().to(device)
    if spec.channels_last:
        model = model.to(memory_format=torch.channels_last)
    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None,
                                   gradient_as_bucket_view=True)


class TrainStep:
    """One training step of the recipe on a fixed synthetic batch: autocast forward, (scaled)
    backward, optimizer step. No host sync of its own (but fp16's GradScaler skip check).

    ``model`` is what runs the forward (the DDP module, or torch.compile of it); ``parameters``
    are the DDP module's.
    """

    def __init__(self, model, parameters, spec, precision: str, device: torch.device, batch_size: int):
        self.model = model
        self.spec = spec
        self.optimizer = make_optimizer(parameters, precision)
        self.scaler = make_scaler(precision, device)
        self.amp_dtype = autocast_dtype(precision)
        self.device_type = device.type
        self.inputs, self.targets = spec.synthetic_batch(batch_size, device)

    def forward_backward(self, poison: bool = False) -> torch.Tensor:
        """Forward and backward only (the straggler probe runs this under DDP's no_sync)."""
        with torch.autocast(self.device_type, dtype=self.amp_dtype or torch.float32, enabled=self.amp_dtype is not None):
            loss = self.spec.loss(self.model(self.inputs), self.targets)
        if poison:
            loss = loss * float("nan")  # fault injection (harness/workloads/faults.py): the sanity check must catch it
        self.scaler.scale(loss).backward()
        return loss.detach()

    def __call__(self, poison: bool = False) -> torch.Tensor:
        loss = self.forward_backward(poison)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        return loss
