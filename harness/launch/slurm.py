"""Slurm: what the allocation is, and how to start one torchrun agent per node in it.

A multi-node benchmark is launched the way Slurm and PyTorch document it, with nothing home-made
in between: ``srun`` starts one ``torchrun`` agent on each node (``--ntasks-per-node=1``), and the
agents meet through torchrun's c10d rendezvous on the first node of the allocation. The driver
(pytest and the plugin) runs once, in the batch script on that first node.

Everything here reads the environment Slurm gives a batch script and is pure apart from the
optional ``scontrol`` call, so it is tested without a cluster; tests/test_slurm.py also runs it
against a real one (.ci/slurm-cluster.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

DEFAULT_RENDEZVOUS_PORT = 29500
"""torchrun's own default port, used when a job cannot be told apart from another (no numeric job id)."""
RENDEZVOUS_PORT_SPAN = 1000
"""Jobs get ports DEFAULT..DEFAULT+SPAN-1 by job id, so two jobs whose first node is the same rarely collide."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SlurmAllocation:
    """A Slurm job's nodes and per-node resources, as its batch script sees them."""

    job_id: str
    nodes: tuple[str, ...]
    """Host names in Slurm's order (SLURM_JOB_NODELIST expanded); the first is the head node."""
    gpus_per_node: int | None
    """GPUs Slurm gave each node; None when the job asked for none or the environment does not say."""
    cpus_per_node: int | None
    """CPUs Slurm gave each node (the smallest, if they differ); None when the environment does not say."""

    def __post_init__(self) -> None:
        if not self.nodes:
            raise ValueError(f"Slurm job {self.job_id}: the allocation has no nodes")
        for name in ("gpus_per_node", "cpus_per_node"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")

    @property
    def head_node(self) -> str:
        return self.nodes[0]

    @property
    def node_count(self) -> int:
        return len(self.nodes)

    def to_dict(self) -> dict:
        return {**asdict(self), "nodes": list(self.nodes)}


# --- hostlists ---------------------------------------------------------------------------------

_HOSTLIST_CHARS = re.compile(r"[^\s,\[\]]")


MAX_HOSTS = 100_000
"""The most host names a hostlist may expand to: ten times the largest GPU clusters; "n[0-99999999999]"
would otherwise build names until memory runs out."""


def _too_many(whole: str, count: int) -> ValueError:
    return ValueError(f"hostlist {whole!r}: expands to {count:,} names, more than {MAX_HOSTS:,}; check the ranges")


def expand_hostlist(text: str) -> list[str]:
    """Expand a Slurm hostlist ("n[1-3,05],gpu-a7", "r[1-2]-g[01-02]") into host names, in order.

    Ranges keep the zero padding of their lower bound ("n[08-10]" -> n08 n09 n10), as Slurm does;
    several bracket groups in one name expand as a product, the last one varying fastest.
    Duplicates are kept (Slurm keeps them too).
    """
    hosts: list[str] = []
    for item in _split_top_level(text.strip(), text):
        hosts.extend(_expand_one(item, text))
        if len(hosts) > MAX_HOSTS:
            raise _too_many(text, len(hosts))
    return hosts


def _split_top_level(text: str, whole: str) -> list[str]:
    items, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char == "[":
            depth += 1
            if depth > 1:
                raise ValueError(f"hostlist {whole!r}: nested '[' at position {index}")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"hostlist {whole!r}: ']' without '[' at position {index}")
        elif char == "," and depth == 0:
            items.append(text[start:index])
            start = index + 1
    if depth:
        raise ValueError(f"hostlist {whole!r}: '[' is never closed")
    items.append(text[start:])
    stripped = [item.strip() for item in items]
    if text and any(not item for item in stripped):
        raise ValueError(f"hostlist {whole!r}: empty host name (two commas in a row, or a trailing comma)")
    return [item for item in stripped if item]


def _expand_one(item: str, whole: str) -> list[str]:
    match = re.search(r"\[([^\]]*)\]", item)
    if match is None:
        if not _HOSTLIST_CHARS.search(item) or re.search(r"\s", item):
            raise ValueError(f"hostlist {whole!r}: {item!r} is not a host name")
        return [item]
    prefix, suffixes = item[:match.start()], _expand_one(item[match.end():], whole) if item[match.end():] else [""]
    numbers = _expand_ranges(match.group(1), whole)
    if len(numbers) * len(suffixes) > MAX_HOSTS:
        raise _too_many(whole, len(numbers) * len(suffixes))
    return [f"{prefix}{number}{suffix}" for number in numbers for suffix in suffixes]


