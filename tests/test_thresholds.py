"""Threshold profiles: loading, merging, and one precise message per kind of mistake."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pickle
from pathlib import Path

import pytest

from harness.catalog import MODELS, PRECISIONS
from harness.profile import schema
from harness.kinds.interconnect.bounds import INTERCONNECT_BOUNDS, TOPOLOGY_BOUNDS, InterconnectBounds, TopologyBounds
from harness.kinds.shipped import BOUNDS_TABLES, load_shipped_profile, load_shipped_profiles
from harness.kinds.soak.bounds import SOAK_BOUNDS, SoakBounds
from harness.profile.bounds import CaseBounds, HardwareMatch, Profile, RunSettings
from harness.profile.load import ThresholdError, cli_check, default_thresholds_dir

REPO_THRESHOLDS_DIR = Path(__file__).resolve().parents[1] / "thresholds"

GOOD = """\
schema_version = 1

[hardware]
name = "good"
description = "NVIDIA H200 SXM 141 GB"
device = "cuda"
match = { gpu_name_contains = "H200", min_memory_gib = 130 }
peak_tflops = { bf16 = 989, fp16 = 989, fp32 = 67 }
peak_tflops_source = "NVIDIA H200 datasheet (dense)"

[run]
warmup_seconds = 5
measure_seconds = 10
timeout_seconds = 600

[defaults]
gpu_counts = [1, 2, 4, 8]
models = ["resnet152"]
precisions = ["bf16"]
min_gpu_utilization_pct = { 1 = 90 }
max_straggler_ratio = { 2 = 1.05 }
max_step_time_cv = { 1 = 0.05 }
min_power_fraction_of_limit = { 1 = 0.5 }
max_temperature_c = 85
source = "harness defaults"

[models.resnet152.bf16]
batch_size_per_gpu = 256
min_samples_per_sec_per_gpu = { 1 = 2000 }
min_weak_efficiency = { 2 = 0.97, 4 = 0.96, 8 = 0.95 }
strong_global_batch_size = 512
min_strong_efficiency = { 2 = 0.9, 4 = 0.8 }
max_straggler_ratio = { 2 = 1.03 }
source = "measured on gpu-017"

[models.vit_b_16.fp16]
batch_size_per_gpu = 128
max_temperature_c = 80
min_weak_efficiency = { 8 = 0.9 }
source = "measured on gpu-018"

[interconnect]
min_allreduce_busbw_gbps = { 2 = 290, 8 = 330 }
source = "measured on gpu-017"

[topology]
nvlinks_per_gpu = 18
p2p_all_pairs = true
pcie_generation = 5
pcie_width = 16
source = "HGX H200 baseboard"

