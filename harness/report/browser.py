"""The report in headless Chromium: load it and collect console errors, or screenshot it.

For the browser tests and the docs' example screenshots; nothing in a session needs a browser.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path
from typing import Iterable

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync")


def _chromium(chromium: str, html_path: Path, extra: Iterable[str],
              timeout_s: float) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="harness-chromium-") as profile:
        command = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, Path(html_path).resolve().as_uri()]
        try:
            return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
        except FileNotFoundError:
            raise RuntimeError(f"{chromium}: not found; install Chromium (Debian: apt-get install chromium) "
                               "or pass its path") from None
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"{chromium} did not finish with {html_path} within {timeout_s:.0f} s") from None


def screenshot(html_path: Path, png_path: Path, chromium: str = "chromium", *, height: int = 2400,
               width: int = 1400, timeout_s: float = 120.0) -> None:
    """A PNG of the page's first ``height`` pixels at ``width`` px wide (1400: a desktop, 390: a
    phone). Raises RuntimeError if none is written."""
    png_path = Path(png_path).resolve()
    png_path.unlink(missing_ok=True)
    result = _chromium(chromium, html_path, [f"--screenshot={png_path}", f"--window-size={width},{height}"],
                       timeout_s)
    if not png_path.exists() or png_path.stat().st_size == 0:
        raise RuntimeError(f"{chromium} wrote no screenshot of {html_path} (exit {result.returncode}): "
                           f"{result.stderr.strip()[-2000:]}")


def print_to_pdf(html_path: Path, pdf_path: Path, chromium: str = "chromium", *, timeout_s: float = 120.0) -> int:
    """The page printed as the browser prints it (the page's own @page size), without Chromium's
    header and footer; returns the number of pages. Raises RuntimeError if no PDF is written."""
    pdf_path = Path(pdf_path).resolve()
    pdf_path.unlink(missing_ok=True)
    result = _chromium(chromium, html_path, [f"--print-to-pdf={pdf_path}", "--no-pdf-header-footer"], timeout_s)
    if not pdf_path.exists() or pdf_path.stat().st_size == 0:
        raise RuntimeError(f"{chromium} wrote no PDF of {html_path} (exit {result.returncode}): "
                           f"{result.stderr.strip()[-2000:]}")
    return pdf_page_count(pdf_path.read_bytes())


def pdf_page_count(data: bytes) -> int:
    """Pages of a PDF as Chromium writes it: one ``/Type /Page`` object each (``/Pages`` is the tree)."""
    return len(re.findall(rb"/Type\s*/Page(?![a-zA-Z])", data))


def load_in_chromium(html_path: Path, chromium: str = "chromium", *, width: int = 1400,
                     timeout_s: float = 120.0) -> tuple[str, list[str]]:
    """Load the page headless: (the DOM after load, the page's console lines from Chromium's log).

    Chromium logs every console message of the page, errors and uncaught exceptions included, as
    ``INFO:CONSOLE`` whatever its level; the report writes none, so any such line is a problem.
    """
    result = _chromium(chromium, html_path, ["--enable-logging=stderr", "--v=0", "--dump-dom",
                                             f"--window-size={width},900"], timeout_s)
    errors = [line for line in result.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    if result.returncode != 0:
        errors.append(f"chromium exited with {result.returncode}")
    return result.stdout, errors
