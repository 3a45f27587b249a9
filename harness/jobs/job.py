"""What one kind of job declares: the acceptance tests it owns, the run level they belong to, and the
test ids a profile requires of a node. The test ids are spelt here, once, for the plugin's parameters
and the verdict's required set alike: a mismatch between the two would make a required test look
"not collected" (INCOMPLETE), or worse, a collected one look not required.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping, Protocol, Sequence

from harness.profile.bounds import Profile
from harness.profile.tables import BoundsTable

LEVELS = ("quick", "standard", "long")
"""Run levels (``--level``), like DCGM's: quick = the node, GPU state, components and topology (a Slurm
prolog); standard adds the DDP matrix and the all-reduce (the sign-off); long adds the soak."""


def level_rank(level: str) -> int:
    """Where ``level`` stands in ``LEVELS``; a level this version does not know counts as standard."""
    return LEVELS.index(level if level in LEVELS else "standard")


def gpu_id(index: int) -> str:
    """The test id of one GPU: ``gpu3``."""
    return f"gpu{index}"


def node_gpu_id(node: str, index: int) -> str:
    """The test id of one GPU of one node of a multi-node session: ``gpu02-gpu3``."""
    return f"{node}-{gpu_id(index)}"


def pair_id(source: int, target: int) -> str:
    """The test id of one ordered GPU pair: ``gpu0-gpu1``."""
    return f"{gpu_id(source)}-{gpu_id(target)}"


def gpu_count_id(gpus: int) -> str:
    """The test id of a GPU count: ``4gpu``."""
    return f"{gpus}gpu"


@dataclass(frozen=True, kw_only=True)
class Requirement:
    """What a node must run, as the verdict knows it: the profile, the GPUs the node should have, whether
    bf16 runs natively on its CPU (a CPU profile), and every node of a multi-node session."""

    profile: Profile
    expected_gpus: int
    native_bf16: str | None = None
    nodes: tuple[str, ...] = ()
    """The driver's node first; empty on one node."""

    @property
    def on_gpus(self) -> bool:
        return self.profile.hardware.device == "cuda"

    @property
    def gpu_counts(self) -> list[int]:
        """The profile's GPU counts this node can run, ascending."""
        return [n for n in sorted(set(self.profile.gpu_counts)) if n <= self.expected_gpus]


class GpuStateWatch(Protocol):
    """What the session offers every kind's runner besides its context: its GPU-state watch (harness/plugin/
    gpu_state.py), which reads every GPU from the session's start to its end (snapshots, XIDs, the other nodes'
    probes). A kind names what its window saw besides its own checks (a foreign process, a clock-event reason, an
    XID); the GPU-state kind judges what the watch read."""

    def seen_in_window(self, telemetry: Any) -> list[str]:
        """One line per thing a launch's window saw besides its own figures; [] when nothing was."""

    def reading(self, target: Any, nvml: Any = None) -> Any:
        """What the watch read of one GPU (an index; a node and index in a multi-node session): its start and end
        snapshots and XIDs, and why any is missing (harness/plugin/gpu_state.py ``GpuStateReading``)."""

    def summary(self) -> dict | None:
        """Both snapshots and every XID of the session, for session.json; None where there is no GPU."""


class KindRunner:
    """What the session asks of a kind's runner, whatever the kind: the session holds one per ``Job.section``,
    built by the job's ``runner`` at its start, and reaches the kind only through these (its tests reach the rest
    through ``harness.runner(section)``). The defaults do nothing, so a runner says only what it has."""

    def connect(self, say: Callable[[str], None]) -> None:
        """Where the runner's progress lines go while it runs (the session's terminal)."""

    def attach(self, watch: GpuStateWatch) -> None:
        """The session's GPU-state watch (``GpuStateWatch``), handed over once the session holds it."""

    def start_early(self, items: Sequence[Any]) -> None:
        """Start what can start before its test runs (the collected pytest items say what will run)."""

    def summary(self) -> dict | None:
        """Its section of session.json and report.json; None when it measured nothing."""
        return None

    def launches_s(self) -> dict[str, float]:
        """Its launches' wall time in seconds by name, for the session's timeline."""
        return {}


@dataclass(frozen=True, kw_only=True)
class JobOption:
    """A command-line option a kind of job declares for itself: ``--harness-NAME``, and its short spelling in
    acceptance sessions. The plugin declares it before pytest reads the command line (harness/plugin/options.py
    ``add_job_options``, which the shipped kinds' pytest_addoption calls, as a site's conftest does for its own),
    parses it once at the session's start and hands the value to the kind (``HarnessOptions.of(name)``)."""

    name: str
    """``soak``: ``--harness-soak``, read as ``options.of("soak")``."""
    short: str | None = None
    """``--soak``: the spelling the README uses, in acceptance sessions only (other suites may use the name)."""
    metavar: str | None = None
    help: str = ""
    parse: Callable[[str], Any] = str
    """The text given (never empty) -> its value; a ValueError's message is the usage error, said as it is."""
    sets_level: bool = False
    """Given, the session runs at its job's level; that level asked for (``--level``) needs it given."""
    needed: str = ""
    """With ``sets_level``: the usage error when its job's level is asked for without it."""

    @property
    def flag(self) -> str:
        """How the usage errors spell it: ``--soak``."""
        return self.short or f"--harness-{self.name}"