[soak]
max_throughput_decay = 0.03
source = "harness default"
"""

CPU_PROFILE = """\
schema_version = 1
[hardware]
name = "cpu"
description = "any CPU, gloo"
device = "cpu"
[defaults]
gpu_counts = [1, 2]
models = ["resnet18"]
precisions = ["fp32"]
source = "harness defaults"
[models.resnet18.fp32]
batch_size_per_gpu = 8
source = "measured on a 2-core CI runner"
"""


def write(directory: Path, text: str, name: str = "good") -> Path:
    path = directory / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def edited(old: str, new: str, text: str = GOOD) -> str:
    """``text`` with one edit; fails loudly if the edit matched nothing (a test that cannot fail)."""
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in the base profile"
    return text.replace(old, new)


def problems_of(tmp_path: Path, text: str, name: str = "good") -> list[str]:
    path = write(tmp_path, text, name)
    with pytest.raises(ThresholdError) as caught:
        load_shipped_profile(path)
    assert caught.value.path == path
    assert str(caught.value) == "\n".join(caught.value.problems)
    return caught.value.problems


def only_problem(tmp_path: Path, text: str, name: str = "good") -> str:
    problems = problems_of(tmp_path, text, name)
    assert len(problems) == 1, problems
    return problems[0]


# ---------------------------------------------------------------------------------------------
# A good profile


def test_good_profile_round_trip(tmp_path):
    path = write(tmp_path, GOOD)
    profile = load_shipped_profile(path)

    assert profile.name == "good"
    assert profile.path == path
    assert profile.description == "NVIDIA H200 SXM 141 GB"
    assert profile.hardware == HardwareMatch(device="cuda", gpu_name_contains="H200", min_memory_gib=130.0)
    assert profile.peak_tflops == {"bf16": 989.0, "fp16": 989.0, "fp32": 67.0}
    assert profile.peak_tflops_source == "NVIDIA H200 datasheet (dense)"
    assert profile.gpu_counts == (1, 2, 4, 8)
    assert profile.models == ("resnet152",)
    assert profile.precisions == ("bf16",)
    assert profile.run == RunSettings(warmup_seconds=5, measure_seconds=10, timeout_seconds=600)
    assert set(profile.cases) == {("resnet152", "bf16"), ("vit_b_16", "fp16")}
    assert profile.table(INTERCONNECT_BOUNDS) == InterconnectBounds(min_allreduce_busbw_gbps={2: 290.0, 8: 330.0},
                                                      source="measured on gpu-017")
    assert profile.table(TOPOLOGY_BOUNDS) == TopologyBounds(nvlinks_per_gpu=18, p2p_all_pairs=True, pcie_generation=5,
                                                            pcie_width=16, source="HGX H200 baseboard")
    assert profile.table(SOAK_BOUNDS) == SoakBounds(max_throughput_decay=0.03, source="harness default")
    assert profile.raw["models"]["resnet152"]["bf16"]["batch_size_per_gpu"] == 256
    assert profile.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_bounds_merge_defaults_and_case_overrides(tmp_path):
    profile = load_shipped_profile(write(tmp_path, GOOD))

    resnet = profile.bounds("resnet152", "bf16")
    assert resnet == CaseBounds(
        model="resnet152", precision="bf16", batch_size_per_gpu=256,
        min_samples_per_sec_per_gpu={1: 2000.0},
        min_weak_efficiency={2: 0.97, 4: 0.96, 8: 0.95},
        strong_global_batch_size=512, min_strong_efficiency={2: 0.9, 4: 0.8},
        min_gpu_utilization_pct={1: 90.0}, min_power_fraction_of_limit={1: 0.5}, max_temperature_c=85.0,
        max_straggler_ratio={2: 1.03},  # the case's own value wins over [defaults]' 1.05
        max_step_time_cv={1: 0.05},
        source=resnet.source,
        inherited=("max_step_time_cv", "max_temperature_c", "min_gpu_utilization_pct", "min_power_fraction_of_limit"),
    )
    assert resnet.source.startswith("measured on gpu-017; ")
    assert resnet.source.endswith("from [defaults]: harness defaults")
    assert "max_straggler_ratio" not in resnet.source  # its own value, not inherited

    vit = profile.bounds("vit_b_16", "fp16")
    assert vit is not None
    assert vit.max_temperature_c == 80.0
    assert vit.max_straggler_ratio == {2: 1.05}
    assert vit.min_weak_efficiency == {8: 0.9}
    assert vit.min_samples_per_sec_per_gpu == {}
    assert vit.strong_global_batch_size is None and vit.min_strong_efficiency == {}


def test_resolved_bounds_have_a_json_form_and_say_what_came_from_defaults(tmp_path):
    profile = load_shipped_profile(write(tmp_path, GOOD))

    vit = profile.bounds("vit_b_16", "fp16")
    assert vit.inherited == ("max_step_time_cv", "max_straggler_ratio", "min_gpu_utilization_pct",
                             "min_power_fraction_of_limit")
    data = vit.to_dict()
    assert json.loads(json.dumps(data)) == data  # survives session.json as is
    assert data["min_weak_efficiency"] == {"8": 0.9}
    assert data["max_temperature_c"] == 80.0 and data["max_straggler_ratio"] == {"2": 1.05}
    assert data["min_samples_per_sec_per_gpu"] == {}
    assert "inherited" not in data  # a result carries it beside the bounds, as bounds_inherited
    assert set(data) == {f.name for f in dataclasses.fields(CaseBounds)} - {"inherited"}
    assert profile.table(INTERCONNECT_BOUNDS).to_dict() == {"min_allreduce_busbw_gbps": {"2": 290.0, "8": 330.0},
                                              "source": "measured on gpu-017", "references": {}}
    assert profile.table(TOPOLOGY_BOUNDS).to_dict()["nvlinks_per_gpu"] == 18
    assert profile.table(SOAK_BOUNDS).to_dict() == {"max_throughput_decay": 0.03, "source": "harness default"}


def test_bounds_of_a_case_the_profile_lacks_is_none(tmp_path):
    profile = load_shipped_profile(write(tmp_path, GOOD))
    assert profile.bounds("resnet50", "bf16") is None
    assert profile.bounds("resnet152", "fp32") is None


def test_case_without_inherited_bounds_keeps_its_own_source(tmp_path):
    profile = load_shipped_profile(write(tmp_path, CPU_PROFILE, name="cpu"))
    case = profile.bounds("resnet18", "fp32")
    assert case is not None and case.source == "measured on a 2-core CI runner"
    assert case.inherited == ()


def test_minimal_cpu_profile_uses_defaults(tmp_path):
    profile = load_shipped_profile(write(tmp_path, CPU_PROFILE, name="cpu"))
    assert profile.hardware == HardwareMatch(device="cpu")
    assert profile.peak_tflops == {} and profile.peak_tflops_source is None
    assert profile.run == RunSettings(warmup_seconds=5.0, measure_seconds=10.0, timeout_seconds=600.0)
    assert profile.tables == {}


def test_numbers_are_floats_and_integers_stay_integers(tmp_path):
    profile = load_shipped_profile(write(tmp_path, GOOD))
    case = profile.bounds("resnet152", "bf16")
    assert type(case.min_samples_per_sec_per_gpu[1]) is float
    assert type(case.batch_size_per_gpu) is int
    assert all(type(count) is int for count in case.min_weak_efficiency)


# ---------------------------------------------------------------------------------------------
# Syntax, reading


def test_toml_syntax_error_names_line_and_column(tmp_path):
    text = edited('device = "cuda"', 'device = cuda')
    problem = only_problem(tmp_path, text)
    assert problem.startswith(f"{tmp_path / 'good.toml'}: invalid TOML: ")
    assert "line 6, column 10" in problem
    assert "fix the syntax" in problem


def test_missing_file(tmp_path):
    path = tmp_path / "absent.toml"
    with pytest.raises(ThresholdError, match=r"absent\.toml: no such file"):
        load_shipped_profile(path)


def test_not_utf8(tmp_path):
    path = tmp_path / "good.toml"
    path.write_bytes(GOOD.encode("utf-8").replace(b"NVIDIA H200", b"NVIDIA \xff"))
    with pytest.raises(ThresholdError,
                       match=r"good\.toml: not UTF-8 text \(bad byte at offset \d+\); TOML files must be UTF-8"):
        load_shipped_profile(path)


def test_message_names_the_path_as_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub", edited("batch_size_per_gpu = 256", "batch_size_per_gpu = 0"))
    with pytest.raises(ThresholdError) as caught:
        load_shipped_profile("sub/good.toml")
    assert caught.value.problems[0].startswith("sub/good.toml: models.resnet152.bf16.batch_size_per_gpu = 0: ")


# ---------------------------------------------------------------------------------------------
# Unknown keys, models, precisions


def test_unknown_case_key_suggests_the_closest(tmp_path):
    text = edited("min_weak_efficiency = { 2 = 0.97, 4 = 0.96, 8 = 0.95 }", "min_weak_eff = { 2 = 0.97 }")
    problem = only_problem(tmp_path, text)
    assert problem.startswith(f"{tmp_path / 'good.toml'}: models.resnet152.bf16.min_weak_eff: unknown key; "
                              "allowed keys here: batch_size_per_gpu, min_samples_per_sec_per_gpu, "
                              "min_weak_efficiency, ")
    assert problem.endswith("; did you mean min_weak_efficiency?")


@pytest.mark.parametrize(
    ("old", "new", "key_path", "allowed_start"),
    [
        ("schema_version = 1", "schema_version = 1\ncolour = 1",
         "colour", "allowed keys here: schema_version, hardware, run, "),
        ('device = "cuda"', 'device = "cuda"\nvendor = "nvidia"',
         "hardware.vendor", "allowed keys here: name, description, device, "),
        ('gpu_name_contains = "H200"', 'gpu_name = "H200"',
         "hardware.match.gpu_name", "allowed keys here: gpu_name_contains, "),
        ("warmup_seconds = 5", "warmup_s = 5",
         "run.warmup_s", "allowed keys here: warmup_seconds, measure_seconds, timeout_seconds"),
        ("max_temperature_c = 85", "max_temp_c = 85",
         "defaults.max_temp_c", "allowed keys here: gpu_counts, models, precisions, "),
        ("source = \"HGX H200 baseboard\"", "source = \"HGX H200 baseboard\"\nnvlink = 18",
         "topology.nvlink", "allowed keys here: nvlinks_per_gpu, "),
    ],
)
def test_unknown_key_at_every_level(tmp_path, old, new, key_path, allowed_start):
    problems = [line for line in problems_of(tmp_path, edited(old, new)) if ": unknown key; " in line]
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{tmp_path / 'good.toml'}: {key_path}: unknown key; {allowed_start}")


def test_unknown_peak_tflops_precision(tmp_path):
    problem = only_problem(tmp_path, edited("fp32 = 67 }", "fp32 = 67, fp8 = 1979 }"))
    assert problem == (f"{tmp_path / 'good.toml'}: hardware.peak_tflops.fp8: unknown precision; "
                       "known precisions: fp32, fp16, bf16")


def test_key_in_the_wrong_section_says_where_it_belongs(tmp_path):
    text = edited('source = "harness defaults"', 'source = "harness defaults"\nbatch_size_per_gpu = 64')
    problem = only_problem(tmp_path, text)
    assert problem.startswith(f"{tmp_path / 'good.toml'}: defaults.batch_size_per_gpu: unknown key; ")
    assert problem.endswith("; batch_size_per_gpu belongs in [models.<model>.<precision>]")


def test_renamed_key_from_the_design_sketch(tmp_path):
    problem = only_problem(tmp_path, edited("min_samples_per_sec_per_gpu = { 1 = 2000 }",
                                            "min_throughput_per_gpu = { 1 = 2000 }"))
    assert problem.endswith("did you mean min_samples_per_sec_per_gpu?")


def test_unknown_model_lists_known_models(tmp_path):
    problem = only_problem(tmp_path, edited("[models.vit_b_16.fp16]", "[models.vit_b16.fp16]"))
    known = ", ".join(MODELS)
    assert problem == (f"{tmp_path / 'good.toml'}: models.vit_b16: unknown model; known models: {known}; "
                       "did you mean vit_b_16?")


def test_unknown_precision_lists_known_precisions(tmp_path):
    problem = only_problem(tmp_path, edited("[models.vit_b_16.fp16]", "[models.vit_b_16.fp8]"))
    assert problem == (f"{tmp_path / 'good.toml'}: models.vit_b_16.fp8: unknown precision; known precisions: "
                       f"{', '.join(PRECISIONS)}; a case is a [models.vit_b_16.<precision>] table")


def test_unknown_model_in_the_default_matrix(tmp_path):
    problem = only_problem(tmp_path, edited('models = ["resnet152"]', 'models = ["resnet152", "resnet9"]'))
    assert problem == (f'{tmp_path / "good.toml"}: defaults.models[1] = "resnet9": unknown model; known models: '
                       f"{', '.join(MODELS)}")


def test_unknown_precision_in_the_default_matrix(tmp_path):
    problem = only_problem(tmp_path, edited('precisions = ["bf16"]', 'precisions = ["BF16"]'))
    assert problem == (f'{tmp_path / "good.toml"}: defaults.precisions[0] = "BF16": unknown precision; '
                       "known precisions: fp32, fp16, bf16")


# ---------------------------------------------------------------------------------------------
# Wrong types


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("min_samples_per_sec_per_gpu = { 1 = 2000 }", 'min_samples_per_sec_per_gpu = { 1 = "2000" }',
         'models.resnet152.bf16.min_samples_per_sec_per_gpu.1 = "2000": expected a number, got string; '
         "remove the quotes"),
        ("min_samples_per_sec_per_gpu = { 1 = 2000 }", 'min_samples_per_sec_per_gpu = { 1 = "fast" }',
         'models.resnet152.bf16.min_samples_per_sec_per_gpu.1 = "fast": expected a number, got string'),
        # A bound holds for the GPU count it was measured on: a bare number says none, and is refused.
        ("min_samples_per_sec_per_gpu = { 1 = 2000 }", "min_samples_per_sec_per_gpu = 2000",
         "models.resnet152.bf16.min_samples_per_sec_per_gpu = 2000: expected a table of GPU count = value, e.g. "
         "{ 4 = ... }; the key is how many GPUs were measured at once: a bound holds only for the GPU count it "
         "was measured on (a 1-GPU figure is not stretched to 4), got integer"),
        ("batch_size_per_gpu = 256", "batch_size_per_gpu = 256.5",
         "models.resnet152.bf16.batch_size_per_gpu = 256.5: expected an integer, got float"),
        ("batch_size_per_gpu = 256", "batch_size_per_gpu = 256.0",
         "models.resnet152.bf16.batch_size_per_gpu = 256.0: expected an integer, got float; "
         "write 256, without a decimal point"),
        ("max_straggler_ratio = { 2 = 1.03 }", "max_straggler_ratio = { 2 = true }",
         "models.resnet152.bf16.max_straggler_ratio.2 = true: expected a number, got boolean "
         "(true/false is not a number)"),
        ("p2p_all_pairs = true", 'p2p_all_pairs = "true"',
         'topology.p2p_all_pairs = "true": expected a boolean (true or false), got string; remove the quotes'),
        ("gpu_counts = [1, 2, 4, 8]", "gpu_counts = 8",
         "defaults.gpu_counts = 8: expected an array of GPU counts, got integer"),
        ("gpu_counts = [1, 2, 4, 8]", "gpu_counts = [1, 2.0]",
         "defaults.gpu_counts[1] = 2.0: expected an integer, got float; write 2, without a decimal point"),
        ("min_weak_efficiency = { 2 = 0.97, 4 = 0.96, 8 = 0.95 }", "min_weak_efficiency = 0.95",
         "models.resnet152.bf16.min_weak_efficiency = 0.95: expected a table of GPU count = value, "
         "e.g. { 2 = ..., 8 = ... }, got float"),
        ("max_temperature_c = 85", "max_temperature_c = nan",
         "defaults.max_temperature_c = nan: expected a finite number"),
        ('description = "NVIDIA H200 SXM 141 GB"', "description = 2024-01-01",
         "hardware.description = 2024-01-01: expected a string, got date"),
    ],
)
def test_wrong_type_says_expected_and_got(tmp_path, old, new, expected):
    assert only_problem(tmp_path, edited(old, new)) == f"{tmp_path / 'good.toml'}: {expected}"


def test_gpu_count_key_that_is_not_an_integer(tmp_path):
    problem = only_problem(tmp_path, edited("{ 2 = 0.97, 4 = 0.96, 8 = 0.95 }", '{ 2 = 0.97, two = 0.96, 8 = 0.95 }'))
    assert problem == (f"{tmp_path / 'good.toml'}: models.resnet152.bf16.min_weak_efficiency.two = 0.96: GPU-count key "
                       '"two" is not a plain integer; expected an integer GPU count >= 2, e.g. { 2 = ..., 8 = ... }')


@pytest.mark.parametrize("count", [0, 1])
def test_gpu_count_key_out_of_range(tmp_path, count):
    problem = only_problem(tmp_path, edited("{ 2 = 290, 8 = 330 }", f"{{ {count} = 290, 8 = 330 }}"))
    assert problem == (f"{tmp_path / 'good.toml'}: interconnect.min_allreduce_busbw_gbps.{count} = 290: "
                       f"GPU count {count} is out of range; GPU-count keys here are integers >= 2 "
                       "(a single GPU has nothing to scale or all-reduce against)")


def test_section_that_is_not_a_table(tmp_path):
    text = edited("[soak]\nmax_throughput_decay = 0.03\nsource = \"harness default\"\n", 'soak = "yes"\n')
    # A top-level key after a [table] header belongs to that table; put it first.
    text = 'soak = "yes"\n' + text.replace('soak = "yes"\n', "")
    problem = only_problem(tmp_path, text)
    assert problem == f'{tmp_path / "good.toml"}: soak = "yes": expected a table, got string'


# ---------------------------------------------------------------------------------------------
# Out-of-range values


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("batch_size_per_gpu = 256", "batch_size_per_gpu = 0",
         "models.resnet152.bf16.batch_size_per_gpu = 0: must be >= 1 (samples per GPU per step)"),
        ("batch_size_per_gpu = 256", "batch_size_per_gpu = -4",
         "models.resnet152.bf16.batch_size_per_gpu = -4: must be >= 1 (samples per GPU per step)"),
        ("min_samples_per_sec_per_gpu = { 1 = 2000 }", "min_samples_per_sec_per_gpu = { 1 = 0 }",
         "models.resnet152.bf16.min_samples_per_sec_per_gpu.1 = 0: must be > 0 (samples/s per GPU)"),
        ("min_gpu_utilization_pct = { 1 = 90 }", "min_gpu_utilization_pct = { 1 = 101 }",
         "defaults.min_gpu_utilization_pct.1 = 101: must be between 0 and 100 (percent)"),
        ("min_gpu_utilization_pct = { 1 = 90 }", "min_gpu_utilization_pct = { 1 = -1 }",
         "defaults.min_gpu_utilization_pct.1 = -1: must be between 0 and 100 (percent)"),
        ("max_straggler_ratio = { 2 = 1.03 }", "max_straggler_ratio = { 2 = 0.95 }",
         "models.resnet152.bf16.max_straggler_ratio.2 = 0.95: must be >= 1 (slowest rank / fastest rank)"),
        ("max_straggler_ratio = { 2 = 1.03 }", "max_straggler_ratio = { 1 = 1.03 }",
         "models.resnet152.bf16.max_straggler_ratio.1 = 1.03: GPU count 1 is out of range; GPU-count keys here "
         "are integers >= 2 (a figure between GPUs needs two)"),
        ("max_step_time_cv = { 1 = 0.05 }", "max_step_time_cv = { 1 = 0 }",
         "defaults.max_step_time_cv.1 = 0: must be a fraction in (0, 1]; use 0.05 for 5 %, not 5"),
        ("max_step_time_cv = { 1 = 0.05 }", "max_step_time_cv = { 1 = 5 }",
         "defaults.max_step_time_cv.1 = 5: must be a fraction in (0, 1]; use 0.05 for 5 %, not 5"),
        ("min_power_fraction_of_limit = { 1 = 0.5 }", "min_power_fraction_of_limit = { 1 = 50 }",
         "defaults.min_power_fraction_of_limit.1 = 50: must be a fraction in (0, 1] of the power limit; use 0.5, "
         "not 50"),
        # A reference bound: the limit it gives is range-checked, and its tolerance must be a fraction.
        ("min_samples_per_sec_per_gpu = { 1 = 2000 }", "min_samples_per_sec_per_gpu = { 1 = { ref = 2000, tol = 3 } }",
         "models.resnet152.bf16.min_samples_per_sec_per_gpu.1.tol = 3: must be a fraction in [0, 1) for a min_ "
         "bound (0.03 for 3 %, not 3), in [0, 100] for a max_ bound"),
        ("min_samples_per_sec_per_gpu = { 1 = 2000 }", "min_samples_per_sec_per_gpu = { 1 = { ref = 2000 } }",
         "models.resnet152.bf16.min_samples_per_sec_per_gpu.1.tol: required key is missing: the tolerance, a "
         "fraction in [0, 1)"),
        ("min_weak_efficiency = { 2 = 0.97, 4 = 0.96, 8 = 0.95 }",
         "min_weak_efficiency = { 2 = { ref = 0.98, tol = 0.01, node_gpus = 2.5 }, 4 = 0.96, 8 = 0.95 }",
         "models.resnet152.bf16.min_weak_efficiency.2.node_gpus = 2.5: must be a whole number of GPUs >= 1"),
        ("2 = 290, 8 = 330", "2 = { ref = 300, tol = 0.05, hosts = 3 }, 8 = { ref = 330, tol = 1.5 }",
         "interconnect.min_allreduce_busbw_gbps.8.tol = 1.5: must be a fraction in [0, 1) for a min_ bound (0.03 "
         "for 3 %, not 3), in [0, 100] for a max_ bound"),
        ("max_temperature_c = 85", "max_temperature_c = 0",
         "defaults.max_temperature_c = 0: must be between 0 and 150 (degrees Celsius)"),
        ("gpu_counts = [1, 2, 4, 8]", "gpu_counts = [0, 2]",
         "defaults.gpu_counts[0] = 0: must be >= 1 (GPUs)"),
        ("gpu_counts = [1, 2, 4, 8]", "gpu_counts = [1, 2, 2]",
         "defaults.gpu_counts[2] = 2: repeats an earlier entry; list each GPU count once"),
        ("gpu_counts = [1, 2, 4, 8]", "gpu_counts = []",
         "defaults.gpu_counts = []: must list at least one GPU count"),
        ("2 = 290, 8 = 330", "2 = -290, 8 = 330",
         "interconnect.min_allreduce_busbw_gbps.2 = -290: must be > 0 GB/s"),
        ("max_throughput_decay = 0.03", "max_throughput_decay = 3",
         "soak.max_throughput_decay = 3: must be a fraction in (0, 1); use 0.03 for 3 %, not 3"),
        ("pcie_width = 16", "pcie_width = 12",
         "topology.pcie_width = 12: must be one of 1, 2, 4, 8, 16"),
        ("pcie_generation = 5", "pcie_generation = 0",
         "topology.pcie_generation = 0: must be between 1 and 7"),
        ("nvlinks_per_gpu = 18", "nvlinks_per_gpu = -1",
         "topology.nvlinks_per_gpu = -1: must be >= 0 (links)"),
        ('device = "cuda"', 'device = "gpu"',
         'hardware.device = "gpu": must be one of "cuda", "cpu"'),
        ("min_memory_gib = 130", "min_memory_gib = 0",
         "hardware.match.min_memory_gib = 0: must be > 0 GiB"),
        ("bf16 = 989,", "bf16 = 0,",
         "hardware.peak_tflops.bf16 = 0: must be > 0 TFLOP/s"),
        ('source = "measured on gpu-018"', 'source = "  "',
         'models.vit_b_16.fp16.source = "  ": must not be empty'),
        ("warmup_seconds = 5", "warmup_seconds = -1",
         "run.warmup_seconds = -1: must be > 0 s"),
    ],
)
def test_out_of_range_says_what_is_allowed(tmp_path, old, new, expected):
    assert only_problem(tmp_path, edited(old, new)) == f"{tmp_path / 'good.toml'}: {expected}"


@pytest.mark.parametrize(("value", "shown"), [("1.2", "1.2"), ("96", "96"), ("0", "0"), ("-0.5", "-0.5")])
def test_efficiency_outside_zero_one(tmp_path, value, shown):
    problem = only_problem(tmp_path, edited("4 = 0.96,", f"4 = {value},"))
    assert problem == (f"{tmp_path / 'good.toml'}: models.resnet152.bf16.min_weak_efficiency.4 = {shown}: "
                       "an efficiency is a fraction in (0, 1]; use 0.96, not 96")


def test_strong_efficiency_above_one(tmp_path):
    problem = only_problem(tmp_path, edited("{ 2 = 0.9, 4 = 0.8 }", "{ 2 = 90, 4 = 0.8 }"))
    assert problem == (f"{tmp_path / 'good.toml'}: models.resnet152.bf16.min_strong_efficiency.2 = 90: "
                       "an efficiency is a fraction in (0, 1]; use 0.96, not 96")


def test_long_values_are_truncated_to_80_characters(tmp_path):
    long_name = "x" * 200
    problem = only_problem(tmp_path, edited('device = "cuda"', f'device = "{long_name}"'))
    shown = problem.split(" = ", 1)[1].split(": must be", 1)[0]
    assert len(shown) == 80
    assert shown.startswith('"xxx') and shown.endswith("...")


# ---------------------------------------------------------------------------------------------
# Missing keys


@pytest.mark.parametrize(
    ("old", "key_path", "what"),
    [
        ("schema_version = 1\n", "schema_version", "key"),
        ('name = "good"\n', "hardware.name", "key"),
        ('device = "cuda"\n', "hardware.device", "key"),
        ('description = "NVIDIA H200 SXM 141 GB"\n', "hardware.description", "key"),
        ('source = "harness defaults"\n', "defaults.source", "key"),
        ("gpu_counts = [1, 2, 4, 8]\n", "defaults.gpu_counts", "key"),
        ("batch_size_per_gpu = 256\n", "models.resnet152.bf16.batch_size_per_gpu", "key"),
        ('source = "measured on gpu-018"\n', "models.vit_b_16.fp16.source", "key"),
        ('source = "measured on gpu-017"\n\n[topology]', "interconnect.source", "key"),
        ("max_throughput_decay = 0.03\n", "soak.max_throughput_decay", "key"),
    ],
)
def test_missing_required_key(tmp_path, old, key_path, what):
    new = "\n[topology]" if old.endswith("[topology]") else ""
    problem = only_problem(tmp_path, edited(old, new))
    assert problem.startswith(f"{tmp_path / 'good.toml'}: {key_path}: required {what} is missing: ")


def test_missing_defaults_table(tmp_path):
    text = CPU_PROFILE.split("[defaults]")[0] + "[models.resnet18.fp32]\nbatch_size_per_gpu = 8\nsource = \"x\"\n"
    problem = only_problem(tmp_path, text, name="cpu")
    assert problem == (f"{tmp_path / 'cpu.toml'}: defaults: required table is missing: "
                       "[defaults]: the default matrix and bounds shared by every case")


def test_missing_key_message_says_what_the_key_is(tmp_path):
    problem = only_problem(tmp_path, edited('source = "harness defaults"\n', ""))
    assert problem.endswith("required key is missing: where the numbers came from: a measurement (who, which node, "
                            "when) or a cited publication")


def test_cuda_profile_needs_gpu_name_contains(tmp_path):
    problem = only_problem(tmp_path, edited('gpu_name_contains = "H200", ', ""))
    assert problem.startswith(f"{tmp_path / 'good.toml'}: hardware.match.gpu_name_contains: required key is missing "
                              "for a cuda profile: ")


def test_cuda_profile_without_match_table_needs_gpu_name_contains(tmp_path):
    problem = only_problem(tmp_path, edited('match = { gpu_name_contains = "H200", min_memory_gib = 130 }\n', ""))
    assert problem.startswith(f"{tmp_path / 'good.toml'}: hardware.match.gpu_name_contains: required key is missing")


def test_cuda_profile_needs_peak_tflops(tmp_path):
    problem = only_problem(tmp_path, edited("peak_tflops = { bf16 = 989, fp16 = 989, fp32 = 67 }\n", ""))
    assert problem.startswith(f"{tmp_path / 'good.toml'}: hardware.peak_tflops: "
                              "required key is missing for a cuda profile: ")


def test_peak_tflops_needs_its_source(tmp_path):
    problem = only_problem(tmp_path, edited('peak_tflops_source = "NVIDIA H200 datasheet (dense)"\n', ""))
    assert problem.startswith(f"{tmp_path / 'good.toml'}: hardware.peak_tflops_source: required key is missing when "
                              "peak_tflops is given")


def test_cuda_peak_tflops_must_cover_every_case_precision(tmp_path):
    problem = only_problem(tmp_path, edited("fp16 = 989, ", ""))
    assert problem == (f"{tmp_path / 'good.toml'}: hardware.peak_tflops = {{ bf16 = 989, fp32 = 67 }}: has no fp16 "
                       "entry, but [models.vit_b_16.fp16] runs fp16; add fp16 = <dense TFLOP/s per GPU> "
                       "(MFU needs it)")


def test_cpu_profile_match_must_be_empty(tmp_path):
    text = edited('device = "cpu"\n', 'device = "cpu"\nmatch = { gpu_name_contains = "H200" }\n', CPU_PROFILE)
    problem = only_problem(tmp_path, text, name="cpu")
    assert problem == (f'{tmp_path / "cpu.toml"}: hardware.match.gpu_name_contains = "H200": a cpu profile matches '
                       "no GPU; leave hardware.match out")


def test_memory_bounds_that_no_gpu_can_meet(tmp_path):
    problem = only_problem(tmp_path, edited("min_memory_gib = 130", "min_memory_gib = 130, max_memory_gib = 100"))
    assert problem == (f"{tmp_path / 'good.toml'}: hardware.match.max_memory_gib = 100: must be >= min_memory_gib "
                       "(130); no GPU could match")


# ---------------------------------------------------------------------------------------------
# Rules across keys


def test_schema_version_other_than_1_is_the_only_problem(tmp_path):
    text = edited("schema_version = 1", "schema_version = 2") + "\n[future]\nthing = 1\n"
    problem = only_problem(tmp_path, text)
    assert problem == (f"{tmp_path / 'good.toml'}: schema_version = 2: this harness reads schema_version = 1 only; "
                       "use the harness version that wrote the file, or convert it (thresholds/README.md)")


def test_schema_version_of_the_wrong_type(tmp_path):
    problem = only_problem(tmp_path, edited("schema_version = 1", 'schema_version = "1"'))
    assert problem == (f'{tmp_path / "good.toml"}: schema_version = "1": expected an integer, got string; '
                       "remove the quotes")


def test_name_must_equal_the_file_stem(tmp_path):
    problem = only_problem(tmp_path, GOOD, name="h200")
    assert problem == (f'{tmp_path / "h200.toml"}: hardware.name = "good": must equal the file name without .toml '
                       '("h200"); rename the file or change the name')


def test_default_matrix_case_without_its_table(tmp_path):
    problem = only_problem(tmp_path, edited('models = ["resnet152"]', 'models = ["resnet152", "resnet50"]'))
    assert problem == (f"{tmp_path / 'good.toml'}: models.resnet50.bf16: required table is missing: defaults.models "
                       "and defaults.precisions put resnet50 x bf16 in the default matrix; add "
                       "[models.resnet50.bf16] with batch_size_per_gpu and source, or take it out of the matrix")


def test_strong_global_batch_not_divisible_names_the_counts(tmp_path):
    text = edited("strong_global_batch_size = 512", "strong_global_batch_size = 500")
    text = edited("{ 2 = 0.9, 4 = 0.8 }", "{ 2 = 0.9, 3 = 0.85, 8 = 0.8 }", text)
    problem = only_problem(tmp_path, text)
    assert problem == (f"{tmp_path / 'good.toml'}: models.resnet152.bf16.strong_global_batch_size = 500: not divisible "
                       "by 3, 8 (GPU counts in min_strong_efficiency); the global batch must split evenly over the "
                       "GPUs: use a multiple of 24")


def test_strong_efficiency_needs_a_global_batch(tmp_path):
    problem = only_problem(tmp_path, edited("strong_global_batch_size = 512\n", ""))
    assert problem == (f"{tmp_path / 'good.toml'}: models.resnet152.bf16.min_strong_efficiency = "
                       "{ 2 = 0.9, 4 = 0.8 }: needs strong_global_batch_size in the same table: "
                       "strong scaling fixes the global batch")


def test_timeout_must_leave_room_for_warmup_and_measurement(tmp_path):
    problem = only_problem(tmp_path, edited("timeout_seconds = 600", "timeout_seconds = 15"))
    assert problem == (f"{tmp_path / 'good.toml'}: run.timeout_seconds = 15: must exceed warmup_seconds + "
                       "measure_seconds (15 s), with room for start-up and model build")


def test_an_adaptive_window_cap_below_its_minimum_is_refused(tmp_path):
    problem = only_problem(tmp_path, edited("timeout_seconds = 600", "timeout_seconds = 600\nmax_measure_seconds = 4"))
    assert problem == (f"{tmp_path / 'good.toml'}: run.max_measure_seconds = 4: must be at least measure_seconds "
                       "(10 s), the least an adaptive window lasts")


def test_a_ci_target_in_percent_is_refused(tmp_path):
    problem = only_problem(tmp_path, edited("timeout_seconds = 600", "timeout_seconds = 600\nci_target = 1"))
    assert problem.startswith(f"{tmp_path / 'good.toml'}: run.ci_target = 1: must be a fraction in [0, 1)")


def test_every_problem_of_a_file_is_reported_at_once(tmp_path):
    text = edited("batch_size_per_gpu = 256", "batch_size_per_gpu = 0")
    text = edited("4 = 0.96,", "4 = 96,", text)
    text = edited('precisions = ["bf16"]', 'precisions = ["bf16"]\nmodel = "resnet50"', text)
    text = edited("max_throughput_decay = 0.03", "max_throughput_decay = -1", text)
    problems = problems_of(tmp_path, text, name="other")
    assert [line.split(": ", 2)[1] for line in problems] == [
        "defaults.model",
        "models.resnet152.bf16.batch_size_per_gpu = 0",
        "models.resnet152.bf16.min_weak_efficiency.4 = 96",
        "soak.max_throughput_decay = -1",
        'hardware.name = "good"',
    ]


def test_threshold_error_survives_pickling(tmp_path):
    problems = problems_of(tmp_path, GOOD, name="other")
    err = ThresholdError(tmp_path / "other.toml", problems)
    copy = pickle.loads(pickle.dumps(err))
    assert copy.path == err.path and copy.problems == err.problems and str(copy) == str(err)


# ---------------------------------------------------------------------------------------------
# Directories, default directory, CLI


def test_load_profiles_sorted_by_name(tmp_path):
    write(tmp_path, GOOD)
    write(tmp_path, CPU_PROFILE, name="cpu")
    (tmp_path / "README.md").write_text("not a profile")
    assert [profile.name for profile in load_shipped_profiles(tmp_path)] == ["cpu", "good"]


def test_load_profiles_lists_every_bad_file(tmp_path):
    write(tmp_path, GOOD)
    write(tmp_path, edited("batch_size_per_gpu = 256", "batch_size_per_gpu = 0"), name="bad1")
    write(tmp_path, "schema_version = ", name="bad2")
    with pytest.raises(ThresholdError) as caught:
        load_shipped_profiles(tmp_path)
    err = caught.value
    assert err.path == tmp_path
    assert err.problems[0].startswith(f'{tmp_path / "bad1.toml"}: models.resnet152.bf16.batch_size_per_gpu = 0: ')
    assert err.problems[1] == (f'{tmp_path / "bad1.toml"}: hardware.name = "good": must equal the file name '
                               'without .toml ("bad1"); rename the file or change the name')
    assert err.problems[2].startswith(f"{tmp_path / 'bad2.toml'}: invalid TOML: ")
    assert len(err.problems) == 3


def test_load_profiles_of_an_empty_directory(tmp_path):
    assert load_shipped_profiles(tmp_path) == []


def test_load_profiles_of_a_missing_directory(tmp_path):
    with pytest.raises(ThresholdError, match="absent: not a directory of threshold files"):
        load_shipped_profiles(tmp_path / "absent")


def test_default_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_THRESHOLDS_DIR", str(tmp_path))
    assert default_thresholds_dir() == tmp_path


def test_default_dir_beside_the_package(monkeypatch):
    monkeypatch.delenv("HARNESS_THRESHOLDS_DIR", raising=False)
    assert default_thresholds_dir() == REPO_THRESHOLDS_DIR


def test_cli_check_all_good(tmp_path, capsys):
    good = write(tmp_path, GOOD)
    cpu = write(tmp_path, CPU_PROFILE, name="cpu")
    assert cli_check([str(good), str(cpu)], BOUNDS_TABLES) == 0
    out, err = capsys.readouterr()
    assert out == f"ok  {good}  (2 cases)\nok  {cpu}  (1 case)\n"
    assert err == ""


def test_cli_check_a_bad_file(tmp_path, capsys):
    good = write(tmp_path, GOOD)
    bad = write(tmp_path, edited("max_step_time_cv = { 1 = 0.05 }", "max_step_time_cv = { 1 = 5 }"), name="bad")
    assert cli_check([str(tmp_path)], BOUNDS_TABLES) == 1
    out, err = capsys.readouterr()
    assert out == f"ok  {good}  (2 cases)\n"
    assert f"{bad}: defaults.max_step_time_cv.1 = 5: must be a fraction in (0, 1]" in err
    assert err.endswith("problems in 1 of 2 threshold files (format: thresholds/README.md)\n")
    assert "Traceback" not in err


def test_cli_check_missing_file_is_bad_not_a_crash(tmp_path, capsys):
    assert cli_check([str(tmp_path / "absent.toml")], BOUNDS_TABLES) == 1
    assert "absent.toml: no such file" in capsys.readouterr().err


def test_cli_check_no_files(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HARNESS_THRESHOLDS_DIR", str(tmp_path))
    assert cli_check([], BOUNDS_TABLES) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (f"harness thresholds check: no threshold files (*.toml) found in {tmp_path}; pass files or a "
                   "directory, or set HARNESS_THRESHOLDS_DIR\n")


def test_cli_check_default_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HARNESS_THRESHOLDS_DIR", str(tmp_path))
    write(tmp_path, CPU_PROFILE, name="cpu")
    assert cli_check([], BOUNDS_TABLES) == 0
    assert capsys.readouterr().out == f"ok  {tmp_path / 'cpu.toml'}  (1 case)\n"


# ---------------------------------------------------------------------------------------------
# The shipped profiles, and the schema staying in step with its dataclasses and docs


def test_shipped_a100_profile():
    profile = load_shipped_profile(REPO_THRESHOLDS_DIR / "a100-80gb.toml")
    assert profile.hardware.device == "cuda" and profile.hardware.min_memory_gib == 70
    assert "a100" in profile.hardware.gpu_name_contains.lower()
    assert profile.peak_tflops == {"bf16": 312, "fp16": 312, "fp32": 19.5}
    assert profile.gpu_counts == (1, 2, 4, 8)
    assert set(profile.cases) == {(m, p) for m in ("resnet152", "vit_b_16") for p in ("fp16", "bf16")}
    resnet = profile.bounds("resnet152", "fp16")
    assert resnet.batch_size_per_gpu == 512 and resnet.min_samples_per_sec_per_gpu == {1: 1071}  # 1190 x 0.90
    assert resnet.min_weak_efficiency == {2: 0.969, 4: 0.961, 8: 0.954}  # published - 0.02
    assert resnet.strong_global_batch_size == 512 and resnet.min_strong_efficiency == {8: 0.287}
    assert profile.bounds("vit_b_16", "fp16").batch_size_per_gpu == 1024
    assert profile.bounds("vit_b_16", "bf16").min_strong_efficiency == {}  # none published
    assert resnet.min_gpu_utilization_pct == {1: 90}
    assert resnet.max_straggler_ratio == {2: 1.05} and resnet.max_step_time_cv == {1: 0.05}
    assert profile.definitions["training"].startswith("cited")  # shown, not judged (harness/definitions.py)
    assert "not published" in resnet.source
    assert profile.table(INTERCONNECT_BOUNDS).min_allreduce_busbw_gbps == {8: 208}  # 232 x 0.90


def test_shipped_v100_profile():
    profile = load_shipped_profile(REPO_THRESHOLDS_DIR / "v100-16gb.toml")
    assert profile.hardware.max_memory_gib == 20 and "v100" in profile.hardware.gpu_name_contains.lower()
    assert profile.peak_tflops == {"fp16": 125, "fp32": 15.7}  # V100 has no bf16
    assert profile.precisions == ("fp16",)
    assert profile.bounds("resnet152", "fp16").min_samples_per_sec_per_gpu == {1: 452}  # 503 x 0.90
    assert profile.bounds("vit_b_16", "fp16").batch_size_per_gpu == 128
    assert profile.table(INTERCONNECT_BOUNDS) is None  # no published figure


@pytest.mark.parametrize("path", sorted(REPO_THRESHOLDS_DIR.glob("*.toml")), ids=lambda path: path.name)
def test_every_shipped_profile_loads_and_cites_sources(path):
    profile = load_shipped_profile(path)
    assert all(case.source.strip() for case in profile.cases.values())
    assert cli_check([str(path)], BOUNDS_TABLES) == 0


def _dataclass_fields(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


@pytest.mark.parametrize(
    ("fields", "cls"),
    [
        (schema.CASE_FIELDS, CaseBounds),
        (schema.RUN_FIELDS, RunSettings),
        (schema.HARDWARE_MATCH_FIELDS, HardwareMatch),
    ],
)
def test_every_schema_key_reaches_its_dataclass(fields, cls):
    assert {spec.key for spec in fields} <= _dataclass_fields(cls)


@pytest.mark.parametrize("table", BOUNDS_TABLES, ids=lambda table: table.name)
def test_every_key_of_a_kinds_table_reaches_the_bounds_it_builds(table):
    """A shipped kind's table builds a dataclass holding every key it declares (a key the dataclass lacked would
    fail its build as the profile loads)."""
    built = type(table.build({spec.key: () for spec in table.fields}))  # a placeholder of each key
    assert dataclasses.is_dataclass(built)
    assert {spec.key for spec in table.fields} <= _dataclass_fields(built)


def test_inherited_bounds_are_case_fields():
    inherited = {spec.key for spec in schema.DEFAULTS_FIELDS} - {"gpu_counts", "models", "precisions", "source"}
    assert inherited == {spec.key for spec in schema.CASE_FIELDS if spec.inherit}
    assert inherited <= _dataclass_fields(CaseBounds)


def test_readme_documents_every_schema_key():
    readme = (REPO_THRESHOLDS_DIR / "README.md").read_text(encoding="utf-8")
    keys = {spec.key for fields in schema.sections_of(BOUNDS_TABLES).values() for spec in fields}
    assert sorted(key for key in keys if f"`{key}`" not in readme and f"[{key}]" not in readme) == []


def test_profile_is_frozen(tmp_path):
    profile = load_shipped_profile(write(tmp_path, GOOD))
    with pytest.raises(dataclasses.FrozenInstanceError):
        profile.name = "other"  # type: ignore[misc]
    assert isinstance(profile, Profile)
