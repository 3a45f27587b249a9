"""The one routine that runs a job: start torchrun, bound it (time limit, stall rule), sample the
GPUs beside it, kill every process it started, and say why it failed when it did.

The benchmark (harness/launch/benchmark.py), a launch of several cases (group.py), the all-reduce
sweep (allreduce.py) and the soak (soak.py) all run through ``run_job``; each turns the outcome
into its own result. KeyboardInterrupt and SystemExit still propagate, after the processes are
gone, because the user or the scheduler asked us to stop.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from harness.launch.cleanup import clear_run_dir, kill_run, owner_env
from harness.launch.command import die_with_launcher, launch_env
from harness.launch.failure import explain_failure, oom_kills
from harness.launch.heartbeat import Heartbeat
from harness.launch.spec import LaunchSettings
from harness.launch.stall import Stall, find_stall
from harness.rank import read_phases
from harness.results.job import Failure, Status
from harness import telemetry

STALL_CHECK_PERIOD_S = 1.0
Watch = Callable[[], float]
"""Called at every poll of a running launch; returns seconds to add to its time limit (for work it handed the
launch meanwhile), else 0."""
POLL_PERIOD_S = 0.2


@dataclass(frozen=True, kw_only=True, slots=True)
class StoppedLaunch:
    """A launch that an interrupt (Ctrl-C, SIGTERM, a Slurm time limit) stopped while it ran: no record holds
    its time, so the session's timeline names it (``stopped_since``) instead of counting it as a gap."""

    name: str
    """The launch's directory name: ``launch2-4gpu``, ``components-4gpu``."""
    elapsed_s: float


STOPPED_LAUNCHES: list[StoppedLaunch] = []
"""Every launch stopped in this process, in order; a session reads those after its start (``stopped_since``)."""


def stopped_since(count: int) -> list[StoppedLaunch]:
    """The launches stopped after the first ``count`` (what ``len(STOPPED_LAUNCHES)`` was when a session began)."""
    return STOPPED_LAUNCHES[count:]


class Sampler(Protocol):
    """What runs beside a launch: harness.telemetry's sampler, or group.CaseSamplers."""

    def start(self) -> Any: ...

    def stop(self) -> Any: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class JobOutcome:
    """How one torchrun launch ended, whatever it ran."""

    returncode: int | None
    stall: Stall | None
    """Set when the launch was killed: past its time limit, or a rank stopped making progress."""
    elapsed_s: float
    phases: dict[int, dict]
    """Each rank's last phase file, read before the processes were killed."""
    telemetry: Any = None
    """The sampler's summary, when one ran beside the launch."""
    started: float = 0.0
    """time.time() when the launch began."""
    status: Status = "ok"
    """ok when the job finished and left its result; else failed, timeout or invalid (``failure`` says why)."""
    failure: Failure | None = None

    @property
    def finished(self) -> bool:
        return self.failure is None


def stop_on_sigterm() -> None:
    """Turn SIGTERM (timeout(1), Slurm at a time limit, a CI runner cancelling) into KeyboardInterrupt,
    so the launcher's cleanup stops every process it started, as on Ctrl-C.

    SIGINT and SIGHUP (a closed terminal, a dropped ssh) get the same handler: the first signal of any
    of them raises KeyboardInterrupt, and while a launch is running it also starts a hold
    (``signals_held``), so the second signal that GNU timeout, make, Slurm or a double Ctrl-C deliver
    cannot abort the cleanup half-way. Once a stop began, later signals are ignored (a line each) until
    the process ends: the session is writing what it has, and a third SIGTERM must not cut that short
    and end the process with another status than the page says (issue 31).
    """
    if threading.current_thread() is threading.main_thread():
        _Hold.stopping = False  # a new session (pytest.main called again in one process) starts afresh
        for signum in STOP_SIGNALS:
            signal.signal(signum, _on_stop_signal)
        if not _Hold.exit_guarded:
            _Hold.exit_guarded = True
            atexit.register(_ignore_stop_signals)


def ending() -> None:
    """The session's verdict is final (written and printed): a stop signal from here on is ignored, with a
    line, instead of ending the process with another status than the one the page says."""
    _Hold.stopping = True