def _expand_ranges(ranges: str, whole: str) -> list[str]:
    numbers: list[str] = []
    for part in ranges.split(","):
        part = part.strip()
        bounds = part.split("-")
        if not part or len(bounds) > 2 or not all(b.isdigit() for b in bounds):
            raise ValueError(f"hostlist {whole!r}: [{ranges}] has {part!r}, expected N or N-M with digits")
        low, high = bounds[0], bounds[-1]
        if int(high) < int(low):
            raise ValueError(f"hostlist {whole!r}: range {part!r} runs backwards")
        if len(numbers) + int(high) - int(low) + 1 > MAX_HOSTS:
            raise _too_many(whole, len(numbers) + int(high) - int(low) + 1)
        width = len(low)
        numbers.extend(str(n).zfill(width) for n in range(int(low), int(high) + 1))
    return numbers


def hostnames_via_scontrol(text: str, scontrol: str | None = None) -> list[str] | None:
    """``scontrol show hostnames TEXT``, or None where scontrol is missing or fails (no config)."""
    scontrol = scontrol or shutil.which("scontrol")
    if scontrol is None:
        return None
    try:
        done = subprocess.run([scontrol, "show", "hostnames", text], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.split()


# --- the allocation ----------------------------------------------------------------------------


def allocation_from_env(env: Mapping[str, str] = os.environ) -> SlurmAllocation | None:
    """The Slurm job this process runs in, or None outside Slurm (no SLURM_JOB_ID).

    Raises ValueError when the environment contradicts itself (a node count that is not the
    node list's length), naming the variables: a half-read allocation would launch on the wrong
    nodes.
    """
    job_id = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
    if not job_id:
        return None
    nodelist_var = next((v for v in ("SLURM_JOB_NODELIST", "SLURM_NODELIST") if env.get(v)), None)
    if nodelist_var is None:
        raise ValueError(f"Slurm job {job_id}: SLURM_JOB_ID is set but SLURM_JOB_NODELIST is not; "
                         "run the harness in the job's batch script or an salloc shell")
    nodes = tuple(expand_hostlist(env[nodelist_var]))
    count_var = next((v for v in ("SLURM_JOB_NUM_NODES", "SLURM_NNODES") if env.get(v)), None)
    if count_var is not None:
        count = _int(env, count_var)
        if count != len(nodes):
            raise ValueError(f"Slurm job {job_id}: {count_var}={count} but {nodelist_var}={env[nodelist_var]!r} "
                             f"names {len(nodes)} nodes")
    return SlurmAllocation(job_id=job_id, nodes=nodes, gpus_per_node=_gpus_per_node(env, len(nodes)),
                           cpus_per_node=_cpus_per_node(env))


def _int(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except ValueError:
        raise ValueError(f"{name}={env[name]!r} is not a whole number") from None


def _gpus_per_node(env: Mapping[str, str], node_count: int) -> int | None:
    # SLURM_GPUS_ON_NODE: what this node got (set in batch and step environments when GPUs were
    # allocated, however they were asked for). Then what was asked for: --gpus-per-node sets
    # SLURM_GPUS_PER_NODE ("8" or "h100:8"), --gres sets SLURM_JOB_GPUS (indices) on the node.
    if env.get("SLURM_GPUS_ON_NODE"):
        return _int(env, "SLURM_GPUS_ON_NODE")
    if env.get("SLURM_GPUS_PER_NODE"):
        return _count_after_type(env["SLURM_GPUS_PER_NODE"], "SLURM_GPUS_PER_NODE")
    for name in ("SLURM_JOB_GPUS", "SLURM_STEP_GPUS"):
        if env.get(name):
            return len([index for index in env[name].split(",") if index.strip()])
    if env.get("SLURM_GPUS"):  # --gpus=N over the whole job: per node only when it divides evenly
        total = _count_after_type(env["SLURM_GPUS"], "SLURM_GPUS")
        return total // node_count if total % node_count == 0 else None
    return None


def _count_after_type(value: str, name: str) -> int:
    """ "8" -> 8, "h100:8" -> 8, "gpu:h100:8" -> 8 (Slurm's [type:]count)."""
    count = value.rsplit(":", 1)[-1]
    if not count.isdigit():
        raise ValueError(f"{name}={value!r}: expected [type:]count, e.g. 8 or h100:8")
    return int(count)


def _cpus_per_node(env: Mapping[str, str]) -> int | None:
    if env.get("SLURM_CPUS_ON_NODE"):
        return _int(env, "SLURM_CPUS_ON_NODE")
    # "72(x2),36": per-node counts, compressed; the smallest is what every node can give.
    text = env.get("SLURM_JOB_CPUS_PER_NODE")
    if not text:
        return None
    counts = re.findall(r"(\d+)(?:\(x\d+\))?", text)
    if not counts:
        raise ValueError(f"SLURM_JOB_CPUS_PER_NODE={text!r}: expected e.g. 72(x2),36")
    return min(int(c) for c in counts)


# --- launching ---------------------------------------------------------------------------------


def rendezvous_port(alloc: SlurmAllocation, base: int = DEFAULT_RENDEZVOUS_PORT) -> int:
    """A port for this job's rendezvous: base + job id mod 1000, so that jobs sharing a head node differ."""
    return base + int(alloc.job_id) % RENDEZVOUS_PORT_SPAN if alloc.job_id.isdigit() else base


def rendezvous_endpoint(alloc: SlurmAllocation, port: int = DEFAULT_RENDEZVOUS_PORT) -> str:
    """host:port of torchrun's c10d rendezvous: the allocation's first node, which runs the driver."""
    if not 0 < port < 65536:
        raise ValueError(f"rendezvous port must be 1-65535, got {port}")
    return f"{alloc.head_node}:{port}"


def srun_prefix(alloc: SlurmAllocation, nodes: int, extra: Sequence[str] = ()) -> list[str]:
    """``srun`` that starts one task (a torchrun agent) on each of the first ``nodes`` nodes.

    The first nodes, by name: the rendezvous is on the head node, so it must be in the step.
    Each task gets the node's CPUs and GPUs (Slurm gives a step's task one CPU and no GPU unless
    told), the caller's environment (HARNESS_RUN_ID and the rest), and the step dies as a whole
    when one agent fails. ``extra`` goes last, e.g. a container wrapper's srun options.
    """
    if not 1 <= nodes <= alloc.node_count:
        raise ValueError(f"a {nodes}-node launch does not fit Slurm job {alloc.job_id}, which has "
                         f"{alloc.node_count} node{'s' if alloc.node_count != 1 else ''} "
                         f"({', '.join(alloc.nodes)}); ask sbatch for --nodes={max(nodes, 1)}")
    command = ["srun", f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1",
               f"--nodelist={','.join(alloc.nodes[:nodes])}", "--kill-on-bad-exit=1", "--export=ALL"]
    if alloc.cpus_per_node:
        command.append(f"--cpus-per-task={alloc.cpus_per_node}")
    if alloc.gpus_per_node:
        command.append(f"--gpus-per-node={alloc.gpus_per_node}")
    return [*command, *extra]


STEP_WRAPPER_ENV = "HARNESS_STEP_WRAPPER"


def step_wrapper(env: Mapping[str, str] = os.environ) -> list[str]:
    """The command srun runs each torchrun agent under, e.g. ``apptainer exec --nv image.sif``.

    slurm/acceptance.sbatch sets HARNESS_STEP_WRAPPER (shell-quoted words) when the driver runs in
    an Apptainer image, so that the agents srun starts on the other nodes run in it too.
    """
    try:
        return shlex.split(env.get(STEP_WRAPPER_ENV, ""))
    except ValueError as exc:
        raise ValueError(f"{STEP_WRAPPER_ENV}={env[STEP_WRAPPER_ENV]!r}: {exc}") from None


# --- command line: what the batch script logs, and a check from a shell ----------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.launch.slurm",
                                     description="What Slurm allocation this is, as the harness reads it.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("show", help="the allocation as JSON (exit 1 outside Slurm)")
    expand = sub.add_parser("expand", help="expand a hostlist, one host a line")
    expand.add_argument("hostlist")
    endpoint = sub.add_parser("endpoint", help="the c10d rendezvous host:port for this job")
    endpoint.add_argument("--port", type=int, default=None, help="default: 29500 + job id mod 1000")
    prefix = sub.add_parser("srun-prefix", help="the srun command that starts one agent per node")
    prefix.add_argument("nodes", type=int)
    args = parser.parse_args(argv)

    if args.command == "expand":
        try:
            print("\n".join(expand_hostlist(args.hostlist)))
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    try:
        alloc = allocation_from_env()
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if alloc is None:
        print("not in a Slurm job (SLURM_JOB_ID is not set)", file=sys.stderr)
        return 1
    if args.command == "show":
        print(json.dumps(alloc.to_dict(), indent=1))
    elif args.command == "endpoint":
        print(rendezvous_endpoint(alloc, args.port if args.port is not None else rendezvous_port(alloc)))
    else:
        try:
            print(" ".join(srun_prefix(alloc, args.nodes)))
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
