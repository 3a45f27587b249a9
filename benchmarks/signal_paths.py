"""Signal `harness run` as timeout(1), make, Slurm, a terminal and the OOM killer do, and print what is
left 15 s later: the signal-path rows of docs/reliability.md.

    python benchmarks/signal_paths.py --device cpu                                  # as measured on the VM
    python3 benchmarks/signal_paths.py --device cuda --model resnet50 --precision bf16 --batch 64 --gpus 1

Each row: the signal and how it was sent (``SIGTERM``, ``SIGTERM x2`` 0.2 s apart, ``SIGTERM group`` to
the process group, ``SIGTERM x3`` 1 s apart, ``SIGINT x2``, ``SIGHUP`` as a closed terminal or a dropped
ssh sends it, ``SIGKILL``), sent once rank 0 measures; the exit status and how
long the command took to exit; the launch's processes (found by the ``HARNESS_LAUNCH_DIR`` tag in
their environment) at the signal and 15 s later; on CUDA, the compute processes nvidia-smi lists
15 s later. tests/test_reliability_signals.py runs the same paths (``interrupt``) as slow tests.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAUNCH_DIR_ENV = "HARNESS_LAUNCH_DIR"  # harness/launch/cleanup.py; not imported: run from any checkout
SIGNALS = {"SIGTERM": signal.SIGTERM, "SIGINT": signal.SIGINT, "SIGKILL": signal.SIGKILL, "SIGHUP": signal.SIGHUP}
PATHS = ("SIGTERM", "SIGTERM x2", "SIGTERM x3", "SIGTERM group", "SIGINT x2", "SIGHUP", "SIGKILL")
SETTLE_S = 15.0


def launched_under(root: Path) -> list[int]:
    """Processes of launches whose directory is under ``root`` (their HARNESS_LAUNCH_DIR tag)."""
    needle = f"{LAUNCH_DIR_ENV}={root}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and needle in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def measuring(root: Path, gpus: int | None = None) -> bool:
    """Whether rank 0 of a launch under ``root`` (of a ``gpus``-rank case, when given) is in its measured window."""
    for phase_file in root.rglob("rank0.phase"):
        if gpus is not None and not phase_file.parent.name.endswith(f"-{gpus}gpu"):
            continue
        try:
            if json.loads(phase_file.read_text() or "{}").get("phase") == "measure":
                return True
        except (OSError, ValueError):
            continue
    return False


def send(process: subprocess.Popen, how: str) -> None:
    name, _, mode = how.partition(" ")
    sig = SIGNALS[name]
    if mode == "group":
        os.killpg(process.pid, sig)
    elif mode == "x2":
        process.send_signal(sig)
        time.sleep(0.2)
        process.send_signal(sig)
    elif mode == "x3":  # an impatient user or a supervisor that repeats itself: three, 1 s apart
        for _ in range(3):
            if process.poll() is not None:
                break
            process.send_signal(sig)
            time.sleep(1.0)
    else:
        process.send_signal(sig)


def gpu_compute_processes() -> list[str]:
    try:
        listed = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,process_name", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in listed.splitlines() if line.strip()]


def interrupt(command: list[str], cwd: Path, how: str, *, gpus: int | None = None, start_s: float = 240) -> dict:
    """Start ``command`` in its own process group, send ``how`` once a rank measures, and say what is left
    ``SETTLE_S`` later (every process of it is killed afterwards, whatever happened)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, start_new_session=True)
    try:
        deadline = time.time() + start_s
        while not measuring(cwd, gpus):
            if time.time() > deadline or process.poll() is not None:
                raise RuntimeError(f"{how}: the launch never measured:\n{process.communicate(timeout=30)[0]}")
            time.sleep(0.3)
        running = len(launched_under(cwd))
        sent = time.time()
        send(process, how)
        output, _ = process.communicate(timeout=60)
        exited_s = time.time() - sent
        time.sleep(max(0.0, SETTLE_S - (time.time() - sent)))
        left = launched_under(cwd)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
        for pid in launched_under(cwd):
            os.kill(pid, signal.SIGKILL)
    return {"how": how, "returncode": process.returncode, "exited_s": round(exited_s, 1), "running": running,
            "left_15s": len(left), "output": output}


def harness_run_command(output: Path, args: argparse.Namespace) -> list[str]:
    return [sys.executable, "-m", "harness.cli", "run", "--model", args.model, "--precision", args.precision,
            "--gpus", str(args.gpus), "--batch-size", str(args.batch), "--device", args.device,
            "--duration", "120", "--warmup", "0.5", "--output", str(output)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--model", default="tiny_bert")
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--gpus", type=int, default=2)
    parser.add_argument("--how", action="append", choices=PATHS, help="default: every path")
    args = parser.parse_args()
    for how in args.how or PATHS:
        with tempfile.TemporaryDirectory(prefix="signal-paths-") as scratch:
            row = interrupt(harness_run_command(Path(scratch) / "run.json", args), Path(scratch), how)
            row["last_line"] = row.pop("output").strip().splitlines()[-1:] or [""]
            if args.device == "cuda":
                row["gpu_processes_15s"] = gpu_compute_processes()
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
