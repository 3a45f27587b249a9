"""torch.compile's on-disk caches: where a run keeps them, and whether it found them warm.

A compiled sign-off is only quick when the caches of an earlier run are found. The worker counts
the cache lookups of each case (``lookups`` before and after, ``delta``), the record keeps the
sum over ranks (``combine``) and the report says in one line whether the case compiled cold or
warm (``summary``), so a slow compiled run explains itself.

Inductor's cache key holds the CUDA device index of the graph's inputs: a graph compiled on
cuda:0 is compiled again on cuda:1 (pytorch/pytorch#108971). A launch on N GPUs compiles every
graph for N device indices at once, which is why the plugin launches the widest GPU count first
when compiling: the narrower launches after it find their graphs cached.

The caches hold pickles and compiled code that the workers load: whoever can write them runs code
in the next sign-off. They live in a per-user directory outside the reports (``default_cache_root``),
and a directory another user owns, or one a group or everyone may write, is refused
(``prepare_cache_root``).
"""

from __future__ import annotations

import os
import stat
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


CACHE_DIR_MODE = 0o700
"""The cache directory made when absent: its owner alone reads, writes and enters it."""


class CacheDirError(ValueError):
    """A compile cache directory the workers must not load code from."""


def default_cache_root() -> Path:
    """$XDG_CACHE_HOME/harness/compile, else ~/.cache/harness/compile (the XDG base directory rule)."""
    base = os.environ.get("XDG_CACHE_HOME") or ""
    return (Path(base) if os.path.isabs(base) else Path.home() / ".cache") / "harness" / "compile"


def prepare_cache_root(root: Path) -> Path:
    """``root`` made (0700) when absent and returned resolved; a CacheDirError when it is not a
    directory this user owns and alone may write (the workers load code from it)."""
    root = Path(root).expanduser()
    try:
        root.mkdir(mode=CACHE_DIR_MODE, parents=True, exist_ok=True)
        info = os.lstat(root)
    except OSError as exc:
        raise CacheDirError(f"cannot make the compile cache directory {root}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise CacheDirError(f"the compile cache {root} is not a directory (a link or a file): "
                            "name a directory of your own with --harness-compile-cache")
    if info.st_uid != os.getuid():
        raise CacheDirError(f"the compile cache {root} belongs to uid {info.st_uid}, not to you (uid {os.getuid()}): "
                            "its owner could put code there that the workers load; use a directory of your own")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheDirError(f"the compile cache {root} is writable by its group or by everyone "
                            f"(mode {stat.S_IMODE(info.st_mode):04o}): anyone who can write it runs code in "
                            f"the workers; chmod 700 {root}, or use another directory")
    return root.resolve()


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
