"""``harness fleet`` and ``harness history``: argument parsing and the terminal's output.

Exit status (harness/exitcodes.py, the one table): 0 when the fleet passed (fleet) or nothing
drifted (history); 1 when a node failed, or a figure drifted; 6 when the fleet is incomplete (a
node incomplete or not signed off, an expected node without a session, an unreadable input); 4
when the input cannot be used (the message says what, where and what to do); 7 when the page or the
store could not be written.
"""

from __future__ import annotations

import argparse
import sys
from datetime import date
from pathlib import Path

from harness.exitcodes import EXIT_FAIL, EXIT_INCOMPLETE, EXIT_NOT_RECORDED, EXIT_PASS, EXIT_USAGE_ERROR
from harness.fleet.collect import CollectError, find_run_dirs, read_session
from harness.fleet.facts import SessionFacts
from harness.fleet.history import DRIFT_THRESHOLD, format_trends, gpu_history, node_history, trends_to_dict
from harness.fleet.history_page import render_history_html
from harness.fleet.outliers import MIN_RELATIVE, Z_THRESHOLD, OutlierRule
from harness.fleet.page import check_output_dir, render_json, write_outputs
from harness.fleet.session_end import STORE_ENV, store_path
from harness.fleet.compaction import compact
from harness.fleet.store import StoreError, load, write_session
from harness.fleet.store import exists as store_exists
from harness.fleet.view import build_fleet
from harness.files import OutputPathError, refuse_special_output
from harness.launch.slurm import expand_hostlist
from harness.files import write_text_atomic


class InputError(Exception):
    """Input that cannot be used: printed as one line, exit status 4."""


class NotWrittenError(Exception):
    """An output or the store could not be written: printed as one line, exit status 7."""


FLEET_HELP = "one page for many nodes: verdict per node, failing checks, outliers against the fleet median"
FLEET_DESCRIPTION = ("Build fleet.html, fleet.json and fleet.csv from many nodes' sessions: each node's verdict (its "
                     "latest session), the failing checks, and every figure against the fleet median with robust "
                     "outliers flagged (docs/fleet.md).")
HISTORY_HELP = "a node's or a GPU's figures over its sessions, drift flagged; the store's upkeep"
HISTORY_DESCRIPTION = ("Each figure of a node (--node) or of a GPU (--gpu UUID) over its sessions, compared with the "
                       "median of its earlier sign-offs; or add report directories to the store (--add), or fold the "
                       "per-session files into it (--compact). docs/fleet.md.")


def add_fleet_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("fleet", help=FLEET_HELP, description=FLEET_DESCRIPTION)
    p.add_argument("run_dirs", nargs="*", type=Path, metavar="DIR",
                   help="report directories (reports/<run-id>/) or directories holding them, up to two levels down")
    p.add_argument("--store", type=Path, metavar="PATH", help="also take the sessions of this history store")
    p.add_argument("--since", metavar="YYYY-MM-DD", help="only store sessions started on or after this date")
    p.add_argument("--expect-nodes", metavar="HOSTLIST",
                   help="the nodes that must have a session, as a Slurm hostlist (gpu[001-064]); a missing one "
                        "makes the fleet INCOMPLETE")
    p.add_argument("--output", type=Path, default=Path("reports/fleet"), metavar="DIR",
                   help="where fleet.html, fleet.json and fleet.csv go (default: reports/fleet)")
    p.add_argument("--outlier-z", type=float, default=Z_THRESHOLD, metavar="Z",
                   help=f"robust z-score from which a value is an outlier (default {Z_THRESHOLD})")
    p.add_argument("--min-deviation", type=float, default=MIN_RELATIVE, metavar="F",
                   help=f"and the least distance from the fleet median, a fraction (default {MIN_RELATIVE} = "
                        f"{MIN_RELATIVE * 100:g} %%)")
    return p


def add_history_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("history", help=HISTORY_HELP, description=HISTORY_DESCRIPTION)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--node", help="a node's host name")
    what.add_argument("--gpu", metavar="UUID", help="a GPU's UUID (GPU-...), followed across nodes")
    what.add_argument("--add", nargs="+", type=Path, metavar="DIR",
                      help="record these report directories (or directories holding them) into the store")
    what.add_argument("--compact", action="store_true", help="fold the store's per-session files into it")
    p.add_argument("run_dirs", nargs="*", type=Path, metavar="DIR",
                   help="with --node/--gpu: also read these report directories")
    p.add_argument("--store", type=Path, metavar="PATH",
                   help=f"the history store (default: ${STORE_ENV}, else reports/history.sqlite)")
    p.add_argument("--drift", type=float, default=DRIFT_THRESHOLD, metavar="F",
                   help=f"a value this fraction worse than the median of earlier sign-offs has drifted "
                        f"(default {DRIFT_THRESHOLD} = {DRIFT_THRESHOLD * 100:g} %%)")
    p.add_argument("--json", type=Path, metavar="PATH", help="also write the history as JSON")
    p.add_argument("--html", type=Path, metavar="PATH", help="also write the history as an HTML page with charts")
    return p


def gather(run_dirs: list[Path], store: Path | None, since: str | None = None) -> tuple[list[SessionFacts], list[str]]:
    """Sessions from report directories and a store, each once; unreadable inputs as problem lines."""
    sessions, problems = [], []
    try:
        found = find_run_dirs(run_dirs)
    except CollectError as exc:
        raise InputError(str(exc)) from None
    for run_dir in found:
        try:
            sessions.append(read_session(run_dir))
        except CollectError as exc:
            problems.append(str(exc))
    if store is not None:
        try:
            contents = load(store)
        except StoreError as exc:
            raise InputError(str(exc)) from None
        problems += contents.problems
        sessions += [s for s in contents.sessions if since is None or (s.started_at or s.when) >= since]
    unique = {s.identity: s for s in reversed(sessions)}  # a report directory wins over the store's copy
    return list(reversed(unique.values())), problems


