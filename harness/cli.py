"""The `harness` command: run one benchmark, detect hardware, check threshold files, rebuild a report,
find the largest batch, calibrate a new profile, compare two runs, sign off a fleet, follow a history,
prove on this node that the harness can fail (selftest)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

from harness.files import NotRecorded, path_kind


class UsageError(Exception):
    """A mistake on the command line: printed as one line, exit status 4 (harness/exitcodes.py)."""


class NotRecordedError(Exception):
    """The result could not be written where it belongs: printed as one line, exit status 7."""


def _run_device(asked: str | None) -> str:
    """``--device``, else cuda where a GPU is usable and cpu where no NVIDIA hardware is: a node whose GPUs
    CUDA or NVML cannot use stops here, once, with the fix (its ranks would each say only "torch sees no
    CUDA device"). The rule is harness/node/presence.py's ``choose_device``, shared with calibrate and
    find-max-bs."""
    if asked == "cpu":
        return "cpu"
    # NVML, then torch.cuda.is_available (no CUDA context in this process): harness/node/hardware.py.
    from harness.node.hardware import HardwareError, detect
    from harness.node.presence import DeviceChoiceError, choose_device

    try:
        return choose_device(asked, detect())
    except (HardwareError, DeviceChoiceError) as exc:
        raise UsageError(str(exc)) from None


def _add_run(sub) -> None:
    p = sub.add_parser("run", help="run one DDP benchmark and write its record",
                       description="Run one DDP benchmark through torchrun and write its run record (JSON).")
    p.add_argument("--model", required=True, help="a registry model, e.g. resnet50, vit_b_16, bert_large, resnet18")
    p.add_argument("--precision", default="bf16", choices=("fp32", "fp16", "bf16"))
    p.add_argument("--gpus", type=int, default=1, help="GPUs (CPU ranks with --device cpu) per node")
    p.add_argument("--scaling", default="weak", choices=("weak", "strong"))
    p.add_argument("--batch-size", type=int, help="per-GPU batch size (weak scaling)")
    p.add_argument("--global-batch-size", type=int, help="global batch size (strong scaling)")
    p.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda when a GPU is present, else cpu (gloo)")
    p.add_argument("--duration", type=float, default=10.0,
                   help="seconds of measured window (default 10); with --ci-target, the least it lasts")
    p.add_argument("--ci-target", type=float, default=0.0,
                   help="adaptive window: stop once the throughput's 95 %% CI half-width is at most this "
                        "(0.01 = ±1 %%); default 0: a fixed window of --duration")
    p.add_argument("--max-duration", type=float,
                   help="adaptive window: stop here whatever the CI (default 6 x --duration + 10)")
    p.add_argument("--warmup", type=float, default=5.0, help="minimum warmup seconds (default 5)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--peak-tflops", type=float, help="dense peak TFLOP/s per GPU, for MFU")
    p.add_argument("--timeout", type=float, default=900.0, help="kill the run after this many seconds (default 900)")
    p.add_argument("--sync-each-step", action="store_true",
                   help="diagnostic: read the loss on the host every step, to measure what that costs")
    p.add_argument("--output", type=Path, default=Path("run.json"), help="record path (default run.json); "
                   "rank logs go to <output>.logs/")


def cmd_run(ns: argparse.Namespace) -> int:
    from harness.launch.benchmark import run_benchmark
    from harness.launch.command import usable_cpu_cores
    from harness.launch.spec import BenchmarkSpec, LaunchSettings
    from harness.records import write_record
    from harness.workloads.plan import Device

    if ns.scaling == "weak" and ns.batch_size is None:
        raise UsageError("weak scaling needs --batch-size (per GPU)")
    if ns.scaling == "strong" and ns.global_batch_size is None:
        raise UsageError("strong scaling needs --global-batch-size")
    device: Device = "cuda" if _run_device(ns.device) == "cuda" else "cpu"
    try:
        spec = BenchmarkSpec(
            model=ns.model, precision=ns.precision, scaling=ns.scaling,
            batch_size_per_gpu=ns.batch_size if ns.scaling == "weak" else None,
            global_batch_size=ns.global_batch_size if ns.scaling == "strong" else None,
            warmup_seconds=ns.warmup, measure_seconds=ns.duration, compile=ns.compile,
            peak_tflops=ns.peak_tflops, sync_each_step=ns.sync_each_step,
            ci_target=ns.ci_target, max_measure_seconds=ns.max_duration,
            launch=LaunchSettings(gpus_per_node=ns.gpus, device=device, timeout_s=ns.timeout),
        )
    except ValueError as exc:
        field = str(exc).split(" ", 1)[0]  # the spec's messages start with the field they are about
        raise UsageError(f"{_OPTION_OF_FIELD[field]}: {exc}" if field in _OPTION_OF_FIELD else str(exc)) from None
    cores = usable_cpu_cores()
    if device == "cpu" and ns.gpus > cores:
        # One rank per core at most: more only time-share the cores (the throughput is not the
        # host's), and each is a whole PyTorch process, so hundreds of them exhaust its memory.
        raise UsageError(f"--gpus {ns.gpus} --device cpu: a CPU run starts one rank per --gpus, and this process "
                         f"may use {cores} CPU core{'s' if cores != 1 else ''}; use --gpus {cores} or fewer")
    output: Path = ns.output
    _check_output(output)
    run_dir = output.with_name(output.name + ".logs")
    record = run_benchmark(spec, run_dir)
    print(summary_line(record))
    kind = path_kind(output)
    if kind is not None:  # something took the path while the benchmark ran: leave it alone
        raise NotRecordedError(f"--output {output}: is {kind} now, so the record was not written there; it is in "
                         f"{run_dir / 'record.json'}")
    write_record(output, record)
    print(f"record: {output}   logs: {run_dir}/")
    return 0 if record.ok else 1


_OPTION_OF_FIELD = {"warmup_seconds": "--warmup", "measure_seconds": "--duration", "ci_target": "--ci-target",
                    "max_measure_seconds": "--max-duration", "peak_tflops": "--peak-tflops", "timeout_s": "--timeout",
                    "gpus_per_node": "--gpus", "batch_size_per_gpu": "--batch-size",
                    "global_batch_size": "--global-batch-size"}
"""The option of each BenchmarkSpec / LaunchSettings field that `harness run` sets."""


def _check_output(output: Path) -> None:
    """UsageError unless the record and its logs (<output>.logs/) can be written: before any benchmark,
    so that nothing is measured for nothing and nothing but a record file is ever replaced (the record
    is written to a new file renamed over the path, which would turn a link, a device or a pipe into a
    regular file)."""
    kind = path_kind(output)
    if kind == "a directory":
        raise UsageError(f"--output {output}: is a directory; name a file in it, e.g. --output {output / 'run.json'}")
    if kind is not None:
        raise UsageError(f"--output {output}: is {kind}, not a regular file, and writing the record would replace "
                         "it; name a regular file or a new path, e.g. --output run.json")
    logs = output.with_name(output.name + ".logs")
    if logs.exists() and not logs.is_dir():
        raise UsageError(f"--output {output}: its log directory {logs} exists and is not a directory; move it "
                         "away or choose another --output")
    directory = output.parent
    while not directory.exists():  # the run makes the missing directories
        directory = directory.parent
    if not directory.is_dir():
        raise UsageError(f"--output {output}: {directory} is not a directory; choose a path in a directory")
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass  # a file can be made there (O_TMPFILE on Linux: nothing to remove even if we die here)
    except OSError as exc:
        raise UsageError(f"--output {output}: cannot create files in {directory} ({exc.strerror or exc}); "
                         "choose a writable directory") from None


def summary_line(record) -> str:
    case = f"{record.model} {record.precision} {record.scaling} x{record.world_size} ({record.device_kind})"
    if not record.ok and record.throughput_per_gpu is None:
        return f"{record.status.upper():7s} {case}: {record.failure.reason if record.failure else ''}"
    parts = [f"{record.status.upper():7s} {case}:",
             f"{record.throughput_per_gpu:,.1f} {record.sample_unit}/s per GPU",
             f"({record.throughput_total:,.1f} total)"]
    if record.throughput_ci95_rel is not None:
        parts.append(f"CI95 ±{record.throughput_ci95_rel * 100:.2f}%")
    if record.step_time_ms:
        parts.append(f"step {record.step_time_ms.mean_ms:.1f} ms (CV {record.step_time_ms.cv * 100:.2f}%)")
    if record.mfu is not None:
        parts.append(f"MFU {record.mfu * 100:.1f}%")
    if record.straggler_ratio is not None and record.world_size > 1:
        parts.append(f"straggler {record.straggler_ratio:.3f}")
    if record.peak_memory_gib is not None:
        parts.append(f"peak mem {record.peak_memory_gib:.1f} GiB")
    if record.failure:
        parts.append(f"— {record.failure.reason}")
    return " ".join(parts)


def _add_detect(sub) -> None:
    p = sub.add_parser("detect", help="print the detected GPUs and the threshold profile that would be used")
    p.add_argument("--hardware", help="use this profile name instead of matching")
    p.add_argument("--thresholds-dir", help="directory of threshold profiles (default: the shipped ones)")


def cmd_detect(ns: argparse.Namespace) -> int:
    from harness.exitcodes import EXIT_USAGE_ERROR
    from harness.kinds.shipped import BOUNDS_TABLES
    from harness.profile.match import cli_detect

    # cli_detect says 1 for hardware it cannot describe or match: the one table's usage error.
    return EXIT_USAGE_ERROR if cli_detect(ns.hardware, ns.thresholds_dir, BOUNDS_TABLES) == 1 else 0


def _add_thresholds(sub) -> None:
    p = sub.add_parser("thresholds", help="threshold profile tools")
    tsub = p.add_subparsers(dest="thresholds_command", required=True)
    check = tsub.add_parser("check", help="validate threshold files (default: every shipped profile)")
    check.add_argument("files", nargs="*")


def cmd_thresholds(ns: argparse.Namespace) -> int:
    from harness.exitcodes import EXIT_USAGE_ERROR
    from harness.kinds.shipped import BOUNDS_TABLES
    from harness.profile.load import cli_check

    # cli_check: 1 when a file is invalid (a finding, as FAIL), 2 when none was found (a usage error).
    code = cli_check(ns.files, BOUNDS_TABLES)
    return EXIT_USAGE_ERROR if code == 2 else code


def _add_report(sub) -> None:
    p = sub.add_parser("report", help="rebuild report.html of a run directory from its saved JSON",
                       description="Rebuild reports/<run-id>/report.html from report.json, session.json and runs/.")
    p.add_argument("run_dir", help="a run directory, e.g. reports/latest")


def cmd_report(ns: argparse.Namespace) -> int:
    from harness.kinds.shipped import report_sections
    from harness.report.render import cli_report

    return cli_report(ns.run_dir, report_sections())


def cmd_find_max_bs(ns: argparse.Namespace) -> int:
    from harness.tools.batchsize.cli import cli_find_max_bs

    return cli_find_max_bs(ns)


def cmd_calibrate(ns: argparse.Namespace) -> int:
    from harness.tools.calibrate.cli import cli_calibrate

    return cli_calibrate(ns)


def cmd_calibrate_fit(ns: argparse.Namespace) -> int:
    from harness.tools.calibrate.fit import cli_fit

    return cli_fit(ns)


def cmd_compare(ns: argparse.Namespace) -> int:
    from harness.tools.compare import cli_compare

    return cli_compare(ns.a, ns.b)


def cmd_selftest(ns: argparse.Namespace) -> int:
    from harness.selftest.cli import SelftestError, cli_selftest

    try:
        return cli_selftest(ns)
    except SelftestError as exc:
        raise UsageError(str(exc)) from None


def cmd_fleet(ns: argparse.Namespace) -> int:
    from harness.fleet.cli import main as fleet_main

    return fleet_main(ns.command, ns)


COMMANDS = {"run": cmd_run, "detect": cmd_detect, "thresholds": cmd_thresholds, "report": cmd_report,
            "find-max-bs": cmd_find_max_bs, "calibrate": cmd_calibrate, "calibrate-fit": cmd_calibrate_fit,
            "compare": cmd_compare,
            "fleet": cmd_fleet, "history": cmd_fleet, "selftest": cmd_selftest}


class _Parser(argparse.ArgumentParser):
    """argparse's own mistakes (an unknown option, a missing value) exit with the usage code, as
    every other mistake does (argparse alone exits 2, the suite's code for an interruption)."""

    def error(self, message: str) -> NoReturn:
        from harness.exitcodes import EXIT_USAGE_ERROR

        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE_ERROR, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    from harness import __version__
    from harness.tools.batchsize.options import add_find_max_bs_parser
    from harness.tools.calibrate.fit import add_fit_parser
    from harness.tools.calibrate.options import add_calibrate_parser
    from harness.tools.compare import add_compare_parser
    from harness.fleet.cli import add_fleet_parser, add_history_parser
    from harness.selftest.cli import add_selftest_parser

    parser = _Parser(prog="harness", description=__doc__)
    parser.add_argument("--version", action="version", version=f"harness {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_run(sub)
    _add_detect(sub)
    _add_thresholds(sub)
    _add_report(sub)
    add_find_max_bs_parser(sub)
    add_calibrate_parser(sub)
    add_fit_parser(sub)
    add_compare_parser(sub)
    add_fleet_parser(sub)
    add_history_parser(sub)
    add_selftest_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    from harness.exitcodes import EXIT_INTERRUPTED, EXIT_NOT_RECORDED, EXIT_USAGE_ERROR
    from harness.launch.supervise import stop_on_sigterm

    # find-max-bs probes and benchmark launches run in sessions of their own: SIGTERM must reach them.
    stop_on_sigterm()
    try:
        return COMMANDS[ns.command](ns)
    except UsageError as exc:
        print(f"harness {ns.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE_ERROR
    except NotRecordedError as exc:
        print(f"harness {ns.command}: could not record: {exc}", file=sys.stderr)
        return EXIT_NOT_RECORDED
    except NotRecorded as exc:  # a full disk: the storage's failure, never the node's
        print(f"harness {ns.command}: {exc}", file=sys.stderr)
        return EXIT_NOT_RECORDED
    except KeyboardInterrupt:
        print(f"harness {ns.command}: interrupted; every process it started has been stopped", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
