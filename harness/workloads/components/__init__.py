"""Component micro-benchmarks, one process per GPU: dense GEMM, HBM bandwidth, host<->GPU bandwidth
and the GPU<->GPU peer matrix (docs/components.md).

``plan`` (what a launch runs, torch-free), ``arith`` (FLOP and byte arithmetic, NUMA sysfs reading,
torch-free), ``kernels`` (the timed loops, torch passed in), ``worker`` (the torchrun entry point).
The launcher's side is harness/launch/components.py; the checks, harness/checks/components.py.
"""
