"""The profile's measured stack against this run's: said, never failed."""

from __future__ import annotations

import dataclasses

from harness.profile.bounds import MeasuredStack
from harness.profile.stack import compare_stack
from support.hardware import make_hardware

H200 = make_hardware(("NVIDIA H200", 140.4))
MEASURED = MeasuredStack(torch="2.11.0+cu130", cuda="13.0", nccl="2.28.9", driver="580.159.04", source="lent H200")


def test_a_run_on_the_profiles_stack_says_so():
    hardware = dataclasses.replace(H200, torch_version="2.11.0+cu130", cuda_runtime_version="13.0",
                                   nccl_version="2.28.9", driver_version="580.159.04")
    comparison = compare_stack(MEASURED, hardware)
    assert comparison is not None and comparison.same
    assert comparison.describe() == ("same software stack as the profile was measured on "
                                     "(torch 2.11.0+cu130 / CUDA 13.0 / NCCL 2.28.9 / driver 580.159.04)")


def test_a_run_on_another_stack_names_each_difference_side_by_side():
    hardware = dataclasses.replace(H200, torch_version="2.14.1+cu130", cuda_runtime_version="13.0",
                                   nccl_version="2.27.5", driver_version="580.159.04")
    comparison = compare_stack(MEASURED, hardware)
    assert comparison is not None and comparison.differs == ("torch", "nccl")
    assert comparison.describe() == ("profile measured on torch 2.11.0+cu130 / NCCL 2.28.9; "
                                     "this run torch 2.14.1+cu130 / NCCL 2.27.5")
    assert comparison.to_dict()["differs"] == ["torch", "nccl"]


def test_only_what_the_profile_records_is_compared_and_unknown_is_said():
    hardware = dataclasses.replace(H200, driver_version=None)
    comparison = compare_stack(MeasuredStack(driver="580.159.04", source="x"), hardware)
    assert comparison is not None and comparison.describe() == ("profile measured on driver 580.159.04; "
                                                                "this run driver unknown")
    assert compare_stack(None, hardware) is None
    assert compare_stack(MeasuredStack(source="nothing recorded"), hardware) is None


def test_the_cpu_profiles_stack_is_the_torch_make_installs_on_a_cpu_machine():
    """Every CPU run printed a stack mismatch: [stack] named a torch that constraints/cpu.txt does not install."""
    import re
    from pathlib import Path

    from harness.kinds.shipped import load_shipped_profile
    from harness.profile.load import default_thresholds_dir

    repo = Path(__file__).resolve().parent.parent
    pinned = re.search(r"^torch==(\S+)$", (repo / "constraints" / "cpu.txt").read_text(), re.MULTILINE)
    stack = load_shipped_profile(default_thresholds_dir() / "cpu.toml").stack
    assert pinned and stack is not None and stack.torch is not None
    assert stack.torch.split("+")[0] == pinned[1], f"cpu.toml [stack] torch {stack.torch}, constraints {pinned[1]}"
