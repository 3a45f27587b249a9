"""GPU cluster acceptance harness: DDP benchmarks asserted against per-hardware thresholds."""

__version__ = "0.1.0"
