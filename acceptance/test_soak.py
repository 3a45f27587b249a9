"""Burn-in: does the node hold its speed and health for hours, not seconds?

Runs only with ``--soak DURATION`` (e.g. ``make acceptance ARGS="--soak 4h -k soak"``): the
profile's most compute-heavy case trains on every GPU for the duration with telemetry on, and
fails on throttling, new ECC errors, a temperature above the profile's bound, or throughput
decay beyond ``[soak] max_throughput_decay`` (last window vs first).
"""

import pytest


def test_soak(harness):
    """The whole duration on every GPU: no throttling, no new ECC errors, no throughput decay."""
    if harness.runner("soak").duration_s is None:
        pytest.skip("burn-in runs only with --soak DURATION (e.g. --soak 4h)")
    result = harness.keep(harness.runner("soak").run_soak())
    harness.assert_passed(result)
