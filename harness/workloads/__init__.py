"""What runs on the GPUs inside torchrun: the DDP benchmark, the component launch, and what they share with the
kinds' own workers (harness/kinds/<kind>/worker.py: the all-reduce sweep, the soak)."""
