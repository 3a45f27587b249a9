"""The session verdict: every test's outcome × what the profile requires of this node → PASS, FAIL or
INCOMPLETE, its scope, its exit code and its failures grouped by cause. Pure: no pytest, no files.

The rules (docs/verdicts.md), in order:

1. **FAIL** when any check failed or any test failed or errored: a failure found is final, also in
   an interrupted or narrowed run.
2. **INCOMPLETE** when a test that had to run did not: a case the profile requires of this node
   (harness/jobs/registry.py ``required_tests``) skipped (e.g. for missing GPUs), interrupted, never started or never
   collected; a case the user asked for that the node cannot run (``--gpus 8`` on fewer); or
   nothing at all was judged. Never PASS.
3. **PASS** otherwise. Its scope says what it covers: ``full`` when every required case ran,
   ``partial: N of M profile cases`` when the user narrowed the run (``--models``, ``-k``, node
   ids, ...), which is never a node sign-off. On the cpu profile every verdict line says it is a
   harness self-check, never a GPU sign-off.

The plugin (harness/plugin/outcomes.py) gathers the inputs; the terminal, report.json,
session.json, junit.xml, report.html and the exit code all show the ``SessionVerdict`` made here.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Literal, Sequence

from harness.checks.shapes import UNMEASURED_SHAPE_HINT, is_unmeasured
from harness.exitcodes import (EXIT_FAIL, EXIT_INCOMPLETE, EXIT_INTERNAL_ERROR, EXIT_INTERRUPTED, EXIT_NO_TESTS,
                               EXIT_PASS)
from harness.jobs.job import Job
from harness.jobs.registry import job_of
from harness.results.location import Location, locations_of

Verdict = Literal["PASS", "FAIL", "INCOMPLETE"]
Outcome = Literal["passed", "failed", "error", "skipped", "interrupted", "not run"]
RAN = ("passed", "failed", "error")

CPU_SELF_CHECK = "harness self-check on CPU — not a GPU sign-off"
NOT_A_SIGN_OFF = "not a node sign-off"
CALIBRATION_RUN = ("a calibration run (--harness-calibration): first measurements for harness calibrate-fit, "
                   "not a node sign-off")

DIRECT_CAUSES: tuple[tuple[str, ...], ...] = (
    ("foreign_processes",),
    ("xid_events",),
    ("gpu_count", "remote_gpu_count", "node_shape"),
    ("power_limit", "clocks", "ecc_mode", "retired_pages", "remapped_rows", "ecc_uncorrected", "nvlink_errors",
     "remote_gpu_model"),
    ("throttling",),
    ("ecc_errors",),
    ("straggler_ratio", "gpu_uniformity"),
)
"""Check keys that name a cause, most direct first: what an operator acts on (the foreign process, the
XID, the missing GPU, the GPU's state, the straggler). They head the session's causes."""
SYMPTOMS = ("throughput_per_gpu", "weak_efficiency", "strong_efficiency", "gpu_utilization",
            "power_fraction_of_limit", "step_time_cv", "allreduce_busbw")
"""Check keys that show a cost, not its cause: they follow every other cause. Under DDP (every rank waits
for the slowest) they are put on the GPU a direct cause of the same case names, else on the node, never
on the GPU a check happened to list first."""
HEADLINE_CAUSES = 3
"""Causes the headline shows at least; every direct cause is shown, however many."""


@dataclass(frozen=True, kw_only=True)
class SelectedTest:
    """What one selected test did, as the plugin saw it."""

    name: str
    """pytest's name of the test: ``test_weak_scaling[resnet50-bf16-4gpu]``."""
    outcome: Outcome
    must_run: bool = False
    """Required of this node, or asked for by the user beyond what the node has: a skip is not a pass."""
    checks: tuple[dict, ...] = ()
    """The checks of its CaseResult/CheckedResult (``Check.to_dict()``)."""
    synchronised: bool = False
    """A DDP run: every rank waits for the slowest at each step, so a per-GPU symptom does not say which
    GPU is at fault."""
    reason: str = ""
    """Why it was skipped, did not run, or failed without a failed check (first line)."""


@dataclass(frozen=True, kw_only=True)
class SessionFacts:
    """What the session knows beside the tests: the requirement, how it was narrowed, how it ended."""

    required: tuple[str, ...]
    """``required_tests`` of this node (harness/jobs/registry.py)."""
    jobs: tuple[Job, ...]
    """The session's kinds of job (harness/kinds/shipped.py's and a site's): which tests the matrix options
    narrow, and what to say of a required test that is missing."""
    collected: frozenset[str] = frozenset()
    """Every test name collected before the user's deselection (-k, -m, --deselect)."""
    partial_collection: bool = False
    """Node ids or single files were named: tests outside them were never collected, so absence says nothing."""
    option_narrowing: tuple[str, ...] = ()
    """The matrix options given, as typed: ``--models tiny_bert``."""
    selection_narrowing: tuple[str, ...] = ()
    """Selections of tests: ``-k weak``, ``-m ...``, ``--deselect ...``, node ids or single files."""
    cpu: bool = False
    """The cpu profile: a self-check of the harness, never a GPU sign-off."""
    interrupted: bool = False
    pytest_exit: int = 0
    """pytest's own exit status, before the verdict replaces it."""
    overrides: tuple[dict, ...] = ()
    """Environment variables that change results ({"name", "value", "effect"}) (harness/results/overrides.py)."""
    level: str = "standard"
    """The run level (harness/jobs/job.py ``LEVELS``): quick checks the node's health without the DDP matrix,
    never a sign-off."""
    calibration: bool = False
    """--harness-calibration: figures for calibrate-fit (first measurements, no re-measure), never a sign-off."""


@dataclass(frozen=True, kw_only=True)
class Cause:
    """Failures of one check key, and where they were seen."""

    key: str
    count: int
    where: tuple[str, ...]
    """The named GPUs, pids, XIDs, links or ranks, each with how often; empty when no check names one
    (the node as a whole)."""
    tests: tuple[str, ...]
    locations: tuple[Location, ...] = ()
    """The places of ``where``, as data, in its order."""

    def text(self) -> str:
        """``throughput_per_gpu ×3, all on GPU 2 (UUID GPU-…)``."""
        if not self.where:
            return f"{self.key} ×{self.count} ({', '.join(self.tests[:3])}{', …' if len(self.tests) > 3 else ''})"
        if len(self.where) == 1:
            entity = self.where[0].rsplit(" ×", 1)[0]
            return f"{self.key} ×{self.count}, {'all ' if self.count > 1 else ''}on {entity}"
        return f"{self.key} ×{self.count}, on {', '.join(self.where)}"

    def to_dict(self) -> dict:
        return {"key": self.key, "count": self.count, "where": list(self.where), "tests": list(self.tests),
                "locations": [location.to_dict() for location in self.locations], "text": self.text()}


@dataclass(frozen=True, kw_only=True)
class SessionVerdict:
    verdict: Verdict
    scope: str
    """``full`` or ``partial: N of M profile cases``."""
    exit_code: int
    headline: str
    """The one line shown wherever the verdict appears."""
    counts: dict[str, int]
    required_total: int
    required_selected: int
    sign_off: bool
    """PASS over the full scope on a GPU profile: the only verdict that signs a node off."""
    cpu_self_check: bool
    causes: tuple[Cause, ...] = ()
    not_run: tuple[dict, ...] = ()
    """Tests that had to run and did not: {"name", "outcome", "reason"}."""
    narrowing: tuple[str, ...] = ()
    overrides: tuple[dict, ...] = ()
    level: str = "standard"

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "scope": self.scope, "exit_code": self.exit_code,
                "headline": self.headline, "counts": dict(self.counts), "required_total": self.required_total,
                "required_selected": self.required_selected, "sign_off": self.sign_off,
                "cpu_self_check": self.cpu_self_check, "causes": [c.to_dict() for c in self.causes],
                "not_run": [dict(n) for n in self.not_run], "narrowing": list(self.narrowing),
                "overrides": [dict(o) for o in self.overrides], "level": self.level}


