"""Is the whole node here? Its usable GPUs against the GPUs a node of its kind has.

Collected before every benchmark (test files run in name order; the plugin also moves this test
first). The expected count comes from ``--expect-gpus``, else the Slurm allocation, else the
profile's ``[node] gpus_per_node`` shape that holds the GPUs NVML and the PCI bus show
(docs/usage.md, "Node shape"). Fewer usable GPUs fail here, naming what NVML sees and what is missing;
the cases that would need them are skipped, and the session verdict counts them as not run.
"""


def test_node_shape(harness):
    """Usable GPUs >= expected GPUs; a node bigger than every shape of the profile is not of its kind."""
    result = harness.keep(harness.runner("node_shape").check(harness.remote_gpu_state))
    harness.assert_passed(result)
