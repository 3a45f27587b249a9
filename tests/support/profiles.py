"""The CPU test profile the plugin-level tests share: "cpu-test", tiny_bert bf16 on gloo ranks,
launches short enough for a 2-core host. Tests add what they are about (a bound, a section) and
write it as ``<thresholds dir>/cpu-test.toml``."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Mapping

from harness.definitions import DEFINITIONS
from harness.profile.tables import BoundsTable

CPU_TEST_PROFILE_NAME = "cpu-test"


DEFINITIONS_OF_TODAY = ("[definitions]",
                        *(f'{family} = "{definition.id}"' for family, definition in DEFINITIONS.items()))
"""A test profile's bounds are of the definitions this harness measures (harness/definitions.py)."""


def cpu_test_profile(*, defaults: str = "", case: str = "", sections: str = "") -> str:
    """The profile as TOML text. ``defaults`` and ``case`` are extra lines for [defaults] and for
    [models.tiny_bert.bf16]; ``sections`` are extra tables at the end. The base text has no braces,
    so the result can be a ``str.format`` template of the caller's own fields."""
    return "\n".join(line for line in (
        "schema_version = 1",
        "[hardware]",
        f'name = "{CPU_TEST_PROFILE_NAME}"',
        'description = "test CPU profile"',
        'device = "cpu"',
        "[run]",
        "warmup_seconds = 1",
        "measure_seconds = 1",
        "timeout_seconds = 60",
        "[defaults]",
        "gpu_counts = [1, 2, 64]",
        'models = ["tiny_bert"]',
        'precisions = ["bf16"]',
        defaults,
        'source = "test"',
        "[models.tiny_bert.bf16]",
        "batch_size_per_gpu = 4",
        case,
        'source = "test bounds"',
        sections,
        *DEFINITIONS_OF_TODAY,
    ) if line) + "\n"


def profile_stub(name: str, tables: Mapping[BoundsTable, Any] | None = None, **attributes: Any) -> SimpleNamespace:
    """A stand-in for a loaded Profile with ``name``, ``attributes`` and the kinds' ``tables``, read as a Profile's
    (``profile.table(TABLE)``; None for a table it lacks)."""
    held = dict(tables or {})
    return SimpleNamespace(name=name, table=lambda table: held.get(table), **attributes)
