"""What runs on the GPUs inside torchrun: the DDP benchmark, the soak, and what they share with the kinds' own
workers (harness/kinds/<kind>/worker.py: the all-reduce sweep)."""
