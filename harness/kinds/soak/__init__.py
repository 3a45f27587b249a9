"""The soak kind: the burn-in (``--soak DURATION``), one module per role (job: the declaration; runner: the
session's side; launch: the launcher's; worker and loop: inside torchrun, windows: their arithmetic; checks:
the judging). Kept empty: the worker imports this package on its way."""
