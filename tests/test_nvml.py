"""The NVML vocabulary: clock-event reasons as pynvml numbers them, and a declared reduction per metric."""

from __future__ import annotations

import pynvml
import pytest

from harness.node import nvml
from harness.node.nvml import CLOCK_EVENT_REASONS, decode_clock_event_reasons

HW_THERMAL = 0x40
SW_POWER_CAP = 0x4


def test_clock_event_bitmask_is_decoded_into_names():
    assert decode_clock_event_reasons(0) == []
    assert decode_clock_event_reasons(SW_POWER_CAP | HW_THERMAL) == ["sw power cap", "hw thermal slowdown"]
    assert decode_clock_event_reasons(0x8 | 0x20) == ["hw slowdown", "sw thermal slowdown"]
    assert decode_clock_event_reasons(0x1000) == ["unknown 0x1000"]


def test_clock_event_bits_match_pynvml():
    by_name = {"gpu idle": "GpuIdle", "applications clocks setting": "ApplicationsClocksSetting",
               "sw power cap": "SwPowerCap", "hw slowdown": "HwSlowdown", "sync boost": "SyncBoost",
               "sw thermal slowdown": "SwThermalSlowdown", "hw thermal slowdown": "HwThermalSlowdown",
               "hw power brake slowdown": "HwPowerBrakeSlowdown", "display clock setting": "DisplayClockSetting"}
    for reason in CLOCK_EVENT_REASONS:
        assert getattr(pynvml, f"nvmlClocksEventReason{by_name[reason.name]}") == reason.bit
    assert set(nvml.FAULT_REASONS) == {"hw slowdown", "sw thermal slowdown", "hw thermal slowdown",
                                       "hw power brake slowdown"}


def test_every_metric_declares_a_known_reduction():
    assert {m.reduction for m in nvml.METRICS} <= {"mean", "max", "min", "any", "delta"}
    declared = {m.key: m.reduction for m in nvml.METRICS}
    assert declared["util_pct"] == "mean" and declared["power_w"] == "mean"
    assert declared["temperature_c"] == "max" and declared["sm_clock_mhz"] == "min"
    assert declared["clock_event_reasons"] == "any"
    assert declared["ecc_corrected"] == declared["ecc_uncorrected"] == declared["pcie_replays"] == "delta"


def test_nvml_errors_are_told_apart_by_code():
    assert nvml.error_code(pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)) == pynvml.NVML_ERROR_GPU_IS_LOST
    assert nvml.error_code(ValueError("not from NVML")) is None
    assert nvml.is_unsupported(pynvml, pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED))
    assert nvml.is_unsupported(pynvml, pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND))
    assert not nvml.is_unsupported(pynvml, pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST))


def test_nvml_strings_are_text_whichever_pynvml_wrote_them():
    assert nvml.nvml_text(b"NVIDIA H200") == "NVIDIA H200"
    assert nvml.nvml_text("NVIDIA H200") == "NVIDIA H200"


def test_a_missing_pynvml_says_why(monkeypatch: pytest.MonkeyPatch):
    assert nvml.installed_pynvml() is pynvml
    monkeypatch.setattr(nvml, "PYNVML", None)
    monkeypatch.setattr(nvml, "PYNVML_IMPORT_ERROR", "No module named 'pynvml'")
    with pytest.raises(ImportError, match="No module named 'pynvml'"):
        nvml.installed_pynvml()
