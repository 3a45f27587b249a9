# Arms the harness plugin for this directory even when pytest picks an ini file above it
# (see harness/plugin/__init__.py::_active). The tests themselves get everything from the plugin.
harness_acceptance = True
