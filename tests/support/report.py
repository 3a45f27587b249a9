"""The sign-off page of a run directory as ``harness report`` renders it: harness/report/render.py with the
shipped kinds' sections (harness/kinds/shipped.py), which the report itself does not import."""

from __future__ import annotations

from pathlib import Path

from harness.kinds.shipped import report_sections
from harness.report import render


def build_report(run_dir: Path) -> str:
    return render.build_report(run_dir, report_sections())


def write_report(run_dir: Path) -> Path:
    return render.write_report(run_dir, report_sections())


def cli_report(run_dir: str) -> int:
    return render.cli_report(run_dir, report_sections())
