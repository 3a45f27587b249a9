"""Shared fakes and fixtures data for the harness's own tests: one fake NVML (fake_nvml.py), the
sampler driven through a fake measured window (sampling.py), one CPU test profile (profiles.py).

Imported as ``support.…``: pytest puts tests/ on sys.path (rootdir conftest, prepend import mode).
"""