def judge_session(tests: list[SelectedTest], facts: SessionFacts) -> SessionVerdict:
    """The session's verdict from every selected test's outcome and what the node had to run."""
    selected = {t.name for t in tests}
    narrowed = bool(facts.option_narrowing or facts.selection_narrowing)
    missing = [name for name in facts.required if name not in selected and not _narrowed_away(name, facts)]
    not_run = [{"name": t.name, "outcome": t.outcome, "reason": t.reason or _default_reason(t.outcome)}
               for t in tests if (t.must_run or t.name in facts.required) and t.outcome not in RAN]
    not_run += [{"name": name, "outcome": "not run",
                 "reason": "not collected: the suite has no such test for this node" + _missing_hint(name, facts.jobs)}
                for name in missing]
    causes = group_causes(tests)
    counts = {outcome: sum(1 for t in tests if t.outcome == outcome)
              for outcome in ("passed", "failed", "error", "skipped", "interrupted", "not run")}
    counts["not run"] += len(missing)
    judged = any(t.outcome in RAN for t in tests)
    required_selected = sum(1 for name in facts.required if name in selected)
    full = required_selected == len(facts.required) or not narrowed
    scope = "full" if full else f"partial: {required_selected} of {len(facts.required)} profile cases"
    if causes or counts["failed"] or counts["error"]:
        verdict: Verdict = "FAIL"
    elif not_run or not judged or facts.interrupted:
        verdict = "INCOMPLETE"
    else:
        verdict = "PASS"
    headline = _headline(verdict, scope, causes, not_run, judged, facts)
    return SessionVerdict(
        verdict=verdict, scope=scope, exit_code=exit_code(verdict, facts), headline=headline, counts=counts,
        required_total=len(facts.required), required_selected=required_selected,
        sign_off=verdict == "PASS" and full and not facts.cpu and facts.level != "quick" and not facts.calibration,
        cpu_self_check=facts.cpu,
        causes=tuple(causes), not_run=tuple(not_run), narrowing=facts.option_narrowing + facts.selection_narrowing,
        overrides=facts.overrides, level=facts.level)


