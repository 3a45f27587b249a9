"""The example pages in docs/examples/ are what today's report code renders from their saved sessions: the README
and docs/report.md show them as the product's page, so a template change that leaves them stale shows users a page
the harness no longer draws (found 2026-11-28: seven pages several template changes old). Rebuild with
``.venv/bin/python docs/examples/build.py``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "docs" / "examples" / "build.py"


def _build_module():
    spec = importlib.util.spec_from_file_location("examples_build", BUILD)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BUILD_MODULE = _build_module()


@pytest.mark.parametrize("name", sorted(BUILD_MODULE.EXAMPLES))
def test_each_example_page_is_what_the_report_code_renders_today(name):
    committed = (ROOT / "docs" / "examples" / name / "report.html").read_text(encoding="utf-8")
    assert BUILD_MODULE.report_html(BUILD_MODULE.EXAMPLES[name]) == committed, (
        f"docs/examples/{name}/report.html is stale: rebuild with .venv/bin/python docs/examples/build.py")
