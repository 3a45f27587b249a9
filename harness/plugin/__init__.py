"""The pytest plugin: turns a threshold profile into parametrized acceptance tests and runs them.

Registered through the ``pytest11`` entry point, so it is loaded in every pytest session, but it
stays inert unless the session is an acceptance session: ``harness_acceptance = true`` in the
ini file (acceptance/pytest.ini sets it). Then, before any test runs, it reads the options once
(options.py), validates every threshold file, detects the hardware, picks the profile and makes
``reports/<run-id>/`` (session.py); any problem there is one clear error and no benchmark starts.

This module holds only the hooks and the ``harness`` fixture; the session lives in
``config.stash``. The rest of the plugin, one concept per module: options, context (what the session
knows from its start), cases (what the kinds' parameters share), specs (what is launched), results (what a
test hands to the report), outputs (report.json, junit.xml, session.json, report.html), rundir, provenance.
Every kind's runner and parameters are reached through its ``Job`` (harness/kinds/: the node shape, GPU state,
components, interconnect, DDP scaling and soak).
"""

from __future__ import annotations

import pytest

from harness.launch import heartbeat, prestart, supervise
from harness.launch.supervise import stop_on_sigterm
from harness.plugin import hookspecs, levels
from harness.plugin.cases import NOT_AN_ACCEPTANCE_SESSION
from harness.plugin.fixture import HarnessTest
from harness.plugin.options import (add_options, add_short_options, ini_declares_acceptance, parse_options,
                                    refuse_cache_options)
from harness.plugin.outcomes import OUTCOMES_KEY, SessionOutcomes
from harness.plugin.outputs import route_reports, write_session_outputs
from harness.plugin.progress import SessionProgress, write_verdict_lines
from harness.plugin.session import SESSION_KEY, start_session
from harness import definitions
from harness.profile.stack import compare_stack


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    add_options(parser)
    levels.register_shipped_kinds(pluginmanager)  # the kinds' own options (--soak), declared as it registers
    if ini_declares_acceptance(parser, pluginmanager):
        add_short_options(parser)


def _active(config: pytest.Config) -> bool:
    """An acceptance session: the ini says so, or a loaded conftest declares ``harness_acceptance = True``.

    The conftest route keeps ``pytest acceptance --harness-thresholds-dir DIR`` working when pytest
    picks a rootdir (and so an ini file) above acceptance/ because of the extra path argument.
    """
    if config.getini("harness_acceptance"):
        return True
    return any(getattr(plugin, "harness_acceptance", False) is True for plugin in config.pluginmanager.get_plugins())


INFORMATION_OPTIONS = ("help", "version", "markers", "showfixtures", "show_fixtures_per_test")
"""pytest options after which no test runs and only pytest's own information is printed."""


