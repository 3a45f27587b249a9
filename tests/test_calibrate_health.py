"""harness calibrate writes a complete measured profile: the health rules (records in, bounds and their sources
out), [components] and [stack], and it refuses a node whose NVIDIA GPUs cannot be used (as find-max-bs does)."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest

from harness.kinds.components.launch import ComponentsRun
from harness.kinds.shipped import BOUNDS_TABLES, load_shipped_profile
from harness.profile.load import cli_check
from harness.records import RankStats, StepTimeStats
from harness.tools.calibrate import CalibrationError
from harness.tools.calibrate.components import component_bounds
from harness.tools.calibrate.health import (calibrated_health, cv_bound, power_bound, soak_decay_bound,
                                            straggler_bound, uniformity_bound, util_bound)
from harness.tools.calibrate.cli import cli_calibrate
from harness.tools.calibrate.measure import run_calibration
from harness.tools.calibrate.plan import plan_from_args
from harness.kinds.components.bounds import COMPONENTS_BOUNDS
from harness.kinds.soak.bounds import SOAK_BOUNDS
from support.hardware import make_hardware
from test_calibrate import FakeLauncher, gpu_node, parse

H100_3D = ("0x10de", "0x030200")


def record(model="resnet50", *, gpus=2, independent=False, util=(97.0, 98.0), power_w=(560.0, 570.0), cv=0.02,
           straggler=None, rates=None, compute_ms=None, status="ok", device="cuda") -> dict:
    """A run record as JSON: one telemetry GPU per utilization figure, per-rank rates or compute step times."""
    telemetry = {"status": "ok", "gpus": [{"index": i, "reduced": {"util_pct": u, "power_w": p, "power_limit_w": 700.0,
                                                                    "temperature_c": 60}}
                                          for i, (u, p) in enumerate(zip(util, power_w, strict=True))]}
    ranks = [{"rank": i, "throughput": (rates or [None] * gpus)[i],
              "compute_step_ms": (compute_ms or [None] * gpus)[i]} for i in range(gpus)]
    return {"model": model, "precision": "bf16", "status": status, "device_kind": device,
            "world_size": 1 if independent else gpus, "independent": independent, "straggler_ratio": straggler,
            "step_time_ms": {"cv": cv}, "per_rank": ranks, "telemetry": telemetry}


def by_key(bounds) -> dict:
    return {b.key: b for b in bounds}


# --- the rules ---------------------------------------------------------------------------------


def test_the_rules_give_the_shipped_bounds_from_the_shipped_figures():
    assert straggler_bound([1.0036, 1.022]) == 1.044  # thresholds/h200.toml: 155 records, highest 1.022
    assert uniformity_bound([0.9984, 0.9891]) == 0.978  # thresholds/h200.toml: worst slowest / median 0.9891
    assert power_bound([0.815, 0.9]) == 0.69  # h200: lowest healthy mean 0.815 x 0.85
    assert power_bound([0.782]) == 0.66  # h100-80gb
    assert util_bound([97.0, 99.1]) == 94  # h100 resnet50 bf16: 97.0 - 3
    assert cv_bound([0.0180]) == 0.058


def test_float_noise_does_not_move_a_bound_by_one_step():
    assert cv_bound([0.011]) == 0.051  # (0.011 + 0.04) x 1000 = 51.00000000000001: not 0.052
    assert util_bound([97.0], 0.0) == 97


def test_every_gpu_of_every_count_and_every_run_is_read_with_its_rule_and_extreme():
    records = [
        *(record(independent=True, util=(96.5 + i, 99.0), rates=[4600.0, 4600.0 - 20 * i]) for i in range(3)),
        *(record(util=(95.0 + i, 99.0), straggler=1.01 + i / 100, compute_ms=[40.0, 40.4], cv=0.03) for i in range(3)),
    ]
    health = calibrated_health(records, device="cuda", gpus=2, cv_margin=0.04, straggler_factor=2.0)
    case = by_key(health.cases[("resnet50", "bf16")])
    assert case["min_gpu_utilization_pct"].value == 92  # lowest 95.0 (a 2-GPU run) - 3
    assert case["min_gpu_utilization_pct"].rule == "lowest 95.0 % of 12 GPU readings over 6 runs - 3 points"
    assert case["max_step_time_cv"].value == pytest.approx(0.07)
    assert case["max_step_time_cv"].rule == "highest 0.0300 over 6 runs + 0.04"
    node = by_key(health.defaults)
    assert node["min_power_fraction_of_limit"].value == 0.68  # 560 / 700 = 0.8 x 0.85
    assert node["max_straggler_ratio"].value == pytest.approx(1.06)  # 1 + 2 x 0.03
    assert "highest 1.0300 of 3 multi-GPU runs" in node["max_straggler_ratio"].rule
    # The worst per-GPU deficit: DDP compute 40.4 vs 40.0 ms (0.9950 of the median) beats 4560 / 4580 (0.9956).
    uniformity = node["min_gpu_uniformity"]
    assert uniformity.value == pytest.approx(0.990)  # 1 - 2 x 0.00498, rounded down
    assert "slowest GPU / median GPU 0.9950 at worst over 6 runs" in uniformity.rule
    assert node["max_temperature_c"].value is None and "site's cooling" in node["max_temperature_c"].rule


def test_too_few_runs_leave_each_bound_out_and_say_why():
    records = [record(independent=True, rates=[4600.0, 4500.0]), record(straggler=1.02, compute_ms=[40.0, 41.0])]
    health = calibrated_health(records, device="cuda", gpus=2, cv_margin=0.04, straggler_factor=2.0)
    bounds = [*health.defaults, *health.cases[("resnet50", "bf16")]]
    assert all(b.value is None for b in bounds)
    texts = [b.text for b in bounds]
    assert "min_gpu_utilization_pct left out: 2 runs with GPU telemetry (utilization); a bound needs 3 or more " \
           "(issue 17)" in texts
    assert "max_straggler_ratio left out: 1 run with 2 or more GPUs (a straggler ratio); a bound needs 3 or more " \
           "(issue 17)" in texts


def test_failed_runs_are_never_read():
    records = [record(straggler=1.01) for _ in range(3)] + [record(straggler=3.0, util=(5.0, 5.0), status="failed")]
    health = calibrated_health(records, device="cuda", gpus=2, cv_margin=0.04, straggler_factor=2.0)
    assert by_key(health.defaults)["max_straggler_ratio"].value == pytest.approx(1.02)
    assert by_key(health.cases[("resnet50", "bf16")])["min_gpu_utilization_pct"].value == 94


@pytest.mark.parametrize("device, gpus, why", [
    ("cpu", 2, "CPU ranks share the host's cores: uniformity is judged on GPUs only"),
    ("cuda", 1, "one GPU: no other GPU to compare it with"),
])
def test_uniformity_is_left_out_on_cpu_ranks_and_on_one_gpu(device, gpus, why):
    records = [record(independent=True, rates=[100.0, 90.0], device=device) for _ in range(3)]
    uniformity = by_key(calibrated_health(records, device=device, gpus=gpus, cv_margin=0.04,
                                          straggler_factor=2.0).defaults)["min_gpu_uniformity"]
    assert uniformity.value is None and why in uniformity.rule


def test_the_off_switches_are_said_in_the_source():
    records = [record(straggler=1.01) for _ in range(3)]
    health = calibrated_health(records, device="cuda", gpus=2, cv_margin=None, straggler_factor=None)
    assert by_key(health.defaults)["max_straggler_ratio"].text == "max_straggler_ratio left out: --straggler-factor off"
    assert by_key(health.cases[("resnet50", "bf16")])["max_step_time_cv"].rule == "--cv-margin off"


# --- [components] --------------------------------------------------------------------------------


def component_run(gemm_bf16: float, copy_gbps: float, pairs=()) -> dict:
    ranks = [{"gemm": {"bf16": {"tflops": gemm_bf16}}, "hbm": {"copy": {"gbps": copy_gbps}}},
             {"gemm": {"bf16": {"tflops": gemm_bf16 + 5}}, "hbm": {"copy": {"gbps": copy_gbps + 10}}}]
    return {"ranks": ranks, "peer": {"pairs": list(pairs)}}


def test_component_bounds_are_the_lowest_figure_x_0_90_over_every_run_and_gpu():
    runs = [component_run(676.8, 3026.0), component_run(679.5, 3026.9, [{"gbps": 400.0, "latency_us": 2.0}]),
            component_run(678.0, 3030.0)]
    values, rules = component_bounds(runs, 0.10)
    assert values == {"min_gemm_tflops": {"bf16": 609.1}, "min_hbm_copy_gbps": 2723.4, "min_peer_gbps": 360.0,
                      "max_peer_latency_us": 2.2}  # the shipped h100-80gb figures: 609.1, 2723.4
    assert "min_gemm_tflops.bf16 609.1 = lowest 676.8 x 0.9 (6 figures over 3 runs)" in rules
    assert "max_peer_latency_us 2.2 = highest 2 x 1.1 (1 figures over 3 runs)" in rules


def test_component_bounds_need_three_runs_and_peers_two_gpus():
    assert component_bounds([component_run(600.0, 3000.0)] * 2, 0.10) == (
        {}, ["[components] left out: only 2 runs; a bound needs 3 or more (--repeats)"])
    _, rules = component_bounds([component_run(600.0, 3000.0)] * 3, 0.10)
    assert "min_peer_gbps, max_peer_latency_us left out: peer copies need 2 GPUs or more" in rules


# --- a GPU calibration end to end, with fakes --------------------------------------------------


class TelemetryLauncher(FakeLauncher):
    """FakeLauncher whose records carry what a GPU run has: telemetry of every GPU and each rank's own rate."""

    def __call__(self, spec, run_dir, *, run_id=None):
        made = super().__call__(spec, run_dir, run_id=run_id)
        n = spec.gpus_per_node
        gpus = [{"index": i, "uuid": f"GPU-{i:04d}", "reduced": {"util_pct": 97.0 + i / 10, "power_w": 600.0 - i,
                                                                  "power_limit_w": 1000.0, "temperature_c": 60}}
                for i in range(n)]
        step = StepTimeStats(mean_ms=40, median_ms=40, p95_ms=41, p99_ms=42, cv=0.01, steps=30)
        ranks = tuple(RankStats(rank=i, local_rank=i, host="golden", gpu_index=i, gpu_uuid=f"GPU-{i:04d}",
                                device_name="NVIDIA B200", step_time=step, window_s=3.0,
                                compute_step_ms=40.0 + i / 10, peak_memory_gib=100.0,
                                throughput=made.throughput_per_gpu * (1 - i / 200)) for i in range(n))
        return dataclasses.replace(made, telemetry={"status": "ok", "gpus": gpus}, per_rank=ranks,
                                   independent=spec.independent, world_size=1 if spec.independent else n)


