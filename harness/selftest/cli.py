"""`harness selftest`: plan the rows for this node, run each, judge it, print and write the table.

Exit status: 0 when every row that applies caught its degradation with the cause named; 1 when any
did not (a degradation passed, a check was not found, a session did not run, a cause went unnamed),
or when no row applies; 4 for a mistake on the command line or a node the harness cannot describe
(harness/exitcodes.py).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.launch.heartbeat import every
from harness.selftest import rows as row_specs
from harness.selftest.judge import RowOutcome, judge
from harness.selftest.rows import ROW_KEYS, NodeGpu, RowSpec, plan_rows
from harness.selftest.runner import run_row
from harness.selftest.table import closing_line, selftest_passed, text_table, write_outputs


class SelftestError(Exception):
    """What stops the selftest before any row runs: printed as one line, exit status 4."""


def add_selftest_parser(sub: Any) -> None:
    p = sub.add_parser("selftest", help="inject degradations on this node and require the harness to FAIL them",
                       description="Run short acceptance sessions, each with one injected degradation (a foreign "
                                   "compute load, NCCL P2P/SHM off, a hidden GPU, a host sync every step), and "
                                   "require the matching checks to FAIL with the cause named. docs/selftest.md.")
    p.add_argument("--rows", default=",".join(ROW_KEYS),
                   help=f"which rows, comma-separated (default all: {','.join(ROW_KEYS)})")
    p.add_argument("--hardware", help="use this threshold profile instead of matching (passed to every session)")
    p.add_argument("--thresholds-dir", help="directory of threshold profiles (default: the shipped ones)")
    p.add_argument("--report-dir", type=Path, default=Path("reports"),
                   help="selftest-<time>-<host>/ is made here, each row's session in it (default ./reports)")
    p.add_argument("--timeout", type=float, default=900.0, help="stop a row's session after this many seconds "
                                                                "(default 900)")
    p.add_argument("--burners-per-core", type=int, default=row_specs.CPU_BURNERS_PER_CORE,
                   help=f"CPU ranks: busy processes per core in the foreign-load row "
                        f"(default {row_specs.CPU_BURNERS_PER_CORE}; rows.py says why)")


def wanted_rows(text: str) -> tuple[str, ...]:
    keys = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in keys if k not in ROW_KEYS]
    if unknown or not keys:
        raise SelftestError(f"--rows {text!r}: unknown row {', '.join(unknown) or '(none given)'}; "
                            f"rows: {', '.join(ROW_KEYS)}")
    return keys


def repo_root() -> Path:
    """Where the acceptance tests are: the working directory (a clone, or the container image's
    /opt/harness, where the package is installed apart from them), else the clone the package is in."""
    for root in (Path.cwd(), Path(__file__).resolve().parents[2]):
        if (root / "acceptance" / "test_scaling.py").exists():
            return root
    raise SelftestError(f"no acceptance/ directory in {Path.cwd()} or beside the harness package; run the "
                        "selftest from a clone of the repository (in the container image: from /opt/harness)")


def nvml_gpus(nvml: Any = None) -> list[NodeGpu]:
    """Every GPU NVML sees, whatever CUDA_VISIBLE_DEVICES hides; [] where NVML is unusable."""
    from harness.node.nvml import installed_pynvml, nvml_text

    try:
        nvml = nvml or installed_pynvml()
        nvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no NVML: no GPU to hide (detection says why, in the sessions)
        return []
    try:
        gpus = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            gpus.append(NodeGpu(index=index, uuid=nvml_text(nvml.nvmlDeviceGetUUID(handle)),
                                pci_bus_id=nvml_text(nvml.nvmlDeviceGetPciInfo(handle).busId)))
        return gpus
    finally:
        nvml.nvmlShutdown()


def plan_for_this_node(ns: argparse.Namespace) -> tuple[list[RowSpec], dict[str, Any]]:
    from harness.node.hardware import HardwareError, detect
    from harness.kinds.shipped import load_shipped_profiles
    from harness.profile.load import ThresholdError, default_thresholds_dir
    from harness.profile.match import select_profile

    try:
        profiles = load_shipped_profiles(ns.thresholds_dir or default_thresholds_dir())
        hardware = detect()
        profile = select_profile(hardware, profiles, ns.hardware)
    except (ThresholdError, HardwareError) as exc:
        raise SelftestError(str(exc)) from None
    visible = [NodeGpu(index=g.index, uuid=g.uuid, pci_bus_id=g.pci_bus_id) for g in hardware.gpus]
    node = nvml_gpus() if profile.hardware.device == "cuda" else []
    base_args: tuple[str, ...] = ()
    if ns.hardware:
        base_args += ("--harness-hardware", ns.hardware)
    if ns.thresholds_dir:
        base_args += ("--harness-thresholds-dir", str(ns.thresholds_dir))
    specs = plan_rows(profile=profile, visible_gpus=visible, node_gpus=node, base_args=base_args,
                      cores=tuple(sorted(os.sched_getaffinity(0))))
    specs = [_with_burners(s, ns.burners_per_core) for s in specs if s.key in wanted_rows(ns.rows)]
    facts = {"host": socket.gethostname(), "profile": profile.name, "device": profile.hardware.device,
             "gpus_visible": [g.index for g in visible], "gpus_on_node": [g.index for g in node],
             "started_at": datetime.now().isoformat(timespec="seconds")}
    return specs, facts


def _with_burners(spec: RowSpec, per_core: int) -> RowSpec:
    load = spec.foreign_load
    if load is None or load.device != "cpu" or load.burners_per_core == per_core:
        return spec
    return replace(spec, foreign_load=replace(load, burners_per_core=per_core),
                   injected=spec.injected.replace(f"{load.burners_per_core} busy", f"{per_core} busy", 1))


ROW_PROGRESS_S = 20.0
"""A line at least this often while a row's session runs (a row takes minutes)."""


