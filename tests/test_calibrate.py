"""harness calibrate: statistics and bounds (pure), planning, a fake launcher, and one real CPU calibration
that the acceptance suite then passes."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.launch.spec import BenchmarkSpec, LaunchSettings
from harness.node.hardware import GpuInfo, Hardware, HardwareError
from harness.kinds.shipped import BOUNDS_TABLES, load_shipped_profile
from harness.profile.load import cli_check
from harness.profile.match import select_profile
from harness.records import RunRecord, StepTimeStats, Versions
from harness.results.job import Failure
from harness.tools.batchsize.search import JudgedProbe, ProbeResult, SearchResult
from harness.tools.calibrate import CalibrationError
from harness.tools.calibrate.bounds import (BatchChoice, CaseMeasurement, Margins, derive_bounds, measure_case,
                                            round_down_significant, spread_warnings)
from harness.tools.calibrate.cli import cli_calibrate
from harness.tools.calibrate.measure import run_calibration
from harness.tools.calibrate.options import add_calibrate_parser
from harness.tools.calibrate.plan import plan_from_args
from harness.tools.compare import cli_compare
from harness.kinds.components.bounds import COMPONENTS_BOUNDS

REPO = Path(__file__).resolve().parent.parent

CPU_NODE = Hardware(hostname="golden", device="cpu", gpus=(), driver_version=None, cuda_driver_version=None,
                    cuda_runtime_version="13.2", nccl_version="2.30.7", torch_version="2.15.0",
                    nvml_unavailable_reason="no NVML in this test")


def gpu_node(name="NVIDIA B200", memory_gib=178.4, count=4) -> Hardware:
    gpus = tuple(GpuInfo(index=i, name=name, uuid=f"GPU-{i:04d}", memory_total_gib=memory_gib,
                         pci_bus_id=f"0000:{i:02x}:00.0") for i in range(count))
    return Hardware(hostname="golden", device="cuda", gpus=gpus, driver_version="590.10",
                    cuda_driver_version="13.1", cuda_runtime_version="13.0", nccl_version="2.28.9",
                    torch_version="2.11.0+cu130", nvml_unavailable_reason=None)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="harness")
    add_calibrate_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["calibrate", *argv])


def make_record(spec, run_id, per_gpu, *, straggler=1.01, cv=0.01, status="ok", launch_s=12.0) -> RunRecord:
    ok = status == "ok"
    return RunRecord(
        run_id=run_id, model=spec.model, precision=spec.precision, scaling=spec.scaling,
        world_size=spec.world_size, nodes=1, device_kind=spec.device, batch_size_per_gpu=spec.per_gpu_batch,
        global_batch_size=spec.per_gpu_batch * spec.world_size, status=status,
        failure=None if ok else Failure(reason="rank 1 (host golden) was killed by SIGKILL in phase measure"),
        sample_unit="sequences" if spec.model == "tiny_bert" else "images",
        throughput_per_gpu=per_gpu if ok else None, throughput_total=per_gpu * spec.world_size if ok else None,
        throughput_ci95_rel=0.004 if ok else None,
        step_time_ms=StepTimeStats(mean_ms=40, median_ms=40, p95_ms=41, p99_ms=42, cv=cv, steps=30) if ok else None,
        straggler_ratio=straggler if ok and spec.world_size > 1 else None,
        loss_finite=ok or None, device_name="NVIDIA B200" if spec.device == "cuda" else "x86_64", hosts=("golden",),
        versions=Versions(torch="2.11.0+cu130", cuda="13.0", nccl="2.28.9" if spec.device == "cuda" else None,
                          driver="590.10" if spec.device == "cuda" else None, python="3.11.7", harness="0.1.0"),
        phases_s={"launch_total": launch_s}, started_at="2026-11-21T10:00:00+00:00",
        finished_at="2026-11-21T10:05:00+00:00")


def case_key(spec) -> tuple[str, str, int]:
    """(model, precision, GPU count of the case): the 1-GPU case runs on every GPU at once (independent)."""
    return spec.model, spec.precision, 1 if spec.independent else spec.gpus_per_node


class FakeLauncher:
    """Stands in for run_benchmark: per-GPU throughput from a table (model, precision, gpus) -> one per repeat."""

    def __init__(self, table, *, fail_at=None, straggler=1.01, cv=0.01):
        self.table = table
        self.fail_at = fail_at
        self.straggler, self.cv = straggler, cv
        self.calls: list[str] = []
        self.specs = []

    def __call__(self, spec, run_dir, *, run_id=None):
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        self.calls.append(run_id)
        self.specs.append(spec)
        if self.fail_at is not None and len(self.calls) == self.fail_at:
            return make_record(spec, run_id, 0.0, status="failed")
        key = case_key(spec)
        repeat = sum(1 for s in self.specs if case_key(s) == key) - 1
        return make_record(spec, run_id, self.table[key][repeat], straggler=self.straggler, cv=self.cv)


def cpu_plan(tmp_path, *extra: str, hw=CPU_NODE):
    ns = parse("--name", "golden-cpu", "--device", "cpu", "--models", "tiny_bert", "--precisions", "bf16",
               "--gpus", "1,2", "--repeats", "3", "--batch-size", "tiny_bert=4", "--output-dir", str(tmp_path),
               "--records-dir", str(tmp_path / "records"), *extra)
    return plan_from_args(ns, hw)


CPU_TABLE = {("tiny_bert", "bf16", 1): [100.0, 102.0, 98.0], ("tiny_bert", "bf16", 2): [50.0, 51.0, 49.0]}


# --- statistics and bounds ---------------------------------------------------------------------


def test_round_down_keeps_three_significant_digits():
    assert round_down_significant(4176.63) == 4176
    assert round_down_significant(22.87) == 22.8
    assert round_down_significant(0.05678) == 0.0567
    assert round_down_significant(45.0) == 45.0


def _case(per_count: dict[int, list[float]], *, straggler=1.01, cv=0.01) -> CaseMeasurement:
    records = {}
    for gpus, values in per_count.items():
        spec = BenchmarkSpec(model="resnet50", precision="bf16", batch_size_per_gpu=256,
                             launch=LaunchSettings(gpus_per_node=gpus))
        records[gpus] = [make_record(spec, f"r{i}", v, straggler=straggler, cv=cv) for i, v in enumerate(values)]
    return measure_case("resnet50", "bf16", BatchChoice(batch_size=256, how="given"), records)


def test_efficiency_is_paired_within_each_repeat_then_its_median():
    case = _case({1: [100.0, 120.0, 110.0], 2: [90.0, 114.0, 88.0]})
    two = case.counts[1]
    assert two.efficiency == pytest.approx((0.90, 0.95, 0.80))
    assert two.efficiency_median == pytest.approx(0.90)  # the ratio of medians would say 0.818


def test_bounds_follow_the_stated_margins():
    case = _case({1: [4640.7, 4650.0, 4630.0], 2: [4623.8, 4620.0, 4625.0], 4: [4620.3, 4610.0, 4630.0]},
                 straggler=1.012, cv=0.0103)
    bounds = derive_bounds(case, Margins())
    assert bounds.min_samples_per_sec_per_gpu == 4158  # lowest median 4620.3 (4 GPUs) x 0.90 = 4158.27
    assert bounds.min_weak_efficiency == {2: pytest.approx(0.966), 4: pytest.approx(0.965)}
    assert bounds.notes == ()


def test_throughput_bound_holds_at_every_count_so_it_comes_from_the_lowest_median():
    case = _case({1: [100.0, 100.0, 100.0], 2: [50.0, 52.0, 48.0]})  # CPU-like: 2 ranks share the cores
    assert derive_bounds(case, Margins(throughput=0.6)).min_samples_per_sec_per_gpu == 20.0


def test_bounds_are_clamped_to_the_schema_and_say_so():
    case = _case({1: [100.0, 100.0], 2: [104.0, 106.0]}, cv=0.98)
    bounds = derive_bounds(case, Margins(efficiency=0.03, step_time_cv=0.04))
    assert bounds.min_weak_efficiency == {2: 1.0}
    assert len(bounds.notes) == 1 and "bound set to 1.0 (the schema's maximum)" in bounds.notes[0]


def test_a_margin_that_leaves_no_efficiency_bound_is_an_error():
    case = _case({1: [100.0], 2: [2.0]})
    with pytest.raises(CalibrationError, match="lower --efficiency-margin"):
        derive_bounds(case, Margins(efficiency=0.03))


def test_repeats_disagreeing_by_more_than_the_margin_are_warned_about():
    case = _case({1: [100.0, 130.0, 100.0], 2: [95.0, 96.0, 95.0]})
    warnings = spread_warnings(case, Margins())
    assert any("resnet50 bf16 at 1 GPU: repeats disagree by 30.0% (> throughput margin 10%)" in w for w in warnings)
    assert any("weak-scaling efficiency differs by" in w and "at 2 GPUs" in w for w in warnings)
    steady = _case({1: [100.0, 100.2, 99.9], 2: [98.0, 98.1, 97.9]})
    assert spread_warnings(steady, Margins()) == []


# --- planning: every mistake before the first launch ------------------------------------------


def test_gpu_counts_must_include_one(tmp_path):
    with pytest.raises(CalibrationError, match="must include 1"):
        plan_from_args(parse("--name", "x", "--device", "cpu", "--gpus", "2", "--batch-size", "tiny_bert=4",
                             "--models", "tiny_bert", "--output-dir", str(tmp_path)), CPU_NODE)


def test_more_gpus_than_the_node_has_is_refused(tmp_path):
    with pytest.raises(CalibrationError, match="this node has 4 GPUs"):
        plan_from_args(parse("--name", "b200", "--gpus", "1,8", "--peak-tflops", "bf16=2250,fp16=2250",
                             "--peak-tflops-source", "datasheet", "--output-dir", str(tmp_path)), gpu_node())


def test_an_existing_profile_is_not_overwritten_without_force(tmp_path):
    (tmp_path / "golden-cpu.toml").write_text("# someone's profile\n")
    with pytest.raises(CalibrationError, match="exists; pass --force"):
        cpu_plan(tmp_path)
    assert cpu_plan(tmp_path, "--force").force


def test_cpu_without_batch_sizes_needs_a_search_cap(tmp_path):
    with pytest.raises(CalibrationError, match="give --batch-size for resnet18, tiny_bert"):
        plan_from_args(parse("--name", "c", "--device", "cpu", "--output-dir", str(tmp_path)), CPU_NODE)


def test_unknown_gpu_needs_its_peak_tflops_from_the_user(tmp_path):
    ns = parse("--name", "b200", "--output-dir", str(tmp_path))
    with pytest.raises(CalibrationError, match="no existing profile matches NVIDIA B200.*--peak-tflops"):
        plan_from_args(ns, gpu_node(), thresholds_dir=tmp_path)


def test_peak_tflops_must_cover_every_precision_and_cite_a_source(tmp_path):
    with pytest.raises(CalibrationError, match="no peak TFLOP/s for fp16"):
        plan_from_args(parse("--name", "b200", "--peak-tflops", "bf16=2250", "--peak-tflops-source", "datasheet",
                             "--output-dir", str(tmp_path)), gpu_node(), thresholds_dir=tmp_path)
    with pytest.raises(CalibrationError, match="needs --peak-tflops-source"):
        plan_from_args(parse("--name", "b200", "--peak-tflops", "bf16=2250,fp16=2250", "--output-dir", str(tmp_path)),
                       gpu_node(), thresholds_dir=tmp_path)
    with pytest.raises(CalibrationError, match="expected PRECISION=TFLOPS"):
        plan_from_args(parse("--name", "b200", "--peak-tflops", "bf16=lots", "--peak-tflops-source", "d",
                             "--output-dir", str(tmp_path)), gpu_node(), thresholds_dir=tmp_path)


def test_peaks_are_copied_from_an_existing_profile_that_matches(tmp_path):
    h200 = gpu_node(name="NVIDIA H200", memory_gib=140.4)
    plan = plan_from_args(parse("--name", "h200-golden", "--output-dir", str(tmp_path)), h200,
                          thresholds_dir=REPO / "thresholds")
    assert plan.peak_tflops == {"bf16": 989, "fp16": 989, "fp32": 67}
    assert plan.peak_tflops_source.startswith(f"copied from {REPO / 'thresholds' / 'h200.toml'}")
    assert not plan.peak_tflops_given


def test_the_default_matrix_is_the_shipped_one_for_the_device(tmp_path):
    plan = plan_from_args(parse("--name", "b200", "--peak-tflops", "bf16=2250,fp16=2250", "--peak-tflops-source",
                                "datasheet", "--output-dir", str(tmp_path)), gpu_node())
    assert plan.models == ("resnet50", "resnet152", "vit_b_16", "bert_large")
    assert plan.precisions == ("bf16", "fp16")
    assert plan.gpu_counts == (1, 2, 4)
    assert plan.command_line.startswith("harness calibrate --name b200 --device cuda --models resnet50")


# --- a calibration with a fake launcher ---------------------------------------------------------


def test_cpu_calibration_writes_a_profile_that_loads_with_the_derived_bounds(tmp_path):
    plan = cpu_plan(tmp_path)
    launcher = FakeLauncher(CPU_TABLE)
    outcome = run_calibration(plan, CPU_NODE, launcher=launcher, echo=lambda _: None)
    profile = load_shipped_profile(tmp_path / "golden-cpu.toml")
    assert outcome.path == tmp_path / "golden-cpu.toml"
    assert profile.hardware.device == "cpu" and profile.hardware.gpu_name_contains is None
    assert profile.gpu_counts == (1, 2)
    bounds = profile.bounds("tiny_bert", "bf16")
    assert bounds.batch_size_per_gpu == 4
    # Each bound keyed by the GPU count it was measured at: the 1-rank case ran on 2 ranks at once.
    assert bounds.min_samples_per_sec_per_gpu == {2: 45.0}  # 2-rank median 50 x 0.90
    assert bounds.min_weak_efficiency == {2: pytest.approx(0.47)}  # 0.50 - 0.03
    assert bounds.max_straggler_ratio == {2: pytest.approx(1.02)}  # [defaults]: 1 + 2 x (1.01 - 1) over 3 runs
    assert bounds.max_step_time_cv == {2: pytest.approx(0.05)}  # 0.01 + 0.04 over the case's 6 runs
    assert bounds.min_gpu_utilization_pct == {} and bounds.min_gpu_uniformity == {}  # CPU ranks: said why
    # One launch per case is not how a session measures: these training bounds seed sessions, not judge them.
    assert profile.definitions["training"].startswith("calibrate-seed")
    assert "min_gpu_uniformity left out: CPU ranks share the host's cores" in profile.raw["defaults"]["source"]
    assert profile.run.warmup_seconds == 5.0 and profile.run.measure_seconds == 10.0
    assert select_profile(CPU_NODE, [profile]) is profile
    # Repeat by repeat: the whole matrix once, then again (drift hits every case alike); the 1-rank case on
    # every rank at once (2 on cpu: the largest count calibrated), each its own model, as acceptance runs it.
    assert [(s.gpus_per_node, s.independent) for s in launcher.specs] == [(2, True), (2, False)] * 3
    assert len(list((tmp_path / "records" / "runs").glob("*.json"))) == 6


def test_the_file_carries_its_provenance_medians_and_spread(tmp_path):
    outcome = run_calibration(cpu_plan(tmp_path), CPU_NODE, launcher=FakeLauncher(CPU_TABLE), echo=lambda _: None)
    text = outcome.text
    assert "# Node:       host golden" in text
    assert "torch 2.11.0+cu130, Python 3.11.7, harness 0.1.0" in text
    assert "# Command:    harness calibrate --name golden-cpu --device cpu --models tiny_bert" in text
    assert "#   1 GPU : median 100.0, spread 4.0% (100.0, 102.0, 98.0)" in text
    assert "efficiency median 0.500 (0.500, 0.500, 0.500)" in text
    assert "# Warnings:   none" in text
    source = load_shipped_profile(outcome.path).bounds("tiny_bert", "bf16").source
    assert "medians of 3 repeats 100.0 / 50.0 at 1/2 GPUs (spread 4.0% / 4.0%)" in source


def test_a_failed_run_stops_calibration_and_writes_nothing(tmp_path):
    launcher = FakeLauncher(CPU_TABLE, fail_at=3)
    with pytest.raises(CalibrationError) as info:
        run_calibration(cpu_plan(tmp_path), CPU_NODE, launcher=launcher, echo=lambda _: None)
    message = str(info.value)
    assert "tiny_bert bf16 at 1 GPU, repeat 2: failed: rank 1 (host golden) was killed by SIGKILL" in message
    assert "bounds are never made from failed runs" in message
    assert len(launcher.calls) == 3
    assert not (tmp_path / "golden-cpu.toml").exists()


def test_noisy_repeats_are_warned_about_on_screen_and_in_the_file(tmp_path):
    noisy = {("tiny_bert", "bf16", 1): [100.0, 140.0, 100.0], ("tiny_bert", "bf16", 2): [50.0, 51.0, 49.0]}
    shown: list[str] = []
    outcome = run_calibration(cpu_plan(tmp_path), CPU_NODE, launcher=FakeLauncher(noisy), echo=shown.append)
    assert any(line.startswith("WARNING: tiny_bert bf16 at 1 GPU: repeats disagree by 40.0%") for line in shown)
    assert "# WARNINGS during calibration" in outcome.text
    load_shipped_profile(outcome.path)  # still a valid profile: the warning is the user's to act on


def test_cuda_calibration_matches_the_detected_gpu_and_carries_its_peaks(tmp_path):
    node = gpu_node()
    ns = parse("--name", "b200-golden", "--models", "resnet50", "--precisions", "bf16", "--gpus", "1,2,4",
               "--repeats", "2", "--batch-size", "resnet50=256", "--peak-tflops", "bf16=2250",
               "--peak-tflops-source", "NVIDIA B200 datasheet, dense", "--output-dir", str(tmp_path),
               "--records-dir", str(tmp_path / "records"))
    table = {("resnet50", "bf16", 1): [9000.0, 9010.0], ("resnet50", "bf16", 2): [8950.0, 8960.0],
             ("resnet50", "bf16", 4): [8900.0, 8905.0]}
    launcher = FakeLauncher(table)
    outcome = run_calibration(plan_from_args(ns, node), node, launcher=launcher, echo=lambda _: None)
    profile = load_shipped_profile(tmp_path / "b200-golden.toml")
    assert profile.hardware.gpu_name_contains == "NVIDIA B200"
    assert (profile.hardware.min_memory_gib, profile.hardware.max_memory_gib) == (160, 197)  # 178.4 +-10 %
    assert profile.peak_tflops == {"bf16": 2250}
    assert profile.peak_tflops_source == "NVIDIA B200 datasheet, dense"
    assert select_profile(node, [profile]) is profile
    with pytest.raises(HardwareError, match="no threshold profile matches"):
        select_profile(gpu_node(memory_gib=89.0), [profile])  # a smaller part of the same name
    assert all(spec.peak_tflops == 2250 for spec in launcher.specs)  # MFU in the records
    assert "# Node:       host golden, 4 x NVIDIA B200 (178.4 GiB)" in outcome.text
    assert "driver 590.10, CUDA 13.0, NCCL 2.28.9, torch 2.11.0+cu130" in outcome.text
    assert "--peak-tflops bf16=2250 --peak-tflops-source 'NVIDIA B200 datasheet, dense'" in outcome.text


def test_find_max_bs_picks_the_batch_when_none_is_given(tmp_path):
    node = gpu_node()
    calls = []

    def fake_find(**kwargs):
        calls.append(kwargs)
        probe = JudgedProbe(result=ProbeResult(batch_size=24, outcome="ran", peak_memory_gib=150.0,
                                               total_memory_gib=178.4, device_name="NVIDIA B200"),
                            verdict="fits", limit_gib=160.6)
        return SearchResult(max_batch_size=24, probes=(probe,), memory_fraction=0.9, capped=False)

    ns = parse("--name", "b200-found", "--models", "bert_large", "--precisions", "bf16", "--gpus", "1",
               "--repeats", "1", "--peak-tflops", "bf16=2250", "--peak-tflops-source", "datasheet",
               "--output-dir", str(tmp_path), "--records-dir", str(tmp_path / "records"))
    table = {("bert_large", "bf16", 1): [2000.0]}
    outcome = run_calibration(plan_from_args(ns, node), node, launcher=FakeLauncher(table), find_batch=fake_find,
                              echo=lambda _: None)
    assert calls[0]["multiple_of"] == 8 and calls[0]["memory_fraction"] == 0.9 and calls[0]["device_kind"] == "cuda"
    assert load_shipped_profile(outcome.path).bounds("bert_large", "bf16").batch_size_per_gpu == 24
    assert "find-max-bs: peak 150.0 of 178.4 GiB, limit 0.9" in outcome.text
    assert outcome.warnings[0].startswith("one repeat: no spread was measured")


def test_nothing_fitting_stops_calibration(tmp_path):
    node = gpu_node()

    def nothing_fits(**kwargs):
        probe = JudgedProbe(result=ProbeResult(batch_size=1, outcome="oom", detail="CUDA out of memory"),
                            verdict="oom", limit_gib=None)
        return SearchResult(max_batch_size=None, probes=(probe,), memory_fraction=0.9, capped=False)

    ns = parse("--name", "tiny-gpu", "--models", "bert_large", "--precisions", "bf16", "--gpus", "1",
               "--peak-tflops", "bf16=10", "--peak-tflops-source", "d", "--output-dir", str(tmp_path),
               "--records-dir", str(tmp_path / "records"))
    with pytest.raises(CalibrationError, match="even batch 1 does not fit"):
        run_calibration(plan_from_args(ns, node), node, launcher=FakeLauncher({}), find_batch=nothing_fits,
                        echo=lambda _: None)
    assert not (tmp_path / "tiny-gpu.toml").exists()


# --- for real, on CPU: calibrate, then pass the acceptance suite with the new profile ------------


@pytest.mark.slow
def test_calibrated_cpu_profile_passes_the_acceptance_suite(tmp_path, capsys, monkeypatch):
    thresholds_dir = tmp_path / "thresholds"
    thresholds_dir.mkdir()
    records_dir = tmp_path / "calibration"
    # One thread per rank at 1 and 2 ranks alike: a lone rank's two OpenMP threads spin against whatever else
    # the shared machine runs, which once made 1 rank slower than each of 2 (efficiency 1.6).
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    # Shared 2-core CI machines are noisy (docs/calibration.md): wide margins, as the shipped cpu profile has,
    # and no step-time CV or straggler bound (host jitter, not hardware health; the CV reached 1.18 here).
    # fp32: the mechanics are the same at every precision, and a CPU without native bf16 (AVX2 only, as
    # this project's CI VM) runs tiny_bert bf16 at under 2 sequences/s (a 15-minute test).
    ns = parse("--name", "cpu-calibrated", "--device", "cpu", "--models", "tiny_bert", "--precisions", "fp32",
               "--gpus", "1,2", "--repeats", "2", "--batch-size", "tiny_bert=4", "--warmup", "0.5", "--measure",
               "1.5", "--throughput-margin", "0.75", "--efficiency-margin", "0.45", "--straggler-factor", "off",
               "--cv-margin", "off", "--components", "--output-dir", str(thresholds_dir), "--records-dir",
               str(records_dir))
    assert cli_calibrate(ns) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert f"wrote {thresholds_dir / 'cpu-calibrated.toml'} (validated)" in out
    assert "automatic selection on this node picks cpu-calibrated" in out
    assert "[components 2/2] ok" in out  # the real component launches ran; 2 runs are too few for a bound
    profile = load_shipped_profile(thresholds_dir / "cpu-calibrated.toml")
    assert all(bound > 0 for bound in profile.bounds("tiny_bert", "fp32").min_samples_per_sec_per_gpu.values())
    text = (thresholds_dir / "cpu-calibrated.toml").read_text()
    assert profile.table(COMPONENTS_BOUNDS) is None and "# [components] left out: only 2 runs" in text
    assert profile.stack is not None and profile.stack.torch  # the records' versions
    assert "min_gpu_uniformity left out: CPU ranks" in profile.raw["defaults"]["source"]
    assert cli_check([str(thresholds_dir / "cpu-calibrated.toml")], BOUNDS_TABLES) == 0
    # The 1-rank case ran on both ranks at once, each its own model, as the acceptance suite runs it.
    one = RunRecord.from_json(next((records_dir / "runs").glob("tiny_bert-fp32-weak-1gpu-r1*.json")).read_text())
    assert one.independent and len(one.per_rank) == 2

    # One launch per case is not how a session measures: the seed's training bounds are shown, not judged,
    # so a session with them signs nothing off (INCOMPLETE) ...
    reports_dir = tmp_path / "reports"
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # OMP_NUM_THREADS=1 included

    def accept() -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "pytest", "acceptance", f"--harness-thresholds-dir={thresholds_dir}",
             "--hardware", "cpu-calibrated", f"--harness-report-dir={reports_dir}", "-q"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=600)

    seeded = accept()
    assert seeded.returncode == 6, seeded.stdout[-4000:] + seeded.stderr[-2000:]
    assert "measured under definition calibrate-seed" in seeded.stdout  # the cases' reason, in the verdict
    # ... until calibrate-fit derives them from that session: then the next session judges, and passes.
    session_dir = next(p for p in reports_dir.iterdir() if (p / "session.json").is_file() and not p.is_symlink())
    fitted = subprocess.run(
        [sys.executable, "-m", "harness", "calibrate-fit", str(session_dir), "--profile",
         str(thresholds_dir / "cpu-calibrated.toml"), "--min-hosts", "1", "--min-tol", "0.6",
         # as the seed: no step-time CV or straggler bound on a shared machine (once 0.170 against a fitted 0.167)
         "--leave-out", "max_step_time_cv,max_straggler_ratio"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert fitted.returncode == 0, fitted.stderr
    accepted = accept()
    assert accepted.returncode == 0, accepted.stdout[-4000:] + accepted.stderr[-2000:]
    assert "3 passed" in accepted.stdout  # test_node_shape and the two weak-scaling cases

    # The calibration's records and the acceptance run side by side.
    # The session's run directory (reports/ also holds the fleet's history store, history.sqlite.d/).
    run_dir = max((p for p in reports_dir.iterdir() if (p / "session.json").is_file() and not p.is_symlink()),
                  key=lambda p: p.name)
    assert cli_compare(records_dir, run_dir) == 0
    compared = capsys.readouterr().out
    # A case in doubt on a busy machine is re-measured before it is judged: its unjudged attempt shows as "OK x1"
    # beside the judged PASS (seen under a concurrent test run, 2026-11-28); the judged side must be PASS.
    assert re.search(r"tiny_bert-fp32-weak-2gpu .* OK x2 -> (OK x\d+, )?PASS( x\d+)?$", compared, re.M), compared


# --- issue 31: refused before measuring, and no TOML from a path ---------------------------------

def test_an_unwritable_output_dir_is_refused_before_anything_is_measured(tmp_path):
    """Before, calibrate measured everything and then died writing the profile."""
    if os.geteuid() == 0:
        read_only = tmp_path / "ro"
        read_only.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(read_only)], check=False)
        if not os.path.ismount(read_only):
            pytest.skip("cannot mount a read-only file system here")
    else:
        read_only = tmp_path / "ro"
        read_only.mkdir(mode=0o500)
    try:
        with pytest.raises(CalibrationError, match=r"--output-dir .*ro: cannot write files there .*nothing was "
                                                   "measured"):
            plan_from_args(parse("--name", "golden-cpu", "--device", "cpu", "--models", "tiny_bert", "--gpus", "1",
                                 "--batch-size", "tiny_bert=4", "--output-dir", str(read_only)), CPU_NODE)
    finally:
        if os.path.ismount(read_only):
            subprocess.run(["umount", "-l", str(read_only)], check=True)


def test_a_newline_in_the_records_dir_stays_in_its_comment(tmp_path):
    """Before, ``--records-dir $'x\\n[hardware]\\nname = "evil"'`` wrote TOML lines into the profile."""
    hostile = str(tmp_path / "rec\nname = \"evil\"\n[stack]\nx\x7f")
    ns = parse("--name", "golden-cpu", "--device", "cpu", "--models", "tiny_bert", "--precisions", "bf16",
               "--gpus", "1,2", "--repeats", "3", "--batch-size", "tiny_bert=4", "--output-dir", str(tmp_path),
               "--records-dir", hostile)
    outcome = run_calibration(plan_from_args(ns, CPU_NODE), CPU_NODE, launcher=FakeLauncher(CPU_TABLE),
                              echo=lambda _: None)
    assert all(line.startswith("#") or "=" in line or line.startswith("[") or not line
               for line in outcome.text.splitlines())
    assert '\\nname = \\"evil\\"' in outcome.text
    profile = load_shipped_profile(outcome.path)
    assert profile.name == "golden-cpu"
