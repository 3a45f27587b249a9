"""The sign-off record: which node, GPUs, software, profile and command this verdict is about.

What the session did not record says "not recorded" or "unknown", never a guess.
"""

from __future__ import annotations

import shlex

from harness.report.format import MISSING, fmt_number, fmt_with_unit
from harness.report.inputs import RunInputs
from harness.results.reading import as_dict, as_list, as_number, as_text, clean_text
from harness.report.outcomes import SessionTest

CONTAINER_ENV_VARS = ("HARNESS_CONTAINER_IMAGE", "APPTAINER_NAME", "SINGULARITY_NAME", "APPTAINER_CONTAINER",
                      "SINGULARITY_CONTAINER")


def _all_records(tests: list[SessionTest], inputs: RunInputs) -> list[dict]:
    return [t.record for t in tests if t.record] + list(inputs.records.values())


def _container(header: dict, environment: dict) -> str:
    if "container" in header:
        value = header["container"]
        if not value:
            return "not in a container"
        if isinstance(value, dict):
            shown = ", ".join(f"{k}: {as_text(v)}" for k, v in value.items() if v not in (None, ""))
            return shown or "not in a container"
        return as_text(value)
    for source in (as_dict(header.get("environment")), environment):
        for name in CONTAINER_ENV_VARS:
            if source.get(name):
                return f"{as_text(source[name])} ({name})"
    return "not recorded (this harness version does not record the container image)"


def _gpus_text(hardware: dict, device: str) -> str:
    by_name: dict[str, list[dict]] = {}
    for gpu in (as_dict(g) for g in as_list(hardware.get("gpus"))):
        by_name.setdefault(as_text(gpu.get("name"), "unknown GPU"), []).append(gpu)
    if by_name:
        return "; ".join(
            f"{len(group)} × {name}" + (f" ({fmt_number(group[0].get('memory_total_gib'))} GiB each)"
                                        if as_number(group[0].get("memory_total_gib")) else "")
            for name, group in by_name.items())
    if device == "cpu":
        reason = as_text(hardware.get("nvml_unavailable_reason"))
        return "none: a CPU run (ranks are CPU processes, gloo)" + (f"; NVML: {reason}" if reason else "")
    return "not recorded"


def _cuda_and_nccl(hardware: dict, versions: dict, device: str) -> tuple[str, str]:
    cuda_driver = as_text(hardware.get("cuda_driver_version"))
    cuda_runtime = as_text(hardware.get("cuda_runtime_version")) or as_text(versions.get("cuda"))
    nccl = as_text(hardware.get("nccl_version")) or as_text(versions.get("nccl"))
    if device == "cpu":
        return ("not used (CPU run)" + (f"; PyTorch is built for CUDA {cuda_runtime}" if cuda_runtime else ""),
                "not used (CPU run, gloo)" + (f"; PyTorch bundles NCCL {nccl}" if nccl else ""))
    if cuda_driver or cuda_runtime:
        return f"driver API {cuda_driver or 'unknown'}, runtime {cuda_runtime or 'unknown'}", nccl or "not recorded"
    return "not recorded", nccl or "not recorded"


def _command_text(header: dict) -> str:
    command = header.get("command_line")
    if isinstance(command, list):
        return clean_text(shlex.join(as_text(part) for part in command))
    return as_text(command, "not recorded") or "not recorded"


def _rows(header: dict, environment: dict, hosts: list[str], versions: dict, device: str) -> list[tuple[str, str]]:
    hardware = as_dict(header.get("hardware"))
    profile = as_dict(header.get("profile"))
    cuda, nccl = _cuda_and_nccl(hardware, versions, device)
    commit = next((as_text(header.get(key)) for key in ("git_commit", "harness_git_commit") if header.get(key)), "")
    harness_version = as_text(header.get("harness_version")) or as_text(versions.get("harness")) or "unknown"
    return [
        ("Host" if len(hosts) <= 1 else "Hosts", ", ".join(hosts) or "not recorded"),
        ("GPUs", _gpus_text(hardware, device)),
        ("Driver", as_text(hardware.get("driver_version")) or as_text(versions.get("driver")) or
         ("none (CPU run)" if device == "cpu" else "not recorded")),
        ("CUDA", cuda),
        ("NCCL", nccl),
        ("PyTorch", as_text(hardware.get("torch_version")) or as_text(versions.get("torch")) or "not recorded"),
        ("Python", as_text(versions.get("python")) or as_text(environment.get("Python")) or "not recorded"),
        ("Harness", f"{harness_version} (git commit {commit or 'unknown'})"),
        ("Threshold profile", (f"{as_text(profile.get('name'))} ({as_text(profile.get('path'))})"
                               if profile.get("name") else "not recorded")),
        ("Profile sha256", as_text(profile.get("sha256")) or "not recorded"),
        ("Profile describes", as_text(profile.get("description")) or "not recorded"),
        ("Command line", _command_text(header)),
        ("Container", _container(header, environment)),
        ("CUDA_VISIBLE_DEVICES", as_text(hardware.get("cuda_visible_devices")) or "not set"),
    ]


def _gpu_rows(hardware: dict) -> list[dict]:
    rows = []
    for gpu in (as_dict(g) for g in as_list(hardware.get("gpus"))):
        memory = gpu.get("memory_total_gib")
        rows.append({"index": as_text(gpu.get("index")), "name": as_text(gpu.get("name")),
                     "memory": fmt_with_unit(memory, "GiB") if as_number(memory) else MISSING,
                     "pci": as_text(gpu.get("pci_bus_id")) or MISSING, "uuid": as_text(gpu.get("uuid")) or MISSING})
    return rows


def _built_from(inputs: RunInputs) -> str:
    sources = []
    if inputs.report is not None:
        sources.append("report.json")
    if inputs.session is not None:
        sources.append("session.json")
    if inputs.records:
        sources.append(f"{len(inputs.records)} run record{'s' if len(inputs.records) != 1 else ''} in runs/")
    return ", ".join(sources)


def build_signoff(inputs: RunInputs, header: dict, tests: list[SessionTest]) -> dict:
    hardware = as_dict(header.get("hardware"))
    records = _all_records(tests, inputs)
    hosts = [as_text(hardware.get("hostname"))] if hardware.get("hostname") else []
    for record in records:
        hosts += [as_text(h) for h in as_list(record.get("hosts"))]
    hosts = list(dict.fromkeys(h for h in hosts if h))
    versions = next((as_dict(r.get("versions")) for r in records if r.get("versions")), {})
    device = as_text(hardware.get("device")) or next(
        (as_text(r.get("device_kind")) for r in records if r.get("device_kind")), "")
    environment = as_dict(as_dict(inputs.report).get("environment"))
    return {"rows": _rows(header, environment, hosts, versions, device), "gpus": _gpu_rows(hardware),
            "device": device, "run_dir": as_text(header.get("run_dir")), "built_from": _built_from(inputs)}
