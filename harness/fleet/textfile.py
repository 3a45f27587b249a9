"""One atomic text write for every file the fleet leaves for others to read: the fleet page, its
JSON and CSV, the history page, the Prometheus textfile.

Written to a dot-name in the same directory and renamed into place, so a reader (a browser, a CI
step, node_exporter's next scrape) sees the old file or the new one, never half of one. The
temporary name never ends in ``.prom``: the textfile collector reads every ``*.prom``. Mode 0644,
because node_exporter runs as another user.
"""

from __future__ import annotations

from pathlib import Path

from harness import files


def write_text_atomic(path: Path, text: str) -> None:
    """Raises OSError (the directory is made if missing)."""
    files.write_text_atomic(Path(path), text, mode=0o644)
