"""Minimal reproduction: torch's fused SGD + GradScaler when the FIRST step overflows.

    python3 benchmarks/fused_sgd_overflow.py [cpu|cuda]

Four optimizers take one overflowed step (skipped by the scaler) and one healthy step: plain
(foreach) SGD and fused SGD, each with and without momentum buffers zeroed up front. Fused SGD
without zeroed buffers keeps the ``empty_like`` buffers of its skipped first step and its next
step starts from uninitialised memory (docs/measurements.md has what this printed).
"""

import sys

import torch

DEVICE = sys.argv[1] if len(sys.argv) > 1 else "cpu"


def run(fused: bool, zeroed: bool) -> torch.Tensor:
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(1 << 20, device=DEVICE))
    opt = torch.optim.SGD([p], lr=0.1, momentum=0.9, fused=fused, foreach=None if fused else True)
    if zeroed:
        opt.state[p]["momentum_buffer"] = torch.zeros_like(p)
    scaler = torch.amp.GradScaler(DEVICE, init_scale=2.0**16)
    scaler.scale((p * float("inf")).sum()).backward()  # an overflowed first step: the scaler skips it
    scaler.step(opt)
    scaler.update()
    opt.zero_grad()
    scaler.scale(p.sum()).backward()  # a healthy step
    scaler.step(opt)
    scaler.update()
    return p.detach()


reference = run(fused=False, zeroed=False)
for fused in (False, True):
    for zeroed in (False, True):
        got = run(fused, zeroed)
        diff = (got - reference).abs().max().item()
        print(f"{DEVICE}: fused={fused!s:5} zeroed buffers={zeroed!s:5} -> after the next step: "
              f"finite={torch.isfinite(got).all().item()!s:5} max |p - plain SGD| = {diff:.3g}")
print("torch", torch.__version__)