def last_progress_line(log_path: Path, tail_bytes: int = 16384) -> str:
    """The session's latest ``harness:`` line (its case, phase and ETA), from the end of its log; ""."""
    try:
        with open(log_path, "rb") as log:
            log.seek(max(log.seek(0, os.SEEK_END) - tail_bytes, 0))
            lines = log.read().decode(errors="replace").splitlines()
    except OSError:
        return ""
    return next((line.strip() for line in reversed(lines) if line.startswith("harness: ")), "")


@contextlib.contextmanager
def row_progress(label: str, log_path: Path, timeout_s: float, period_s: float = ROW_PROGRESS_S) -> Iterator[None]:
    """While the block runs: every ``period_s``, how long the row has run and what its session last said."""
    def tick(elapsed_s: float) -> None:
        said = last_progress_line(log_path)
        print(f"{label} still running: {elapsed_s:.0f} s of at most {timeout_s:.0f} s"
              + (f"; the session: {said.removeprefix('harness: ')[:200]}" if said else ""), flush=True)

    with every(period_s, tick, name="selftest-row-progress"):
        yield


def new_directory(wanted: Path) -> Path:
    """``wanted``, or ``wanted-2``, ``-3``, ... : made with mkdir, never an existing one, so two selftests
    started in the same second never share a directory and judge each other's sessions."""
    wanted.parent.mkdir(parents=True, exist_ok=True)
    for number in range(1, 10_000):
        candidate = wanted if number == 1 else wanted.with_name(f"{wanted.name}-{number}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            raise SelftestError(f"cannot make {candidate} ({exc.strerror or exc}); pass a writable "
                                "--report-dir") from None
        return candidate
    raise SelftestError(f"{wanted}: 10,000 selftest directories of this second exist; remove some")


def cli_selftest(ns: argparse.Namespace) -> int:
    if ns.timeout <= 0 or ns.burners_per_core < 1:
        raise SelftestError("--timeout must be above 0 and --burners-per-core at least 1")
    wanted_rows(ns.rows)
    root = repo_root()
    specs, facts = plan_for_this_node(ns)
    directory = new_directory(ns.report_dir / f"selftest-{time.strftime('%Y%m%d-%H%M%S')}-{facts['host']}")
    print(f"harness selftest: profile {facts['profile']}, {len(specs)} rows; sessions in {directory}/", flush=True)
    outcomes: list[RowOutcome] = []
    for number, spec in enumerate(specs, start=1):
        run = None
        if spec.not_applicable is None:
            print(f"[{number}/{len(specs)}] {spec.injected}: running ...", flush=True)
            started = time.monotonic()
            row_dir = directory / f"{number}-{spec.key}"
            with row_progress(f"[{number}/{len(specs)}] {spec.key}", row_dir / "selftest-session.log", ns.timeout):
                run = run_row(spec, repo_root=root, row_dir=row_dir, timeout_s=ns.timeout)
            print(f"[{number}/{len(specs)}] done in {time.monotonic() - started:.0f} s (exit {run.exit_code})",
                  flush=True)
        outcomes.append(judge(spec, run))
    print(text_table(outcomes))
    json_path, md_path = write_outputs(directory, outcomes, facts)
    print(f"harness selftest: {json_path}  {md_path}")
    print(closing_line(outcomes))
    return 0 if selftest_passed(outcomes) else 1
