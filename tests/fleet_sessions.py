"""Report directories of made-up GPU nodes for the fleet tests and the docs example.

Schema-valid by construction: the run records are real ``RunRecord``s, the checks come from the
real verdict code against the h200 profile as shipped before its 4-GPU fit (tests/data/h200-hand-set/h200.toml:
the shipped one bounds no 8-GPU shape, so it would judge these 8-GPU nodes "not evaluated"), the results are the
plugin's own
``CaseResult.to_dict()`` and the hardware is a real ``Hardware``. Only the measurements are made
up: each node gets a throughput scale, and one GPU may be made slower than its peers.
"""

from __future__ import annotations

import json
import random
import zlib
from dataclasses import dataclass
from pathlib import Path

from harness.cases import CaseId
from harness.kinds.ddp_scaling import checks as scaling_checks
from harness.node.hardware import GpuInfo, Hardware
from harness.plugin.results import CaseResult
from harness.kinds.shipped import load_shipped_profile
from harness.records import RankStats, RunRecord, StepTimeStats, Straggler, Versions

PROFILE = load_shipped_profile(Path(__file__).resolve().parent / "data" / "h200-hand-set" / "h200.toml")
MODEL, PRECISION = "resnet50", "bf16"
ONE_GPU_IMAGES_PER_S = 4640.7
"""The h200 profile's measured 1-GPU figure for resnet50 bf16 (its bound is 0.90 of it)."""
VERSIONS = Versions(torch="2.9.0+cu130", cuda="13.0", nccl="2.27.7", driver="580.95.05", python="3.11.7",
                    harness="0.1.0")


@dataclass(frozen=True, kw_only=True)
class NodePlan:
    node: str
    gpus: int = 8
    speed: float = 1.0
    """Every GPU's throughput as a fraction of the profile's measured figure."""
    slow_gpu: int | None = None
    slow_by: float = 0.0
    """GPU ``slow_gpu`` computes this fraction slower than the node's others."""
    started_at: str = "2026-11-20T10:00:00+00:00"
    seed: int = 0
    scope: str | None = "full"
    """The session verdict's scope; None: write no session verdict (an older harness)."""
    level: str = "standard"
    cpu_self_check: bool = False


def uuid_of(node: str, index: int) -> str:
    """A UUID-shaped name, the same in every process (``hash()`` of a string is salted per process)."""
    return f"GPU-{zlib.crc32(f'{node}/{index}'.encode()):08x}-{index:04d}-4e1f-9c2a-{node[-4:].rjust(4, '0')}00000000"


def _telemetry(plan: NodePlan, indices: range, rng: random.Random) -> dict:
    gpus = []
    for index in indices:
        slow = index == plan.slow_gpu
        reduced = {"util_pct": round(98.5 - (3.0 if slow else 0.0) + rng.uniform(-0.3, 0.3), 2),
                   "power_w": round(655.0 + rng.uniform(-6, 6), 1), "power_limit_w": 700.0,
                   "temperature_c": round(71.0 + (6.0 if slow else 0.0) + rng.uniform(-1, 1), 1),
                   "sm_clock_mhz": 1980.0 - (60.0 if slow else 0.0), "clock_event_reasons": [],
                   "ecc_uncorrected": 0, "ecc_corrected": 0}
        gpus.append({"index": index, "uuid": uuid_of(plan.node, index), "rank": index - indices.start,
                     "samples": 100, "reduced": reduced})
    return {"status": "ok", "period_s": 0.1, "gpus": gpus}


def _record(plan: NodePlan, world: int, rng: random.Random) -> RunRecord:
    batch = PROFILE.bounds(MODEL, PRECISION).batch_size_per_gpu
    speeds = [plan.speed * (1 - plan.slow_by if i == plan.slow_gpu else 1.0) * (1 + rng.uniform(-0.002, 0.002))
              for i in range(world)]
    compute_ms = [batch * 1000.0 / (ONE_GPU_IMAGES_PER_S * s) for s in speeds]
    # Under DDP every rank waits for the slowest, plus a little all-reduce time above 1 GPU.
    step_ms = max(compute_ms) * (1.0 if world == 1 else 1.004)
    per_gpu = batch * 1000.0 / step_ms
    stats = StepTimeStats(mean_ms=step_ms, median_ms=step_ms, p95_ms=step_ms * 1.01, p99_ms=step_ms * 1.02,
                          cv=0.004, steps=400)
    ranks = tuple(RankStats(rank=i, local_rank=i, host=plan.node, gpu_index=i, gpu_uuid=uuid_of(plan.node, i),
                            device_name="NVIDIA H200", step_time=stats, window_s=30.0,
                            compute_step_ms=compute_ms[i] if world > 1 else None, peak_memory_gib=61.2)
                  for i in range(world))
    slow, fast = max(range(world), key=lambda i: compute_ms[i]), min(range(world), key=lambda i: compute_ms[i])
    straggler = Straggler(ratio=compute_ms[slow] / compute_ms[fast], slowest_rank=slow, slowest_host=plan.node,
                          slowest_gpu_index=slow, fastest_rank=fast, fastest_host=plan.node, fastest_gpu_index=fast)
    case = CaseId(model=MODEL, precision=PRECISION, gpus=world)
    return RunRecord(run_id=f"{run_id(plan)}-{case.key}", model=MODEL, precision=PRECISION, scaling="weak",
                     world_size=world, nodes=1, device_kind="cuda", batch_size_per_gpu=batch,
                     global_batch_size=batch * world, status="ok", sample_unit="images", throughput_per_gpu=per_gpu,
                     throughput_total=per_gpu * world, throughput_ci95_rel=0.004, ci_blocks=10, step_time_ms=stats,
                     per_rank=ranks, straggler=straggler if world > 1 else None,
                     straggler_ratio=straggler.ratio if world > 1 else None, peak_memory_gib=61.2,
                     loss_finite=True, final_loss=6.9, measured_steps=400, measure_s=30.0, device_name="NVIDIA H200",
                     hosts=(plan.node,), versions=VERSIONS, telemetry=_telemetry(plan, range(world), rng),
                     started_at=plan.started_at, finished_at=plan.started_at)


