"""The components kind: the per-GPU component benchmarks (dense GEMM, HBM bandwidth, host<->GPU bandwidth and
the GPU<->GPU peer matrix, docs/components.md), one module per role (job: the declaration; runner: the session's
side; launch: the launcher's; plan: what a launch runs and the file rank 0 leaves; worker: inside torchrun, with
kernels, the timed loops, torch passed in, and arith, the FLOP and byte arithmetic and the NUMA reading, both
torch-free; checks: the judging). Its page is the report's per-GPU table (harness/report/sections/gpus.py), which
the other kinds' per-GPU figures share. Kept empty: the worker imports this package on its way."""
