"""How each family of figures is measured today: the definition a profile's bounds must share to be judged.

A bound belongs to the definition its figure was measured under (the reference, the window, the recipe,
the launch layout, the concurrency). A profile records, per family, the definition its bounds were
measured under (``[definitions]`` in thresholds/<name>.toml); a session whose harness measures that
family another way judges nothing of it against those bounds: each such check is *not evaluated*, saying
which definitions differ, and the verdict's header names the mismatch, as it does for ``[stack]``.

Each definition names the code that measures it. ``tests/test_definitions.py`` fingerprints that code
(its syntax tree, docstrings and comments left out) and fails when it changes without this table
changing with it: the author then decides whether the figure moved (a new ``id``, and the bounds
re-derived with ``harness calibrate``) or not (only the new fingerprint recorded).

Stdlib only: the profile loader and the verdict read this module, and neither may import torch.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path

FAMILIES = {
    "training": "the [models] and [defaults] case bounds: 1-GPU rates, scaling efficiency, straggler, health",
    "components": "the [components] bounds: GEMM, memory, host link",
    "allreduce": "the [interconnect] all-reduce bus bandwidth bounds",
}
"""Each family of bounds, and what it holds."""

PACKAGE_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True, kw_only=True, slots=True)
class Definition:
    family: str
    id: str
    """What a profile's ``[definitions]`` says for bounds measured this way: the date the definition began."""
    summary: str
    sources: tuple[str, ...]
    """The files (from the repository root) whose code measures it."""
    fingerprint: str
    """``fingerprint(sources)`` when ``id`` was last confirmed."""


DEFINITIONS: dict[str, Definition] = {
    "training": Definition(
        family="training", id="2026-11-27",
        summary="one torchrun launch per node for every single-node case; per model and precision the 1-GPU "
                "reference (a bare model on every GPU at once, the median GPU) and then each N-GPU DDP case on "
                "ranks 0..N-1, seconds apart; a later case of the same work settles hot (a quarter of the warm-up, "
                "half-size blocks); adaptive window of >= 5-step blocks until the 95 % CI meets the target or the "
                "cap; every figure over the slowest rank's busy seconds (CUDA events per step, summed); a 5-pass "
                "straggler probe",
        sources=("harness/workloads/ddp_cases.py", "harness/workloads/window.py", "harness/workloads/ddp_record.py",
                 "harness/workloads/recipe.py", "harness/workloads/stats.py", "harness/kinds/ddp_scaling/launcher.py",
                 "harness/launch/group.py"),
        # Re-measures of one attempt share a launch (kinds/ddp_scaling/confirming.py): a case's first figure is measured
        # as before, and a re-measure now in the launch layout above instead of a launch of its own (then each
        # case's runs planned once, not twice: same launch). Then (issue 28) the session's launch holds after its
        # planned cases and runs the re-measures there as follow-ons (launch/group.py, ddp_cases.follow_on): the
        # planned cases run exactly as before, and a re-measure is a later case of the same work on the same
        # processes, settling hot like the N-GPU cases after their reference -- the layout its bounds judge.
        # Then a refactor only (one re-measure plan shared by both paths, the watch reading each case's end once).
        # Then (issue 28) the launch may start with the session (launch/prestart.py): its workers import while the
        # component and all-reduce launches measure and touch no GPU until their plan; from the plan on, the same
        # cases run in the same order on the same processes. Figure unchanged: shown on one 4 x H100 host, the
        # same session with and without it (docs/data/2026-11-28-h100x4-prestart).
        # Then a refactor only: a follow-on's wait is workloads/plan.py's wait_for_plan, shared with the early start.
        # Then a refactor only: a re-measure's run label spelt by harness/cases.py remeasure_label (the same labels),
        # which the fit reads back with remeasure_of.
        # Then a refactor only (issue 29 item 2): plugin/launching.py moved to the DDP scaling kind's folder as
        # kinds/ddp_scaling/launcher.py; the code is the same statement for statement (7208004b5eeb49c3 with the old
        # path).
        fingerprint="a27bf123c57a8961"),
    "components": Definition(
        family="components", id="2026-11-24",
        summary="one launch on every GPU at once: 8192^3 GEMM settled under the power cap (3 s warm-up, 3 s of "
                "0.25 s blocks, the median block), 4 GiB HBM copy and read-modify-write, 1 GiB pinned host<->GPU "
                "each GPU alone then all at once, NUMA-bound ranks",
        sources=("harness/kinds/components/kernels.py", "harness/kinds/components/worker.py",
                 "harness/kinds/components/arith.py"),
        # GEMM_DTYPES to catalog.py, write_json_atomic to files.py: figure unchanged.
        # Then a refactor only (issue 29 item 2): the three files moved to the components kind's folder, their module
        # paths and the worker's name changed with them; the code is otherwise the same statement for statement
        # (2fd4371f8131508b with the old paths and names).
        fingerprint="b1c629977304146d"),
    "allreduce": Definition(
        family="allreduce", id="2026-11-21",
        summary="nccl-tests' bus bandwidth of torch.distributed all_reduce, 1 MiB to the largest size the GPUs hold, "
                "x2 per step, 0.2 s timed per size, CUDA events",
        sources=("harness/kinds/interconnect/worker.py", "harness/kinds/interconnect/busbw.py",
                 "harness/workloads/units.py"),
        # write_json_atomic imported from files.py: figure unchanged. Then (issue 28) the sweep's launch may start with
        # the session (launch/prestart.py): its workers import torch and wait for the plan touching no GPU, then sweep
        # exactly as before. Figure unchanged: shown on one 4 x H100 host, the same session with and without it
        # (docs/data/2026-11-28-h100x4-prestart).
        # Then a refactor only: the early start's phase and wait shared with the training worker (wait_started_early).
        # Then a refactor only (issue 29 item 2): the worker moved to the interconnect kind's folder, its module path
        # and the name its plan argument reports changed with it; the code is otherwise the same statement for
        # statement (802ef4456c05b4d5 with the old path and name).
        # Then a refactor only (issue 29 item 2): workloads/busbw.py moved to the interconnect kind's folder as
        # kinds/interconnect/busbw.py, its MIB and GIB to workloads/units.py (shared with the components' launch, and
        # listed here since the sweep's sizes are counted in them), the sweep's plan to kinds/interconnect/plan.py; the
        # code is otherwise the same statement for statement (ecfa1c299b318e79 with the old paths and names).
        fingerprint="e3976ff589d9180f"),
}


