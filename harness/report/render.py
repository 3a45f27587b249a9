"""The sign-off report: one self-contained HTML page, rebuilt from a run directory's saved JSON.

The pipeline is ``inputs`` (read and clean the run directory) → ``view`` (one view dict, built by
the ``sections`` from what the session recorded) → ``templates/report.html.j2``, rendered once
here with autoescape on. ``harness report <run-dir>`` (``cli_report``) rebuilds a page at any time. The kinds'
sections (harness/report/sections/kind.py) are handed in by the caller: the report imports no kind.
"""

from __future__ import annotations

import sys
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from harness.files import write_text_atomic
from harness.report.inputs import ReportError, load_inputs
from harness.report.sections.kind import KindReports
from harness.report.view import build_view

TEMPLATE = "report.html.j2"


def _environment() -> Environment:
    return Environment(loader=PackageLoader("harness.report", "templates"),
                       autoescape=select_autoescape(["html", "j2"], default_for_string=True, default=True),
                       undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def render(view: dict) -> str:
    return _environment().get_template(TEMPLATE).render(report=view)


def build_report(run_dir: Path, kinds: KindReports) -> str:
    """The report of ``run_dir`` as HTML text, from its saved JSON alone. Raises ReportError."""
    return render(build_view(load_inputs(Path(run_dir)), kinds))


def write_report(run_dir: Path, kinds: KindReports) -> Path:
    """Build and write ``run_dir/report.html`` (atomically); returns its path. Raises ReportError."""
    run_dir = Path(run_dir)
    html = build_report(run_dir, kinds)
    target = run_dir / "report.html"
    write_text_atomic(target, html)  # the run directory's one mode (files.default_file_mode)
    return target


def cli_report(run_dir: str, kinds: KindReports) -> int:
    """``harness report <run-dir>``: rebuild report.html from the saved JSON, print its path."""
    from harness.exitcodes import EXIT_INTERNAL_ERROR, EXIT_NOT_RECORDED, EXIT_USAGE_ERROR

    try:
        path = write_report(Path(run_dir), kinds)
    except ReportError as exc:
        print(f"harness report: {exc}", file=sys.stderr)
        return EXIT_USAGE_ERROR
    except OSError as exc:
        print(f"harness report: cannot write {Path(run_dir) / 'report.html'}: {exc.strerror or exc}; "
              "make the run directory writable or copy it somewhere writable", file=sys.stderr)
        return EXIT_NOT_RECORDED
    except Exception as exc:  # a bug here must not bury the run's saved JSON under a traceback
        print(f"harness report: could not build the report of {run_dir}: {type(exc).__name__}: {exc}; the JSON "
              "files are intact; please report this with the run directory", file=sys.stderr)
        return EXIT_INTERNAL_ERROR
    print(path)
    return 0
