"""The kinds of job that live in one folder each (issue 29 item 2), on the floor above the plugin and the
report: a kind's folder may import any stage below it, and nothing below imports it. The core reaches a kind
through its ``Job`` declaration (harness/jobs/job.py: its runner factory and report section), handed to the
plugin by the ``pytest_harness_jobs`` hook of shipped.py and to ``harness report`` by harness/cli.py.

Kept empty: a kind's worker runs as ``python -m harness.kinds.<kind>.worker`` under torchrun, and importing
this package on the way must load nothing."""