def fingerprint(sources: tuple[str, ...], root: Path = PACKAGE_ROOT) -> str:
    """A hash of the code of ``sources``: their syntax trees without docstrings (comments never reach
    the tree), so rewording leaves it alone and a changed statement does not."""
    digest = hashlib.sha256()
    for source in sources:
        tree = ast.parse((root / source).read_text())
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                    and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
                body[0] = ast.Pass()
        digest.update(source.encode() + b"\0" + ast.dump(tree, annotate_fields=False).encode() + b"\0")
    return digest.hexdigest()[:16]


def current_id(family: str) -> str:
    return DEFINITIONS[family].id


def mismatch(family: str, recorded: dict[str, str] | None) -> str | None:
    """Why bounds of ``family`` recorded as ``recorded[family]`` cannot be judged today; None when they can."""
    today = current_id(family)
    was = (recorded or {}).get(family)
    if was == today:
        return None
    if was is None:
        return (f"the profile does not say how its {family} bounds were measured ([definitions] {family}); this "
                f"harness measures them as definition {today} (harness/definitions.py)")
    return (f"the profile's {family} bounds were measured under definition {was}; this harness measures "
            f"{family} figures as definition {today} (harness/definitions.py): re-derive them from sessions run "
            "with --harness-calibration on >= 3 healthy hosts of this kind and GPU count, fitted by harness "
            "calibrate-fit (docs/calibration.md)")


def compare(recorded: dict[str, str] | None) -> dict[str, dict]:
    """Per family: what the profile recorded, what this harness measures, and why they cannot be judged
    together (None when they can): session.json's ``definitions`` and the verdict header's lines."""
    return {family: {"profile": (recorded or {}).get(family), "harness": current_id(family),
                     "mismatch": mismatch(family, recorded)} for family in DEFINITIONS}