def _shows_information_only(config: pytest.Config) -> bool:
    """``--help``, ``--markers``, ...: no session, so no threshold check can fail them and no directory is made."""
    return any(getattr(config.option, name, False) for name in INFORMATION_OPTIONS)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "weak_scaling: a weak-scaling acceptance case (per-GPU batch fixed)")
    config.addinivalue_line("markers", "strong_scaling: a strong-scaling acceptance case (global batch fixed)")
    if not _active(config) or hasattr(config, "workerinput") or _shows_information_only(config):
        return
    refuse_cache_options(config)
    jobs = levels.gather_jobs(config)  # a site's bad job is refused before anything starts
    session = start_session(config, parse_options(config, jobs), jobs)
    config.stash[SESSION_KEY] = session
    if not session.collect_only:
        outcomes = SessionOutcomes(harness_session=session)
        config.stash[OUTCOMES_KEY] = outcomes
        config.pluginmanager.register(outcomes, "harness-outcomes")
        route_reports(config, session, outcomes)
        progress = SessionProgress(config=config, results=session.results)
        config.pluginmanager.register(progress, "harness-progress")
        for runner in session.runners.values():
            runner.connect(progress.say)
        heartbeat.SINK = progress.say  # a line per launch every 20 s, through pytest's terminal
        session.gpu_state.start()
    # Slurm sends SIGTERM at the time limit: make it an interrupt, so the launcher kills the
    # process groups and pytest still writes its reports.
    stop_on_sigterm()


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    session = config.stash.get(SESSION_KEY, None)
    if session is None:
        return None
    ctx = session.ctx
    hw = ctx.hardware
    what = f"{hw.gpu_count} x {hw.gpu_name}" if hw.device == "cuda" else f"CPU ({ctx.available_gpus} cores)"
    if ctx.allocation is not None:
        alloc = ctx.allocation
        what += f"; Slurm job {alloc.job_id} on {alloc.node_count} node(s): {', '.join(alloc.nodes)}"
    stack = compare_stack(ctx.profile.stack, hw)
    unjudged = [entry["mismatch"] for entry in definitions.compare(ctx.profile.definitions).values()
                if entry["mismatch"]]
    return [f"harness: profile {ctx.profile.name} ({ctx.profile.path}) on {what}",
            *([f"harness: {stack.describe()}"] if stack is not None else []),
            *(f"harness: NOT JUDGED: {why}" for why in unjudged),
            "harness: --collect-only, no run directory made" if session.collect_only
            else f"harness: reports in {ctx.run_dir}",
            *(f"harness: stopped a process an earlier, killed session left: {orphan.describe()}"
              for orphan in ctx.orphans_stopped),
            *(f"harness: OVERRIDE {override.describe()}" for override in ctx.overrides),
            *(f"harness: warning: {warning}" for warning in ctx.start_warnings)]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every kind's fixtures are its job's to declare (``Job.params``): the plugin names none of them."""
    session = metafunc.config.stash.get(SESSION_KEY, None)
    not_acceptance = [pytest.param(None, marks=pytest.mark.skip(reason=NOT_AN_ACCEPTANCE_SESSION))]
    for job in levels.session_jobs(metafunc.config):
        for fixture, make in job.params.items():
            if fixture in metafunc.fixturenames:
                metafunc.parametrize(fixture, not_acceptance if session is None else make(session))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--level`` deselects the tests above the session's run level (harness/plugin/levels.py); then each job's
    tests where its ``order`` puts them, a stable sort: the node shape first (a missing GPU is the first thing a
    sign-off says), GPU state last (it judges the end of the session, after every benchmark)."""
    harness_session = config.stash.get(SESSION_KEY, None)
    if harness_session is not None:
        levels.select_level(config, items, harness_session.ctx.options.level)
        levels.order_by_jobs(items, harness_session.jobs)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Tell each kind's runner what will run, so that its launches start early (harness/launch/prestart.py): the
    all-reduce's and the training's start-ups run while the component launch measures."""
    harness_session = session.config.stash.get(SESSION_KEY, None)
    if harness_session is not None and not session.config.option.collectonly:
        for runner in harness_session.runners.values():
            runner.start_early(session.items)


@pytest.fixture
def harness(request: pytest.FixtureRequest) -> HarnessTest:
    session = request.config.stash.get(SESSION_KEY, None)
    if session is None:
        pytest.skip(NOT_AN_ACCEPTANCE_SESSION)
    return HarnessTest(session, request.node)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """After pytest-json-report saved report.json: session.json, then the HTML sign-off report.

    Runs on a normal end, on failures and on an interrupt (Ctrl-C, or SIGTERM from Slurm's time
    limit), so a cut-short session still leaves a report, marked INCOMPLETE; pytest then exits
    with the session verdict's exit code.
    """
    harness_session = session.config.stash.get(SESSION_KEY, None)
    outcomes = session.config.stash.get(OUTCOMES_KEY, None)
    prestart.stop_all()  # a launch started early that no test took (deselected, or the session stopped first)
    if harness_session is not None and outcomes is not None:
        harness_session.gpu_state.stop()
        write_session_outputs(session, harness_session, exitstatus, outcomes.verdict())
        # pytest exits with this: 0 only for PASS (docs/verdicts.md has the table).
        session.exitstatus = outcomes.verdict().exit_code


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """The session verdict as the terminal's last lines, after pytest's own summary."""
    heartbeat.SINK = heartbeat.to_stderr
    outcomes = config.stash.get(OUTCOMES_KEY, None)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if outcomes is not None and outcomes.session is not None and reporter is not None:
        write_verdict_lines(reporter, outcomes.verdict())
    if outcomes is not None:
        supervise.ending()  # the exit status is the verdict's now: no late signal may change it
