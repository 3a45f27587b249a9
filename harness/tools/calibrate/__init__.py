"""Calibration: a new threshold profile measured on a node known to be healthy (``harness calibrate``).

On new hardware (a B200, an MI300, an L40S...) there is no profile to sign nodes off against.
Calibration makes one from a golden node: it finds the batch sizes (``harness find-max-bs``) or
takes them, runs the weak-scaling matrix ``repeats`` times through ``harness.launch.benchmark.run_benchmark``
(the very launch the acceptance suite makes), and writes ``thresholds/<name>.toml`` with the
measured medians and spreads as comments, bounds derived from them with stated margins, a match
rule for the detected hardware, and where every number came from. The file is validated with
``harness.profile.schema.load_profile`` before it is written (atomically), so it is usable at once:
``make acceptance ARGS="--hardware <name>"``.

Statistics (docs/calibration.md says why; computed in ``bounds``):

* per case and GPU count, the **median** of the repeats; **spread** = (max - min) / median;
* weak-scaling **efficiency** is paired within a repeat (per-GPU throughput at N GPUs / at 1 GPU
  of the same repeat, so slow drift of the node cancels), then its median over the repeats;
* bounds: throughput = the lowest median over the GPU counts x (1 - throughput margin), rounded
  down to 3 significant digits; efficiency = median - efficiency margin, rounded down to 0.001;
* health bounds (``health``; each from >= 3 runs, else left out with the reason): per case utilization
  (lowest - 3 points) and step-time CV (highest + margin); node-wide power (lowest x 0.85), straggler
  ratio (1 + 2 x the worst excess) and GPU uniformity (1 - 2 x the worst deficit); with ``--components``,
  [components] (lowest x 0.90); and [stack] from the records' versions.

The 1-GPU case runs as acceptance runs it: on every GPU at once, each its own model (``independent``).

Calibrating on an unhealthy node bakes its faults into the bounds: that is the user's risk, so
the spread of every case is printed and a WARNING is given (and kept in the file) when repeats
disagree by more than the margin. A failed run stops calibration with its reason; no bound is
ever written from a failed run.

The package, in the order a calibration runs:

* ``options``: the ``harness calibrate`` command line and its defaults (light: no torch);
* ``plan``: arguments checked against the hardware and the files -> ``CalibrationPlan``;
* ``measure``: the batches, the repeated matrix over a launcher, then bounds and the file;
* ``bounds``: measurements -> throughput and efficiency bounds with margins, rounding and spread warnings (pure);
* ``health``: the health rules (utilization, step-time CV, power, straggler, GPU uniformity), shared with
  benchmarks/health_bounds.py (pure);
* ``components``: the [components] rule, shared with benchmarks/components_calibrate.py, and its launches;
* ``provenance``: what ran, where and with which software, from the run records;
* ``profile_file``: the TOML text, validated, written atomically;
* ``cli``: the command itself (prints, exit status).
"""

from __future__ import annotations


class CalibrationError(Exception):
    """Calibration cannot start or cannot finish; the message says why and what to do."""
