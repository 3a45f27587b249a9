"""The report in a real browser: headless Chromium loads it without errors and can screenshot it.

Slow (a browser start per page) and skipped where no ``chromium`` is installed
(Debian: ``apt-get install chromium``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.report.browser import load_in_chromium, screenshot
from support.report import write_report
from test_report import _poison, _session_only, contract_copy
from test_report_timeline import cpu_run  # noqa: F401 - the fixture: a session that recorded its timeline

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


# --- a phone, a desktop and a printer ---------------------------------------------------------

LAYOUT_PROBE = """<!DOCTYPE html><html><body style="margin:0"><iframe id="f" style="width:%dpx;height:900px;border:0"
srcdoc="%s"></iframe><script>document.getElementById("f").addEventListener("load", function () {
  var w = this.contentWindow, d = this.contentDocument, wide = [];
  function scrolled(e) { return e && e.parentElement && e.parentElement.closest(".scroll"); }
  d.querySelectorAll("body *").forEach(function (e) {
    if (e.getBoundingClientRect().right > w.innerWidth + 2 && !scrolled(e)) wide.push(e.tagName + "." + e.className);
  });
  var walk = d.createTreeWalker(d.body, NodeFilter.SHOW_TEXT), node;
  while ((node = walk.nextNode())) {
    var range = d.createRange(); range.selectNodeContents(node); var r = range.getBoundingClientRect();
    if (r.width > 0 && r.right > w.innerWidth + 2 && !node.parentElement.closest(".scroll"))
      wide.push("text: " + node.textContent.slice(0, 40));
  }
  var th = d.querySelector("#signoff table.kv th"), td = d.querySelector("#signoff table.kv td");
  var out = d.createElement("pre"); out.id = "probe";
  out.textContent = JSON.stringify({width: w.innerWidth, wide: wide.slice(0, 10),
    th: th.getBoundingClientRect(), td: td.getBoundingClientRect()});
  document.body.appendChild(out);
});</script></body></html>"""


def layout_at(report: Path, width: int) -> dict:
    """The report laid out in a viewport ``width`` px wide (an iframe: Chromium's window is never
    narrower than 500 px): what overflows it outside a scrolling box, and the record's first row."""
    import html
    import json
    import re

    probe = report.with_name(f"probe-{width}.html")
    probe.write_text(LAYOUT_PROBE % (width, html.escape(report.read_text(), quote=True)))
    dom, errors = load_in_chromium(probe)
    assert errors == []
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found, "the probe did not run"
    return json.loads(html.unescape(found.group(1)))


def test_on_a_phone_the_record_stacks_and_nothing_runs_off_the_screen(built: Path):
    layout = layout_at(built, 390)
    assert layout["width"] == 390
    assert layout["wide"] == [], f"wider than the phone, outside a scrolling box: {layout['wide']}"
    th, td = layout["th"], layout["td"]
    assert td["width"] >= 300, "the record's values squeezed (one character a line)"
    assert td["top"] >= th["bottom"] - 1, "a record row is two lines: its label above its value"


def test_on_a_desktop_the_record_is_label_beside_value(built: Path):
    layout = layout_at(built, 1400)
    th, td = layout["th"], layout["td"]
    assert abs(td["top"] - th["top"]) < 2 and td["left"] >= th["right"] - 1
    assert layout["wide"] == []


def test_printed_the_summary_is_one_page_and_the_details_follow(built: Path):
    """Page 1: the verdict with its causes, the sign-off record and the matrix; the details from page 2."""
    from harness.report.browser import print_to_pdf

    summary = built.with_name("summary-only.html")
    summary.write_text(built.read_text().replace(
        "</head>", "<style>@media print { .details-start, .details-start ~ *, footer { display: none !important; } }"
                   "</style></head>"))
    assert print_to_pdf(summary, built.with_name("summary.pdf")) == 1
    whole = print_to_pdf(built, built.with_name("report.pdf"))
    assert whole >= 2
    text = built.read_text()
    order = [text.index(marker) for marker in ('id="verdict"', 'id="signoff"', 'id="matrix"', 'class="details-start"',
                                                'id="cases"')]
    assert order == sorted(order)


def test_a_page_with_where_the_time_went_loads_cleanly_and_fits_a_phone(cpu_run: Path):  # noqa: F811
    report = write_report(cpu_run)
    dom, errors = load_in_chromium(report)
    assert errors == [] and 'id="time"' in dom
    layout = layout_at(report, 390)
    assert layout["wide"] == [], f"wider than the phone, outside a scrolling box: {layout['wide']}"
