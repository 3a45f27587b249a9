"""Environment variables that change what a session measures or claims: each one set is named, with
its effect, in session.json, in every run record, and beside the verdict.

A sign-off must not depend on something invisible: ``HARNESS_FAULT`` turns a run INVALID on
purpose, ``HARNESS_TELEMETRY=0`` leaves the GPU health checks unevaluated, ``HARNESS_GIT_COMMIT``
and ``HARNESS_CONTAINER_IMAGE`` are taken on trust as provenance, and NCCL's variables change the
transport the interconnect figures measure. The NVLink-multicast switches that the GPU machines
need (``EXPECTED``) are listed as expected, not as overrides, when they hold their expected value.
No torch here: the launcher and the records read it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass

FAULT_ENV = "HARNESS_FAULT"

EFFECTS: dict[str, str] = {
    FAULT_ENV: "fault injection: a rank is killed, hangs, crashes, runs out of memory or gets a non-finite loss "
               "on purpose (harness/workloads/faults.py); the run's verdict is not the node's",
    "HARNESS_TELEMETRY": "GPU telemetry off (when 0/off/false/no): the health checks (throttling, clocks, "
                         "power, ECC, XID) are not evaluated",
    "HARNESS_GIT_COMMIT": "provenance taken on trust: the harness commit named when it does not run from a git "
                          "checkout (set at image build time; by hand it can name any commit)",
    "HARNESS_CONTAINER_IMAGE": "provenance taken on trust: the container image named in session.json",
    "CUDA_LAUNCH_BLOCKING": "every CUDA kernel launch waits for the kernel: steps are slower than the hardware's",
    "NCCL_P2P_DISABLE": "NCCL does not use peer-to-peer (NVLink/PCIe) between GPUs: all-reduce goes through host "
                        "memory, the interconnect figures are not the links'",
    "NCCL_P2P_LEVEL": "limits the GPU pairs NCCL reaches peer-to-peer",
    "NCCL_SHM_DISABLE": "NCCL does not use shared memory between processes",
    "NCCL_IB_DISABLE": "NCCL does not use InfiniBand/RoCE: multi-node traffic goes over TCP sockets",
    "NCCL_NET": "forces NCCL's network transport",
    "NCCL_ALGO": "forces NCCL's collective algorithms",
    "NCCL_PROTO": "forces NCCL's protocols",
    "NCCL_NVLS_ENABLE": "NVLink SHARP (multicast) on or off for NCCL",
    "NCCL_COLLNET_ENABLE": "in-network reductions (SHARP) on or off",
    "NCCL_MIN_NCHANNELS": "NCCL's channel count (bandwidth per collective)",
    "NCCL_MAX_NCHANNELS": "NCCL's channel count (bandwidth per collective)",
    "NCCL_BUFFSIZE": "NCCL's buffer size per channel",
    "NCCL_NTHREADS": "NCCL's CUDA threads per block",
    "NCCL_CUMEM_ENABLE": "NCCL's memory allocation (cuMem) on or off",
    "NCCL_SOCKET_IFNAME": "the network interfaces NCCL uses",
    "NCCL_IB_HCA": "the InfiniBand adapters NCCL uses",
    "NCCL_NET_GDR_LEVEL": "when NCCL uses GPUDirect RDMA",
    "NCCL_CROSS_NIC": "whether NCCL's rings may cross network adapters",
    # issue 31: variables that change the measured speed or what runs, not named before
    "OMP_NUM_THREADS": "the CPU threads each rank's math libraries use: CPU ranks (and host-side work) run "
                       "faster or slower than the node's default",
    "MKL_NUM_THREADS": "the CPU threads MKL uses per rank",
    "NVIDIA_TF32_OVERRIDE": "TF32 forced on or off in cuBLAS/cuDNN whatever the recipe asks: fp32 figures are "
                            "not the recipe's",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "TF32 matmuls forced on: fp32 figures are not the recipe's",
    "PYTORCH_CUDA_ALLOC_CONF": "PyTorch's CUDA allocator tuned: peak memory and step times change",
    "PYTORCH_NO_CUDA_MEMORY_CACHING": "PyTorch's CUDA allocator off: every allocation goes to the driver, far "
                                      "slower",
    "CUDA_DEVICE_MAX_CONNECTIONS": "the hardware queues per GPU: kernel overlap (compute with NCCL) changes",
    "CUDA_MODULE_LOADING": "when CUDA loads kernels (LAZY/EAGER): start-up and first steps change",
    "CUDA_CACHE_DISABLE": "the PTX JIT cache off: kernels are compiled again",
    "LD_PRELOAD": "libraries loaded into every process before all others: any function may be replaced",
    "TORCHINDUCTOR_MAX_AUTOTUNE": "torch.compile autotunes (with --harness-compile): other kernels are timed",
}
"""Every variable known to change results or provenance, and what it does."""

PREFIXED_EFFECTS: dict[str, str] = {
    "TORCH_NCCL_": "changes how PyTorch drives NCCL (async error handling, blocking waits, streams, ...): the "
                   "multi-GPU figures may not be the hardware's",
}
"""Every variable starting with one of these changes results; NCCL_* has its own rule below."""
NCCL_PREFIX = "NCCL_"
NCCL_ANY_EFFECT = "changes NCCL's behaviour (see NCCL's environment variable documentation): the interconnect " \
                  "and multi-GPU figures may not be the hardware's"
"""Any other NCCL_* variable: named too, since a variable unknown here may still change the transport."""
NCCL_HARMLESS = frozenset({"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE",
                           # NVIDIA's CUDA container images set it to the NCCL they ship ("2.28.3-1" on
                           # the lent H100): a label, read by nothing at run time
                           "NCCL_VERSION"})
"""NCCL variables that only change its logging."""

EXPECTED: dict[str, str] = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                            "NVSHMEM_DISABLE_NVLS": "1"}
"""NVLink multicast off, as the lent GPU machines require (their KINDS.md): expected at these values;
at another value NCCL_NVLS_ENABLE is an override like any NCCL variable."""

HARNESS_SET_ENV = "HARNESS_SET_ENV"
"""Comma-separated names the launcher itself set in a launch's environment (OMP_NUM_THREADS, which
torchrun would set to 1 anyway): its own defaults, never the user's overrides."""

