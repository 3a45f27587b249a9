"""Which threshold profile signs this node off: its ``[hardware] match`` rule fits the detected
GPUs most specifically, or ``--hardware NAME`` names it.

Facts about GPU models (peak FLOP/s, expected throughput, which names mean what) live in the
threshold files, never in ``if/elif`` ladders here. ``cli_detect`` is ``harness detect``: the
detected hardware and the profile it selects.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Sequence

from harness.node.hardware import Hardware, HardwareError, describe, detect
from harness.profile.bounds import Profile
from harness.profile.load import ThresholdError, default_thresholds_dir, load_profiles
from harness.profile.tables import BoundsTable


def check_homogeneous(hw: Hardware) -> None:
    """Raise HardwareError when the visible GPUs are not all one model."""
    if len(hw.gpu_names) <= 1:
        return
    per_gpu = ", ".join(f"{gpu.index}: {gpu.name}" for gpu in hw.gpus)
    most_common_name = Counter(gpu.name for gpu in hw.gpus).most_common(1)[0][0]
    suggested = ",".join(str(gpu.index) for gpu in hw.gpus if gpu.name == most_common_name)
    raise HardwareError(
        f"several GPU models on this node: {per_gpu}; DDP runs at the speed of the slowest GPU, so the "
        f"node cannot be signed off as one. Restrict the run to one model with "
        f"CUDA_VISIBLE_DEVICES={suggested} (with CUDA_DEVICE_ORDER=PCI_BUS_ID, so that these "
        f"nvidia-smi indices mean the same GPUs to CUDA)."
    )


def select_profile(hw: Hardware, profiles: Sequence[Profile], override: str | None = None) -> Profile:
    """The threshold profile for ``hw``: the one named ``override`` (``--hardware``), or the one
    whose match rule fits the hardware most specifically."""
    if override is not None:
        for profile in profiles:
            if profile.name == override:
                return profile
        raise HardwareError(
            f"no threshold profile named {override!r} (--hardware). Known profiles: {_known_names(profiles)}."
        )
    check_homogeneous(hw)
    candidates = [profile for profile in profiles if _fits(profile, hw)]
    if not candidates:
        raise HardwareError(
            f"no threshold profile matches this hardware: {_hardware_summary(hw)}. "
            f"Known profiles: {_known_rules(profiles)}. Make one on a known-good node with "
            "`harness calibrate --name <new-profile>` (see docs/calibration.md), or pass --hardware NAME "
            "to use an existing profile deliberately."
        )
    best_specificity = max(_specificity(profile) for profile in candidates)
    best = [profile for profile in candidates if _specificity(profile) == best_specificity]
    if len(best) > 1:
        tied = ", ".join(f"{_rule_text(profile)} from {profile.path}" for profile in best)
        raise HardwareError(
            f"{len(best)} threshold profiles match this hardware ({_hardware_summary(hw)}) equally well: "
            f"{tied}. Make their [hardware] match rules distinct, or pass --hardware NAME to pick one."
        )
    return best[0]


def _fits(profile: Profile, hw: Hardware) -> bool:
    rule = profile.hardware
    if rule.device != hw.device:
        return False
    if hw.device == "cpu":
        return True
    assert hw.gpu_name is not None  # device "cuda" always has GPUs (Hardware.__post_init__)
    if rule.gpu_name_contains is not None and rule.gpu_name_contains.lower() not in hw.gpu_name.lower():
        return False
    # The smallest GPU decides: every rank must fit the profile's batch sizes.
    memory_gib = min(gpu.memory_total_gib for gpu in hw.gpus)
    if rule.min_memory_gib is not None and memory_gib < rule.min_memory_gib:
        return False
    if rule.max_memory_gib is not None and memory_gib > rule.max_memory_gib:
        return False
    return rule.node_gpus is None or rule.node_gpus == hw.gpu_count


def _specificity(profile: Profile) -> tuple[int, bool, int]:
    """Longer name fragments are more specific ("H200 NVL" over "H200"), then a profile fitted on this
    node's size (its bounds are of this shape), then memory bounds."""
    rule = profile.hardware
    memory_bounds = (rule.min_memory_gib is not None) + (rule.max_memory_gib is not None)
    return (len(rule.gpu_name_contains or ""), rule.node_gpus is not None, memory_bounds)


def _rule_text(profile: Profile) -> str:
    rule = profile.hardware
    if rule.device == "cpu":
        return profile.name
    parts = [rule.gpu_name_contains or "any GPU"]
    if rule.min_memory_gib is not None:
        parts.append(f">= {rule.min_memory_gib:g} GiB")
    if rule.max_memory_gib is not None:
        parts.append(f"<= {rule.max_memory_gib:g} GiB")
    if rule.node_gpus is not None:
        parts.append(f"nodes of {rule.node_gpus} GPUs")
    return f"{profile.name} ({', '.join(parts)})"


def _known_rules(profiles: Sequence[Profile]) -> str:
    if not profiles:
        return "none (no threshold file was found)"
    return ", ".join(_rule_text(profile) for profile in sorted(profiles, key=lambda p: p.name))


def _known_names(profiles: Sequence[Profile]) -> str:
    if not profiles:
        return "none (no threshold file was found)"
    return ", ".join(sorted(profile.name for profile in profiles))


def _hardware_summary(hw: Hardware) -> str:
    if hw.device == "cpu":
        return f"no GPU ({hw.nvml_unavailable_reason})"
    memory_gib = min(gpu.memory_total_gib for gpu in hw.gpus)
    return f"{hw.gpu_count} x {' + '.join(hw.gpu_names)} ({memory_gib:.1f} GiB)"


def cli_detect(hardware_override: str | None, thresholds_dir: str | None, tables: Sequence[BoundsTable]) -> int:
    """``harness detect``: print the hardware and the profile it selects; 0 on success, 1 on error. ``tables``: the
    shipped kinds' bounds tables (harness/kinds/shipped.py), checked as the profiles load."""
    try:
        hw = detect()
    except HardwareError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(describe(hw))
    try:
        directory = Path(thresholds_dir) if thresholds_dir else default_thresholds_dir()
        profiles = load_profiles(directory, tables, sites_declared=False)
        profile = select_profile(hw, profiles, hardware_override)
    except (ThresholdError, HardwareError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"profile: {profile.name} ({profile.path})")
    return 0
