"""Which bound of a profile holds for a record: the GPU count it was measured on, and its reference.

A bound holds only for the shape it was measured on (issue 27): a profile's health, rate and
concurrent-host-link bounds are tables by how many GPUs ran at once, efficiency and straggler tables by
how many trained together; a count with no entry is *not evaluated*, never judged against another count's
figure. Pure: records and profile bounds in, numbers and words out.
"""

from __future__ import annotations

from harness.profile.bounds import ReferencedBounds
from harness.records import RunRecord


UNMEASURED_SHAPE = "not evaluated: no "
"""How every reason for a shape with no measured bound begins (``unmeasured``), so that the session verdict can
tell a node of an unfitted size from a test that did not run for another reason."""
UNMEASURED_SHAPE_HINT = ("no bound was measured for this node's shape: fit one from calibration sessions on >= 3 "
                         "healthy hosts of this node size (docs/calibration.md)")


def unmeasured(what: str) -> str:
    """``not evaluated: no <what>``: the reason of a check whose shape the profile has no bound for."""
    return f"{UNMEASURED_SHAPE}{what}"


def is_unmeasured(reason: str) -> bool:
    return reason.startswith(UNMEASURED_SHAPE) and " bound measured for " in reason


def gpus_at_once(record: RunRecord) -> int:
    """The shape a record's bounds are looked up by: how many GPUs (ranks) ran its case at once, each its
    own model in a 1-GPU case on every GPU, or together under DDP."""
    return len(record.per_rank) or record.world_size * record.nodes


def bound_for(bounds: object, key: str, gpus: int, shape: str = "") -> tuple[float | None, str]:
    """(the bound ``key`` for ``gpus`` GPUs, "") or (None, why not): "" as well when the profile has no such
    bound at all (then there is no check); a count it has no entry for is named, never stretched from another.
    ``shape`` words the count in the reason (" at once"). ``bounds``: a case's, or a kind's bounds dataclass."""
    table = getattr(bounds, key)
    if not isinstance(table, dict):
        return table, ""
    if not table or gpus in table:
        return table.get(gpus), ""
    measured = ", ".join(str(count) for count in table)
    return None, unmeasured(f"{key} bound measured for {gpus} GPU{'s' if gpus != 1 else ''}{shape} "
                            f"(the profile has it for {measured})")


def reference_note(bounds: ReferencedBounds, key: str, gpus: int, measured: float | None) -> str:
    """``3.1 % under this kind's reference 0.985 (3 hosts, 9 runs)`` for a bound written as a reference."""
    reference = bounds.reference(key, gpus)
    if reference is None or measured is None or not reference.ref:
        return ""
    offset = measured / reference.ref - 1
    fit = ", ".join(part for part in (f"{reference.hosts} hosts" if reference.hosts else "",
                                      f"{reference.runs} runs" if reference.runs else "") if part)
    side = "under" if offset < 0 else "over"
    return f"{abs(offset):.1%} {side} this kind's reference {reference.ref:.4g}" + (f" ({fit})" if fit else "")


def key_of_bound(check_key: str, comparison: str) -> str:
    """The profile key that bounds a check: ``step_time_cv`` -> ``max_step_time_cv``."""
    return {"throughput_per_gpu": "min_samples_per_sec_per_gpu", "weak_efficiency": "min_weak_efficiency",
            "strong_efficiency": "min_strong_efficiency"}.get(
        check_key, f"{'max' if comparison == '<=' else 'min'}_{check_key}")
