"""The shared fakes stay true to what they fake: every NVML function and constant the fake offers
exists in the installed pynvml (nvidia-ml-py) with the same parameters, so a test cannot pass by
calling NVML in a way a GPU node would refuse."""

from __future__ import annotations

import inspect

import pynvml
import pytest

from harness.definitions import current_id
from harness.kinds.shipped import load_shipped_profile
from support.fake_nvml import FakeNvml, fake_nvml
from support.profiles import CPU_TEST_PROFILE_NAME, cpu_test_profile

FAKE_FUNCTIONS = sorted(name for name in vars(FakeNvml) if name.startswith("nvml"))


def _parameters(function) -> list[tuple[str, inspect._ParameterKind, bool]]:
    """(name, kind, has a default) of each parameter: what decides which calls bind."""
    return [(p.name, p.kind, p.default is not inspect.Parameter.empty)
            for p in inspect.signature(function).parameters.values()]


def test_the_fake_offers_functions():
    assert "nvmlInit" in FAKE_FUNCTIONS and "nvmlDeviceGetHandleByIndex" in FAKE_FUNCTIONS


@pytest.mark.parametrize("name", FAKE_FUNCTIONS)
def test_every_fake_function_exists_in_pynvml_with_the_same_parameters(name):
    real = getattr(pynvml, name, None)
    assert callable(real), f"real pynvml has no {name}: the fake would hide a wrong call"
    assert _parameters(getattr(fake_nvml(1), name)) == _parameters(real), (
        f"{name}: the fake takes {inspect.signature(getattr(fake_nvml(1), name))}, "
        f"pynvml takes {inspect.signature(real)}")


def test_every_fake_constant_is_pynvml_s_own():
    nvml = fake_nvml(1)
    carried = sorted(name for name in vars(nvml) if name.startswith("NVML_"))
    assert carried == sorted(FakeNvml.CONSTANTS)
    for name in carried:
        assert getattr(nvml, name) == getattr(pynvml, name), name


def test_the_fake_raises_pynvml_s_own_errors():
    assert FakeNvml.NVMLError is pynvml.NVMLError
    nvml = fake_nvml(1)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetHandleByIndex(5)
    nvml.lost_gpu_indices = {0}
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        nvml.nvmlDeviceGetHandleByIndex(0)


def test_the_cpu_test_profile_loads(tmp_path):
    path = tmp_path / f"{CPU_TEST_PROFILE_NAME}.toml"
    path.write_text(cpu_test_profile(case="min_samples_per_sec_per_gpu = { 2 = 50 }"))
    profile = load_shipped_profile(path)
    assert profile.hardware.device == "cpu"
    assert profile.bounds("tiny_bert", "bf16").min_samples_per_sec_per_gpu == {2: 50}
    assert profile.definitions["training"] == current_id("training")  # a test profile is of today's definition
