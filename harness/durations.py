"""The default durations of a launch and of a measurement, and the longest any may be: one place for
every stage (the profile's checks, the launcher's specs, the plugin's options) to read them from.
harness/workloads/window.py says how the measurement's are used.
"""

from __future__ import annotations

# Of a launch ...
TIMEOUT_SECONDS = 600.0
"""Hard cap on one launch."""
SETUP_TIMEOUT_SECONDS = 300.0
STALL_FACTOR = 3.0
STALL_FLOOR_SECONDS = 30.0
TELEMETRY_PERIOD_SECONDS = 0.1
# ... and of a measurement (harness/workloads/window.py says how they are used).
WARMUP_SECONDS = 5.0
MEASURE_SECONDS = 10.0
MIN_WARMUP_STEPS = 10
MIN_MEASURE_STEPS = 20
WARMUP_BLOCK_STEPS = 5
COMPUTE_PROBE_STEPS = 5
"""Forward/backward passes per rank with gradient sync off (the straggler probe): 0.3-0.7 s on Hopper."""
CI_BLOCK_SECONDS = 0.5


def max_warmup_seconds(warmup_seconds: float) -> float:
    """Warmup stops here, steady or not: a noisy shared host may never look steady."""
    return 2 * warmup_seconds + 5


def default_max_measure_seconds(measure_seconds: float) -> float:
    """The adaptive window's cap when none is given."""
    return 6 * measure_seconds + 10


MAX_SECONDS = 7 * 24 * 3600.0
"""The longest duration any window, soak or deadline may have: a week. 1e308 s passed "finite" and then
overflowed the worker's clock arithmetic, failing the node for a typo (issue 31)."""
