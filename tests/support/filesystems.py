"""Real small file systems for the tests of a full disk: a tmpfs mounted in a temporary directory (root only)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tmpfs(mount_point: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``2m``) at ``mount_point`` (made), unmounted afterwards; skips without root."""
    mount_point.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)],
                      capture_output=True).returncode != 0:
        pytest.skip(f"mounting a {size} tmpfs needs root")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=True)


def fill(directory: Path) -> None:
    """Write a ballast file in ``directory`` until its file system is full."""
    with open(directory / "ballast", "wb") as ballast:
        try:
            while True:
                ballast.write(b"x" * 65536)
                ballast.flush()
        except OSError:
            pass
