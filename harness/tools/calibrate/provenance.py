"""Where a calibrated profile's numbers came from: the hosts, GPUs and software versions that the
run records say ran (the detected hardware fills what they do not say), for the file's header."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Sequence

from harness import __version__
from harness.node.hardware import Hardware
from harness.records import RunRecord
from harness.tools.calibrate.plan import CalibrationPlan


@dataclass(frozen=True, kw_only=True, slots=True)
class Provenance:
    started_at: str
    finished_at: str
    hosts: tuple[str, ...]
    device_name: str
    gpu_count: int
    memory_gib: float | None
    driver: str | None
    cuda: str | None
    nccl: str | None
    torch: str
    python: str | None
    harness: str
    command_line: str
    records_dir: str

    @property
    def date(self) -> str:
        return self.started_at[:10]

    @property
    def node(self) -> str:
        hosts = ", ".join(self.hosts) or "unknown host"
        if self.memory_gib is None:
            return f"host {hosts}, {self.device_name} (CPU ranks, gloo)"
        return f"host {hosts}, {self.gpu_count} x {self.device_name} ({self.memory_gib:.1f} GiB)"

    @property
    def software(self) -> str:
        parts = [f"driver {self.driver}" if self.driver else None, f"CUDA {self.cuda}" if self.cuda else None,
                 f"NCCL {self.nccl}" if self.nccl else None, f"torch {self.torch}",
                 f"Python {self.python}" if self.python else None, f"harness {self.harness}"]
        return ", ".join(p for p in parts if p)


def provenance(records: Sequence[RunRecord], hw: Hardware, plan: CalibrationPlan) -> Provenance:
    """From the run records' versions and hosts (what actually ran) and the detected hardware."""

    def one(values) -> str | None:
        distinct = list(dict.fromkeys(v for v in values if v))
        return " / ".join(distinct) if distinct else None

    versions = [r.versions for r in records if r.versions is not None]
    cuda_run = plan.device == "cuda"
    return Provenance(
        started_at=min(r.started_at for r in records if r.started_at) if any(r.started_at for r in records)
        else datetime.now(timezone.utc).isoformat(timespec="seconds"),
        finished_at=max(r.finished_at for r in records if r.finished_at) if any(r.finished_at for r in records)
        else datetime.now(timezone.utc).isoformat(timespec="seconds"),
        hosts=tuple(dict.fromkeys(host for r in records for host in r.hosts)) or (hw.hostname,),
        device_name=one(r.device_name for r in records) or (hw.gpu_name if cuda_run else "cpu") or "unknown",
        gpu_count=hw.gpu_count if cuda_run else 0,
        memory_gib=min(gpu.memory_total_gib for gpu in hw.gpus) if cuda_run and hw.gpus else None,
        driver=one(v.driver for v in versions) or (hw.driver_version if cuda_run else None),
        cuda=one(v.cuda for v in versions) or hw.cuda_runtime_version,
        nccl=one(v.nccl for v in versions) or (hw.nccl_version if cuda_run else None),
        torch=one(v.torch for v in versions) or hw.torch_version,
        python=one(v.python for v in versions),
        harness=one(v.harness for v in versions) or __version__,
        command_line=plan.command_line, records_dir=str(plan.records_dir))
