"""The command-line options of an acceptance session: declared once, parsed once.

Every option is ``--harness-NAME`` (read from ``dest`` ``harness_NAME``); the everyday ones also have
the short spelling the README uses (``--gpus``, ``--soak``), in acceptance sessions only (add_options
says why). A kind of job declares its own (``Job.options``: the soak's ``--soak``) through add_job_options,
which the shipped kinds call from their pytest_addoption (harness/kinds/shipped.py). ``parse_options`` reads
them all once, at
session start, into one frozen ``HarnessOptions``: a bad value is a ``pytest.UsageError`` naming the
option, raised before any benchmark starts. Nothing after that calls ``config.getoption``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

import pytest

from harness.catalog import MODELS, PRECISIONS
from harness.fleet.session_end import PROMETHEUS_ENV, STORE_ENV
from harness.launch.spec import check_window
from harness.durations import STALL_FACTOR, STALL_FLOOR_SECONDS, TELEMETRY_PERIOD_SECONDS
from harness.jobs.job import LEVELS, Job, JobOption, level_rank
from harness.profile.bounds import Profile
from harness.workloads.compilecache import CacheDirError, default_cache_root, prepare_cache_root

PREFIX = "harness"
"""``--harness-NAME`` on the command line, ``harness_NAME`` as the argparse dest."""

LaunchMode = Literal["grouped", "per-case"]


@dataclass(frozen=True, kw_only=True, slots=True)
class HarnessOptions:
    """What the command line asked of this session; None: the profile's (or the matrix's) choice."""

    hardware: str | None = None
    """Profile name that overrides hardware matching."""
    thresholds_dir: Path | None = None
    """None: the shipped thresholds/."""
    models: tuple[str, ...] | None = None
    """Models of the matrix; None: the profile's."""
    precisions: tuple[str, ...] | None = None
    """Precisions of the matrix; None: the profile's."""
    gpus: tuple[int, ...] | None = None
    """GPU counts (per node, on multi-node cases); None: the profile's."""
    nodes: tuple[int, ...] | None = None
    """Node counts of multi-node cases; None: the whole Slurm allocation."""
    expect_gpus: int | None = None
    """GPUs this node (or the part of it under test) must have usable; None: the Slurm allocation's,
    else the profile's node shape (harness/node/shape.py)."""
    report_dir: Path = Path("reports")
    """Where ``<run-id>/`` is made."""
    warmup_seconds: float | None = None
    """Overrides the profile's [run] warmup_seconds."""
    measure_seconds: float | None = None
    """Overrides the profile's [run] measure_seconds."""
    timeout_s: float | None = None
    """Overrides the profile's [run] timeout_seconds."""
    stall_factor: float = STALL_FACTOR
    """A rank without progress for stall_factor x its phase's expected time + stall_floor_s is hung."""
    stall_floor_s: float = STALL_FLOOR_SECONDS
    """Seconds added to every stall bound."""
    telemetry: bool = True
    """Sample the GPUs (NVML) during each measured window; off measures what sampling costs."""
    telemetry_period_s: float = TELEMETRY_PERIOD_SECONDS
    """Seconds between telemetry samples."""
    ci_target: float | None = None
    """Adaptive window's target CI half-width; None: the profile's [run] ci_target."""
    repeats: int = 1
    """Launches per case; the case is judged on one figure of them (harness/checks/repeats.py)."""
    launch: LaunchMode = "grouped"
    """grouped: the cases of one GPU count share a torchrun launch; per-case: one launch each."""
    prestart: Literal["auto", "on", "off"] = "auto"
    """Start the grouped training launch with the session (harness/launch/prestart.py): auto on GPUs only (on a
    CPU profile its imports would share the cores the CPU figures are measured on)."""
    compile: bool = False
    """torch.compile every case, widest GPU count first."""
    compile_cache: Path | None = None
    """Where torch.compile keeps its caches; with --harness-compile always set: the option's, else the
    per-user cache directory (harness/workloads/compilecache.py default_cache_root)."""
    job_options: Mapping[str, Any] = field(default_factory=dict)
    """Each kind's own options (``Job.options``) by name, parsed: None where not given (read with ``of``)."""
    store: Path | None = None
    """The fleet's history store this session is added to; None: $HARNESS_STORE, else REPORT_DIR/history.sqlite."""
    prometheus_dir: Path | None = None
    """node_exporter's textfile directory; None: $HARNESS_PROMETHEUS_DIR, else not written."""
    level: str = "standard"
    """quick, standard or long (one of LEVELS): which tests run; a kind's option that sets a level (--soak: long)
    means that level, and that level needs it."""
    allow_fault_injection: bool = False
    """HARNESS_FAULT may be set (the harness's own self-tests); otherwise a session with it is refused."""
    calibration: bool = False
    """A session whose figures are for ``harness calibrate-fit``: no confirm-before-FAIL re-measures (the fit
    takes each case's first measurement), the all-reduce sweep runs where the profile has no bound for it
    yet, and the verdict is never a sign-off."""

    def of(self, name: str) -> Any:
        """The value of a kind's own option ``--harness-NAME`` (``Job.options``); None where it was not given."""
        return self.job_options.get(name)

    def starts_early(self, device: str) -> bool:
        """Whether the session starts its launches with the session (``prestart``): auto on GPUs only."""
        return self.prestart == "on" or (self.prestart == "auto" and device == "cuda")


