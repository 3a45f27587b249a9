"""The training recipe: fused SGD at every precision, safe on fp16's overflowed steps, no host sync.

The trap these guard against (harness/workloads/recipe.py): torch's fused SGD allocates its
momentum buffers with ``empty_like`` on the first step and keeps them even when GradScaler skips
that step for an overflow, so the next step starts from uninitialised memory.
"""

from __future__ import annotations

import pytest
import torch

from harness.workloads import recipe


def _overflow_then_healthy_step(optimizer: torch.optim.Optimizer, param: torch.nn.Parameter) -> torch.Tensor:
    """An fp16-style first step whose gradients overflowed (skipped), then a healthy one."""
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
    scaler.scale((param * float("inf")).sum()).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    scaler.scale((param * torch.linspace(-1, 1, param.numel())).sum()).backward()
    scaler.step(optimizer)
    scaler.update()
    return param.detach().clone()


def _param() -> torch.nn.Parameter:
    return torch.nn.Parameter(torch.randn(4096, generator=torch.Generator().manual_seed(7)))


def test_an_overflowed_first_step_leaves_the_fused_recipe_exactly_where_plain_sgd_is():
    reference_param = _param()
    reference = torch.optim.SGD([reference_param], lr=recipe.LEARNING_RATE, momentum=recipe.MOMENTUM, foreach=False)
    expected = _overflow_then_healthy_step(reference, reference_param)

    param = _param()
    got = _overflow_then_healthy_step(recipe.make_optimizer([param], "fp16"), param)

    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)


def test_the_skip_is_handed_to_the_kernel_so_a_step_never_reads_a_flag_on_the_host(monkeypatch):
    param = _param()
    optimizer = recipe.make_optimizer([param], "fp16")
    assert optimizer.defaults["fused"] and getattr(optimizer, "_step_supports_amp_scaling", False)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
    scaler.scale(param.sum()).backward()

    def no_host_read(self):
        raise AssertionError("a host read (Tensor.item) inside the optimizer step")

    monkeypatch.setattr(torch.Tensor, "item", no_host_read)
    scaler.step(optimizer)
    scaler.update()


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_every_precision_starts_from_zeroed_momentum_and_describes_itself(precision):
    params = [_param(), torch.nn.Parameter(torch.ones(3, 5))]
    optimizer = recipe.make_optimizer(iter(params), precision)  # any iterable, as model.parameters()
    for param in params:
        buffer = optimizer.state[param]["momentum_buffer"]
        assert buffer.shape == param.shape and not buffer.any()
    assert "fused" in recipe.describe(precision)
    assert ("GradScaler" in recipe.describe(precision)) == (precision == "fp16")