def _ignore_stop_signals() -> None:
    """At exit: Python puts SIGTERM back to its default while it shuts down (torch's teardown takes
    seconds), so a signal then would end the process as "killed by SIGTERM" (143) after the page said 2.
    SIG_IGN is the one handler shutdown leaves in place."""
    if threading.current_thread() is threading.main_thread():
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _Hold:
    """The state of the signal hold: the handlers to put back, and what arrived while it held."""

    saved: dict[int, Any] | None = None
    """The SIGINT/SIGTERM handlers in force before the hold; None: not holding."""
    stop_began = False
    """A signal already raised KeyboardInterrupt: later ones are ignored, not deferred."""
    deferred: int | None = None
    """The first signal that arrived during a cleanup no stop had begun: raised after the hold."""
    live_launches = 0
    """torchrun launches started and not yet cleaned up."""
    stopping = False
    """A stop signal raised KeyboardInterrupt already (or the verdict is final): the process is on its way
    out, writing what it has."""
    exit_guarded = False
    """``_ignore_stop_signals`` is registered with atexit."""


def _leave_a_hung_up_terminal() -> None:
    """After SIGHUP the terminal is gone and writing to it fails (EIO): what the session prints from here
    goes nowhere instead, so that its files are still written."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    for fd in (1, 2):
        try:
            if os.isatty(fd):
                os.dup2(devnull, fd)
        except OSError:
            pass
    os.close(devnull)


def _on_stop_signal(signum: int, frame: object) -> None:
    name = signal.Signals(signum).name
    if signum == signal.SIGHUP:
        _leave_a_hung_up_terminal()
    if _Hold.stopping and _Hold.saved is None:
        print(f"harness: {name} ignored: already ending, writing what was measured", file=sys.stderr, flush=True)
        return
    if _Hold.saved is not None:  # a cleanup is running: it must finish
        if _Hold.stop_began or _Hold.deferred is not None:
            print(f"harness: {name} ignored: already stopping, waiting for every process of the launch to exit",
                  file=sys.stderr, flush=True)
        else:
            _Hold.deferred = signum
        return
    if _Hold.live_launches:
        _begin_hold()
        _Hold.stop_began = True
    _Hold.stopping = True
    raise KeyboardInterrupt(f"signal {name}")


def _begin_hold() -> None:
    if _Hold.saved is None and threading.current_thread() is threading.main_thread():
        _Hold.saved = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
        for signum in STOP_SIGNALS:
            signal.signal(signum, _on_stop_signal)


@contextmanager
def signals_held() -> Iterator[None]:
    """Run the block (a launch's cleanup) to its end whatever SIGINT/SIGTERM arrive meanwhile.

    When a stop already began (the signal that raised KeyboardInterrupt), further signals are
    ignored with a line on stderr; otherwise the first one is remembered and raised as
    KeyboardInterrupt after the block, so a stop asked during a normal cleanup is not lost. The
    handlers in force before come back when the block ends, that is when every process is gone.
    """
    _begin_hold()
    try:
        yield
    finally:
        saved, deferred, stop_began = _Hold.saved, _Hold.deferred, _Hold.stop_began
        _Hold.saved, _Hold.deferred, _Hold.stop_began = None, None, False
        for signum, handler in (saved or {}).items():
            signal.signal(signum, handler)
        if deferred is not None and not stop_began:
            _Hold.stopping = True
            raise KeyboardInterrupt(f"signal {signal.Signals(deferred).name}")


def _wait(proc: subprocess.Popen, launch: LaunchSettings, run_dir: Path, started: float,
          timeout_s: float, heartbeat: Heartbeat | None = None, watch: Watch | None = None) -> Stall | None:
    """Until the launch exits (None), passes its time limit or stalls (the Stall that stops it);
    a progress line every heartbeat period meanwhile, and ``watch`` asked at every poll."""
    next_check = started
    while proc.poll() is None:
        if watch is not None:
            timeout_s += watch()
        now = time.time()
        if heartbeat is not None:
            heartbeat.tick(read_phases, now)
        if now >= started + timeout_s:
            return Stall(reason=f"the launch exceeded its {timeout_s:.0f} s limit")
        if now >= next_check:
            stall = find_stall(launch, read_phases(run_dir), started, now)
            if stall is not None:
                return stall
            next_check = now + STALL_CHECK_PERIOD_S
        time.sleep(POLL_PERIOD_S)
    return None


def start_process(launch: LaunchSettings, command: list[str], run_dir: Path, run_id: str,
                  extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    """torchrun started in its own session, its output in <run_dir>/torchrun.log, tagged with ``run_id`` (the
    cleanup finds every process of it by that) and killed with the thread that started it (die_with_launcher)."""
    env = {**launch_env(launch, run_id), **owner_env(run_dir), **(extra_env or {})}
    with open(run_dir / "torchrun.log", "w") as log:
        return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=die_with_launcher(os.getpid()))


def run_job(launch: LaunchSettings, command: list[str], run_dir: Path, run_id: str, *, result_file: str | None = None,
            timeout_s: float | None = None, sampler: Sampler | None = None, watch: Watch | None = None,
            started_process: subprocess.Popen | None = None) -> JobOutcome:
    """Run ``command`` (a torchrun launch) in ``run_dir`` within ``launch``'s bounds; kill all of it afterwards.

    The job finished when torchrun exited 0 within its bounds and rank 0 left ``result_file`` in
    ``run_dir`` (None: nothing to look for); otherwise the outcome's ``failure`` says why.
    ``timeout_s`` overrides ``launch.timeout_s``; ``sampler`` (default: the telemetry sampler of
    ``launch``) is started before the launch and stopped before the processes are killed. ``watch``
    is called at every poll while the launch runs (a holding launch's follow-ons: launch/group.py).
    ``started_process``: this launch's torchrun, started earlier (launch/prestart.py) and now handed its plan;
    its run directory is kept, and its bounds count from now.
    """
    if started_process is None:
        clear_run_dir(run_dir, *([result_file] if result_file else []))
        (run_dir / "command.json").write_text(json.dumps(command))
    if sampler is None:
        sampler = telemetry.sampler_for(launch.device, run_dir, enabled=launch.telemetry,
                                        period_s=launch.telemetry_period_s)
    limit_s = launch.timeout_s if timeout_s is None else timeout_s
    started = time.time()
    oom_kills_before = oom_kills()  # a rank SIGKILLed while this count grows died of host memory
    stall: Stall | None = None
    sampler.start()
    proc: subprocess.Popen | None = started_process
    try:
        _Hold.live_launches += 1  # inside the try: the finally below always takes it back
        if proc is None:
            with signals_held():  # a signal during the start is raised once ``proc`` can be killed
                proc = start_process(launch, command, run_dir, run_id)
        stall = _wait(proc, launch, run_dir, started, limit_s, Heartbeat(run_dir, run_id, started), watch)
    except BaseException:  # an interrupt: the timeline says where the time went, then it propagates
        STOPPED_LAUNCHES.append(StoppedLaunch(name=run_dir.name, elapsed_s=time.time() - started))
        raise
    finally:
        # Runs on timeout, on normal exit (stragglers) and on Ctrl-C / SIGTERM alike; no second
        # signal can cut it short (timeout(1), make and Slurm send two).
        with signals_held():
            try:
                phases = read_phases(run_dir)
                summary = sampler.stop()
                if proc is not None:
                    kill_run(proc, run_id)
            finally:
                _Hold.live_launches -= 1
    assert proc is not None  # else Popen raised, and so did this
    elapsed_s = time.time() - started
    left_result = result_file is None or (run_dir / result_file).exists()
    if stall is None and proc.returncode == 0 and left_result:
        return JobOutcome(returncode=proc.returncode, stall=None, elapsed_s=elapsed_s, phases=phases,
                          telemetry=summary, started=started)
    status, failure = explain_failure(run_dir, returncode=proc.returncode, stall=stall, elapsed_s=elapsed_s,
                                      phases=phases, oom_kills_before=oom_kills_before)
    return JobOutcome(returncode=proc.returncode, stall=stall, elapsed_s=elapsed_s, phases=phases,
                      telemetry=summary, started=started, status=status, failure=failure)
