"""What runs on the GPUs inside torchrun: the DDP benchmark, the all-reduce sweep, the soak, and what they share."""
