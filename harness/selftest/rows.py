"""The selftest's rows: what each injects, which acceptance test it runs, and what must FAIL.

Pure: the node's facts (its GPUs, its cores) and the session's profile in, row specs out. A row
that cannot apply on this node carries the reason (``not_applicable``) and is never run; it is
shown as such, never as passed. None of the rows touches clocks, power limits or the driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from harness.cases import CaseId
from harness.catalog import MODELS
from harness.profile.bounds import Profile

SCALING_TEST = "acceptance/test_scaling.py::test_weak_scaling"
ALLREDUCE_TEST = "acceptance/test_interconnect.py::test_allreduce_bus_bandwidth"
NODE_TEST = "acceptance/test_node.py"
ALLOW_FAULTS_OPTION = "--harness-allow-fault-injection"
"""Acceptance sessions refuse HARNESS_FAULT without it (fault injection must never pass unnoticed)."""

CPU_BURNERS_PER_CORE = 6
"""Busy processes pinned to each of the ranks' cores in the CPU foreign-load row, each a session of its
own (foreign_load.py says why). The cpu profile's throughput bounds are 0.40 x the 2-rank median
(about 0.4 x a lone rank's rate, thresholds/cpu.toml), so the load must cost a rank over 60 % of its
speed with a margin for faster CPUs: against 6 busy neighbours the scheduler leaves a rank about 1/7
of its core. Measured on the 2-core AVX2 CI VM, 2026-11-24: docs/selftest.md."""

CPU_LOADED_LAUNCH_ARGS = ("--harness-timeout", "600", "--harness-stall-factor", "20")
"""The CPU foreign-load session's launch limit and stall rule: a loaded rank needs minutes for the
warmup's and window's minimum step counts, past the cpu profile's 180 s, and its window can run
several times its estimate (at 8 per core the stall rule stopped a run after 131 s without a step,
failing run_completed instead of the throughput check). Both guard against hangs; raising them
judges nothing differently."""

RowKey = Literal["foreign_load", "nccl_p2p_off", "hidden_gpu", "host_sync"]
ROW_KEYS: tuple[RowKey, ...] = ("foreign_load", "nccl_p2p_off", "hidden_gpu", "host_sync")


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeGpu:
    """A GPU as NVML numbers it (physical index), whether or not CUDA_VISIBLE_DEVICES shows it."""

    index: int
    uuid: str
    pci_bus_id: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class ForeignLoad:
    """The foreign process of the first row (harness/selftest/foreign_load.py)."""

    device: Literal["cuda", "cpu"]
    gpu_uuid: str | None = None
    """The GPU the matmul loop runs on (cuda)."""
    cores: tuple[int, ...] = ()
    """The cores the busy processes are pinned to (cpu): the ranks' cores."""
    burners_per_core: int = CPU_BURNERS_PER_CORE
    case: str | None = None
    """The case whose warm-up starts the load (its log directory's name); None: the session's first case. The DDP
    case's own: started at the 1-GPU reference before it (same launch, seconds apart), the load slowed the reference
    too, and on 2 GPUs, whose reference is the slower GPU's figure, the efficiency did not move (0.969 with GPU 1 at
    half speed: docs/data/2026-11-28-h100x2-host-x11)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RowSpec:
    key: RowKey
    injected: str
    """What the row does to the node, in words (the table's first column)."""
    expected_keys: tuple[str, ...]
    """Check keys that must FAIL."""
    require: Literal["all", "any"] = "all"
    """all: every expected key must fail; any: at least one (either measure can show the cost)."""
    not_applicable: str | None = None
    """Why this row cannot apply on this node; None: it runs."""
    pytest_args: tuple[str, ...] = ()
    """The acceptance session's arguments (tests and options), after ``python -m pytest -p harness.plugin``."""
    env: dict[str, str] = field(default_factory=dict)
    """Set in the session's environment (the injection, where it is one)."""
    cause_tokens: tuple[str, ...] = ()
    """Any of these, found where ``cause_in`` says, names the injected cause."""
    cause_in: Literal["notes", "overrides", "output"] = "notes"
    """notes: the failed expected checks' notes; overrides: session.json ``overrides``; output: the
    session's terminal output (a refused session leaves no session.json)."""
    cause_not_expected: str | None = None
    """Why no check can name the cause on this node (the row is judged on failing alone)."""
    headline_tokens: tuple[str, ...] = ()
    """Each of these must be named in the session verdict's headline (``GPU 3``: the GPU the fault was put
    on); where the row's cause is in the notes, one of its cause tokens (the foreign pid) must be too. An
    operator reads the headline: a cause named in a note only is a headline blaming the wrong GPU."""
    expect_refusal: bool = False
    """The session must refuse to start (exit non-zero before any benchmark) instead of failing a check."""
    refusal_counts: bool = False
    """A session that refuses to start, naming the cause in its output, caught the degradation too
    (a node-shape problem may stop a session at its start rather than fail a check)."""
    foreign_load: ForeignLoad | None = None
    affinity: tuple[int, ...] | None = None
    """The cores the session may use (CPU ranks: one rank per core); None: the selftest's own."""


def launch_bound_case(profile: Profile, device: str) -> tuple[str, str] | None:
    """(model, precision) of the profile's case with the fewest training FLOPs per step.

    The shortest step is where a fixed per-step host cost weighs the most (launch-bound). fp16 first
    on GPUs (its step is as short as bf16's, docs/measurements.md), fp32 first on CPU ranks (bf16
    may be emulated there and is then skipped, thresholds/cpu.toml).
    """
    order = ("fp16", "bf16", "fp32") if device == "cuda" else ("fp32", "bf16", "fp16")
    for precision in (p for p in order if p in profile.precisions):
        candidates = []
        for model in profile.models:
            bounds = profile.bounds(model, precision)
            if bounds is not None and bounds.min_samples_per_sec_per_gpu and model in MODELS:
                candidates.append((bounds.batch_size_per_gpu * MODELS[model].train_flops_per_sample, model))
        if candidates:
            return min(candidates)[1], precision
    return None


def plan_rows(*, profile: Profile, visible_gpus: list[NodeGpu], node_gpus: list[NodeGpu],
              cores: tuple[int, ...], base_args: tuple[str, ...] = ()) -> list[RowSpec]:
    """Every row for this node, in table order. ``visible_gpus``: the GPUs the session will use
    (empty on CPU); ``node_gpus``: every GPU NVML sees; ``base_args``: passed to every session."""
    device = profile.hardware.device
    case = launch_bound_case(profile, device)
    case_args: tuple[str, ...] = ()
    no_case = f"profile {profile.name} has no case with a throughput bound"
    ddp_gpus = ddp_gpu_count(profile, len(visible_gpus)) if device == "cuda" else 1
    load_args: tuple[str, ...] = ()
    symptom = "throughput_per_gpu"
    if case is not None:
        case_args = (SCALING_TEST, "--harness-models", case[0], "--harness-precisions", case[1], "--harness-gpus", "1")
        load_args = (*case_args[:-1], str(ddp_gpus))
        symptom = load_symptom(profile, case, ddp_gpus)
    loaded_case = CaseId(model=case[0], precision=case[1], gpus=ddp_gpus).key if case is not None else None
    return [_foreign_load_row(device, visible_gpus[:ddp_gpus], cores, base_args + load_args,
                              no_case if case is None else None, symptom, loaded_case),
            _nccl_row(device, visible_gpus, base_args),
            _hidden_gpu_row(device, node_gpus, base_args) if device == "cuda" else _hidden_core_row(cores, base_args),
            _host_sync_row(device, base_args + case_args, no_case if case is None else None)]


def ddp_gpu_count(profile: Profile, visible: int) -> int:
    """The GPUs of the foreign-load row's case: the profile's largest DDP count the node can run (every rank
    then waits for the loaded GPU, the case where a headline once blamed GPU 0); 1 on a one-GPU node."""
    counts = [n for n in profile.gpu_counts if 1 < n <= visible]
    return max(counts) if counts else 1


def load_symptom(profile: Profile, case: tuple[str, str], gpus: int) -> str:
    """The performance check a foreign load on one GPU of the ``gpus``-GPU case must fail: its weak-scaling
    efficiency where the profile bounds it at that count (every rank waits for the loaded GPU, and a profile
    fitted per shape bounds a DDP case's per-GPU rate only through it), else the per-GPU throughput."""
    bounds = profile.bounds(*case)
    if gpus > 1 and bounds is not None and bounds.at("min_weak_efficiency", gpus) is not None:
        return "weak_efficiency"
    return "throughput_per_gpu"


def _foreign_load_row(device: str, case_gpus: list[NodeGpu], cores: tuple[int, ...], args: tuple[str, ...],
                      no_case: str | None, symptom: str, case: str | None) -> RowSpec:
    if device == "cuda":
        # The case's last GPU, not its first: the rank-0 GPU is where a careless verdict looks anyway.
        target = case_gpus[-1] if case_gpus else None
        ddp = f"of the {len(case_gpus)}-GPU DDP case " if len(case_gpus) > 1 else ""
        return RowSpec(key="foreign_load", injected=f"foreign matmul loop on GPU {target.index if target else '?'} "
                       f"{ddp}from the case's warmup on",
                       expected_keys=(symptom, "foreign_processes"), pytest_args=args,
                       not_applicable=no_case or (None if target else "no GPU visible"),
                       foreign_load=ForeignLoad(device="cuda", gpu_uuid=target.uuid if target else None, case=case),
                       headline_tokens=(f"GPU {target.index}",) if target else ())
    load = ForeignLoad(device="cpu", cores=cores)
    return RowSpec(key="foreign_load",
                   injected=f"{load.burners_per_core} busy processes per rank core ({len(cores)} cores) from the "
                            "case's warmup on",
                   expected_keys=("throughput_per_gpu",), not_applicable=no_case,
                   pytest_args=(*args, *CPU_LOADED_LAUNCH_ARGS),
                   cause_not_expected="on CPU ranks no check reads the host's processes (foreign_processes "
                                      "watches GPUs through NVML): the throughput drop is the finding",
                   foreign_load=load)


def _nccl_row(device: str, visible_gpus: list[NodeGpu], base_args: tuple[str, ...]) -> RowSpec:
    injected = "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 on the 2-GPU all-reduce"
    if device != "cuda":
        return RowSpec(key="nccl_p2p_off", injected=injected, expected_keys=("allreduce_busbw",),
                       not_applicable="CPU ranks all-reduce through gloo, which uses neither NCCL's P2P nor its SHM")
    if len(visible_gpus) < 2:
        return RowSpec(key="nccl_p2p_off", injected=injected, expected_keys=("allreduce_busbw",),
                       not_applicable=f"needs 2 or more GPUs; {len(visible_gpus)} visible")
    return RowSpec(key="nccl_p2p_off", injected=injected, expected_keys=("allreduce_busbw",),
                   pytest_args=(*base_args, ALLREDUCE_TEST, "--harness-gpus", "2"),
                   env={"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"},
                   cause_tokens=("NCCL_P2P_DISABLE",), cause_in="overrides")


def _hidden_core_row(cores: tuple[int, ...], base_args: tuple[str, ...]) -> RowSpec:
    """CPU ranks: one rank per core, so a core the session may not use is the CPU's hidden GPU."""
    if len(cores) < 2:
        return RowSpec(key="hidden_gpu", injected="one core hidden by the CPU affinity", expected_keys=("gpu_count",),
                       not_applicable=f"{len(cores)} core: hiding it leaves no rank to run")
    shown = cores[:-1]
    return RowSpec(key="hidden_gpu", injected=f"CPU affinity hides core {cores[-1]} ({len(shown)} of {len(cores)} "
                   f"cores left; --expect-gpus {len(cores)})",
                   expected_keys=("gpu_count",), affinity=shown,
                   pytest_args=(*base_args, NODE_TEST, "--expect-gpus", str(len(cores))),
                   cause_tokens=(f"may use {len(shown)} CPU core",))


def _hidden_gpu_row(device: str, node_gpus: list[NodeGpu], base_args: tuple[str, ...]) -> RowSpec:
    if not node_gpus:
        return RowSpec(key="hidden_gpu", injected="one GPU hidden with CUDA_VISIBLE_DEVICES",
                       expected_keys=("gpu_count",), not_applicable="NVML lists no GPU to hide")
    hidden, shown = node_gpus[-1], node_gpus[:-1]
    visible = ",".join(str(gpu.index) for gpu in shown)
    args = (*base_args, NODE_TEST, "--expect-gpus", str(len(node_gpus)))
    if not shown:
        # The only GPU hidden: the session must stop with the cause, not fall back to the CPU profile.
        return RowSpec(key="hidden_gpu", injected=f'CUDA_VISIBLE_DEVICES="" hides the only GPU ({hidden.index})',
                       expected_keys=(), pytest_args=args, env={"CUDA_VISIBLE_DEVICES": ""},
                       expect_refusal=True, cause_tokens=("CUDA_VISIBLE_DEVICES",), cause_in="output")
    return RowSpec(key="hidden_gpu", injected=f"CUDA_VISIBLE_DEVICES={visible} hides GPU {hidden.index} "
                   f"(--expect-gpus {len(node_gpus)})",
                   expected_keys=("gpu_count",), pytest_args=args, env={"CUDA_VISIBLE_DEVICES": visible},
                   cause_tokens=tuple(t for t in (hidden.uuid, hidden.pci_bus_id) if t), refusal_counts=True,
                   headline_tokens=(f"GPU {hidden.index}",))


HOST_STALL_MS = 8.0
"""Host time after each synced step: 15-19 % of a ResNet-50 fp16 step on H100/H200 (42-52 ms), as a
slow data loader would cost. A bare sync cost -8.1 %, -2.3 % and -0.2 % on three lent hosts
(docs/selftest.md): what it costs follows the host, so alone it proves nothing about the verdict."""


def _host_sync_row(device: str, args: tuple[str, ...], no_case: str | None) -> RowSpec:
    injected = (f"a host sync and a {HOST_STALL_MS:g} ms host stall after every step "
                f"(HARNESS_FAULT=kind=host_sync,stall_ms={HOST_STALL_MS:g})")
    # Any of the three may show it: the stall idles the GPU (throughput, utilization), and a bare sync
    # on a slow host also makes the steps jitter (step-time CV 0.095 against a healthy 0.011-0.037).
    expected = ("throughput_per_gpu", "gpu_utilization", "step_time_cv")
    if device != "cuda":
        return RowSpec(key="host_sync", injected=injected, expected_keys=expected, require="any",
                       not_applicable="CPU ranks: a CPU rank's step has already run on the host when it ends, so "
                                      "a host sync waits for nothing and costs nothing")
    return RowSpec(key="host_sync", injected=injected, expected_keys=expected, require="any",
                   not_applicable=no_case, pytest_args=(*args, ALLOW_FAULTS_OPTION),
                   env={"HARNESS_FAULT": f"kind=host_sync,stall_ms={HOST_STALL_MS:g}"}, cause_tokens=("host_sync",),
                   cause_in="overrides")