def _add(group: Any, name: str, *short: str, **settings: Any) -> None:
    """``--harness-NAME`` always; its short spelling (``--gpus``) is kept for add_short_options."""
    group.addoption(f"--{PREFIX}-{name}", dest=f"{PREFIX}_{name.replace('-', '_')}", **settings)
    for alias in short:
        _SHORT_ALIASES[alias] = (name, settings)


_SHORT_ALIASES: dict[str, tuple[str, dict[str, Any]]] = {}
"""``--gpus`` -> (``gpus``, its settings): filled by add_options, registered by add_short_options, which
acceptance/conftest.py calls after add_options ran (so the settings are kept here, declared once)."""


def add_options(parser: pytest.Parser) -> None:
    """Every ``--harness-*`` option, in every pytest session; the short spellings only in acceptance sessions.

    The plugin is loaded in every pytest session of the environment (the pytest11 entry point), so
    ``--gpus`` or ``--models`` here would be taken from any other project's test suite; they are added
    when the ini file read before the plugin loaded says ``harness_acceptance = true``, or by
    acceptance/conftest.py (add_short_options) when pytest picked an ini file above acceptance/.
    """
    parser.addini("harness_acceptance", type="bool", default=False,
                  help="run this pytest session as a GPU acceptance session (set in acceptance/pytest.ini)")
    group = parser.getgroup("harness", "GPU acceptance harness")
    _add(group, "hardware", "--hardware", metavar="PROFILE",
         help="use this threshold profile instead of matching the detected hardware")
    _add(group, "thresholds-dir", metavar="DIR",
         help="directory of threshold profiles (default: the shipped thresholds/)")
    _add(group, "models", "--models", action="append", metavar="M[,M...]",
         help="only these models (default: the profile's matrix)")
    _add(group, "precisions", "--precisions", action="append", metavar="P[,P...]",
         help="only these precisions (default: the profile's matrix)")
    _add(group, "gpus", "--gpus", action="append", metavar="N[,N...]",
         help="only these GPU counts (default: the profile's matrix)")
    _add(group, "nodes", "--nodes", action="append", metavar="N[,N...]",
         help="multi-node cases on these node counts (default: every node of the Slurm allocation, "
              "when it has more than one; GPU counts are then per node)")
    _add(group, "expect-gpus", "--expect-gpus", type=int, metavar="N",
         help="the node (or the part of it under test) has N usable GPUs; fewer fails test_node_shape "
              "(default: the Slurm allocation's GPUs on this node, else the profile's [node] shape that holds "
              "the GPUs NVML and the PCI bus show; CPU ranks on the cpu profile)")
    _add(group, "report-dir", default="reports", metavar="DIR",
         help="where reports/<run-id>/ is made (default: ./reports)")
    _add(group, "warmup-seconds", type=float, metavar="S", help="override the profile's minimum warmup seconds")
    _add(group, "measure-seconds", type=float, metavar="S", help="override the profile's measured-window seconds")
    _add(group, "timeout", type=float, metavar="S", help="override the profile's per-launch timeout (seconds)")
    _add(group, "stall-factor", type=float, default=STALL_FACTOR, metavar="F",
         help="a rank with no progress for F x its phase's expected time + the floor is hung "
              f"(default {STALL_FACTOR:g})")
    _add(group, "stall-floor", type=float, default=STALL_FLOOR_SECONDS, metavar="S",
         help=f"seconds added to every stall bound (default {STALL_FLOOR_SECONDS:g})")
    _add(group, "telemetry", choices=("on", "off"), default="on",
         help="sample the GPUs (NVML) during each measured window (default on; off measures its cost)")
    _add(group, "telemetry-period", type=float, default=TELEMETRY_PERIOD_SECONDS, metavar="S",
         help=f"seconds between telemetry samples (default {TELEMETRY_PERIOD_SECONDS:g})")
    _add(group, "ci-target", type=float, metavar="F",
         help="adaptive window: stop measuring a case once its throughput's 95 %% CI half-width is at "
              "most F (0.01 = ±1 %%; 0 = a fixed window); overrides the profile's [run] ci_target")
    _add(group, "repeats", "--repeats", type=int, default=1, metavar="N",
         help="run every case N times and judge one figure: the median, or with N >= 5 the mean "
              "after dropping the best and the worst run (MLPerf's rule); default 1")
    _add(group, "launch", choices=("grouped", "per-case"), default="grouped",
         help="grouped (default): the cases of one GPU count share one torchrun launch (start-up paid "
              "once; a failed case ends it and the rest run again); per-case: one launch each")
    _add(group, "prestart", choices=("auto", "on", "off"), default="auto", help="auto (default): on GPUs the training "
         "launch starts and imports with the session, touching no GPU until its turn; on: on CPU too; off: at its turn")
    _add(group, "compile", action="store_true",
         help="torch.compile every case, widest GPU count first so the narrower launches find its "
              "graphs cached (cold: 24-83 s per case on 4 x H200; warm, from --harness-compile-cache: "
              "7-20 s of tracing per case that torch does not cache under DDP)")
    _add(group, "compile-cache", metavar="DIR",
         help="where torch.compile keeps its caches between runs (default: $XDG_CACHE_HOME/harness/compile, "
              "else ~/.cache/harness/compile); the workers load code from it, so it must be yours and "
              "writable by you alone")
    _add(group, "allow-fault-injection", action="store_true",
         help="run although HARNESS_FAULT is set (the harness's self-tests); a sign-off refuses it")
    _add(group, "calibration", action="store_true",
         help="a calibration session on a healthy node, for `harness calibrate-fit` (docs/calibration.md): no "
              "re-measures before a FAIL, only of a window that never settled; the all-reduce measured where the "
              "profile has no bound for it yet; never a sign-off")
    _add(group, "level", "--level", choices=LEVELS, metavar="LEVEL",
         help="quick: node shape, GPU state, GEMM, memory, host and peer bandwidth, topology (minutes: a "
              "Slurm prolog/epilog or nightly check); standard (default): quick + the DDP matrix + all-reduce; "
              "long: standard + the soak (needs --soak DURATION, which implies long)")
    _add(group, "store", metavar="PATH",
         help=f"the history store this session's facts are added to (default: ${STORE_ENV}, else "
              "REPORT_DIR/history.sqlite); many nodes may share one path on a shared file system")
    _add(group, "prometheus-dir", metavar="DIR",
         help="also write the session's verdict and figures to DIR/harness_acceptance.prom, for "
              f"node_exporter's textfile collector (default: ${PROMETHEUS_ENV}, else not written)")


