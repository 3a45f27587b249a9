"""The telemetry sampler driven through a measured window by hand: phase files written as the
workers write them, a fake clock, a fake NVML (fake_nvml.py)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.telemetry import Sampler
from support.fake_nvml import UUIDS, FakeNvml


def write_phase(run_dir: Path, rank: int, phase: str, since: float, *, uuid: str | None = None,
                index: int | None = None, host: str = "node1") -> None:
    info = {"rank": rank, "host": host, "phase": phase, "since": since, "expected_s": None, "pid": 1}
    if uuid is not None or index is not None:
        info.update(gpu_uuid=uuid, gpu_index=index)
    (run_dir / f"rank{rank}.phase").write_text(json.dumps(info))


class Clock:
    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def drive(nvml: FakeNvml, run_dir: Path, *, gpus: int = 2, measured_polls: int = 10, during=None) -> dict:
    """warmup (sampled never) -> measure (``measured_polls`` periods; ``during(i)`` may change the
    fake GPUs) -> gather; returns the sampler's summary."""
    clock = Clock()
    sampler = Sampler(run_dir, period_s=0.1, nvml=nvml, clock=clock, host="node1")
    assert sampler.init()
    for rank in range(gpus):
        write_phase(run_dir, rank, "warmup", clock.now, uuid=UUIDS[rank], index=rank)
    sampler.poll()
    assert sampler.samples == 0, "warmup must not be sampled"
    for rank in range(gpus):
        write_phase(run_dir, rank, "measure", clock.now, uuid=UUIDS[rank], index=rank)
    for i in range(measured_polls):
        if during is not None:
            during(i)
        sampler.poll()
        clock.now += 0.1
    for rank in range(gpus):
        write_phase(run_dir, rank, "gather", clock.now, uuid=UUIDS[rank], index=rank)
    sampler.poll()
    clock.now += 5.0
    sampler.poll()  # after the window: nothing more is sampled
    return sampler.stop()
