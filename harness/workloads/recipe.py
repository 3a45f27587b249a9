"""The training recipe shared by the worker and the reference loop: optimizer, loss scaler, autocast.

SGD with momentum, as the study this harness descends from, through the fused kernel (one launch
for all parameters) at every precision. fp16 adds ``GradScaler``, which must *skip* the update on
steps whose gradients overflowed (routine in the first steps, while it finds its scale). With a
fused optimizer the scaler hands the skip to the kernel (``found_inf`` stays on the device), so the
step never waits on the host; the foreach/for-loop path instead reads the overflow flag on the
host every step (``found_inf.item()``), which made fp16 figures follow the host's CPU and launch
latency.

The trap, and why the buffers are made here: on its first step, torch's ``_fused_sgd`` allocates
every momentum buffer with ``torch.empty_like`` and keeps them in the optimizer state even when
the kernel skips that step for an overflow. The next step then starts from uninitialised memory:
the weights turn NaN or huge (seen on H200 with torch 2.11 for ResNet fp16; reproduced on the CPU
with torch 2.14 in tests/test_recipe.py; LibreYOLO/libreyolo#771 saw the same). Zero buffers made
up front give the first real step ``buf = momentum * 0 + grad = grad``, exactly what SGD's first
step sets, and leave nothing uninitialised for an overflowed step to keep.
"""

from __future__ import annotations

import torch
from torch.nn.parallel import DistributedDataParallel

LEARNING_RATE = 1e-3
MOMENTUM = 0.9


def autocast_dtype(precision: str) -> torch.dtype | None:
    """The autocast dtype for a precision; None means full fp32 (autocast off)."""
    return {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": None}[precision]


def make_optimizer(params, precision: str) -> torch.optim.Optimizer:
    """Fused SGD with momentum, its buffers zeroed before the first step (see the module doc)."""
    params = list(params)
    optimizer = torch.optim.SGD(params, lr=LEARNING_RATE, momentum=MOMENTUM, fused=True)
    for param in params:
        optimizer.state[param]["momentum_buffer"] = torch.zeros_like(param, memory_format=torch.preserve_format)
    return optimizer


def make_scaler(precision: str, device: torch.device) -> torch.amp.GradScaler:
    return torch.amp.GradScaler(device.type, enabled=precision == "fp16")


def describe(precision: str) -> str:
    scaler = ", GradScaler (skip on the device)" if precision == "fp16" else ""
    return f"SGD(lr={LEARNING_RATE}, momentum={MOMENTUM}, fused, zeroed momentum){scaler}"


def build_model(spec, device: torch.device) -> torch.nn.Module:
    """The model of ``spec`` on ``device`` (channels_last for CNNs), as one GPU trains it alone."""
    with device:  # parameters made on the device: initialising them there takes a fraction of the CPU's time
        model = spec.build().to(device)
    if spec.channels_last:
        model = model.to(memory_format=torch.channels_last)
    return model


def build_ddp(spec, device: torch.device, process_group=None):
    """The model of ``spec`` on ``device`` (channels_last for CNNs), wrapped in DDP over ``process_group``
    (None: every rank of the launch).

    The process group must exist. Gradients alias DDP's all-reduce buckets
    (``gradient_as_bucket_view``): one copy fewer per step, as large jobs run.
    """
    device_ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(build_model(spec, device), device_ids=device_ids, gradient_as_bucket_view=True,
                                   process_group=process_group)


class TrainStep:
    """One training step of the recipe on a fixed synthetic batch: autocast forward, (scaled)
    backward, optimizer step. No host sync, fp16 included (the scaler's skip stays on the device).

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
        with torch.autocast(self.device_type, dtype=self.amp_dtype or torch.float32,
                            enabled=self.amp_dtype is not None):
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
