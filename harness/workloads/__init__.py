"""What runs on the GPUs inside torchrun: the DDP benchmark, and what it shares with the kinds' own workers
(harness/kinds/<kind>/worker.py: the component benchmarks, the all-reduce sweep, the soak)."""