def add_job_options(parser: pytest.Parser, jobs: Sequence[Job]) -> None:
    """The options the ``jobs`` declare for themselves (``Job.options``), as every ``--harness-*`` option: called
    from a pytest_addoption, before pytest reads the command line (harness/kinds/shipped.py for the shipped
    kinds; a site's conftest for its own), and before add_short_options, which adds their short spellings."""
    group = parser.getgroup("harness", "GPU acceptance harness")
    for job in jobs:
        for option in job.options:
            _add(group, option.name, *filter(None, (option.short,)), metavar=option.metavar, help=option.help)


def add_short_options(parser: pytest.Parser) -> None:
    """``--gpus``, ``--models``, ... as aliases of their ``--harness-*`` options; added once per session."""
    group = parser.getgroup("harness", "GPU acceptance harness")
    known = {flag for option in group.options for flag in option.names()}
    for alias, (name, settings) in _SHORT_ALIASES.items():
        if alias not in known:
            group.addoption(alias, dest=f"{PREFIX}_{name.replace('-', '_')}",
                            **{**settings, "help": f"same as --{PREFIX}-{name}"})


REFUSED_CACHE_OPTIONS = {"lf": "--lf", "failedfirst": "--ff", "newfirst": "--nf", "stepwise": "--sw",
                         "stepwise_skip": "--sw-skip"}
"""pytest's cache options (dest -> flag). The acceptance suite runs without pytest's cache (-p
no:cacheprovider in acceptance/pytest.ini: a node's sign-off never depends on what an earlier
session left in a directory); pytest still accepts these options then, and silently reruns
everything. Refused instead, with the way to do what was meant."""


