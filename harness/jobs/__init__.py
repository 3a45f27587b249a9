"""What a kind of job declares (job.py: its tests, level, required tests, runner and report section) and
the kinds the core still runs (registry.py). The session's list, every shipped kind in test order, is
assembled above the plugin (harness/kinds/shipped.py) and reaches the plugin through its
``pytest_harness_jobs`` hook, as a site's own kinds do: the session verdict, the run levels and the
plugin's collection all read that one list (issue 29)."""
