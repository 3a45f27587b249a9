"""find-max-bs: the search against a fake memory model (pure), and the real probe on CPU."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import harness.workloads.models
from harness.tools.batchsize import probe as batchsize_probe
from harness.tools.batchsize.cli import cli_find_max_bs
from harness.tools.batchsize.options import add_find_max_bs_parser
from harness.tools.batchsize.search import (JudgedProbe, ProbeResult, SearchError, format_table, judge,
                                            monotonicity_warnings, recommendation, search_max_batch)


class FakeMemory:
    """peak = base + per_sample x batch (GiB) on a device of ``total`` GiB; OOM when the peak exceeds it."""

    def __init__(self, base=2.0, per_sample=0.5, total=80.0, device_name="Fake GPU 80GB", peaks=None):
        self.base, self.per_sample, self.total = base, per_sample, total
        self.device_name = device_name
        self.peaks = peaks or {}
        """batch -> peak override (to break monotonicity on purpose)."""
        self.calls: list[int] = []

    def __call__(self, batch: int) -> ProbeResult:
        self.calls.append(batch)
        peak = self.peaks.get(batch, self.base + self.per_sample * batch)
        if peak > self.total:
            return ProbeResult(batch_size=batch, outcome="oom", device_name=self.device_name,
                               detail="CUDA out of memory. Tried to allocate 2.00 GiB")
        return ProbeResult(batch_size=batch, outcome="ran", peak_memory_gib=peak, reserved_memory_gib=peak + 1,
                           total_memory_gib=self.total, device_name=self.device_name)


# limit = 0.9 x 80 = 72 GiB; 2 + 0.5 b <= 72  <=>  b <= 140; OOM above 156 (peak > 80).


def test_doubles_then_bisects_to_the_exact_largest_batch():
    memory = FakeMemory()
    result = search_max_batch(memory, start=8, memory_fraction=0.9)
    assert result.max_batch_size == 140
    # Doubling until the first miss, then bisection between 128 (fits) and 256 (OOM).
    assert memory.calls[:6] == [8, 16, 32, 64, 128, 256]
    assert memory.calls[6:] == [192, 160, 144, 136, 140, 142, 141]
    assert not result.capped
    assert result.warnings == ()


def test_a_peak_exactly_at_the_limit_fits_and_one_sample_more_does_not():
    result = search_max_batch(FakeMemory(), start=8, memory_fraction=0.9)
    by_batch = {p.batch_size: p for p in result.probes}
    assert by_batch[140].result.peak_memory_gib == pytest.approx(72.0)
    assert by_batch[140].verdict == "fits"
    assert by_batch[141].verdict == "over_fraction"
    assert by_batch[256].verdict == "oom"


def test_over_the_fraction_and_oom_are_told_apart():
    result = search_max_batch(FakeMemory(), start=8, memory_fraction=0.9)
    verdicts = {p.batch_size: p.verdict for p in result.probes}
    assert verdicts[144] == "over_fraction"  # ran, 74 GiB > 72 GiB
    assert verdicts[160] == "oom"  # 82 GiB > 80 GiB: did not run


def test_a_lower_fraction_gives_a_smaller_batch():
    assert search_max_batch(FakeMemory(), start=8, memory_fraction=0.5).max_batch_size == 76  # 2 + 38 = 40 GiB


def test_first_probe_failing_searches_down_to_one():
    memory = FakeMemory(base=50.0, per_sample=4.0, total=60.0)  # limit 54: batch 1 fits (54), batch 2 does not
    result = search_max_batch(memory, start=8, memory_fraction=0.9)
    assert memory.calls == [8, 4, 2, 1]
    assert result.max_batch_size == 1


def test_first_probe_failing_can_still_find_a_batch_between():
    memory = FakeMemory(base=10.0, per_sample=20.0, total=80.0)  # limit 72: b <= 3.1
    result = search_max_batch(memory, start=8, memory_fraction=0.9)
    assert result.max_batch_size == 3
    assert memory.calls == [8, 4, 2, 3]


def test_even_batch_one_not_fitting_is_a_clear_answer():
    memory = FakeMemory(base=90.0, total=80.0)
    result = search_max_batch(memory, start=8, memory_fraction=0.9)
    assert result.max_batch_size is None
    assert memory.calls == [8, 4, 2, 1]
    message = recommendation(result, "bert_large", "fp32")
    assert message.startswith("even batch 1 does not fit for bert_large fp32")
    assert "batch 1: OOM" in message


def test_start_at_one_failing_probes_once():
    memory = FakeMemory(base=90.0, total=80.0)
    result = search_max_batch(memory, start=1, memory_fraction=0.9)
    assert memory.calls == [1]
    assert result.max_batch_size is None


def test_max_caps_the_doubling_and_says_so():
    memory = FakeMemory()
    result = search_max_batch(memory, start=8, max_batch=100, memory_fraction=0.9)
    assert memory.calls == [8, 16, 32, 64, 100]
    assert result.max_batch_size == 100
    assert result.capped
    assert max(memory.calls) <= 100
    assert "reached --max" in recommendation(result, "resnet50", "bf16")


def test_max_that_does_not_fit_is_bisected_below():
    memory = FakeMemory()
    result = search_max_batch(memory, start=8, max_batch=200, memory_fraction=0.9)
    assert result.max_batch_size == 140
    assert not result.capped
    assert max(memory.calls) == 200


def test_multiple_of_gives_the_largest_fitting_multiple():
    memory = FakeMemory()
    result = search_max_batch(memory, start=8, memory_fraction=0.9, multiple_of=8)
    assert result.max_batch_size == 136
    assert all(batch % 8 == 0 for batch in memory.calls)
    assert memory.calls == [8, 16, 32, 64, 128, 256, 192, 160, 144, 136]  # 10 probes; the exact search needs 13


def test_multiple_of_still_goes_below_it_when_start_does_not_fit():
    memory = FakeMemory(base=10.0, per_sample=20.0, total=80.0)
    assert search_max_batch(memory, start=8, memory_fraction=0.9, multiple_of=8).max_batch_size == 3


def test_a_non_memory_failure_stops_the_search_with_the_probes_so_far():
    def probe(batch):
        if batch == 32:
            return ProbeResult(batch_size=batch, outcome="error",
                               detail="RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED")
        return FakeMemory()(batch)

    with pytest.raises(SearchError, match="batch 32 failed for a reason other than memory: .*CUDNN_STATUS") as info:
        search_max_batch(probe, start=8)
    assert [p.batch_size for p in info.value.probes] == [8, 16, 32]


def test_no_device_limit_needs_a_cap():
    def cpu_probe(batch):
        return ProbeResult(batch_size=batch, outcome="ran", peak_memory_gib=1.0, device_name="cpu")

    with pytest.raises(SearchError, match="pass --max"):
        search_max_batch(cpu_probe, start=2)
    result = search_max_batch(cpu_probe, start=2, max_batch=6)
    assert result.max_batch_size == 6
    assert [p.batch_size for p in result.probes] == [2, 4, 6]
    assert "no device memory limit on cpu" in recommendation(result, "tiny_bert", "bf16")


def test_a_probe_that_never_fails_is_stopped():
    memory = FakeMemory(per_sample=0.0)
    with pytest.raises(SearchError, match="probes without an answer"):
        search_max_batch(memory, start=1, max_probes=10)
    assert len(memory.calls) == 10


def test_falling_peak_memory_is_flagged_as_breaking_the_monotonicity_assumption():
    memory = FakeMemory(peaks={64: 10.0})  # 34 GiB expected at 64; 18 GiB at 32
    result = search_max_batch(memory, start=8, memory_fraction=0.9)
    assert len(result.warnings) == 1
    assert "fell from 18.00 GiB at batch 32 to 10.00 GiB at batch 64" in result.warnings[0]


def test_monotone_peaks_give_no_warning_within_tolerance():
    probes = [judge(ProbeResult(batch_size=b, outcome="ran", peak_memory_gib=p, total_memory_gib=80), 0.9)
              for b, p in ((8, 10.0), (16, 9.9), (32, 20.0))]  # 1 % dip: allocator noise
    assert monotonicity_warnings(probes) == []


def test_probe_answering_for_another_batch_is_an_error():
    with pytest.raises(SearchError, match="asked to probe batch 8"):
        search_max_batch(lambda batch: ProbeResult(batch_size=batch + 1, outcome="ran"), start=8)


@pytest.mark.parametrize("kwargs, message", [
    ({"start": 0}, "start must be >= 1"),
    ({"start": 12, "multiple_of": 8}, "not a multiple"),
    ({"start": 8, "max_batch": 4}, "below start"),
    ({"start": 8, "memory_fraction": 1.5}, "memory_fraction"),
])
def test_bad_arguments_are_refused_before_probing(kwargs, message):
    memory = FakeMemory()
    with pytest.raises(ValueError, match=message):
        search_max_batch(memory, **kwargs)
    assert memory.calls == []


def test_on_probe_sees_every_probe_as_it_runs():
    seen: list[JudgedProbe] = []
    result = search_max_batch(FakeMemory(), start=64, max_batch=128, on_probe=seen.append)
    assert [p.batch_size for p in seen] == [64, 128]
    assert tuple(seen) == result.probes


def test_table_is_sorted_by_batch_and_names_each_verdict():
    result = search_max_batch(FakeMemory(), start=8, memory_fraction=0.9)
    lines = format_table(result.probes).splitlines()
    batches = [int(line.split()[0]) for line in lines[1:]]
    assert batches == sorted(batches)
    text = "\n".join(lines)
    assert "OOM" in text and "over the limit (72.00 GiB)" in text and "fits" in text
    assert "140 (peak 72.00 GiB of 80.0 GiB = 90%; limit 90%)" in recommendation(result, "resnet50", "bf16")


def test_a_peak_just_over_the_limit_does_not_read_as_equal_to_it():
    """H100: 1088 peaked at 71.28 GiB over a limit of 0.9 x 79.19 = 71.27 GiB; one decimal printed
    "71.28 ... over the limit (71.3 GiB)", which read as a contradiction."""
    probe = judge(ProbeResult(batch_size=1088, outcome="ran", peak_memory_gib=71.28, total_memory_gib=79.19), 0.9)
    assert probe.verdict == "over_fraction"
    assert probe.describe_verdict() == "over the limit (71.27 GiB)"


@pytest.mark.parametrize("message, oom", [
    ("CUDA out of memory. Tried to allocate 20.00 MiB", True),
    ("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate(handle)", True),
    ("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory", True),
    ("cuDNN error: CUDNN_STATUS_NOT_SUPPORTED", False),
    ("shape '[-1, 64]' is invalid for input of size 10", False),
])
def test_oom_messages_are_recognised(message, oom):
    assert batchsize_probe._looks_like_oom(message) is oom


# --- the probe itself (in this process, with a fake model: no GPU needed) --------------------


class _ExplodingSpec:
    """A model spec whose build raises what a GPU would: how the probe classifies it is what we test."""

    channels_last = False

    def __init__(self, exc):
        self.exc = exc

    def build(self):
        raise self.exc


@pytest.mark.parametrize("make_exc, outcome", [
    (lambda torch: torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB"), "oom"),
    (lambda torch: RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED"), "oom"),
    (lambda torch: RuntimeError("cuDNN error: CUDNN_STATUS_INTERNAL_ERROR"), "error"),
    (lambda torch: ValueError("bad shape"), "error"),
])
def test_probe_classifies_failures(monkeypatch, tmp_path, make_exc, outcome):
    monkeypatch.setattr(harness.workloads.models, "get_model", lambda name: _ExplodingSpec(make_exc(torch)))
    result = batchsize_probe.run_probe_steps(model="tiny_bert", precision="fp32", batch_size=4, device_kind="cpu",
                                             steps=2, store_path=tmp_path / "store")
    assert result.outcome == outcome
    assert result.batch_size == 4
    assert result.detail


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="harness")
    add_find_max_bs_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["find-max-bs", *argv])


def test_cli_on_cpu_without_max_is_a_usage_error(capsys):
    assert cli_find_max_bs(_parse("--model", "tiny_bert", "--precision", "bf16", "--device", "cpu")) == 4
    assert "pass --max N" in capsys.readouterr().err


def test_cli_names_the_known_models_for_an_unknown_one(capsys):
    assert cli_find_max_bs(_parse("--model", "resnet5", "--precision", "bf16", "--device", "cpu",
                                            "--max", "8")) == 4
    assert "--model resnet5: unknown; known models: resnet50" in capsys.readouterr().err


def test_cli_rejects_a_fraction_outside_0_1(capsys):
    ns = _parse("--model", "tiny_bert", "--precision", "bf16", "--device", "cuda", "--memory-fraction", "90")
    assert cli_find_max_bs(ns) == 4
    assert "a fraction in (0, 1]" in capsys.readouterr().err


# --- real probes: a fresh process each (slow: each imports torch) ------------------------------


@pytest.mark.slow
def test_cli_on_cpu_runs_real_probes_up_to_max(tmp_path, capsys):
    ns = _parse("--model", "tiny_bert", "--precision", "bf16", "--device", "cpu", "--start", "2", "--max", "4",
                "--steps", "2", "--log-dir", str(tmp_path))
    assert cli_find_max_bs(ns) == 0
    out = capsys.readouterr().out
    assert "largest batch per GPU for tiny_bert bf16 on cpu: 4 (no device memory limit on cpu: capped by --max)" in out
    results = sorted(path.name for path in Path(tmp_path).glob("probe-*.json"))
    assert results == ["probe-2.json", "probe-4.json"]


@pytest.mark.slow
def test_a_probe_process_that_dies_is_an_error_with_its_log(tmp_path):
    probe = batchsize_probe.subprocess_probe(model="no_such_model", precision="fp32", device_kind="cpu",
                                             log_dir=tmp_path, steps=2, timeout_s=120)
    result = probe(2)
    assert result.outcome == "error"
    assert "exited with code 1 without a result" in result.detail
    assert "no_such_model" in result.detail
    assert str(tmp_path / "probe-2.log") in result.detail


@pytest.mark.slow
def test_sigterm_to_find_max_bs_stops_its_probe_process(tmp_path):
    """timeout(1) or Slurm sends SIGTERM: the probe (a session of its own) must not outlive find-max-bs."""
    log_dir = tmp_path / "probes"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.Popen([sys.executable, "-m", "harness", "find-max-bs", "--model", "tiny_bert", "--precision",
                             "fp32", "--device", "cpu", "--start", "8", "--max", "1024", "--log-dir", str(log_dir)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and not list(log_dir.glob("probe-*.log")):
        time.sleep(0.1)
    assert list(log_dir.glob("probe-*.log")), "no probe started within 60 s"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "interrupted; every process it started has been stopped" in err

    def probes_left():
        left = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/cmdline", "rb") as handle:
                        if str(log_dir).encode() in handle.read():
                            left.append(int(entry))
                except OSError:
                    continue
        return left

    deadline = time.time() + 10
    while probes_left() and time.time() < deadline:
        time.sleep(0.1)
    assert probes_left() == []