def refuse_cache_options(config: pytest.Config) -> None:
    """A usage error for --lf, --ff, --nf, --sw where pytest's cache is off: what was asked, why not,
    and what to do instead."""
    if config.pluginmanager.has_plugin("cacheprovider"):
        return
    given = [flag for dest, flag in REFUSED_CACHE_OPTIONS.items() if config.getoption(dest, default=False)]
    if given:
        raise pytest.UsageError(
            f"{', '.join(given)}: refused: the acceptance suite keeps no pytest cache between sessions, so there is "
            "no 'last failed' to go by (pytest would silently rerun everything). To re-run what failed, name it: "
            "the node ids under 'harness: failed:' or in reports/latest/report.html, e.g. make acceptance "
            "ARGS=\"'acceptance/test_scaling.py::test_weak_scaling[resnet50-bf16-2gpu]'\", or -k resnet50. "
            "Such a re-run is partial, not a node sign-off: the node is signed off by a full run.")


def ini_declares_acceptance(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> bool:
    """Whether the ini file pytest already read says ``harness_acceptance = true``.

    False when the plugin is registered before pytest read its ini file (``pytest.main(plugins=...)``):
    asking then would cache the default. ``extra_info["inifile"]`` is set once the ini file is read.
    """
    config = pluginmanager.get_plugin("pytestconfig")
    if config is None or "inifile" not in parser.extra_info:
        return False
    return bool(config.getini("harness_acceptance"))


def parse_options(config: pytest.Config, jobs: Sequence[Job] = ()) -> HarnessOptions:
    """Every option, the ``jobs``' own too, read and checked once; a bad value is a usage error naming it."""
    def get(name: str) -> Any:
        return config.getoption(f"{PREFIX}_{name}")

    given = _given_job_options(config, jobs)

    thresholds_dir, compile = get("thresholds_dir"), bool(get("compile"))
    return HarnessOptions(
        hardware=get("hardware"), thresholds_dir=Path(thresholds_dir) if thresholds_dir else None,
        models=_names("models", get("models")), precisions=_names("precisions", get("precisions")),
        gpus=_counts("--gpus", get("gpus"), "--gpus 1,2,4"), nodes=_counts("--nodes", get("nodes"), "--nodes 2,4"),
        expect_gpus=_expect_gpus(get("expect_gpus")),
        report_dir=Path(get("report_dir")),
        warmup_seconds=_seconds("--harness-warmup-seconds", get("warmup_seconds")),
        measure_seconds=_seconds("--harness-measure-seconds", get("measure_seconds")),
        timeout_s=_seconds("--harness-timeout", get("timeout")),
        stall_factor=_positive("--harness-stall-factor", get("stall_factor"), "a factor > 0, e.g. 3"),
        stall_floor_s=_positive("--harness-stall-floor", get("stall_floor"), "seconds > 0, e.g. 30"),
        telemetry=get("telemetry") != "off",
        telemetry_period_s=_positive("--harness-telemetry-period", get("telemetry_period"), "seconds > 0, e.g. 0.1"),
        ci_target=_ci_target(get("ci_target")), repeats=_repeats(get("repeats")), launch=get("launch"),
        prestart=get("prestart"),
        compile=compile, compile_cache=_compile_cache(get("compile_cache")) if compile else None,
        job_options=_job_options(jobs, given), level=_level(get("level"), jobs, given),
        store=Path(get("store")) if get("store") else None,
        prometheus_dir=Path(get("prometheus_dir")) if get("prometheus_dir") else None,
        allow_fault_injection=bool(get("allow_fault_injection")), calibration=bool(get("calibration")),
    )


def check_run_options(options: HarnessOptions, profile: Profile) -> None:
    """The measurement the options and the profile's [run] make together, checked as a launch will
    (launch.spec.check_window), and a timeout it fits in: a usage error naming the options, before any
    benchmark."""
    run = profile.run
    warmup = options.warmup_seconds or run.warmup_seconds
    measure = options.measure_seconds or run.measure_seconds
    ci = options.ci_target if options.ci_target is not None else run.ci_target
    try:
        check_window(warmup_seconds=warmup, measure_seconds=measure, ci_target=ci)
    except ValueError as exc:
        raise pytest.UsageError(f"--harness-warmup-seconds/--harness-measure-seconds/--harness-ci-target with "
                                f"profile {profile.name}: {exc}; no benchmark was started") from None
    longest = max(run.max_measure_seconds or 0, measure) if ci else measure  # an adaptive window runs to its cap
    timeout = options.timeout_s or run.timeout_seconds
    if timeout <= warmup + longest:
        raise pytest.UsageError(
            f"--harness-timeout {timeout:g}: every launch would time out; it must exceed warmup + the longest "
            f"measured window ({warmup:g} + {longest:g} s with profile {profile.name}), with room for start-up "
            "and model build; no benchmark was started")


def _compile_cache(text: str | None) -> Path:
    try:
        return prepare_cache_root(Path(text) if text else default_cache_root())
    except CacheDirError as exc:
        raise pytest.UsageError(f"--harness-compile-cache: {exc}") from None


def split_values(values: list[str] | None) -> list[str] | None:
    """``--gpus 1,2 --gpus 4`` -> ["1", "2", "4"]; None when the option was not given."""
    if not values:
        return None
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _names(option: str, values: list[str] | None) -> tuple[str, ...] | None:
    known = MODELS if option == "models" else PRECISIONS
    names = split_values(values)
    for name in names or []:
        if name not in known:
            raise pytest.UsageError(f"--{option} {name}: unknown; known: {', '.join(known)}")
    return tuple(names) if names is not None else None


def _counts(option: str, values: list[str] | None, example: str) -> tuple[int, ...] | None:
    texts = split_values(values)
    for text in texts or []:
        if not text.isdigit() or int(text) < 1:
            raise pytest.UsageError(f"{option} {text!r}: expected positive integers, e.g. {example}")
    return tuple(int(text) for text in texts) if texts is not None else None


def _seconds(option: str, value: float | None) -> float | None:
    """An override of a profile duration; absent leaves the profile's. 0 is refused, not read as
    "the profile's": a user who typed it meant something, and no launch can run with it."""
    if value is None:
        return None
    return _positive(option, value, "seconds > 0 (leave the option out for the profile's value)")


def _positive(option: str, value: float, expected: str) -> float:
    if not (value > 0 and math.isfinite(value)):
        raise pytest.UsageError(f"{option} {value}: expected {expected}")
    return value


def _ci_target(value: float | None) -> float | None:
    if value is not None and not 0 <= value < 1:
        raise pytest.UsageError(f"--harness-ci-target {value}: expected a fraction in [0, 1), e.g. 0.01 for "
                                "±1 %, or 0 for a fixed window")
    return value


def _repeats(value: int) -> int:
    if value < 1:
        raise pytest.UsageError(f"--repeats {value}: expected a count >= 1, e.g. --repeats 3")
    return value


def _expect_gpus(value: int | None) -> int | None:
    if value is not None and value < 1:
        raise pytest.UsageError(f"--expect-gpus {value}: expected the number of GPUs the node has, >= 1, e.g. "
                                "--expect-gpus 8")
    return value


def _given_job_options(config: pytest.Config, jobs: Sequence[Job]) -> dict[str, str | None]:
    """The text given for each of the jobs' own options (None: not given); one never declared is a usage error."""
    given: dict[str, str | None] = {}
    for job in jobs:
        for option in job.options:
            try:
                given[option.name] = config.getoption(f"{PREFIX}_{option.name.replace('-', '_')}") or None
            except ValueError:
                raise pytest.UsageError(
                    f"job {job.name!r}: its option --{PREFIX}-{option.name} was never declared; declare it from a "
                    "pytest_addoption hook with harness.plugin.options.add_job_options(parser, [job])") from None
    return given


def _job_options(jobs: Sequence[Job], given: Mapping[str, str | None]) -> dict[str, Any]:
    """Each job's own option parsed (``JobOption.parse``; a ValueError is the usage error), None where not given."""
    parsed: dict[str, Any] = {}
    for option in (option for job in jobs for option in job.options):
        text = given.get(option.name)
        try:
            parsed[option.name] = option.parse(text) if text else None
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
    return parsed


def _level(level: str | None, jobs: Sequence[Job], given: Mapping[str, str | None]) -> str:
    """The run level: as given, else the highest a given option sets (``JobOption.sets_level``: --soak, long) and
    standard without; the two must agree."""
    setting: list[tuple[str, JobOption]] = [(job.level, option) for job in jobs for option in job.options
                                            if option.sets_level]
    if level is None:
        return max((at for at, option in setting if given.get(option.name)), key=level_rank, default="standard")
    for at, option in setting:
        if level == at and not given.get(option.name):
            raise pytest.UsageError(option.needed)
        if level != at and given.get(option.name):
            raise pytest.UsageError(f"{option.flag} runs at --level {at}, not --level {level}: drop one of the two")
    return level
