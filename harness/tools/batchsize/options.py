"""The ``harness find-max-bs`` command line. Light on purpose: ``harness --help`` builds this parser,
and nothing here may import torch."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.tools.batchsize.probe import DEFAULT_PROBE_STEPS, DEFAULT_PROBE_TIMEOUT_S
from harness.tools.batchsize.search import DEFAULT_MEMORY_FRACTION, DEFAULT_START


def add_find_max_bs_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "find-max-bs", help="find the largest per-GPU batch that fits in memory",
        description="Find the largest per-GPU batch whose training step (harness recipe) fits within a fraction of "
                    "the GPU's memory: doubling, then bisection, each probe a fresh process.")
    # Names, not choices from harness.workloads.models: importing it imports torch, and `harness --help`
    # should be quick.
    p.add_argument("--model", required=True, help="a registry model, e.g. resnet50, vit_b_16, bert_large, tiny_bert")
    p.add_argument("--precision", required=True, choices=("fp32", "fp16", "bf16"))
    p.add_argument("--memory-fraction", type=float, default=DEFAULT_MEMORY_FRACTION,
                   help="a probe fits when its peak allocated memory is at most this fraction of the GPU's total "
                        f"(default {DEFAULT_MEMORY_FRACTION}; the rest is for the CUDA context, NCCL and the "
                        "allocator)")
    p.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda when a GPU is present, else cpu")
    p.add_argument("--start", type=int, default=DEFAULT_START, help=f"first batch probed (default {DEFAULT_START})")
    p.add_argument("--max", type=int, dest="max_batch", help="largest batch probed (required on cpu)")
    p.add_argument("--multiple-of", type=int, default=1,
                   help="above this, probe only its multiples (default 1: the exact largest batch)")
    p.add_argument("--steps", type=int, default=DEFAULT_PROBE_STEPS,
                   help=f"training steps per probe (default {DEFAULT_PROBE_STEPS}; the peak is reached at step 2)")
    p.add_argument("--timeout", type=float, default=DEFAULT_PROBE_TIMEOUT_S,
                   help=f"seconds per probe (default {DEFAULT_PROBE_TIMEOUT_S:.0f})")
    p.add_argument("--log-dir", type=Path, help="keep each probe's log here (default: a temporary directory, "
                                                "kept only when a probe fails)")
    return p
