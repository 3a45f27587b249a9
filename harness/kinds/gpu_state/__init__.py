"""The GPU-state kind: one quick test per GPU (per node and GPU in a multi-node session), run after every other
test, judging each GPU's state at the session's end against its start and every XID between. Its declaration and
parameters are here (job, params); what it judges is a session-wide service that every other kind reads too (the
start snapshot, the XID watcher, the other nodes' probes, what a case window saw besides itself:
harness/plugin/gpu_state.py ``GpuStateRunner``), so the session holds it, not this kind."""