RESERVED_SECTIONS = frozenset({
    "run_id", "run_dir", "started_at", "finished_at", "profile", "hardware", "command_line", "harness_version",
    "slurm", "git_commit", "container", "stack", "definitions", "overrides", "expected_environment",
    "orphans_stopped", "warnings", "results", "timeline", "session_verdict", "exitstatus",
    "interrupted", "level"})
"""session.json's own keys (harness/plugin/session.py, outputs.py): no kind's section may take one."""


@dataclass(frozen=True, kw_only=True)
class Job:
    """One kind of job. A test of an acceptance session that no job owns is refused at collection
    (harness/plugin/levels.py): its requirement could not be known, so a skip of it could pass."""

    name: str
    tests: tuple[str, ...]
    """The acceptance test functions it owns: ``test_gemm``."""
    level: str
    """The run level its tests belong to (one of ``LEVELS``)."""
    required: Callable[[Requirement], list[str]]
    """The test names (``test_gemm[gpu3]``) the profile requires of the node, in test order."""
    narrowed_by_matrix: bool = False
    """``--models``/``--precisions``/``--gpus`` narrow its cases: a required case they leave out is the
    user's narrowing (a partial scope), not a missing test. Its tests' parameter is then a ``CaseId`` or the GPU
    count it runs on, which a ``--gpus`` wider than the node is held to (harness/plugin/outcomes.py)."""
    missing_hint: str = ""
    """Said after "not collected" when a required test of it is missing."""
    section: str | None = None
    """Its runner's key in session.json (``interconnect``); jobs naming one section share one runner."""
    runner: Callable[..., KindRunner] | None = None
    """Builds that runner when the session starts, called as ``runner(ctx=...)`` with the session's context
    (harness/plugin/context.SessionContext). A job without one has nothing the session runs for it: its tests
    do their own work (a site's plain test)."""
    params: Mapping[str, Callable[[Any], list[Any]]] = field(default_factory=dict)
    """Its tests' parametrized fixtures: fixture name -> the session's parameters of it, called with the session
    (harness/plugin/session.HarnessSession; typed loosely: this floor knows no session). The plugin parametrizes
    every fixture a job of the session names, and no other (``component_gpu``: one per GPU)."""
    order: Literal["first", "last"] | None = None
    """Where its tests run in the session: ``first`` (the node shape: a missing GPU is the first thing said),
    ``last`` (GPU state: its end snapshot follows every benchmark), or where the test files put them."""
    report: Callable[[dict, list[Any]], Any] | None = None
    """Its section of the sign-off page: (the run's header, its tests) -> a ``KindSection``
    (harness/report/sections/kind.py), handed to the report by whoever renders it (the plugin's outputs,
    ``harness report``): the report imports no kind."""
    gpu_columns: tuple[tuple[str, str], ...] = ()
    """Its per-GPU figures on the page's GPU table (harness/report/sections/gpus.py): (check key, column label), in
    column order. A check of one of these keys that judged one GPU fills that GPU's cell; a key no job names is not
    a column."""
    options: tuple[JobOption, ...] = ()
    """Its own command-line options (the soak's ``--soak DURATION``), declared before pytest reads the command
    line: by harness/kinds/shipped.py for the shipped kinds, by a site's pytest_addoption for its own."""
    bounds: BoundsTable | None = None
    """Its own table of bounds in the threshold profile (harness/profile/tables.py ``BoundsTable``): a shipped
    kind's at the top level (``[interconnect]``), a site's kind's as ``[site.<name>]``; the session hands every
    job's to the loader, which checks it before any benchmark runs. None: it reads none of its own (the DDP
    matrix reads the profile's own ``[defaults]`` and ``[models.*]``)."""

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"job {self.name!r}: level {self.level!r} is not one of {', '.join(LEVELS)}")
        if not self.tests:
            raise ValueError(f"job {self.name!r} owns no test")
        if self.runner is not None and not self.section:
            raise ValueError(f"job {self.name!r} has a runner but no section: name its key in session.json")
        if self.order not in (None, "first", "last"):
            raise ValueError(f"job {self.name!r}: order {self.order!r} is not 'first', 'last' or None")
        for option in self.options:
            if option.sets_level and not option.needed:
                raise ValueError(f"job {self.name!r}: option {option.flag} sets the level {self.level}: say in its "
                                 "'needed' what that level asked for without it is refused with")
        if self.section in RESERVED_SECTIONS:
            raise ValueError(f"job {self.name!r}: section {self.section!r} is one of session.json's own keys; "
                             "choose another name")
