"""Rebuild the example reports and their screenshots in docs/examples/.

    .venv/bin/python docs/examples/build.py            # needs chromium on PATH for the PNGs

Each example is built from saved JSON only, by the harness's own `build_report`:

- h200-pass, h200-fail, h200-incomplete: three sessions on one H200 (docs/data/2026-11-24-h200x1-verdicts/,
  summary-a.txt has their commands and output): the default matrix, the selftest's foreign-load
  row, and `--gpus 2` on the 1-GPU node. Each recorded its session verdict; the dataset kept their
  session.json only (gzipped), which is unpacked into a temporary run directory here.
- h200x4, cpu, cpu-fail: sessions of 2026-11-21, before the session verdict and the case identities
  were recorded: their pages say "not recorded" for both. The 4 x H200 acceptance run in
  docs/data/, and the two CPU runs kept under docs/examples/<name>/run/ (report.json, session.json,
  junit.xml, runs/; the rank logs are left out: the records carry the log tails the report shows).
"""

from __future__ import annotations

import gzip
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from harness.report.browser import screenshot  # noqa: E402
from harness.kinds.shipped import report_sections  # noqa: E402
from harness.report.render import build_report  # noqa: E402

DATA = ROOT / "docs" / "data"
VERDICTS = DATA / "2026-11-24-h200x1-verdicts"
EXAMPLES = {
    "h200-pass": VERDICTS / "matrix1-session.json.gz",
    "h200-fail": VERDICTS / "selftest-1-foreign_load-session.json.gz",
    "h200-incomplete": VERDICTS / "path2-session.json.gz",
    "h200x4": DATA / "2026-11-21-h200x4-acceptance",
    "cpu": ROOT / "docs" / "examples" / "cpu" / "run",
    "cpu-fail": ROOT / "docs" / "examples" / "cpu-fail" / "run",
}
SCREENSHOT_HEIGHT = {"h200-pass": 1900, "h200-fail": 1250, "h200-incomplete": 760}
"""The examples docs/report.md and README.md show as pictures (the others are linked only)."""
SCROLLBAR_PX = 15  # headless Chromium draws the page's scrollbar into the screenshot


def report_html(source: Path) -> str:
    """The page of a run directory, or of a gzipped session.json (unpacked into a run directory of its own)."""
    if source.is_dir():
        return build_report(source, report_sections())
    with tempfile.TemporaryDirectory(prefix="harness-example-") as tmp:
        run_dir = Path(tmp) / source.name.removesuffix("-session.json.gz")
        run_dir.mkdir()
        (run_dir / "session.json").write_bytes(gzip.decompress(source.read_bytes()))
        return build_report(run_dir, report_sections())


def main() -> int:
    chromium = shutil.which("chromium")
    for name, source in EXAMPLES.items():
        out = ROOT / "docs" / "examples" / name
        out.mkdir(parents=True, exist_ok=True)
        html = out / "report.html"
        html.write_text(report_html(source), encoding="utf-8")
        line = f"{html.relative_to(ROOT)}: {html.stat().st_size // 1024} KiB"
        if chromium and name in SCREENSHOT_HEIGHT:
            png = out / "report.png"
            screenshot(html, png, chromium, height=SCREENSHOT_HEIGHT[name])
            shrink(png)
            line += f", {png.relative_to(ROOT)}: {png.stat().st_size // 1024} KiB"
        print(line)
    if not chromium:
        print("chromium is not on PATH: screenshots not rebuilt", file=sys.stderr)
    return 0


def shrink(png: Path) -> None:
    """Crop the scrollbar and use a 256-colour palette: the page is flat colours and text, and the
    README should load fast."""
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(png) as image:
        width, height = image.size
        small = image.convert("RGB").crop((0, 0, width - SCROLLBAR_PX, height))
        small = small.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    small.save(png, optimize=True)


if __name__ == "__main__":
    raise SystemExit(main())
