"""Do the GPUs talk to each other at the speed the wiring promises, over the wiring it promises?

The all-reduce test launches harness.kinds.interconnect.worker through torchrun (NCCL; gloo on a CPU profile)
on the widest selected GPU count the node holds (its ring crosses every link a narrower one would),
sweeps message sizes, checks every reduced value, and
holds the bus bandwidth at the largest message against ``[interconnect]`` of the profile. The
topology test reads NVLink, peer-to-peer and PCIe facts from NVML against ``[topology]``. Both
also fail on thermal or hardware-slowdown throttling and on new ECC errors during the sweep.
"""

import pytest

from harness.kinds.interconnect.bounds import TOPOLOGY_BOUNDS


def test_allreduce_bus_bandwidth(harness, allreduce_gpus):
    """busbw = algbw x 2(n-1)/n at the largest message >= [interconnect] min_allreduce_busbw_gbps."""
    result = harness.keep(harness.runner("interconnect").run_allreduce(allreduce_gpus))
    harness.assert_passed(result)


def test_topology(harness):
    """NVLink links up per GPU, P2P between every pair, PCIe generation and width under load."""
    if harness.profile.hardware.device != "cuda":
        pytest.skip("no GPU topology on a CPU run")
    if harness.profile.table(TOPOLOGY_BOUNDS) is None:
        pytest.skip(f"profile {harness.profile.name} has no [topology] section")
    result = harness.keep(harness.runner("interconnect").run_topology_under(harness.runner("components")))
    harness.assert_passed(result)
