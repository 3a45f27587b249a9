"""The stop-signal handlers a harness session installs, put back after each test.

An in-process pytester session runs the plugin in the suite's own process: ``stop_on_sigterm`` installs its
SIGINT/SIGTERM/SIGHUP handler and ``ending`` marks the process as on its way out, after which a stop signal is
ignored with a line. Left in place, that made the whole suite deaf to ``timeout`` (a run at its 1800 s limit went
on to print its last line, 2026-11-28): a CI runner cancelling a job, or timeout(1), could not stop it."""

from __future__ import annotations

import signal
from contextlib import contextmanager
from typing import Iterator

from harness.launch import supervise


@contextmanager
def stop_signals_restored() -> Iterator[None]:
    """Run the block, then put back the stop signals' handlers and the session's "ending" state as they were."""
    handlers = {signum: signal.getsignal(signum) for signum in supervise.STOP_SIGNALS}
    stopping = supervise._Hold.stopping
    try:
        yield
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        supervise._Hold.stopping = stopping