def unjudged(error: str) -> SessionVerdict:
    """The verdict when judging itself failed (a harness bug): INCOMPLETE with pytest's internal-error code."""
    return SessionVerdict(verdict="INCOMPLETE", scope="not known", exit_code=EXIT_INTERNAL_ERROR,
                          headline=f"INCOMPLETE — the session verdict could not be made ({error}); see report.json",
                          counts={}, required_total=0, required_selected=0, sign_off=False, cpu_self_check=False)


def exit_code(verdict: Verdict, facts: SessionFacts) -> int:
    """0 only for PASS; 1 FAIL; INCOMPLETE keeps pytest's 2/3/5 where they say why, else 6."""
    if verdict == "PASS":
        return EXIT_PASS
    if verdict == "FAIL":
        return EXIT_FAIL
    if facts.interrupted or facts.pytest_exit == EXIT_INTERRUPTED:
        return EXIT_INTERRUPTED
    if facts.pytest_exit in (EXIT_INTERNAL_ERROR, EXIT_NO_TESTS):
        return facts.pytest_exit
    return EXIT_INCOMPLETE


def _narrowed_away(name: str, facts: SessionFacts) -> bool:
    """Whether the user's narrowing, not the node, kept a required test out of the session."""
    if name in facts.collected or facts.partial_collection:
        return True  # deselected by -k, -m or --deselect; or outside the node ids and files named
    job = job_of(name, facts.jobs)
    return bool(facts.option_narrowing) and job is not None and job.narrowed_by_matrix


def _missing_hint(name: str, jobs: tuple[Job, ...]) -> str:
    job = job_of(name, jobs)
    return job.missing_hint if job is not None else ""


def _default_reason(outcome: str) -> str:
    return {"interrupted": "interrupted: the session stopped while it ran",
            "not run": "never started: the session stopped before it",
            "skipped": "skipped"}.get(outcome, outcome)


def directness(key: str) -> int:
    """0 for the most direct cause (a foreign process); every symptom ranks after every other key."""
    for rank, keys in enumerate(DIRECT_CAUSES):
        if key in keys:
            return rank
    return len(DIRECT_CAUSES) + (1 if key in SYMPTOMS else 0)


def is_direct(key: str) -> bool:
    return directness(key) < len(DIRECT_CAUSES)


def group_causes(tests: list[SelectedTest]) -> list[Cause]:
    """Failed checks grouped by key, each naming where it was seen (its checks' locations), the most
    direct causes first; a failed test with no failed check (an error, a crash before its checks) is
    its own cause, ``test_failed`` / ``test_error``."""
    by_key: dict[str, list[tuple[str, tuple[Location, ...]]]] = {}
    for test in tests:
        failed = [c for c in test.checks if isinstance(c, dict) and c.get("passed") is False]
        blamed = _gpus_blamed(failed)
        for check in failed:
            key = str(check.get("key") or "unnamed_check")
            by_key.setdefault(key, []).append((test.name, _attributed(key, locations_of(check), blamed,
                                                                      test.synchronised)))
        if not failed and test.outcome in ("failed", "error"):
            by_key.setdefault("test_error" if test.outcome == "error" else "test_failed", []).append((test.name, ()))
    causes = []
    for key, seen in by_key.items():
        counted = Counter(location for _, locations in seen for location in _shown(locations))
        causes.append(Cause(key=key, count=len(seen), tests=tuple(dict.fromkeys(name for name, _ in seen)),
                            where=tuple(f"{location.text()} ×{n}" for location, n in counted.items()),
                            locations=tuple(counted)))
    return sorted(causes, key=lambda c: (directness(c.key), -c.count))


