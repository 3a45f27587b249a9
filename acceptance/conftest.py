# Arms the harness plugin for this directory even when pytest picks an ini file above it
# (see harness/plugin/__init__.py::_active). The tests themselves get everything from the plugin.
from harness.plugin.options import add_short_options

harness_acceptance = True


def pytest_addoption(parser):
    # --gpus, --models, ... exist only in acceptance sessions (other projects' suites keep those names).
    add_short_options(parser)
