"""torch.compile's caches: counting a case's lookups, summing them over ranks, saying cold or warm."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.workloads import compilecache
from harness.records import RunRecord, Versions
from harness.workloads.ddp_record import build_record
from harness.workloads.models import MODELS

from tests.test_worker_units import _args, _gathered  # noqa: F401 - the worker's raw per-rank facts

ROOT = Path(__file__).resolve().parent.parent


def _counts(**given):
    return {name: given.get(name, 0) for name in compilecache.FIELDS}


def test_delta_is_what_happened_between_two_readings():
    before = _counts(aot_autograd_hits=3, fx_graph_misses=1)
    after = _counts(aot_autograd_hits=10, fx_graph_misses=4)
    assert compilecache.delta(before, after) == _counts(aot_autograd_hits=7, fx_graph_misses=3)
    assert compilecache.delta(None, after) is None


def test_combine_sums_over_ranks_and_names_the_ranks_that_compiled():
    # A 4-GPU launch after a 1-GPU one: rank 0 (cuda:0) finds its graphs, ranks 1-3 compile them.
    warm = _counts(aot_autograd_hits=6)
    cold = _counts(aot_autograd_misses=6, fx_graph_misses=6)
    cache = compilecache.combine([warm, cold, cold, cold])
    assert cache["aot_autograd_hits"] == 6 and cache["aot_autograd_misses"] == 18 and cache["fx_graph_misses"] == 18
    assert cache["ranks"] == 4 and cache["ranks_with_misses"] == [1, 2, 3]
    assert compilecache.summary(cache) == ("partly cached: 6 cache hits, 36 misses over 4 ranks; "
                                           "rank(s) 1, 2, 3 compiled")
    assert compilecache.combine([None, None]) is None


@pytest.mark.parametrize("counts, expected", [
    (_counts(aot_autograd_hits=12), "warm: 24 cache hits, 0 misses over 2 ranks"),
    (_counts(aot_autograd_misses=1, fx_graph_misses=1), "cold: 0 cache hits, 4 misses over 2 ranks"),
    (_counts(aot_autograd_bypasses=2, fx_graph_hits=4), "warm: 8 cache hits, 0 misses, 4 not cacheable over 2 ranks"),
    (_counts(), "no cache lookups (nothing compiled in this case, or the caches are switched off)"),
])
def test_summary_says_warm_or_cold(counts, expected):
    assert compilecache.summary(compilecache.combine([counts, counts])) == expected
    assert compilecache.summary(None) is None


def test_the_record_keeps_the_sum_and_an_eager_record_none():
    versions = Versions(torch="t", cuda=None, nccl=None, driver=None, python="p", harness="h")

    def build(per_rank):
        gathered = [{**_gathered(rank, 50.0), "compile_cache": counts} for rank, counts in enumerate(per_rank)]
        return build_record(_args(), spec=MODELS["tiny_bert"], world_size=2, gathered=gathered, warmup_steps=10,
                            warmup_s=1.0, measured_steps=40, phases_s={}, nodes=1, versions=versions)

    record = build([_counts(aot_autograd_hits=5), _counts(aot_autograd_misses=5)])
    assert record.compile_cache["aot_autograd_hits"] == 5 and record.compile_cache["ranks_with_misses"] == [1]
    again = RunRecord.from_json(record.to_json())  # the field survives the JSON round trip
    assert again.compile_cache == record.compile_cache
    assert build([None, None]).compile_cache is None
    old = json.loads(record.to_json())
    del old["compile_cache"]  # a record written before the field existed still reads
    assert RunRecord.from_dict(old).compile_cache is None


_COMPILE_ONCE = textwrap.dedent("""
    import json, torch
    from harness.workloads import compilecache
    before = compilecache.lookups()
    model = torch.compile(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()))
    model(torch.randn(4, 8, requires_grad=True)).sum().backward()
    print(json.dumps(compilecache.delta(before, compilecache.lookups())))
""")


def test_a_second_process_finds_the_first_ones_graphs_in_the_cache(tmp_path):
    """Real torch.compile on the CPU, twice, in two processes sharing one cache directory: the first
    compiles (misses), the second loads (hits, no misses). This is what a warm sign-off relies on."""
    env = {**os.environ, **compilecache.cache_env(tmp_path / "cache"), "PYTHONPATH": str(ROOT),
           "CUDA_VISIBLE_DEVICES": ""}

    def once():
        done = subprocess.run([sys.executable, "-c", _COMPILE_ONCE], env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    cold, warm = once(), once()
    assert cold["aot_autograd_misses"] + cold["fx_graph_misses"] > 0 and cold["aot_autograd_hits"] == 0
    assert warm["aot_autograd_hits"] > 0 and warm["aot_autograd_misses"] == 0 and warm["fx_graph_misses"] == 0
    assert compilecache.summary(compilecache.combine([warm])).startswith("warm: ")
