"""One table of exit codes for the acceptance suite and every ``harness`` subcommand.

The acceptance suite's codes are pytest's own where pytest has one;
every subcommand uses the same code for the same kind of outcome, so a script, a Slurm prolog or
a CI step reads any of them the same way (docs/verdicts.md, "Exit codes").
"""

from __future__ import annotations

EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_INTERRUPTED = 2
"""pytest's own code for an interrupted session: here INCOMPLETE because of Ctrl-C, SIGTERM or Slurm's limit."""
EXIT_INTERNAL_ERROR = 3
"""pytest's own code: the harness or pytest crashed; INCOMPLETE (what ran is in the report)."""
EXIT_USAGE_ERROR = 4
"""pytest's own code: refused before any test (bad option, no profile, GPUs unusable); no verdict is made."""
EXIT_NO_TESTS = 5
"""pytest's own code: nothing was collected (e.g. ``-k`` matching no test); INCOMPLETE."""
EXIT_INCOMPLETE = 6
"""Not pytest's: the session ended normally but a required case did not run (skipped, not collected)."""
EXIT_NOT_RECORDED = 7
"""Not pytest's: the outcome could not be written where it belongs (a full or read-only file system, an
unmounted store): a storage failure, never the node's, so a Slurm prolog must not drain the node for it
(harness/plugin/outcomes.py ``not_recorded``); fix the storage."""

EXIT_CODES: dict[int, tuple[str, str]] = {
    EXIT_PASS: ("PASS / done", "the session passed; a subcommand did what it was asked and found nothing wrong"),
    EXIT_FAIL: ("FAIL", "a check failed or a test errored; `run`: the benchmark failed; `fleet`: a node failed; "
                        "`history`: a figure drifted; `thresholds check`: a file is invalid; `selftest`: a row "
                        "the harness should have failed did not; `find-max-bs`, `calibrate`: nothing fit or a "
                        "measurement failed"),
    EXIT_INTERRUPTED: ("INCOMPLETE: interrupted", "Ctrl-C, SIGTERM (Slurm's time limit, `timeout`), in the suite "
                                                  "and in every subcommand; every process started is stopped"),
    EXIT_INTERNAL_ERROR: ("INCOMPLETE: internal error", "pytest or the harness crashed, or a verdict or report "
                                                         "could not be made; a bug: please report it"),
    EXIT_USAGE_ERROR: ("usage error", "refused before anything ran: a bad option or value, an unreadable or invalid "
                                      "input file or directory, no matching profile, GPUs present but unusable; "
                                      "the message says what, where and what to do"),
    EXIT_NO_TESTS: ("INCOMPLETE: nothing selected", "no test was collected (e.g. `-k` matching none)"),
    EXIT_INCOMPLETE: ("INCOMPLETE", "the session ended but a test that had to run did not; `fleet`: a node is "
                                    "incomplete, not signed off, or an expected node has no session"),
    EXIT_NOT_RECORDED: ("could not record", "the verdict or result could not be written (report directory, "
                                            "history store, record file): fix the storage and re-run; "
                                            "not a verdict about the node"),
}
"""code -> (short name, meaning): the one table, shown in docs/verdicts.md (a test keeps them equal)."""

__all__ = ["EXIT_CODES", "EXIT_FAIL", "EXIT_INCOMPLETE", "EXIT_INTERNAL_ERROR", "EXIT_INTERRUPTED", "EXIT_NO_TESTS",
           "EXIT_NOT_RECORDED", "EXIT_PASS", "EXIT_USAGE_ERROR"]
