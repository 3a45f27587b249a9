"""What the node is: GPUs, driver, software stack, processes on the GPUs (NVML, torch)."""