def _since(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError:
        raise InputError(f"--since {text!r}: expected a date YYYY-MM-DD, e.g. --since 2026-11-01") from None


def run_fleet(ns: argparse.Namespace) -> int:
    if not ns.run_dirs and ns.store is None:
        raise InputError("nothing to read: pass report directories (e.g. reports/) and/or --store PATH")
    try:
        check_output_dir(ns.output)
    except OutputPathError as exc:
        raise InputError(str(exc)) from None
    try:
        rule = OutlierRule(z_threshold=ns.outlier_z, min_relative=ns.min_deviation)
        expected = expand_hostlist(ns.expect_nodes) if ns.expect_nodes else None
    except ValueError as exc:
        raise InputError(str(exc)) from None
    sessions, problems = gather(ns.run_dirs, ns.store, _since(ns.since))
    if not sessions and problems:
        raise InputError("no session could be read:\n  " + "\n  ".join(problems))
    view = build_fleet(sessions, problems=problems, rule=rule, expected_nodes=expected)
    try:
        written = write_outputs(view, ns.output)
    except OutputPathError as exc:
        raise InputError(str(exc)) from None
    except OSError as exc:
        raise NotWrittenError(f"cannot write {ns.output}: {exc.strerror or exc}; "
                              "pass a writable --output DIR") from None
    counts = view["counts"]
    print(f"{view['verdict']}: {view['node_count']} nodes ({counts['PASS']} passed, {counts['FAIL']} failed, "
          f"{counts['INCOMPLETE']} incomplete), {len(view['outliers'])} outliers "
          f"({view['worse_outliers']} on the worse side)")
    for line in view["reasons"] + [o["text"] + f" ({o['case_key']}, {o['figure']})" for o in view["outliers"][:10]]:
        print(f"  {line}")
    if len(view["outliers"]) > 10:
        print(f"  ... {len(view['outliers']) - 10} more outliers on the page")
    print(written["fleet.html"])
    return {"PASS": EXIT_PASS, "FAIL": EXIT_FAIL}.get(view["verdict"], EXIT_INCOMPLETE)


def run_history(ns: argparse.Namespace) -> int:
    store = ns.store or store_path(None, "reports")
    if ns.compact:
        return _compact(store)
    if ns.add:
        return _add(store, ns.add)
    if not 0 < ns.drift < 1:
        raise InputError(f"--drift {ns.drift}: expected a fraction in (0, 1), e.g. 0.03 for 3 %")
    for option, path in (("--json", ns.json), ("--html", ns.html)):
        if path is not None:
            try:
                refuse_special_output(path, option)
            except OutputPathError as exc:
                raise InputError(str(exc)) from None
    # With report directories, a store that does not exist yet is no error: they are read alone.
    sessions, problems = gather(ns.run_dirs, store if (store_exists(store) or not ns.run_dirs) else None)
    for problem in problems:
        print(f"harness history: skipped {problem}", file=sys.stderr)
    if ns.node is not None:
        trends, subject = node_history(sessions, ns.node, ns.drift), f"node {ns.node}"
        known = sorted({s.node for s in sessions})
    else:
        trends, subject = gpu_history(sessions, ns.gpu, ns.drift), f"GPU {ns.gpu}"
        known = sorted({f.gpu_uuid for s in sessions for f in s.gpu_figures if f.gpu_uuid})
    if not trends:
        shown = ", ".join(known[:20]) + (f" and {len(known) - 20} more" if len(known) > 20 else "")
        raise InputError(f"no measured figure of {subject} in {len(sessions)} sessions read; "
                         f"{'known: ' + shown if known else 'they name none'}")
    print(format_trends(subject, trends, ns.drift))
    try:
        if ns.json is not None:
            write_text_atomic(ns.json, render_json(trends_to_dict(subject, trends, ns.drift)))
        if ns.html is not None:
            write_text_atomic(ns.html, render_history_html(subject, trends, ns.drift))
    except OutputPathError as exc:
        raise InputError(str(exc)) from None
    except OSError as exc:
        raise NotWrittenError(f"cannot write {exc.filename}: {exc.strerror or exc}") from None
    return EXIT_FAIL if any(t.drifted for t in trends) else EXIT_PASS


def _compact(store: Path) -> int:
    try:
        result = compact(store)
    except StoreError as exc:
        raise NotWrittenError(str(exc)) from None
    print(f"{store}: {len(result.folded)} session files folded in, {result.added} new sessions")
    for problem in result.problems:
        print(f"  kept, unreadable: {problem}")
    return 0


def _add(store: Path, run_dirs: list[Path]) -> int:
    sessions, problems = gather(run_dirs, None)
    for session in sessions:
        try:
            print(write_session(store, session))
        except StoreError as exc:
            raise NotWrittenError(str(exc)) from None
    for problem in problems:
        print(f"harness history: not added: {problem}", file=sys.stderr)
    return EXIT_USAGE_ERROR if problems else EXIT_PASS


def main(command: str, ns: argparse.Namespace) -> int:
    try:
        return run_fleet(ns) if command == "fleet" else run_history(ns)
    except InputError as exc:
        print(f"harness {command}: {exc}", file=sys.stderr)
        return EXIT_USAGE_ERROR
    except NotWrittenError as exc:
        print(f"harness {command}: could not record: {exc}", file=sys.stderr)
        return EXIT_NOT_RECORDED
