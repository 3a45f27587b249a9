# The two commands of the README: `make acceptance` (the sign-off run) and `make test` (the
# harness's own tests). Each makes its own virtual environment on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Extra pytest arguments for the acceptance suite, e.g. ARGS="--models resnet50 --gpus 1,2 -x".
ARGS ?=
# Extra pytest arguments for the unit tests.
TEST_ARGS ?=

.PHONY: acceptance test venv clean-venv

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $@

venv: $(STAMP)

acceptance: $(STAMP)
	$(BIN)/python -m pytest acceptance $(ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest tests $(TEST_ARGS)

clean-venv:
	rm -rf $(VENV)
