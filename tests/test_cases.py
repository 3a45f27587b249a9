"""One case identity for the plugin, the launcher, the report and compare."""

import pytest

from harness.cases import CaseId


def test_ids_name_every_coordinate_and_the_test_param_leaves_the_scaling_to_the_test_name():
    case = CaseId(model="resnet50", precision="bf16", gpus=4, scaling="strong", nodes=2)
    assert case.world_size == 8
    assert case.test_param == "resnet50-bf16-2x4gpu"
    assert case.key == "resnet50-bf16-strong-2x4gpu"
    assert CaseId(model="vit_b_16", precision="fp16", gpus=1).key == "vit_b_16-fp16-weak-1gpu"


def test_the_baseline_is_one_gpu_of_one_node_with_the_same_scaling():
    case = CaseId(model="resnet50", precision="bf16", gpus=8, scaling="strong", nodes=2)
    assert case.one_gpu() == CaseId(model="resnet50", precision="bf16", gpus=1, scaling="strong")


def test_a_case_survives_its_json_form_and_anything_else_reads_as_none():
    case = CaseId(model="bert_large", precision="bf16", gpus=2, nodes=3)
    assert CaseId.from_dict(case.to_dict()) == case
    damaged_forms = (None, "resnet50-bf16-4gpu", {"model": "x"},
                     {"model": "x", "precision": "bf16", "gpus": "four"},
                     {"model": "x", "precision": "bf16", "gpus": 0},
                     {"model": "x", "precision": "bf16", "gpus": float("inf")},
                     {**case.to_dict(), "scaling": "sideways"})
    for damaged in damaged_forms:
        assert CaseId.from_dict(damaged) is None


def test_impossible_cases_are_refused_with_the_field_named():
    with pytest.raises(ValueError, match="scaling"):
        CaseId(model="m", precision="bf16", gpus=1, scaling="diagonal")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="gpus and nodes"):
        CaseId(model="m", precision="bf16", gpus=0)


def test_a_remeasure_label_reads_back_as_its_attempt_and_the_case_it_is_the_reference_of():
    """The launcher writes these labels; calibrate-fit, first_attempts and the timeline read them back: one format."""
    from harness.cases import remeasure_label, remeasure_of

    assert remeasure_label("resnet50-bf16-weak-2gpu", 1) == "resnet50-bf16-weak-2gpu-confirm1"
    assert remeasure_label("resnet50-bf16-weak-1gpu", 2, reference_for_gpus=4) == (
        "resnet50-bf16-weak-1gpu-confirm2-for-4gpu")
    assert remeasure_of("20261128-vm-h200-7-" + remeasure_label("resnet50-bf16-weak-2gpu", 1)) == (1, None)
    assert remeasure_of("run-" + remeasure_label("resnet50-bf16-weak-1gpu", 2, reference_for_gpus=4)) == (2, 4)
    assert remeasure_of("20261128-vm-h200-7-resnet50-bf16-weak-2gpu") is None