def fake_components(spec, run_dir, *, run_id):
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    return ComponentsRun(run_id=run_id, status="ok", elapsed_s=30.0,
                         result=component_run(2000.0, 7000.0, [{"gbps": 700.0, "latency_us": 2.5}]))


def test_a_gpu_calibration_writes_every_health_bound_components_and_stack_and_passes_the_check(tmp_path, capsys):
    node = gpu_node()
    ns = parse("--name", "b200-golden", "--models", "resnet50", "--precisions", "bf16", "--gpus", "1,2,4",
               "--batch-size", "resnet50=256", "--peak-tflops", "bf16=2250", "--peak-tflops-source", "datasheet",
               "--components", "--output-dir", str(tmp_path), "--records-dir", str(tmp_path / "records"))
    table = {("resnet50", "bf16", g): [9000.0 - g, 9010.0 - g, 9005.0 - g] for g in (1, 2, 4)}
    launcher = TelemetryLauncher(table)
    outcome = run_calibration(plan_from_args(ns, node), node, launcher=launcher, run_components=fake_components,
                              echo=lambda _: None)
    assert [(s.gpus_per_node, s.independent) for s in launcher.specs[:3]] == [(4, True), (2, False), (4, False)]
    profile = load_shipped_profile(outcome.path)
    bounds = profile.bounds("resnet50", "bf16")
    # Each written for the shapes it was measured at: the 1-GPU case on 4 GPUs at once, the 2- and 4-GPU cases.
    assert bounds.min_gpu_utilization_pct == {2: 94, 4: 94}  # lowest 97.0 - 3
    assert bounds.min_power_fraction_of_limit == {2: 0.5, 4: 0.5}  # lowest 597 / 1000 x 0.85 = 0.507
    assert bounds.max_straggler_ratio == {2: pytest.approx(1.02), 4: pytest.approx(1.02)}
    assert bounds.min_gpu_uniformity == {4: pytest.approx(0.984)}  # GPU 3: 0.985 / 0.9925 = 0.9924 of the median
    assert bounds.max_step_time_cv == {2: pytest.approx(0.05), 4: pytest.approx(0.05)}
    assert bounds.min_samples_per_sec_per_gpu.keys() == {4}
    assert "min_gpu_utilization_pct 94 = lowest 97.0 % of 30 GPU readings over 9 runs - 3 points" in bounds.source
    assert "min_gpu_uniformity 0.984 = 1 - 2 x the worst deficit 0.0076" in profile.raw["defaults"]["source"]
    components = profile.table(COMPONENTS_BOUNDS)
    assert components is not None and components.min_gemm_tflops == {"bf16": 1800.0}
    assert components.max_peer_latency_us == 2.8 and components.datasheet_hbm_gbps is None
    assert "lowest 2000 x 0.9 (6 figures over 3 runs)" in components.source
    assert profile.stack is not None and (profile.stack.torch, profile.stack.driver) == ("2.11.0+cu130", "590.10")
    assert "min_gpu_utilization_pct = { 2 = 94, 4 = 94 }" in outcome.text  # a whole percent
    capsys.readouterr()
    assert cli_check([str(outcome.path)], BOUNDS_TABLES) == 0, capsys.readouterr().err  # `harness thresholds check`


