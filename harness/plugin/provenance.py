"""Where a session ran from: the harness's version and commit, and the container image, if any.

A sign-off must say which harness judged the node; session.json carries these facts.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from harness import __version__

CHECKOUT_ROOT = Path(__file__).resolve().parents[2]
CONTAINER_ENV_VARS = ("HARNESS_CONTAINER_IMAGE", "APPTAINER_NAME", "APPTAINER_CONTAINER", "SINGULARITY_NAME",
                      "SINGULARITY_CONTAINER")


def harness_version() -> str:
    return __version__


def git_commit(root: Path = CHECKOUT_ROOT) -> str | None:
    """The harness checkout's commit (with "-dirty" for local changes), or None outside a checkout."""
    if not (root / ".git").exists():
        return os.environ.get("HARNESS_GIT_COMMIT")  # baked into container images at build time
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("-dirty" if dirty else "")


def container() -> dict | None:
    """The image this session runs in, when it runs in one (OCI image or Apptainer/Singularity)."""
    facts = {key: os.environ[key] for key in CONTAINER_ENV_VARS if os.environ.get(key)}
    if not facts and Path("/run/.containerenv").exists():
        facts["runtime"] = "podman/buildah"
    if not facts and Path("/.dockerenv").exists():
        facts["runtime"] = "docker"
    return facts or None
