"""The ``harness calibrate`` command line and its defaults.

Light on purpose: ``harness --help`` builds this parser, and nothing here may import torch.
"""

from __future__ import annotations

import argparse

from harness.tools.batchsize.search import DEFAULT_MEMORY_FRACTION
from harness.tools.calibrate.bounds import Margins

DEFAULT_MATRIX: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "cuda": (("resnet50", "resnet152", "vit_b_16", "bert_large"), ("bf16", "fp16")),
    "cpu": (("resnet18", "tiny_bert"), ("fp32", "bf16")),
}
"""The default matrix per device kind, as the shipped profiles run it."""
DEFAULT_REPEATS = 3
DEFAULT_BATCH_MULTIPLE = 8
"""find-max-bs answers in multiples of 8 during calibration: tensor-core friendly shapes, fewer probes."""
DEFAULT_WARMUP_SECONDS = 5.0
DEFAULT_MEASURE_SECONDS = 10.0
DEFAULT_TIMEOUT_SECONDS = 600.0
"""Per calibration launch."""
_DEFAULT_MARGINS = Margins()


def add_calibrate_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "calibrate", help="make a threshold profile from measurements on a known-good node",
        description="Run the weak-scaling matrix repeatedly on a node known to be healthy and write "
                    "thresholds/<name>.toml with bounds derived from the measured medians (docs/calibration.md).")
    p.add_argument("--name", required=True, help="the new profile's name, e.g. b200-180gb (the file is <name>.toml)")
    p.add_argument("--repeats", type=int, default=DEFAULT_REPEATS,
                   help=f"runs of the whole matrix (default {DEFAULT_REPEATS}); the median is used")
    p.add_argument("--models", nargs="+", metavar="M", help="models (default: resnet50 resnet152 vit_b_16 bert_large "
                                                            "on cuda, resnet18 tiny_bert on cpu)")
    p.add_argument("--precisions", nargs="+", metavar="P",
                   help="precisions (default: bf16 fp16 on cuda, fp32 bf16 on cpu)")
    p.add_argument("--gpus", nargs="+", metavar="N", help="GPU counts, e.g. 1,2,4,8 (default: 1 and the powers of two "
                                                          "up to the GPUs present; 1,2 on cpu); must include 1")
    p.add_argument("--batch-size", nargs="+", metavar="M=B", help="per-GPU batch per model, e.g. resnet50=256; models "
                                                                  "without one get find-max-bs")
    p.add_argument("--throughput-margin", type=float, default=_DEFAULT_MARGINS.throughput,
                   help="bound = lowest median x (1 - margin) (default 0.10)")
    p.add_argument("--efficiency-margin", type=float, default=_DEFAULT_MARGINS.efficiency,
                   help="bound = median efficiency - margin, in fraction units (default 0.03 = 3 points)")
    p.add_argument("--straggler-factor", type=_margin_or_off, default=_DEFAULT_MARGINS.straggler_factor,
                   help="[defaults] max_straggler_ratio = 1 + factor x (highest ratio of any multi-GPU run - 1) "
                        f"(default {_DEFAULT_MARGINS.straggler_factor:g}); off: no straggler bound")
    p.add_argument("--cv-margin", type=_margin_or_off, default=_DEFAULT_MARGINS.step_time_cv,
                   help="per case: bound = highest step-time CV + margin (default 0.04); off: no CV bound")
    p.add_argument("--components", action="store_true",
                   help="also run the component benchmarks (GEMM, HBM, host link, peer) --repeats times and write "
                        "[components]: lowest x 0.90 (highest x 1.10 for peer latency)")
    p.add_argument("--output-dir", help="where <name>.toml is written (default: the thresholds directory)")
    p.add_argument("--force", action="store_true", help="replace an existing <name>.toml")
    p.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda when a GPU is present, else cpu")
    p.add_argument("--warmup", type=float, default=DEFAULT_WARMUP_SECONDS,
                   help=f"minimum warmup seconds per launch (default {DEFAULT_WARMUP_SECONDS:g}); "
                        "written to the profile's [run]")
    p.add_argument("--measure", type=float, default=DEFAULT_MEASURE_SECONDS,
                   help=f"measured-window seconds per launch (default {DEFAULT_MEASURE_SECONDS:g}); "
                        "written to the profile's [run]")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_SECONDS,
                   help=f"seconds per calibration launch (default {DEFAULT_TIMEOUT_SECONDS:g})")
    p.add_argument("--peak-tflops", help="dense per-GPU peak TFLOP/s, e.g. bf16=2250,fp16=2250 (cuda; default: "
                                         "copied from an existing profile that matches the GPU)")
    p.add_argument("--peak-tflops-source", help="the datasheet the peaks come from (required with --peak-tflops)")
    p.add_argument("--description", help="the hardware in words (default: GPU name, memory, host, date)")
    p.add_argument("--memory-fraction", type=float, default=DEFAULT_MEMORY_FRACTION,
                   help=f"find-max-bs: fraction of GPU memory (default {DEFAULT_MEMORY_FRACTION:g})")
    p.add_argument("--max-batch", type=int, help="find-max-bs: largest batch probed (required on cpu without "
                                                 "--batch-size)")
    p.add_argument("--batch-multiple", type=int, default=DEFAULT_BATCH_MULTIPLE,
                   help=f"find-max-bs: batch sizes are multiples of this (default {DEFAULT_BATCH_MULTIPLE})")
    p.add_argument("--records-dir", help="where the run records and logs go (default: "
                                         "reports/calibration-<time>-<name>/)")
    p.add_argument("--thresholds-dir", help="where to look for a matching profile to copy peak TFLOP/s from "
                                            "(default: the thresholds directory)")
    return p


def _margin_or_off(text: str) -> float | None:
    """argparse type: a number, or "off" for no bound."""
    if text.strip().lower() == "off":
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or off, got {text!r}") from None