def test_without_components_no_components_table_is_written(tmp_path):
    node = gpu_node()
    ns = parse("--name", "b200-plain", "--models", "resnet50", "--precisions", "bf16", "--gpus", "1,2",
               "--batch-size", "resnet50=256", "--peak-tflops", "bf16=2250", "--peak-tflops-source", "datasheet",
               "--output-dir", str(tmp_path), "--records-dir", str(tmp_path / "records"))
    table = {("resnet50", "bf16", g): [9000.0, 9010.0, 9005.0] for g in (1, 2)}
    outcome = run_calibration(plan_from_args(ns, node), node, launcher=TelemetryLauncher(table), echo=lambda _: None)
    assert load_shipped_profile(outcome.path).table(COMPONENTS_BOUNDS) is None and "[components]" not in outcome.text


# --- no calibration or batch search on CPU ranks of a GPU node ----------------------------------


@pytest.fixture
def unusable_gpu_node(monkeypatch, tmp_path) -> None:
    """/dev/nvidia0 and an NVIDIA 3D controller on the PCI bus, but NVML cannot be loaded."""
    root = tmp_path / "root"
    (root / "dev").mkdir(parents=True)
    (root / "dev" / "nvidia0").write_text("")
    device = root / "sys" / "bus" / "pci" / "devices" / "0000:00:06.0"
    device.mkdir(parents=True)
    (device / "vendor").write_text(H100_3D[0] + "\n")
    (device / "class").write_text(H100_3D[1] + "\n")
    monkeypatch.setattr("harness.node.presence.SYSTEM_ROOT", root)
    not_loaded = make_hardware(reason="nvmlInit failed: Driver Not Loaded")
    monkeypatch.setattr("harness.tools.calibrate.cli.detect", lambda: not_loaded)
    monkeypatch.setattr("harness.tools.batchsize.cli.detect", lambda: not_loaded)


