"""What this node's CPUs say of themselves, read from /proc/cpuinfo (Linux, x86-64 and arm64): whether
they compute bf16 natively, and whether they run under a hypervisor.

Without native bf16, torch emulates it: on an AVX2-only AMD EPYC tiny_bert bf16 ran 1.5 sequences/s
where a CPU with AMX bf16 ran 102.9, so a CPU profile's bf16 bounds hold only where the flag is.
A hypervisor matters to the topology check: a VM passes GPUs through without their NVLink fabric.
"""

from __future__ import annotations

from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")

NATIVE_BF16_FLAGS = ("amx_bf16", "avx512_bf16", "bf16")
"""x86-64 ``flags``: AMX and AVX-512 bf16 instructions; arm64 ``Features``: ``bf16`` (FEAT_BF16)."""


def _flag_sets(cpuinfo_text: str | None, fields: tuple[str, ...]) -> list[set[str]] | None:
    """One set of flags per CPU from the ``fields`` lines; None when /proc/cpuinfo cannot be read."""
    if cpuinfo_text is None:
        try:
            cpuinfo_text = CPUINFO.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    return [set(line.partition(":")[2].split()) for line in cpuinfo_text.splitlines()
            if line.split(":")[0].strip().lower() in fields]


def native_bf16_flag(cpuinfo_text: str | None = None) -> str | None:
    """The first of NATIVE_BF16_FLAGS that every CPU of this node lists; None when any lacks them all
    or /proc/cpuinfo cannot be read (not Linux): then bf16 is taken to be emulated."""
    flag_sets = _flag_sets(cpuinfo_text, ("flags", "features"))
    if not flag_sets:
        return None
    return next((flag for flag in NATIVE_BF16_FLAGS if all(flag in flags for flags in flag_sets)), None)


def runs_in_virtual_machine(cpuinfo_text: str | None = None) -> bool | None:
    """Whether the CPUs report the x86 ``hypervisor`` flag, which mainstream hypervisors set for their
    guests; None when /proc/cpuinfo cannot be read or lists no x86 flags (arm64 has no such flag)."""
    flag_sets = _flag_sets(cpuinfo_text, ("flags",))
    if not flag_sets:
        return None
    return any("hypervisor" in flags for flags in flag_sets)


def no_native_bf16_reason() -> str:
    """Why a CPU profile's bf16 cases are skipped here: what was looked for, and where."""
    return (f"this CPU has no native bf16 (none of {', '.join(NATIVE_BF16_FLAGS)} in {CPUINFO}): torch emulates "
            "bf16 here, tens of times slower than the profile's bf16 bounds assume; the fp32 cases still run")
