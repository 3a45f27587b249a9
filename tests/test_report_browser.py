"""The report in a real browser: headless Chromium loads it without errors and can screenshot it.

Slow (a browser start per page) and skipped where no ``chromium`` is installed
(Debian: ``apt-get install chromium``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.report.browser import load_in_chromium, screenshot
from harness.report.render import write_report
from test_report import _poison, _session_only, contract_copy

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {
    "h200x4": ROOT / "docs" / "data" / "2026-11-21-h200x4-acceptance",
    "cpu": ROOT / "docs" / "examples" / "cpu" / "run",
    "cpu-fail": ROOT / "docs" / "examples" / "cpu-fail" / "run",
}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("chromium") is None,
                       reason="chromium is not on PATH (Debian/Ubuntu: apt-get install chromium)"),
]


@pytest.fixture(params=sorted(EXAMPLES))
def built(request, tmp_path: Path) -> Path:
    source = EXAMPLES[request.param]
    if not source.is_dir():
        pytest.skip(f"{source.relative_to(ROOT)} is not in this checkout")
    return write_report(contract_copy(source, tmp_path / request.param))


def test_the_page_loads_without_console_errors(built: Path):
    dom, errors = load_in_chromium(built)
    assert errors == []
    assert 'id="verdict"' in dom and 'data-verdict="' in dom
    assert 'id="thresholds"' in dom  # the whole document was parsed, not a prefix


def test_a_screenshot_is_written(built: Path):
    png = built.parent / "report.png"  # saved under the run directory, beside report.html
    screenshot(built, png)
    data = png.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 10_000


@pytest.mark.parametrize("name", ["matrix1", "selftest-1-foreign_load", "path2"])
def test_pages_of_recorded_pass_fail_and_incomplete_verdicts_load_cleanly(name: str, tmp_path: Path):
    """The sessions docs/examples/h200-{pass,fail,incomplete}/ are built from (session.json only)."""
    dom, errors = load_in_chromium(write_report(_session_only(name, tmp_path)))
    assert errors == []
    assert 'data-recorded="yes"' in dom and 'id="thresholds"' in dom


def test_console_errors_are_caught(tmp_path: Path):
    """The check above can fail: a page with a script error and a console message is reported."""
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><body><div id="verdict"></div>'
                    '<script>console.error("boom"); null.f();</script></body></html>')
    _, errors = load_in_chromium(page)
    assert any("boom" in line for line in errors) and any("Uncaught TypeError" in line for line in errors)


def test_a_page_full_of_hostile_strings_still_loads_cleanly(tmp_path: Path):
    """HTML, control characters and a 100,000-character line in every input: escaped, cut, valid."""
    run = contract_copy(EXAMPLES["h200x4"], tmp_path / "hostile")
    _poison(run)
    dom, errors = load_in_chromium(write_report(run))
    assert errors == []
    assert "<script>alert(1)" not in dom  # not even as an element the parser built
    assert 'id="thresholds"' in dom