def test_calibrate_refuses_a_node_whose_gpus_cannot_be_used(unusable_gpu_node, tmp_path, capsys):
    ns = parse("--name", "quiet-cpu", "--batch-size", "tiny_bert=4", "resnet18=4", "--output-dir", str(tmp_path))
    assert cli_calibrate(ns) == 4
    errors = capsys.readouterr().err
    assert errors.startswith("harness calibrate: NVIDIA hardware is present (/dev/nvidia0; 1 NVIDIA GPU on the PCI")
    assert "nvmlInit failed: Driver Not Loaded" in errors and "pass --device cpu" in errors
    assert errors.count("NVIDIA hardware is present") == 1
    assert not (tmp_path / "quiet-cpu.toml").exists() and not (tmp_path / "records").exists()


def test_calibrate_on_cpu_ranks_on_purpose_is_planned(unusable_gpu_node, tmp_path):
    ns = parse("--name", "on-purpose", "--device", "cpu", "--models", "tiny_bert", "--batch-size", "tiny_bert=4",
               "--output-dir", str(tmp_path))
    assert plan_from_args(ns, make_hardware(reason="nvmlInit failed: Driver Not Loaded")).device == "cpu"


def test_calibrate_device_cuda_without_a_gpu_says_so(tmp_path):
    ns = parse("--name", "x", "--device", "cuda", "--output-dir", str(tmp_path))
    with pytest.raises(CalibrationError, match="--device cuda: this machine has no usable GPU"):
        plan_from_args(ns, make_hardware())


