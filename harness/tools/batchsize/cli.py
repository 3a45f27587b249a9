"""``harness find-max-bs``: check the arguments, run the search with real probes while printing each
one, then the table sorted by batch and the recommendation. The options are in ``options``."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from harness.exitcodes import EXIT_USAGE_ERROR
from harness.node.hardware import HardwareError, detect
from harness.node.presence import DeviceChoiceError, choose_device
from harness.tools.batchsize.probe import find_max_batch
from harness.tools.batchsize.search import SearchError, format_header, format_row, format_table, recommendation
from harness.catalog import MODELS


def cli_find_max_bs(ns: argparse.Namespace) -> int:
    """``harness find-max-bs``: 0 with a recommendation, 1 when nothing fits or a probe failed, 4 on bad input."""
    if ns.model not in MODELS:
        print(f"harness find-max-bs: --model {ns.model}: unknown; known models: {', '.join(MODELS)}", file=sys.stderr)
        return EXIT_USAGE_ERROR
    if not 0 < ns.memory_fraction <= 1:
        print(f"harness find-max-bs: --memory-fraction {ns.memory_fraction}: a fraction in (0, 1], e.g. 0.9",
              file=sys.stderr)
        return EXIT_USAGE_ERROR
    if ns.steps < 2:
        print(f"harness find-max-bs: --steps {ns.steps}: at least 2 (the optimizer state exists from step 2 on)",
              file=sys.stderr)
        return EXIT_USAGE_ERROR
    try:  # a node showing NVIDIA GPUs that cannot be used is refused, never searched on CPU ranks
        device = "cpu" if ns.device == "cpu" else choose_device(ns.device, detect())
    except (HardwareError, DeviceChoiceError) as exc:
        print(f"harness find-max-bs: {exc}", file=sys.stderr)
        return EXIT_USAGE_ERROR
    if device == "cpu" and ns.max_batch is None:
        print("harness find-max-bs: on cpu there is no device memory to fill, so the search needs a cap: pass --max N",
              file=sys.stderr)
        return EXIT_USAGE_ERROR
    keep_logs = ns.log_dir is not None
    log_dir = ns.log_dir or Path(tempfile.mkdtemp(prefix="harness-find-max-bs-"))
    where = ("cuda:0 (pin the GPU with CUDA_VISIBLE_DEVICES)" if device == "cuda" else
             "cpu (no device memory limit: capped by --max; peak = the probe's peak RSS, host memory)")
    rule = (f"fits = ran and peak allocated <= {ns.memory_fraction:g} x total memory" if device == "cuda" else
            "fits = ran")
    print(f"find-max-bs: {ns.model} {ns.precision} on {where}; each probe: a fresh process, {ns.steps} training "
          f"steps (harness recipe); {rule}")
    print(format_header(), flush=True)
    started = time.time()
    try:
        result = find_max_batch(model=ns.model, precision=ns.precision, device_kind=device,
                                memory_fraction=ns.memory_fraction, start=ns.start, max_batch=ns.max_batch,
                                multiple_of=ns.multiple_of, steps=ns.steps, timeout_s=ns.timeout, log_dir=log_dir,
                                on_probe=lambda probe: print(format_row(probe), flush=True))
    except ValueError as exc:
        print(f"harness find-max-bs: {exc}", file=sys.stderr)
        return EXIT_USAGE_ERROR
    except SearchError as exc:
        print(f"harness find-max-bs: {exc}; probe logs: {log_dir}/", file=sys.stderr)
        return 1
    print(f"\n{len(result.probes)} probes in {time.time() - started:.0f} s; sorted by batch:")
    print(format_table(result.probes))
    for warning in result.warnings:
        print(f"WARNING: {warning}")
    print(recommendation(result, ns.model, ns.precision))
    if not keep_logs:
        shutil.rmtree(log_dir, ignore_errors=True)
    return 0 if result.max_batch_size is not None else 1