TELEMETRY_OFF_VALUES = ("0", "off", "false", "no")
"""The HARNESS_TELEMETRY values that switch telemetry off (harness/telemetry.py telemetry_enabled)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Override:
    """One variable set in the environment that changes what a session measures or claims."""

    name: str
    value: str
    effect: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    def describe(self) -> str:
        return f"{self.name}={self.value}: {self.effect}"


def _effect(name: str, value: str) -> str | None:
    if EXPECTED.get(name) == value:
        return None
    if name == "HARNESS_TELEMETRY" and value.strip().lower() not in TELEMETRY_OFF_VALUES:
        return None  # on, the default: nothing changes
    if name == "CUDA_LAUNCH_BLOCKING" and value.strip() in ("", "0"):
        return None
    if name in EFFECTS:
        return EFFECTS[name]
    prefixed = next((effect for prefix, effect in PREFIXED_EFFECTS.items() if name.startswith(prefix)), None)
    if prefixed is not None:
        return prefixed
    if name.startswith(NCCL_PREFIX) and name not in NCCL_HARMLESS:
        return NCCL_ANY_EFFECT
    return None


def find_overrides(environ: Mapping[str, str] | None = None) -> tuple[Override, ...]:
    """The overrides set in ``environ`` (default: this process's environment), sorted by name."""
    env = os.environ if environ is None else environ
    ours = set(env.get(HARNESS_SET_ENV, "").split(","))
    found = []
    for name in sorted(env):
        if not env[name].strip() or name in ours:
            continue  # set but empty: no effect (HARNESS_FAULT too is inert when empty)
        effect = _effect(name, env[name])
        if effect is not None:
            found.append(Override(name=name, value=env[name][:200], effect=effect))
    return tuple(found)


def expected_settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The EXPECTED variables that are set at their expected value (listed, not overrides)."""
    env = os.environ if environ is None else environ
    return {name: env[name] for name, value in EXPECTED.items() if env.get(name) == value}
