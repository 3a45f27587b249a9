"""The GPU-state kind: one quick test per GPU (per node and GPU in a multi-node session), run after every other
test, judging each GPU's state at the session's end against its start and every XID between. Its declaration,
parameters and judging are here (job, params, runner); what it judges is read by a session-wide watch that every
other kind reads too (the start snapshot, the XID watcher, the other nodes' probes, what a case window saw besides
itself: harness/plugin/gpu_state.py ``GpuStateWatcher``), so the session holds the watch, and hands it to this
kind's runner (``KindRunner.attach``)."""
