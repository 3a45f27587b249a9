"""Shared fixtures for the launcher and worker tests: short CPU (gloo) benchmark specs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

# Imported once, here, before any pytester test snapshots sys.modules: in-process pytester runs
# restore the module table afterwards, and torch cannot be imported twice in one process (it
# segfaults). The plugin stays light; hardware detection imports torch inside those runs.
import torch  # noqa: F401
from harness.launch.cleanup import tagged_pids
from harness.launch.spec import BenchmarkSpec, LaunchSettings
from support.signals import stop_signals_restored

LAUNCH_FIELDS = {f.name for f in dataclasses.fields(LaunchSettings)}


@pytest.fixture(autouse=True)
def no_nvidia_hardware(monkeypatch, tmp_path_factory):
    """Sessions started by tests see a machine without NVIDIA hardware, even on a GPU host: a CPU
    session there would otherwise be refused (no silent CPU fallback, harness/node/presence.py).
    Tests of presence pass their own root and ``which``."""
    monkeypatch.setattr("harness.node.presence.SYSTEM_ROOT", tmp_path_factory.mktemp("no-nvidia"))
    monkeypatch.setattr("harness.node.presence.SYSTEM_WHICH", lambda name: None)

@pytest.fixture(autouse=True)
def stop_signals_put_back():
    """A test that runs a harness session in this process leaves the suite stoppable (tests/support/signals.py)."""
    with stop_signals_restored():
        yield


# Short enough that one launch takes seconds on a 2-core host, long enough to reach every phase.
FAST_RUN = {
    "model": "tiny_bert",
    "precision": "fp32",
    "batch_size_per_gpu": 4,
    "device": "cpu",
    "warmup_seconds": 0.5,
    "measure_seconds": 1.0,
    "min_warmup_steps": 2,
    "min_measure_steps": 5,
    "timeout_s": 120.0,
}


@pytest.fixture(scope="session")
def fast_spec():
    """Factory: ``fast_spec(gpus_per_node=2, extra_env={...})`` -> a short CPU BenchmarkSpec (the launch
    settings among the fields go to its LaunchSettings)."""

    def make(**overrides) -> BenchmarkSpec:
        fields = {**FAST_RUN, "gpus_per_node": 1, **overrides}
        if fields.get("scaling") == "strong":
            fields.pop("batch_size_per_gpu", None)
        launch = LaunchSettings(**{k: fields.pop(k) for k in list(fields) if k in LAUNCH_FIELDS})
        return BenchmarkSpec(**fields, launch=launch)

    return make


def processes_mentioning(run_id: str) -> list[int]:
    """PIDs whose environment mentions run_id anywhere: independent of launch.tagged_pids' exact match."""
    needle = run_id.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.fixture(scope="session")
def assert_no_process_left():
    def check(run_id: str) -> None:
        assert tagged_pids(run_id) == [], f"processes of run {run_id} still alive"
        assert processes_mentioning(run_id) == [], f"a process still carries {run_id} in its environment"

    return check
