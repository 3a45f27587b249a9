"""The model catalog: torch-free, one unknown-model message, and FLOPs whose sources can be read."""

import subprocess
import sys
from pathlib import Path

import pytest

from harness.catalog import MODELS, PRECISIONS, model_info

REPO = Path(__file__).resolve().parent.parent


def test_the_catalog_and_profile_loading_do_not_import_torch():
    # A fresh interpreter: this one has torch loaded already.
    code = ("import sys, harness.catalog, harness.profile.load, harness.node.nvml, harness.telemetry; "
            "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch'))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr


def test_unknown_model_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown model 'resnet9000'; known models: resnet50, resnet101"):
        model_info("resnet9000")
    assert model_info("tiny_bert") is MODELS["tiny_bert"]


def test_every_model_has_a_sample_unit_and_the_input_shape_its_kind_needs():
    for info in MODELS.values():
        if info.input_kind == "image":
            assert info.sample_unit == "images" and info.image_size_px and info.num_classes
        else:
            assert info.sample_unit == "sequences" and info.seq_len and info.vocab_size
        assert info.train_flops_per_sample > 0


def test_published_flops_cite_a_file_of_the_repository():
    cited = {info.flops_source.split(":")[0] for info in MODELS.values() if not info.cpu_sized}
    assert cited == {"docs/references.md"}


def test_precisions_are_the_three_the_harness_runs():
    assert PRECISIONS == ("fp32", "fp16", "bf16")
