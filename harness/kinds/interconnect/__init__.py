"""The interconnect kind: the all-reduce sweep and the topology reading, one module per role (job: the
declarations; runner: the session's side; launch: the launcher's; worker: inside torchrun; checks: the
judging; report: the page's section). Kept empty: the worker imports this package on its way."""
