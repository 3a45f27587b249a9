"""Every GPU judged on its own: the 1-GPU case on every GPU at once (independent), per-GPU throughput
naming the slowest GPU, node uniformity against the median GPU, and the median as the baseline."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from harness.checks.repeats import combine
from harness.kinds.ddp_scaling.checks import weak_scaling_checks
from harness.launch.benchmark import run_benchmark
from harness.launch.spec import BenchmarkSpec, LaunchSettings
from harness.profile.bounds import CaseBounds
from harness.records import RankStats, StepTimeStats, Versions
from harness.results.location import Location
from support.report import build_report
from harness.workloads.ddp_record import build_record
from harness.workloads.models import MODELS
from test_plugin import PROFILE, TEST_FILE, FakeLauncher
from test_records import full_record
from test_report import H200_RUN, _test, contract_copy

pytest_plugins = ["pytester"]

BOUNDS = CaseBounds(model="resnet50", precision="bf16", batch_size_per_gpu=256, source="measured X",
                    min_samples_per_sec_per_gpu={1: 4000.0, 2: 4000.0, 4: 4000.0},
                    min_weak_efficiency={2: 0.96, 4: 0.96},
                    min_gpu_uniformity={2: 0.978, 4: 0.978})
STATS = StepTimeStats(mean_ms=55.0, median_ms=55.0, p95_ms=56.0, p99_ms=57.0, cv=0.004, steps=50)


def rank(index: int, rate: float, *, host: str = "node1", device: str = "cuda") -> RankStats:
    cuda = device == "cuda"
    return RankStats(rank=index, local_rank=index, host=host, gpu_index=index if cuda else None,
                     gpu_uuid=f"GPU-uuid-{index}" if cuda else None, device_name="H200", step_time=STATS,
                     window_s=3.0, compute_step_ms=None, peak_memory_gib=11.0, throughput=rate)


def independent(rates: list[float], *, device: str = "cuda"):
    """The 1-GPU case run on len(rates) GPUs at once; its throughput the median GPU's."""
    ranks = tuple(rank(i, rate, device=device) for i, rate in enumerate(rates))
    median = sorted(rates)[(len(rates) - 1) // 2]
    return full_record(world_size=1, global_batch_size=256, per_rank=ranks, independent=True, straggler=None,
                       straggler_ratio=None, throughput_per_gpu=median, throughput_total=median, device_kind=device)


def checks_of(record, baseline=None, bounds=BOUNDS):
    return {c.key: c for c in weak_scaling_checks(record, baseline, bounds, telemetry_note="n/a")}


# --- per-GPU throughput ------------------------------------------------------------------------


def test_per_gpu_throughput_fails_on_the_slowest_gpu_and_names_it():
    check = checks_of(independent([4600.0, 4610.0, 3900.0, 4620.0]))["throughput_per_gpu"]
    assert check.passed is False
    assert check.measured == 3900.0  # the slowest GPU's rate, not the median (4610) nor the mean
    assert "GPU 2 (GPU-uuid-2) 3,900.0 images/s" in check.note
    assert "GPU 0" not in check.note  # only the GPUs that missed are listed
    assert check.locations == (Location(gpu_index=2, gpu_uuid="GPU-uuid-2", rank=2),)


def test_per_gpu_throughput_passes_showing_the_slowest_gpu():
    check = checks_of(independent([4600.0, 4500.0]))["throughput_per_gpu"]
    assert check.passed is True and check.measured == 4500.0
    assert "slowest: GPU 1 (GPU-uuid-1)" in check.note


def test_a_ddp_case_has_no_per_gpu_throughput_floor_its_efficiency_judges_it():
    """A 1-GPU figure is never stretched to N GPUs: under DDP every rank runs at the run's pace, which the
    efficiency holds to the node's own 1-GPU rate."""
    ranks = (rank(0, 4600.0), rank(1, 3990.0, host="node2"))
    record = full_record(world_size=2, per_rank=ranks, hosts=("node1", "node2"), throughput_per_gpu=3990.0)
    checks = checks_of(record, baseline=independent([4620.0]))
    assert "throughput_per_gpu" not in checks
    assert checks["weak_efficiency"].passed is False


def test_an_old_1gpu_record_without_per_rank_rates_is_judged_on_its_throughput_per_gpu():
    record = full_record(world_size=1, throughput_per_gpu=3000.0)  # written before ranks carried their rate
    check = checks_of(record)["throughput_per_gpu"]
    assert check.passed is False and check.measured == 3000.0


# --- node uniformity ---------------------------------------------------------------------------


def test_uniformity_fails_naming_the_slow_gpu_and_its_fraction():
    check = checks_of(independent([4600.0, 4610.0, 4370.0, 4620.0]))["gpu_uniformity"]  # GPU 2 ~5 % slow
    assert check.passed is False
    assert check.measured == pytest.approx(4370.0 / 4605.0)
    assert "GPU 2 (GPU-uuid-2) 4,370.0 images/s (0.949 of the median)" in check.note
    assert [location.gpu_index for location in check.locations] == [2]
    assert check.kind == "health" and check.bound == 0.978 and check.source == "measured X"


def test_uniformity_catches_one_slow_gpu_of_two():
    assert checks_of(independent([4600.0, 4370.0]))["gpu_uniformity"].passed is False  # 0.974 of the mean of two


def test_uniformity_passes_a_healthy_spread():
    check = checks_of(independent([4600.0, 4590.0, 4612.0, 4605.0]))["gpu_uniformity"]
    assert check.passed is True
    assert "slowest: GPU 1 (GPU-uuid-1)" in check.note and "node median" in check.note


@pytest.mark.parametrize(("record", "why"), [
    (independent([4600.0]), "one GPU: no other GPU"),
    (independent([40.0, 20.0], device="cpu"), "CPU ranks share the host's cores"),
])
def test_uniformity_is_not_evaluated_without_peers_or_on_cpu_ranks(record, why):
    check = checks_of(record)["gpu_uniformity"]
    assert check.passed is None and why in check.note


def test_uniformity_without_a_bound_is_shown_not_evaluated():
    bounds = dataclasses.replace(BOUNDS, min_gpu_uniformity={})
    check = checks_of(independent([4600.0, 4000.0]), bounds=bounds)["gpu_uniformity"]
    assert check.passed is None
    assert check.measured == pytest.approx(4000.0 / 4300.0)
    assert "no min_gpu_uniformity" in check.note and "GPU 1 (GPU-uuid-1)" in check.note


def test_ddp_cases_have_no_uniformity_check_the_straggler_probe_speaks_there():
    assert "gpu_uniformity" not in checks_of(full_record(world_size=2), baseline=independent([4620.0]))


def test_efficiency_is_against_the_median_gpu_not_gpu_0():
    baseline = independent([4000.0, 4600.0, 4620.0])  # GPU 0 slow: its own run would flatter every efficiency
    n = full_record(world_size=2, throughput_per_gpu=4500.0, throughput_total=9000.0)
    assert checks_of(n, baseline)["weak_efficiency"].measured == pytest.approx(4500.0 / 4600.0)


# --- the record of an independent run (worker side, pure) --------------------------------------


def _gathered(index: int, step_ms: float, steps: int = 40, wait_s: float = 0.0) -> dict:
    times = [step_ms] * steps
    return {"rank": index, "local_rank": index, "host": "n1", "gpu_index": index, "gpu_uuid": f"GPU-{index}",
            "device_name": "cpu", "step_times_ms": times, "window_s": sum(times) / 1000 + wait_s,
            "compute_step_ms": None, "peak_memory_gib": None, "loss_finite": True, "final_loss": 5.0}


def _spec(gpus: int = 3, **extra) -> BenchmarkSpec:
    fields = {"batch_size_per_gpu": 4, **extra}
    return BenchmarkSpec(model="tiny_bert", precision="bf16", independent=True,
                         launch=LaunchSettings(gpus_per_node=gpus, device="cpu"), **fields)


def _record(gathered: list[dict]):
    return build_record(_spec(len(gathered)).case_plan(Path("/tmp/x"), "r"), spec=MODELS["tiny_bert"], world_size=1,
                        gathered=gathered, warmup_steps=10, warmup_s=1.0, measured_steps=40, phases_s={}, nodes=1,
                        versions=Versions(torch="t", cuda=None, nccl=None, driver=None, python="p", harness="h"))


def test_an_independent_record_keeps_each_gpus_rate_and_reports_the_median():
    # GPU 1 is fast but waited 1 s for the others at the block votes: its rate leaves the wait out.
    record = _record([_gathered(0, 50.0), _gathered(1, 40.0, wait_s=1.0), _gathered(2, 100.0)])
    rates = [r.throughput for r in record.per_rank]
    assert rates == pytest.approx([4 * 40 / 2.0, 4 * 40 / 1.6, 4 * 40 / 4.0])
    assert record.independent and record.world_size == 1 and record.global_batch_size == 4
    assert record.throughput_per_gpu == pytest.approx(80.0)  # the median GPU (rank 0), not the slowest (40)
    assert record.throughput_total == record.throughput_per_gpu
    assert record.straggler is None and record.straggler_ratio is None


def test_a_ddp_record_gives_each_rank_its_busy_rate():
    plan = BenchmarkSpec(model="tiny_bert", precision="bf16", batch_size_per_gpu=4,
                         launch=LaunchSettings(gpus_per_node=2, device="cpu")).case_plan(Path("/tmp/x"), "r")
    record = build_record(plan, spec=MODELS["tiny_bert"], world_size=2, measured_steps=40, phases_s={}, nodes=1,
                          gathered=[_gathered(0, 50.0), _gathered(1, 50.0, wait_s=0.5)], warmup_steps=10,
                          warmup_s=1.0, versions=Versions(torch="t", cuda=None, nccl=None, driver=None, python="p",
                                                          harness="h"))
    # Each rank's rate over its steps' own time: the half second rank 1 waited between blocks is left out.
    assert [r.throughput for r in record.per_rank] == pytest.approx([4 * 40 / 2.0, 4 * 40 / 2.0])
    assert min(r.throughput for r in record.per_rank) == pytest.approx(record.throughput_per_gpu)
    assert not record.independent


# --- the launch of an independent run ----------------------------------------------------------


def test_an_independent_spec_is_the_1gpu_case_on_every_gpu():
    spec = _spec(4)
    assert spec.case_id == "tiny_bert-bf16-weak-1gpu"
    assert spec.world_size == 4 and spec.training_world_size == 1 and spec.per_gpu_batch == 4
    plan = spec.case_plan(Path("/tmp/x"), "r")
    assert plan.independent and plan.global_batch_size == 4


def test_an_independent_strong_baseline_trains_the_whole_global_batch_on_each_gpu():
    spec = _spec(4, scaling="strong", batch_size_per_gpu=None, global_batch_size=6)  # 6 needs no split
    assert spec.per_gpu_batch == 6 and spec.case_plan(Path("/tmp/x"), "r").global_batch_size == 6


def test_an_independent_run_spans_one_node_only():
    with pytest.raises(ValueError, match="one node"):
        BenchmarkSpec(model="tiny_bert", precision="bf16", batch_size_per_gpu=4, independent=True,
                      launch=LaunchSettings(gpus_per_node=2, nodes=2, device="cpu"))


# --- the plugin: the 1-GPU case on every rank, the baseline their median -----------------------


class IndependentLauncher(FakeLauncher):
    """The fake launcher, with an independent run whose GPU 0 is the slowest: 60 and 100/s, median 80."""

    def __call__(self, spec, run_dir, *, run_id=None, rendezvous=None):
        record = super().__call__(spec, run_dir, run_id=run_id)
        if not spec.independent:
            return dataclasses.replace(record, per_rank=tuple(rank(i, record.throughput_per_gpu, device="cpu")
                                                              for i in range(spec.world_size)))
        ranks = tuple(rank(i, 60.0 + 40.0 * i, device="cpu") for i in range(spec.world_size))
        return dataclasses.replace(record, per_rank=ranks, throughput_per_gpu=80.0, throughput_total=80.0)


@pytest.fixture
def session(pytester, monkeypatch, tmp_path):
    launcher = IndependentLauncher()
    monkeypatch.setattr("harness.launch.benchmark.run_benchmark", launcher)
    monkeypatch.setattr("harness.launch.group.run_benchmark_group", launcher.group)
    monkeypatch.setattr("harness.plugin.session.os.sched_getaffinity", lambda pid: {0, 1}, raising=False)
    thresholds = tmp_path / "thresholds"
    thresholds.mkdir()
    (thresholds / "cpu-test.toml").write_text(PROFILE.format(min_tp=50))
    pytester.makeini("[pytest]\nharness_acceptance = true\n")
    pytester.makepyfile(test_accept=TEST_FILE)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    result = pytester.runpytest(f"--harness-thresholds-dir={thresholds}", "-p", "no:cacheprovider")
    report = json.loads((pytester.path / "reports" / "latest" / "report.json").read_text())
    checks = {t["nodeid"].split("[")[1].rstrip("]"): {c["key"]: c for c in t["metadata"]["harness"]["checks"]}
              for t in report["tests"] if t["outcome"] != "skipped"}
    return result, launcher, checks


def test_the_1gpu_case_runs_on_every_rank_at_once(session):
    result, launcher, _ = session
    result.assert_outcomes(passed=2, skipped=1)
    one = [s for s in launcher.specs if s.case_id == "tiny_bert-bf16-weak-1gpu"]
    assert len(one) == 1 and one[0].independent and one[0].gpus_per_node == 2


def test_the_baseline_of_every_efficiency_is_the_median_gpu(session):
    _, _, checks = session
    # 100/s per GPU at 2 GPUs against the median GPU's 80/s alone, not GPU 0's 60/s
    assert checks["tiny_bert-bf16-2gpu"]["weak_efficiency"]["measured"] == pytest.approx(100.0 / 80.0)


def test_the_1gpu_case_is_judged_per_gpu_and_uniformity_is_not_evaluated_on_cpu(session):
    _, _, checks = session
    one = checks["tiny_bert-bf16-1gpu"]
    assert one["throughput_per_gpu"]["measured"] == 60.0 and "rank 0" in one["throughput_per_gpu"]["note"]
    assert one["gpu_uniformity"]["passed"] is None and "CPU ranks" in one["gpu_uniformity"]["note"]


# --- the worker, end to end on 2 CPU ranks (gloo) ----------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("ci_target", [0.0, 0.2], ids=["fixed-window", "adaptive-window"])
def test_an_independent_launch_trains_one_model_per_rank_and_records_each(tmp_path, fast_spec, ci_target):
    spec = dataclasses.replace(fast_spec(gpus_per_node=2), independent=True, ci_target=ci_target,
                               max_measure_seconds=2.0 if ci_target else None)
    record = run_benchmark(spec, tmp_path / "run", run_id="independent")
    assert record.ok, record.failure
    assert record.independent and record.world_size == 1 and record.global_batch_size == 4
    assert [r.rank for r in record.per_rank] == [0, 1]
    rates = sorted(r.throughput for r in record.per_rank)
    assert all(rate > 0 for rate in rates)
    assert record.throughput_per_gpu == pytest.approx(rates[0])  # the lower middle of two
    assert record.straggler is None and all(r.compute_step_ms is None for r in record.per_rank)  # no DDP probe


# --- the report: the 1-GPU run's per-GPU rates -------------------------------------------------


def test_the_report_shows_each_gpus_rate_and_fraction_of_the_median(tmp_path):
    run = contract_copy(H200_RUN, tmp_path / "20261121-110032-vm-h200")
    nodeid = "test_scaling.py::test_weak_scaling[resnet50-bf16-1gpu]"
    for name in ("report.json", "session.json"):
        data = json.loads((run / name).read_text())
        harness = (_test(data, nodeid)["metadata"]["harness"] if name == "report.json" else data["results"][nodeid])
        record = harness["record"]
        template = record["per_rank"][0]
        record["independent"] = True
        record["per_rank"] = [{**template, "rank": i, "local_rank": i, "gpu_index": i, "gpu_uuid": f"GPU-uuid-{i}",
                               "throughput": rate} for i, rate in enumerate([4640.0, 4410.0, 4650.0, 4630.0])]
        (run / name).write_text(json.dumps(data))
    html = build_report(run)
    case = re.search(r'<article class="case[^"]*" id="case-test_scaling.py_test_weak_scaling_resnet50-bf16-1gpu_">'
                     r".*?</article>", html, re.S).group(0)
    assert "Per GPU (4): each trained its own model at once" in case
    assert "<th>of median</th>" in case
    assert "the median of 4 GPUs each training alone at once" in case
    assert re.search(r'class="slow"[^>]*><td>1 \(slowest\)</td>.*?<td>4,410</td><td>0.951</td>', case, re.S)


def test_repeats_judge_each_gpu_on_its_own_figure_over_the_repeats():
    runs = [independent(rates) for rates in ([4600.0, 4000.0], [4610.0, 4590.0], [4620.0, 4580.0])]
    combined = combine([dataclasses.replace(run, run_id=f"r{i}") for i, run in enumerate(runs)])
    # GPU 1 was slow in one run of three: its median over the repeats (4580) stands, not that run's 4000
    assert [r.throughput for r in combined.per_rank] == [4610.0, 4580.0]
    assert checks_of(combined)["gpu_uniformity"].passed is True
