"""Fault injection for tests: make one rank crash, hang or produce NaN at a chosen step.

A testing aid, inert unless ``HARNESS_FAULT`` is set in the worker's environment:

    HARNESS_FAULT="kind=kill,rank=1,phase=measure,step=5"

kind: ``kill`` (SIGKILL to itself), ``crash`` (raise an exception), ``hang`` (SIGSTOP to itself,
as a wedged process looks from outside), ``nan`` (the loss becomes NaN), ``oom`` (raise the
framework's out-of-memory error). phase: ``warmup`` or ``measure``; step counts from 0 within it.
model (optional): only the cases of that model, so one case of a launch of several can fail alone.

``host_sync`` is a degradation, not a failure: every rank waits for its device after every step
(``torch.cuda.synchronize()`` after the optimizer step), the anti-pattern the recipe avoids, so
``harness selftest`` can prove the verdict notices it. It acts on every step of every rank and
phase: ``HARNESS_FAULT="kind=host_sync"`` (``model=`` may narrow it; rank, phase and step do not
apply and are refused). ``stall_ms=N`` adds N ms of host time after each sync, during which the GPU
has nothing queued: a host-bound step (a slow data loader, a Python-side metric). A bare sync costs
what the host's launch latency costs, which differs between hosts (ResNet-50 fp16: -8.1 % on one
lent H100, -2.3 % on another, -0.2 % on an H200): the stall makes the degradation the same anywhere.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

import torch

ENV_VAR = "HARNESS_FAULT"
KINDS = ("kill", "crash", "hang", "nan", "oom", "host_sync")
EVERY_STEP_KINDS = ("host_sync",)
"""Kinds that act on every step of every rank, so rank, phase and step do not apply to them."""
PHASES = ("warmup", "measure")


@dataclass(frozen=True, kw_only=True, slots=True)
class Fault:
    kind: str
    rank: int
    phase: str
    step: int
    model: str | None = None
    stall_ms: float = 0.0
    """host_sync only: host time after each sync, in milliseconds."""

    def due(self, rank: int, phase: str, step: int, model: str | None = None) -> bool:
        if self.model is not None and model != self.model:
            return False
        if self.kind in EVERY_STEP_KINDS:
            return True
        return rank == self.rank and phase == self.phase and step == self.step


def parse_fault(text: str) -> Fault:
    """Parse ``kind=...,rank=...,phase=...,step=...``; a bad value names itself and the allowed ones."""
    fields: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"{ENV_VAR}={text!r}: expected key=value pairs separated by commas, got {part!r}")
        fields[key.strip()] = value.strip()
    unknown = set(fields) - {"kind", "rank", "phase", "step", "model", "stall_ms"}
    if unknown:
        raise ValueError(f"{ENV_VAR}={text!r}: unknown keys {sorted(unknown)}; allowed: kind, rank, phase, step, "
                         "model, stall_ms")
    kind = fields.get("kind", "")
    if kind not in KINDS:
        raise ValueError(f"{ENV_VAR}={text!r}: kind {kind!r} is not one of {', '.join(KINDS)}")
    if kind in EVERY_STEP_KINDS and {"rank", "phase", "step"} & set(fields):
        raise ValueError(f"{ENV_VAR}={text!r}: kind {kind} acts on every step of every rank; rank, phase and "
                         "step do not apply (only model= may narrow it)")
    phase = fields.get("phase", "measure")
    if phase not in PHASES:
        raise ValueError(f"{ENV_VAR}={text!r}: phase {phase!r} is not one of {', '.join(PHASES)}")
    try:
        rank = int(fields.get("rank", "0"))
        step = int(fields.get("step", "0"))
    except ValueError:
        raise ValueError(f"{ENV_VAR}={text!r}: rank and step must be integers") from None
    return Fault(kind=kind, rank=rank, phase=phase, step=step, model=fields.get("model") or None,
                 stall_ms=_stall_ms(text, kind, fields.get("stall_ms")))


def _stall_ms(text: str, kind: str, value: str | None) -> float:
    if value is None:
        return 0.0
    if kind != "host_sync":
        raise ValueError(f"{ENV_VAR}={text!r}: stall_ms applies to kind host_sync only")
    try:
        stall_ms = float(value)
    except ValueError:
        stall_ms = -1.0
    if not 0 <= stall_ms <= 1000:
        raise ValueError(f"{ENV_VAR}={text!r}: stall_ms must be a number of milliseconds in [0, 1000], got {value!r}")
    return stall_ms


def fault_from_env() -> Fault | None:
    text = os.environ.get(ENV_VAR)
    return parse_fault(text) if text else None


def trigger(fault: Fault) -> None:
    """Carry out a due fault that acts on the process (kill, crash, hang, oom); nan and host_sync are
    the caller's (nan poisons the loss, host_sync follows the step: ``after_step``)."""
    if fault.kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif fault.kind == "hang":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif fault.kind == "crash":
        raise RuntimeError(f"injected crash ({ENV_VAR}) at {fault.phase} step {fault.step}")
    elif fault.kind == "oom":
        raise torch.OutOfMemoryError(f"injected out-of-memory ({ENV_VAR}) at {fault.phase} step {fault.step}")


def after_step(fault: Fault, device: torch.device) -> None:
    """What a due fault does once the step's work is queued: host_sync waits for the device.

    A CPU rank has no device queue (its step has already run on the host), so there is nothing to
    wait for and a host sync costs nothing there.
    """
    if fault.kind == "host_sync" and device.type == "cuda":
        torch.cuda.synchronize(device)
        if fault.stall_ms:
            time.sleep(fault.stall_ms / 1000)  # the GPU's queue is empty: it idles for this long
