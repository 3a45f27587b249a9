"""Is each GPU in the state its profile expects, from session start to session end?

One test per GPU (``test_gpu_state[gpu3]``), run after every benchmark (the plugin orders it last):
power limit at its default, clocks not set low, ECC on where ``[gpu_state]`` requires it, no page
retirement or row remap pending or failed, no new uncorrectable ECC errors, no XID during the
session, NVLink error counters steady. On a CPU run it is skipped: there is no GPU to judge.
"""


def test_gpu_state(harness, gpu_state_gpu):
    """Start and end snapshots of this GPU through NVML, and the XIDs the session saw on it."""
    result = harness.keep(harness.runner("gpu_state").check(gpu_state_gpu))
    harness.assert_passed(result)
