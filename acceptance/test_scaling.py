"""Does every GPU train at the promised speed, and do the GPUs scale together?

Cases come from the threshold profile of the detected hardware (model × precision × GPU count);
`--models`, `--precisions`, `--gpus` and `-k` narrow them. Each test launches one DDP benchmark
through torchrun and asserts every check of the profile: a failure lists each miss on its own
line, measured vs bound. The kind: harness/kinds/ddp_scaling/.
"""


def test_weak_scaling(harness, weak_case):
    """Per-GPU batch fixed: per-GPU throughput, efficiency vs the 1-GPU run, stragglers, jitter."""
    result = harness.keep(harness.runner("scaling").run(weak_case))
    harness.assert_passed(result)


def test_strong_scaling(harness, strong_case):
    """Global batch fixed: speedup and parallel efficiency vs the 1-GPU run of the same batch."""
    result = harness.keep(harness.runner("scaling").run(strong_case))
    harness.assert_passed(result)
