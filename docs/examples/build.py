"""Rebuild the example reports and their screenshots in docs/examples/.

    .venv/bin/python docs/examples/build.py            # needs chromium on PATH for the PNGs

Each example is built from saved JSON only: the 4 × H200 acceptance run in docs/data/, and the
two CPU runs kept under docs/examples/<name>/run/ (report.json, session.json, junit.xml, runs/;
the rank logs are left out: the records carry the log tails the report shows).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from harness.report.browser import screenshot  # noqa: E402
from harness.report.render import build_report  # noqa: E402

EXAMPLES = {
    "h200x4": ROOT / "docs" / "data" / "2026-11-21-h200x4-acceptance",
    "cpu": ROOT / "docs" / "examples" / "cpu" / "run",
    "cpu-fail": ROOT / "docs" / "examples" / "cpu-fail" / "run",
}
SCREENSHOT_HEIGHT = {"h200x4": 2150, "cpu": 1750, "cpu-fail": 1750}
SCROLLBAR_PX = 15  # headless Chromium draws the page's scrollbar into the screenshot


def main() -> int:
    chromium = shutil.which("chromium")
    for name, run_dir in EXAMPLES.items():
        out = ROOT / "docs" / "examples" / name
        out.mkdir(parents=True, exist_ok=True)
        html = out / "report.html"
        html.write_text(build_report(run_dir), encoding="utf-8")
        line = f"{html.relative_to(ROOT)}: {html.stat().st_size // 1024} KiB"
        if chromium:
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
