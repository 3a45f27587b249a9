# The two commands of the README: `make acceptance` (the sign-off run) and `make test` (the
# harness's own tests, after `make lint`); `make selftest` proves the harness can fail on this node.
# Each makes its own virtual environment on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Extra pytest arguments for the acceptance suite, e.g. ARGS="--models resnet50 --gpus 1,2 -x".
ARGS ?=
# Run level of the acceptance suite: quick, standard (the default) or long (docs/components.md).
LEVEL ?=
# Extra `harness selftest` arguments, e.g. SELFTEST_ARGS="--rows foreign_load,host_sync".
SELFTEST_ARGS ?=
# Extra pytest arguments for the unit tests.
TEST_ARGS ?=
# What ruff lints (configured in pyproject.toml; mypy's files are set there: harness/).
LINT_PATHS ?= harness tests benchmarks acceptance docs/examples

# The software stack the profiles were measured on: constraints/gpu.txt where an NVIDIA driver is
# installed, constraints/cpu.txt elsewhere (docs/usage.md, "Software stack"). PIP_INDEX: an extra
# package index, e.g. https://download.pytorch.org/whl/cu130 for torch's +cu130 build.
CONSTRAINTS ?= $(if $(shell command -v nvidia-smi 2>/dev/null),constraints/gpu.txt,constraints/cpu.txt)
PIP_INDEX ?=

.PHONY: acceptance selftest test lint venv clean-venv

# What the first run installs, said before it starts (README, "The first run"). Measured here:
# constraints/cpu.txt is PyPI's torch wheel, which carries its CUDA libraries (~5.6 GB in .venv).
INSTALL_NOTE := $(if $(filter constraints/gpu.txt,$(CONSTRAINTS)),the GPU stack (constraints/gpu.txt: torch with CUDA and NCCL, several GB to download),the CPU stack (constraints/cpu.txt: PyPI's torch wheel with its CUDA libraries, about 5.6 GB on disk, 78 s measured on the 2-core CI VM))

$(STAMP): pyproject.toml $(CONSTRAINTS)
	@echo "make: first run (or pyproject.toml/$(CONSTRAINTS) changed): installing $(INSTALL_NOTE) and the harness into $(VENV)/; pip is quiet until it is done..."
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c $(CONSTRAINTS) $(if $(PIP_INDEX),--extra-index-url $(PIP_INDEX)) -e '.[test]'
	@echo "make: $(VENV)/ is ready ($$(du -sh $(VENV) 2>/dev/null | cut -f1))"
	touch $@

venv: $(STAMP)

# ./acceptance.sh returns the harness's exit code (docs/verdicts.md). GNU make itself can only return
# 0 or 2: `make acceptance` exits 0 on PASS and 2 otherwise, and its own last line names the code
# ("make: *** [Makefile:NN: acceptance] Error 6"); call ./acceptance.sh where the code matters.
ACCEPTANCE ?= ./acceptance.sh
acceptance: $(STAMP)
	@HARNESS_VENV_READY=1 VENV=$(VENV) $(ACCEPTANCE) $(if $(LEVEL),--harness-level $(LEVEL)) $(ARGS) || { code=$$?; \
		echo "make acceptance: the harness exited $$code (above: its verdict); make can only return 2 for it, ./acceptance.sh returns $$code itself" >&2; \
		exit $$code; }

# Prove on this node that the harness can fail: each row injects one degradation (docs/selftest.md).
selftest: $(STAMP)
	$(BIN)/harness selftest $(SELFTEST_ARGS)

# Lint first: a finding fails in seconds what the suite would take minutes to reach.
test: lint
	$(BIN)/python -m pytest tests $(TEST_ARGS)

# Both run, so one pass shows every finding; either failing fails the target.
lint: $(STAMP)
	status=0; $(BIN)/ruff check $(LINT_PATHS) || status=1; $(BIN)/mypy || status=1; exit $$status

clean-venv:
	rm -rf $(VENV)

# --- container images (docs/containers.md) ------------------------------------------------------
VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' harness/__init__.py)
IMAGE ?= gpu-acceptance-harness:$(VERSION)
# Empty: the Containerfile's default (pytorch/pytorch); e.g. BASE_IMAGE=nvcr.io/nvidia/pytorch:25.10-py3
BASE_IMAGE ?=
# The first of these on PATH; override with e.g. CONTAINER_ENGINE=podman.
CONTAINER_ENGINE ?= $(firstword $(foreach tool,buildah podman docker,$(if $(shell command -v $(tool) 2>/dev/null),$(tool))))
SIF ?= harness.sif
# apptainer.def, or an OCI image, e.g. SIF_FROM=docker-daemon://gpu-acceptance-harness:0.1.0
SIF_FROM ?= apptainer.def
# Building from a definition needs root, or --fakeroot for everyone else.
SIF_ARGS ?= $(if $(filter 0,$(shell id -u)),,--fakeroot)
BUILD_LABELS = --build-arg HARNESS_VERSION=$(VERSION) \
	--build-arg VCS_REF=$(shell git rev-parse --verify --quiet HEAD 2>/dev/null || echo unknown) \
	--build-arg SOURCE_URL=$(shell git remote get-url origin 2>/dev/null || echo unknown)

.PHONY: image sif

image:
	@test -n "$(CONTAINER_ENGINE)" || { echo "make image: needs buildah, podman or docker on PATH" >&2; exit 2; }
	$(CONTAINER_ENGINE) $(if $(filter buildah%,$(CONTAINER_ENGINE)),bud,build) -f Containerfile -t $(IMAGE) \
		$(BUILD_LABELS) $(if $(BASE_IMAGE),--build-arg BASE_IMAGE=$(BASE_IMAGE)) .

sif:
	@command -v apptainer >/dev/null || { echo "make sif: needs apptainer >= 1.2 (apptainer.org)" >&2; exit 2; }
	apptainer build $(SIF_ARGS) $(if $(filter %.def,$(SIF_FROM)),$(BUILD_LABELS)) $(SIF) $(SIF_FROM)