def _shown(locations: Iterable[Location]) -> list[Location]:
    """The places a cause is put on: those blamed (a straggler's fastest GPU is named for comparison)."""
    located = list(locations)
    return [location for location in located if location.blamed] or located


def _gpus_blamed(failed: list[dict]) -> tuple[Location, ...]:
    """The GPUs the direct causes among one test's failed checks name."""
    gpus = (location.gpu() for check in failed if is_direct(str(check.get("key") or ""))
            for location in _shown(locations_of(check)))
    return tuple(dict.fromkeys(gpu for gpu in gpus if gpu is not None))


def _attributed(key: str, own: tuple[Location, ...], blamed: tuple[Location, ...],
                synchronised: bool) -> tuple[Location, ...]:
    """Where a failure is put: under DDP a symptom is on the GPUs a direct cause of the same test names,
    else on the node (no place: every rank's figures wait for the slowest); in a run where each GPU works
    alone, and for every other key, where the check says."""
    if key not in SYMPTOMS or not synchronised:
        return own
    return blamed


def _headline(verdict: Verdict, scope: str, causes: list[Cause], not_run: list[dict], judged: bool,
              facts: SessionFacts) -> str:
    count = len(facts.required)
    parts = [scope if scope != "full" else f"full: {count} profile case{'' if count == 1 else 's'} of this node"]
    if facts.level != "standard":
        parts[0] += f" at level {facts.level}"
    if verdict == "FAIL":
        told = max(HEADLINE_CAUSES, sum(1 for c in causes if is_direct(c.key)))
        # The causes past the first few by key only: an operator sees every check that failed, the report the rest.
        rest = causes[told:]
        parts.append("; ".join(c.text() for c in causes[:told]) + (
            f"; {len(rest)} more cause{'' if len(rest) == 1 else 's'}: {', '.join(c.key for c in rest)}"
            if rest else ""))
    elif verdict == "INCOMPLETE":
        if not_run:
            parts.append(f"{len(not_run)} that had to run did not: {_not_run_by_reason(not_run)}")
            if all(is_unmeasured(str(n["reason"])) for n in not_run):
                parts.append(UNMEASURED_SHAPE_HINT)
        elif not judged:
            parts.append("no test was judged")
        else:
            parts.append("the session was interrupted")
    if scope != "full" and verdict != "FAIL":
        parts.append(NOT_A_SIGN_OFF)
    elif facts.level == "quick" and verdict != "FAIL":
        parts.append(f"a health check without the DDP matrix, {NOT_A_SIGN_OFF}")
    if facts.calibration:
        parts.append(CALIBRATION_RUN)
    if facts.cpu:
        parts.append(CPU_SELF_CHECK)
    if facts.overrides:
        parts.append("overrides: " + ", ".join(f"{o.get('name')}={o.get('value')}" for o in facts.overrides))
    return f"{verdict} — " + "; ".join(p for p in parts if p)


def not_run_by_reason(not_run: Sequence[dict]) -> dict[str, list[str]]:
    """The names of the tests that did not run, by the reason they did not, in order of first appearance: the
    headline and the terminal's "did not run" lines (harness/plugin/progress.py) say each reason once."""
    by_reason: dict[str, list[str]] = {}
    for entry in not_run:
        by_reason.setdefault(str(entry["reason"]), []).append(str(entry["name"]))
    return by_reason


def _not_run_by_reason(not_run: Sequence[dict], reasons_shown: int = 2) -> str:
    """The tests that did not run, one entry per reason (its first test, how many more, the reason once): a
    calibration session on a 4 x H200 node repeated one 90-character reason for each test the headline named."""
    by_reason = not_run_by_reason(not_run)
    shown = [f"{names[0]}{f' and {len(names) - 1} more' if len(names) > 1 else ''} ({reason})"
             for reason, names in list(by_reason.items())[:reasons_shown]]
    return ", ".join(shown) + (", …" if len(by_reason) > reasons_shown else "")


def from_dict(data: Any) -> dict | None:
    """A stored verdict (session.json ``session_verdict``) as a dict with a known ``verdict``; None when
    absent or damaged (shown as "not recorded")."""
    if not isinstance(data, dict) or data.get("verdict") not in ("PASS", "FAIL", "INCOMPLETE"):
        return None
    return data