def test_find_max_bs_refuses_a_node_whose_gpus_cannot_be_used(unusable_gpu_node, monkeypatch, capsys):
    from harness.cli import main

    probed: list = []
    monkeypatch.setattr("harness.tools.batchsize.cli.find_max_batch", lambda **kwargs: probed.append(kwargs))
    assert main(["find-max-bs", "--model", "tiny_bert", "--precision", "fp32", "--max", "8"]) == 4
    errors = capsys.readouterr().err
    assert errors.startswith("harness find-max-bs: NVIDIA hardware is present")
    assert "pass --device cpu" in errors and probed == []


# --- the shipped H100 profile, re-derived from its records by the shared rules ----------------------


DATA = Path(__file__).resolve().parent.parent / "docs" / "data"


def _lines(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def test_the_shipped_h100_component_bounds_alone_come_out_of_their_runs():
    """GEMM, HBM and the host link of a GPU alone: measured 2026-11-24 on 1-GPU VMs (the concurrent host link
    is a table by GPUs at once now, fitted from 4-GPU sessions: tests/test_fit.py)."""
    shipped = load_shipped_profile(Path(__file__).resolve().parent.parent / "thresholds" / "h100-80gb.toml").table(
        COMPONENTS_BOUNDS)
    with gzip.open(DATA / "2026-11-24-components" / "components-h100.json.gz", "rt") as handle:
        runs = json.load(handle)["runs"]
    values, _ = component_bounds(runs, 0.10)
    assert values["min_gemm_tflops"] == shipped.min_gemm_tflops
    assert (values["min_hbm_copy_gbps"], values["min_h2d_gbps"]) == (shipped.min_hbm_copy_gbps, shipped.min_h2d_gbps)


def test_the_soak_bound_is_twice_the_worst_healthy_decay_and_absent_when_nothing_slowed():
    assert soak_decay_bound([0.00453, 0.00433, 0.0032, 0.00096]) == 0.01
    assert soak_decay_bound([0.00253, 0.00099, 0.00126]) == 0.006
    assert soak_decay_bound([0.002, 0.0025]) == 0.005  # float noise does not add a step
    assert soak_decay_bound([-0.001, 0.0]) is None  # "twice the worst" of no slowdown would fail every soak


@pytest.mark.parametrize("profile, pattern", [("h100-80gb", "h100-*"), ("h200", "h200-*")])
def test_the_shipped_soak_bounds_come_out_of_their_soaks(profile, pattern, capsys):
    import importlib.util

    script = Path(__file__).resolve().parent.parent / "benchmarks" / "soak_bounds.py"
    spec = importlib.util.spec_from_file_location("bench_soak_bounds", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    paths = sorted((DATA / "2026-11-24-soak").glob(pattern))
    assert len(paths) >= 3  # issue 17: three healthy runs or more
    assert module.main([str(p) for p in paths]) == 0
    shipped = load_shipped_profile(Path(__file__).resolve().parent.parent / "thresholds" / f"{profile}.toml").table(
        SOAK_BOUNDS)
    decays = [module.read_soak(p)["throughput_decay"] for p in paths]
    assert shipped.max_throughput_decay == soak_decay_bound(decays)
    assert f"max_throughput_decay = {shipped.max_throughput_decay}" in capsys.readouterr().out
