"""The largest per-GPU batch that fits: ``harness find-max-bs``.

Two halves, kept apart so the search is tested without a GPU:

* ``search.search_max_batch(probe, ...)`` is pure: it asks a ``probe(batch) -> ProbeResult`` callable
  about batch sizes, doubling from ``start`` until a batch does not fit (or ``max_batch`` is
  reached), then bisecting between the last batch that fit and the first that did not.
* ``probe.subprocess_probe(...)`` is the I/O edge: each probe is a fresh Python process that builds the
  model and runs a few full training steps with the harness recipe (``harness/workloads/recipe.py``: the same
  optimizer, loss scaler, autocast, channels_last for CNNs, DDP with ``gradient_as_bucket_view``
  as the worker), then reports the peak memory. A fresh process per probe, because an OOM can leave
  the CUDA caching allocator fragmented: the next probe in the same process would measure the
  wreckage, not the batch.

A probe *fits* when it ran and its peak memory ``torch.cuda.max_memory_allocated`` is at most
``memory_fraction`` × the GPU's total memory. That peak counts tensors only: the CUDA context,
NCCL's buffers and the allocator's cached-but-free blocks are not in it, which is what the
fraction leaves room for. An OOM is an expected answer ("too big"), not a crash; any other failure
stops the search, because it says nothing about memory.

On CPU there is no device memory to fill: a probe that runs fits, the search is capped by
``--max`` (required there), and the peak shown is the probe process's peak resident set size
(host memory), for information only.

The search assumes memory grows with the batch (fits(b) implies fits(b') for b' < b); it warns
when the measured peaks say otherwise (cuDNN may choose other algorithms at other batch sizes).

The package: ``search`` (the pure search, its verdicts and tables), ``probe`` (one probe process
per batch: the parent that starts it and the child that trains), ``options`` (the command line,
light for ``harness --help``) and ``cli`` (the command).
"""
