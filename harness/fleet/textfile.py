"""One atomic text write for every file the fleet leaves for others to read: the fleet page, its
JSON and CSV, the history page, the Prometheus textfile.

Written to a dot-name in the same directory and renamed into place, so a reader (a browser, a CI
step, node_exporter's next scrape) sees the old file or the new one, never half of one. The
temporary name never ends in ``.prom``: the textfile collector reads every ``*.prom``. Mode 0644,
because node_exporter runs as another user.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_text_atomic(path: Path, text: str) -> None:
    """Raises OSError (the directory is made if missing)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
