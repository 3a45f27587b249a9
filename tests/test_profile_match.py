"""Profile selection (``select_profile``, ``check_homogeneous``) and ``harness detect``, against
stand-in profiles and hardware (no GPU and no threshold file needed)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.node.hardware import Hardware, HardwareError, describe
from harness.profile import match
from harness.profile.match import check_homogeneous, select_profile
from support.hardware import make_hardware


def profile(name: str, device: str = "cuda", contains: str | None = None,
            min_gib: float | None = None, max_gib: float | None = None,
            node_gpus: int | None = None) -> SimpleNamespace:
    """A stand-in for harness.profile.bounds.Profile with only the attributes selection reads."""
    return SimpleNamespace(
        name=name,
        path=Path(f"thresholds/{name}.toml"),
        hardware=SimpleNamespace(device=device, gpu_name_contains=contains,
                                 min_memory_gib=min_gib, max_memory_gib=max_gib, node_gpus=node_gpus),
    )


SHIPPED = [
    profile("a100-40gb", contains="A100", max_gib=50),
    profile("a100-80gb", contains="A100", min_gib=70),
    profile("cpu", device="cpu"),
    profile("h200", contains="H200", min_gib=130),
]


def test_mixed_models_are_refused_with_the_indices_of_the_common_model() -> None:
    hw = make_hardware(("NVIDIA H200", 140.4), ("NVIDIA A100-SXM4-80GB", 80.0), ("NVIDIA H200", 140.4))

    with pytest.raises(HardwareError) as excinfo:
        check_homogeneous(hw)

    assert str(excinfo.value) == (
        "several GPU models on this node: 0: NVIDIA H200, 1: NVIDIA A100-SXM4-80GB, 2: NVIDIA H200; DDP runs "
        "at the speed of the slowest GPU, so the node cannot be signed off as one. Restrict the run to one "
        "model with CUDA_VISIBLE_DEVICES=0,2 (with CUDA_DEVICE_ORDER=PCI_BUS_ID, so that these nvidia-smi "
        "indices mean the same GPUs to CUDA)."
    )


def test_one_model_is_homogeneous() -> None:
    check_homogeneous(make_hardware(("NVIDIA H200", 140.4), ("NVIDIA H200", 140.4)))


def test_select_profile_refuses_mixed_models() -> None:
    hw = make_hardware(("NVIDIA H200", 140.4), ("NVIDIA A100-SXM4-80GB", 80.0))

    with pytest.raises(HardwareError, match="^several GPU models on this node"):
        select_profile(hw, SHIPPED)


@pytest.mark.parametrize(
    ("gpu_name", "memory_gib", "expected"),
    [
        ("NVIDIA H200", 140.4, "h200"),
        ("NVIDIA A100-SXM4-80GB", 80.0, "a100-80gb"),
        ("NVIDIA A100-SXM4-40GB", 40.0, "a100-40gb"),
        ("nvidia a100-pcie-80gb", 79.2, "a100-80gb"),  # the name fragment matches case-insensitively
    ],
)
def test_select_profile_by_name_and_memory(gpu_name: str, memory_gib: float, expected: str) -> None:
    hw = make_hardware((gpu_name, memory_gib), (gpu_name, memory_gib))

    assert select_profile(hw, SHIPPED).name == expected


def test_memory_bounds_are_inclusive() -> None:
    profiles = [profile("exact", contains="X", min_gib=80, max_gib=80)]

    assert select_profile(make_hardware(("X", 80.0)), profiles).name == "exact"


def test_longest_name_fragment_wins() -> None:
    profiles = [profile("h200", contains="H200", min_gib=130), profile("h200-nvl", contains="H200 NVL")]

    assert select_profile(make_hardware(("NVIDIA H200 NVL", 140.4)), profiles).name == "h200-nvl"
    assert select_profile(make_hardware(("NVIDIA H200", 140.4)), profiles).name == "h200"


def test_a_memory_bound_beats_none_when_the_fragments_tie() -> None:
    profiles = [profile("any-h100", contains="H100"), profile("h100-80gb", contains="H100", min_gib=70)]

    assert select_profile(make_hardware(("NVIDIA H100 80GB HBM3", 79.6)), profiles).name == "h100-80gb"


def test_equally_specific_matches_are_an_error_naming_them() -> None:
    profiles = [profile("h200", contains="H200", min_gib=130), profile("h200-lab", contains="h200", min_gib=100)]

    with pytest.raises(HardwareError) as excinfo:
        select_profile(make_hardware(("NVIDIA H200", 140.4)), profiles)

    assert str(excinfo.value) == (
        "2 threshold profiles match this hardware (1 x NVIDIA H200 (140.4 GiB)) equally well: "
        f"h200 (H200, >= 130 GiB) from {Path('thresholds/h200.toml')}, "
        f"h200-lab (h200, >= 100 GiB) from {Path('thresholds/h200-lab.toml')}. "
        "Make their [hardware] match rules distinct, or pass --hardware NAME to pick one."
    )


def test_unknown_hardware_lists_known_profiles_and_how_to_calibrate() -> None:
    hw = make_hardware(*[("NVIDIA B200", 180.0)] * 4)

    with pytest.raises(HardwareError) as excinfo:
        select_profile(hw, SHIPPED)

    assert str(excinfo.value) == (
        "no threshold profile matches this hardware: 4 x NVIDIA B200 (180.0 GiB). Known profiles: "
        "a100-40gb (A100, <= 50 GiB), a100-80gb (A100, >= 70 GiB), cpu, h200 (H200, >= 130 GiB). "
        "Make one on a known-good node with `harness calibrate --name <new-profile>` (see "
        "docs/calibration.md), or pass --hardware NAME to use an existing profile deliberately."
    )


def test_memory_outside_every_bound_is_unknown_hardware() -> None:
    with pytest.raises(HardwareError, match=r"^no threshold profile matches this hardware: 1 x NVIDIA A100"):
        select_profile(make_hardware(("NVIDIA A100 60GB", 60.0)), SHIPPED)


def test_override_picks_the_named_profile_whatever_the_hardware() -> None:
    hw = make_hardware(("NVIDIA B200", 180.0))

    assert select_profile(hw, SHIPPED, override="h200").name == "h200"


def test_override_with_unknown_name_lists_known_names() -> None:
    with pytest.raises(HardwareError) as excinfo:
        select_profile(make_hardware(("NVIDIA H200", 140.4)), SHIPPED, override="h300")

    assert str(excinfo.value) == (
        "no threshold profile named 'h300' (--hardware). Known profiles: a100-40gb, a100-80gb, cpu, h200."
    )


def test_cpu_selects_the_cpu_profile() -> None:
    assert select_profile(make_hardware(), SHIPPED).name == "cpu"


def test_cpu_without_a_cpu_profile_says_why_there_is_no_gpu() -> None:
    with pytest.raises(HardwareError) as excinfo:
        select_profile(make_hardware(), [profile("h200", contains="H200")])

    assert str(excinfo.value).startswith(
        "no threshold profile matches this hardware: no GPU (nvmlInit failed: NVML Shared Library Not Found). "
        "Known profiles: h200 (H200). Make one"
    )


# ---------------------------------------------------------------------------------------------
# cli_detect


class FakeThresholdError(Exception):
    pass


@pytest.fixture
def fake_thresholds(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """Stands in for harness.profile.load so these tests do not depend on the threshold files;
    ``loaded_from`` lists the directories cli_detect loaded."""
    loaded = SimpleNamespace(loaded_from=[])

    def load_profiles(directory: Path, tables: object, sites_declared: bool) -> list[SimpleNamespace]:
        loaded.loaded_from.append(Path(directory))
        return SHIPPED

    monkeypatch.setattr(match, "ThresholdError", FakeThresholdError)
    monkeypatch.setattr(match, "default_thresholds_dir", lambda: Path("/shipped/thresholds"))
    monkeypatch.setattr(match, "load_profiles", load_profiles)
    return loaded


def test_cli_detect_prints_hardware_and_profile(
    fake_thresholds: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hw = make_hardware(("NVIDIA H200", 140.4))
    monkeypatch.setattr(match, "detect", lambda: hw)

    assert match.cli_detect(None, None, ()) == 0

    out = capsys.readouterr().out
    assert out == describe(hw) + f"\nprofile: h200 ({Path('thresholds/h200.toml')})\n"
    assert fake_thresholds.loaded_from == [Path("/shipped/thresholds")]


def test_cli_detect_uses_the_given_thresholds_dir_and_override(
    fake_thresholds: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(match, "detect", lambda: make_hardware())

    assert match.cli_detect("a100-80gb", "/site/thresholds", ()) == 0

    assert capsys.readouterr().out.endswith(f"profile: a100-80gb ({Path('thresholds/a100-80gb.toml')})\n")
    assert fake_thresholds.loaded_from == [Path("/site/thresholds")]


def test_cli_detect_reports_a_selection_error_without_traceback(
    fake_thresholds: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(match, "detect", lambda: make_hardware(("NVIDIA B200", 180.0)))

    assert match.cli_detect(None, None, ()) == 1

    captured = capsys.readouterr()
    assert captured.out.startswith("host: node01\n")
    assert "profile:" not in captured.out
    assert captured.err.startswith("error: no threshold profile matches this hardware: 1 x NVIDIA B200")
    assert "Traceback" not in captured.err


def test_cli_detect_reports_a_threshold_file_error(
    fake_thresholds: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(directory: Path, tables: object, sites_declared: bool) -> list[SimpleNamespace]:
        raise FakeThresholdError("thresholds/h200.toml: [defaults] max_straggler_ratio must be >= 1, got 0.9")

    monkeypatch.setattr(match, "load_profiles", broken)
    monkeypatch.setattr(match, "detect", lambda: make_hardware())

    assert match.cli_detect(None, None, ()) == 1

    assert capsys.readouterr().err == (
        "error: thresholds/h200.toml: [defaults] max_straggler_ratio must be >= 1, got 0.9\n"
    )


def test_cli_detect_reports_a_detection_error(
    fake_thresholds: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def lost_gpu() -> Hardware:
        raise HardwareError("NVML could not read GPU 2: GPU is lost.")

    monkeypatch.setattr(match, "detect", lost_gpu)

    assert match.cli_detect(None, None, ()) == 1

    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "error: NVML could not read GPU 2: GPU is lost.\n"


def test_cli_detect_with_the_real_thresholds_module_reports_a_missing_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-dir"

    assert match.cli_detect(None, str(missing), ()) == 1

    captured = capsys.readouterr()
    assert captured.out.startswith("host: ")
    assert captured.err.startswith("error: ")
    assert str(missing) in captured.err
    assert "Traceback" not in captured.err


def test_a_profile_fitted_on_this_node_size_wins_and_other_sizes_keep_the_general_one() -> None:
    # h100-80gb's bounds were fitted on nodes of 4 GPUs, h100-80gb-x2's on nodes of 2: a node of 2 GPUs
    # is judged by figures of its own shape, every other size by the general profile.
    profiles = [profile("h100-80gb", contains="H100 80GB HBM3", min_gib=70),
                profile("h100-80gb-x2", contains="H100 80GB HBM3", min_gib=70, node_gpus=2)]
    gpu = ("NVIDIA H100 80GB HBM3", 79.6)

    assert select_profile(make_hardware(gpu, gpu), profiles).name == "h100-80gb-x2"
    assert select_profile(make_hardware(gpu, gpu, gpu, gpu), profiles).name == "h100-80gb"
    assert select_profile(make_hardware(gpu), profiles).name == "h100-80gb"


def test_a_node_of_another_size_is_told_which_sizes_the_profiles_hold() -> None:
    profiles = [profile("h100-80gb-x2", contains="H100 80GB HBM3", min_gib=70, node_gpus=2)]
    gpu = ("NVIDIA H100 80GB HBM3", 79.6)

    with pytest.raises(HardwareError) as excinfo:
        select_profile(make_hardware(gpu, gpu, gpu), profiles)

    assert "h100-80gb-x2 (H100 80GB HBM3, >= 70 GiB, nodes of 2 GPUs)" in str(excinfo.value)
    assert "3 x NVIDIA H100 80GB HBM3" in str(excinfo.value)


@pytest.mark.parametrize(("gpus", "expected"), [(1, "h100-80gb"), (2, "h100-80gb-x2"), (4, "h100-80gb"),
                                                (8, "h100-80gb")])
def test_the_shipped_profiles_pick_the_h100_profile_of_the_node_size(gpus, expected):
    """The shipped thresholds/ together: the H100 profile fitted on nodes of 2 judges those, the one fitted on
    nodes of 4 every other size (NVML's name and memory of the lent H100s)."""
    from harness.kinds.shipped import load_shipped_profiles
    from harness.profile.load import default_thresholds_dir

    hw = make_hardware(*[("NVIDIA H100 80GB HBM3", 79.6)] * gpus)
    assert select_profile(hw, load_shipped_profiles(default_thresholds_dir())).name == expected
