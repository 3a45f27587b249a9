"""torch.compile's on-disk caches: where a run keeps them, and whether it found them warm.

A compiled sign-off is only quick when the caches of an earlier run are found. The worker counts
the cache lookups of each case (``lookups`` before and after, ``delta``), the record keeps the
sum over ranks (``combine``) and the report says in one line whether the case compiled cold or
warm (``summary``), so a slow compiled run explains itself.

Inductor's cache key holds the CUDA device index of the graph's inputs: a graph compiled on
cuda:0 is compiled again on cuda:1 (pytorch/pytorch#108971). A launch on N GPUs compiles every
graph for N device indices at once, which is why the plugin launches the widest GPU count first
when compiling: the narrower launches after it find their graphs cached.
"""

from __future__ import annotations

from pathlib import Path

# (counter group, counter name) in torch._dynamo.utils.counters -> the name the record uses.
# An AOT-autograd hit includes its FX-graph lookups. Under DDP the AOT-autograd cache is bypassed
# ("not cacheable": DDP's graph split traces with fakify_first_call, which it refuses), so a warm
# DDP case shows FX-graph hits only and still pays Dynamo's and AOTAutograd's tracing.
_COUNTERS = {
    ("aot_autograd", "autograd_cache_hit"): "aot_autograd_hits",
    ("aot_autograd", "autograd_cache_miss"): "aot_autograd_misses",
    ("aot_autograd", "autograd_cache_bypass"): "aot_autograd_bypasses",
    ("inductor", "fxgraph_cache_hit"): "fx_graph_hits",
    ("inductor", "fxgraph_cache_miss"): "fx_graph_misses",
    ("inductor", "fxgraph_cache_bypass"): "fx_graph_bypasses",
}
FIELDS = tuple(_COUNTERS.values())


def cache_env(root: Path) -> dict[str, str]:
    """torch.compile's on-disk caches under ``root``: a second run with the same models, shapes and
    software skips most of the 15-45 s of compilation per case. Inductor's FX-graph and AOT-autograd
    caches live under TORCHINDUCTOR_CACHE_DIR, the compiled Triton kernels under TRITON_CACHE_DIR."""
    return {"TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"), "TRITON_CACHE_DIR": str(root / "triton"),
            "TORCHINDUCTOR_FX_GRAPH_CACHE": "1", "TORCHINDUCTOR_AUTOGRAD_CACHE": "1"}


def lookups() -> dict[str, int] | None:
    """This process's cache lookups so far (worker side; imports torch), or None where this torch
    keeps no such counters."""
    try:
        # Imported here, not at the top: the launcher reads cache_env without importing torch.
        from torch._dynamo.utils import counters
    except ImportError:
        return None
    return {name: int(counters[group][counter]) for (group, counter), name in _COUNTERS.items()}


def delta(before: dict[str, int] | None, after: dict[str, int] | None) -> dict[str, int] | None:
    """The lookups between two ``lookups()`` readings: one case's."""
    if before is None or after is None:
        return None
    return {name: after.get(name, 0) - before.get(name, 0) for name in FIELDS}


def combine(per_rank: list[dict[str, int] | None]) -> dict | None:
    """The record's ``compile_cache``: each count summed over ranks, and which ranks missed.

    None when no rank counted (an eager run, or a torch without the counters)."""
    counted = [(rank, counts) for rank, counts in enumerate(per_rank) if counts is not None]
    if not counted:
        return None
    totals: dict = {name: sum(counts.get(name, 0) for _, counts in counted) for name in FIELDS}
    totals["ranks"] = len(counted)
    totals["ranks_with_misses"] = [rank for rank, counts in counted
                                   if counts.get("aot_autograd_misses", 0) or counts.get("fx_graph_misses", 0)]
    return totals


def summary(cache: dict | None) -> str | None:
    """One line for the report and the sign-off table: warm, cold or partly cached, with the counts."""
    if not cache:
        return None
    hits = int(cache.get("aot_autograd_hits", 0)) + int(cache.get("fx_graph_hits", 0))
    misses = int(cache.get("aot_autograd_misses", 0)) + int(cache.get("fx_graph_misses", 0))
    if hits + misses == 0:
        return "no cache lookups (nothing compiled in this case, or the caches are switched off)"
    state = "warm" if misses == 0 else "cold" if hits == 0 else "partly cached"
    bypasses = int(cache.get("aot_autograd_bypasses", 0)) + int(cache.get("fx_graph_bypasses", 0))
    ranks = int(cache.get("ranks", 0))
    missing = cache.get("ranks_with_misses") or []
    where = f"; rank(s) {', '.join(map(str, missing))} compiled" if 0 < len(missing) < ranks else ""
    return (f"{state}: {hits} cache hit{'s' if hits != 1 else ''}, {misses} miss{'es' if misses != 1 else ''}"
            f"{f', {bypasses} not cacheable' if bypasses else ''} over {ranks} rank{'s' if ranks != 1 else ''}{where}")
