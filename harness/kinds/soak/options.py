"""The soak's own command-line option, ``--soak DURATION`` (``--harness-soak``): declared on its Job (job.py), so
the plugin declares it before pytest reads the command line (harness/kinds/shipped.py pytest_addoption) and parses
it once at the session's start, naming no kind; giving it means ``--level long``, and ``--level long`` needs it."""

from __future__ import annotations

from harness.jobs.job import JobOption
from harness.kinds.soak.windows import soak_duration

SOAK_OPTION = JobOption(
    name="soak", short="--soak", metavar="DURATION",
    help="burn-in: train the profile's most compute-heavy case on every GPU for DURATION "
         "(e.g. 4h, 30m, 90s) with telemetry on; the soak test is skipped without it",
    parse=soak_duration, sets_level=True,
    needed="--level long runs the soak: give its duration too, e.g. --level long --soak 4h")
"""Its value, seconds of soak (None: no soak, the test is skipped), is ``options.of("soak")``."""