def run_id(plan: NodePlan) -> str:
    return f"{plan.started_at[:10].replace('-', '')}-{plan.started_at[11:19].replace(':', '')}-{plan.node}-h200"


def _results(plan: NodePlan) -> dict[str, dict]:
    rng = random.Random(f"{plan.node}-{plan.started_at}-{plan.seed}")
    bounds = PROFILE.bounds(MODEL, PRECISION)
    one = _record(plan, 1, rng)
    results = {}
    for world in (1, plan.gpus):
        record = one if world == 1 else _record(plan, world, rng)
        case = CaseId(model=MODEL, precision=PRECISION, gpus=world)
        checks = scaling_checks.weak_scaling_checks(record, one if world > 1 else None, bounds, telemetry_note="none")
        result = CaseResult(case=case, record=record, checks=checks,
                            baseline_run_id=one.run_id if world > 1 else None,
                            context=f"h200, {MODEL} {PRECISION}, {world} GPUs", log_dir=Path("logs") / case.key)
        results[f"test_scaling.py::test_weak_scaling[{case.test_param}]"] = result.to_dict()
    return results


def write_node(root: Path, plan: NodePlan) -> Path:
    """reports/<run-id>/ of one made-up node: session.json and report.json as a session writes them."""
    hardware = Hardware(hostname=plan.node, device="cuda", driver_version=VERSIONS.driver, cuda_driver_version="13.0",
                        cuda_runtime_version="13.0", nccl_version=VERSIONS.nccl, torch_version=VERSIONS.torch,
                        nvml_unavailable_reason=None, nvml_gpu_count=plan.gpus,
                        gpus=tuple(GpuInfo(index=i, name="NVIDIA H200", uuid=uuid_of(plan.node, i),
                                           memory_total_gib=139.8, pci_bus_id=f"00000000:{0x18 + i:02X}:00.0")
                                   for i in range(plan.gpus)))
    results = _results(plan)
    failed = any(c["passed"] is False for r in results.values() for c in r["checks"])
    summary = {"run_id": run_id(plan), "run_dir": str(root / run_id(plan)), "started_at": plan.started_at,
               "finished_at": plan.started_at[:11] + "10:05:00+00:00",
               "profile": {"name": PROFILE.name, "path": str(PROFILE.path), "sha256": PROFILE.sha256,
                           "description": PROFILE.description, "raw": PROFILE.raw},
               "hardware": hardware.to_dict(), "command_line": ["python", "-m", "pytest", "acceptance"],
               "harness_version": "0.1.0", "slurm": None, "git_commit": "0" * 40, "container": None}
    tests = [{"nodeid": nodeid, "outcome": "failed" if any(c["passed"] is False for c in r["checks"]) else "passed",
              "setup": {"outcome": "passed", "duration": 0.01},
              "call": {"outcome": "failed" if any(c["passed"] is False for c in r["checks"]) else "passed",
                       "duration": 40.0},
              "teardown": {"outcome": "passed", "duration": 0.0}, "metadata": {"harness": r}}
             for nodeid, r in results.items()]
    run_dir = root / run_id(plan)
    (run_dir / "runs").mkdir(parents=True, exist_ok=True)
    session = {**summary, "results": results, "exitstatus": 1 if failed else 0, "interrupted": False}
    if plan.scope is not None:
        verdict = "FAIL" if failed else "PASS"
        session["session_verdict"] = {
            "verdict": verdict, "scope": plan.scope, "exit_code": int(failed),
            "headline": f"{verdict} — {plan.scope}", "level": plan.level, "cpu_self_check": plan.cpu_self_check,
            "sign_off": (verdict == "PASS" and plan.scope == "full" and plan.level != "quick"
                         and not plan.cpu_self_check)}
    report = {"created": 0, "duration": 300.0, "exitcode": 1 if failed else 0, "root": "acceptance",
              "environment": {}, "summary": {"collected": len(tests)}, "tests": tests, "harness": summary}
    (run_dir / "session.json").write_text(json.dumps(session, indent=1))
    (run_dir / "report.json").write_text(json.dumps(report, indent=1))
    return run_dir


def fleet_plans(count: int = 6, *, outlier: str = "gpu-node04", failing: str = "gpu-node05") -> list[NodePlan]:
    """``count`` healthy nodes but two: ``outlier`` has GPU 3 4 % slower (within every bound, the
    straggler ratio included); ``failing`` runs 15 % below the profile's measured throughput."""
    plans = []
    for index in range(1, count + 1):
        node = f"gpu-node{index:02d}"
        if node == outlier:
            plans.append(NodePlan(node=node, slow_gpu=3, slow_by=0.04))
        elif node == failing:
            plans.append(NodePlan(node=node, speed=0.85))
        else:
            plans.append(NodePlan(node=node))
    return plans
