"""The threshold-file schema: every key of every table, declared once, and the generic checker.

A profile is one file, ``thresholds/<name>.toml`` (format: thresholds/README.md). It is checked
completely before any benchmark runs, because a typo found after an hour of 8-GPU runs costs an
hour: every problem in a file becomes one line naming the file, the key path, the value and what
is allowed (harness/profile/problems.py), and all of a file's problems are raised together.

The profile's own schema is declared as tables of ``Field`` specs below (``TOP_LEVEL_FIELDS`` and the section
tables it nests; the value kinds, STRING, NUMBER, ..., are in harness/profile/kinds.py); a kind of job's own table
is declared by the kind (``BoundsTable``, harness/profile/tables.py) and joins the top level as the loader is handed
it (``top_level_fields``). Adding a key is one ``Field(...)`` line, plus the dataclass field that carries it to the
verdict; ``check_table`` does the rest (type, range, unknown keys, missing keys). Rules that relate two keys are in
harness/profile/rules.py.
"""

from __future__ import annotations

import difflib
from typing import Any, Iterable, Mapping, Sequence

from harness.catalog import MODELS, PRECISIONS
from harness.definitions import FAMILIES
from harness.profile.kinds import (BOOLEAN, BOUND_BY_GPUS_AT_ONCE, BOUND_BY_GPUS_TOGETHER,
                                   FRACTION_BY_GPU_COUNT, GPU_COUNT_ARRAY, INTEGER, INVALID, NUMBER, STRING,
                                   STRING_ARRAY, Field, Kind, Rule, keyed_table, number, wrong_type)
from harness.profile.problems import KeyPath, ProblemReport, toml_repr
from harness.profile.tables import SITE_TABLES, BoundsTable

SCHEMA_VERSION = 1
"""The file format this harness reads (``schema_version`` at the top of every profile)."""


# ---------------------------------------------------------------------------------------------
# The declarative schema: Field specs, their kinds, and range rules


def _precision_key(key: str, item: Any, where: KeyPath, report: ProblemReport) -> Any:
    if key not in PRECISIONS:
        report.add((*where, key), _unknown(key, PRECISIONS, noun="precision"))
        return INVALID
    return key


def _precision_table(element: Kind) -> Kind:
    """A table keyed by precision (harness.catalog.PRECISIONS)."""
    example = ", ".join(f"{precision} = ..." for precision in PRECISIONS)
    return keyed_table(element, f"a table of precision = value, e.g. {{ {example} }}", _precision_key)


def _table(value: Any, where: KeyPath, report: ProblemReport, spec: Field) -> Any:
    if not isinstance(value, dict):
        return wrong_type(value, "a table", where, report)
    return check_table(value, spec.fields, where, report)


def _site_tables(value: Any, where: KeyPath, report: ProblemReport, spec: Field) -> Any:
    """``[site.<table>]``: a site's kinds' own bounds, one table each. Here only their shape; the keys inside are
    checked against the fields the kind declares (``Job.bounds``) when a session loads the profile
    (harness/profile/load.py ``site_tables``)."""
    if not isinstance(value, dict):
        return wrong_type(value, "a table of [site.<table>] tables", where, report)
    tables: dict[str, dict[str, Any]] = {}
    for name, table in value.items():
        if not isinstance(table, dict):
            wrong_type(table, "a table", (*where, name), report)
        else:
            tables[name] = table
    return tables


def _cases(value: Any, where: KeyPath, report: ProblemReport, spec: Field) -> Any:
    """``[models.<model>.<precision>]`` tables -> {(model, precision): checked case table}."""
    if not isinstance(value, dict):
        return wrong_type(value, "a table of [models.<model>.<precision>] cases", where, report,
                           "; the models of the default matrix are listed in [defaults] models")
    cases: dict[tuple[str, str], dict[str, Any]] = {}
    for model, by_precision in value.items():
        if model not in MODELS:
            report.add((*where, model), _unknown(model, MODELS, noun="model"))
            continue
        if not isinstance(by_precision, dict):
            wrong_type(by_precision, f"a table of precisions, e.g. [models.{model}.fp16]", (*where, model), report)
            continue
        for precision, case in by_precision.items():
            case_where = (*where, model, precision)
            if precision not in PRECISIONS:
                report.add(case_where, _unknown(precision, PRECISIONS, noun="precision")
                           + f"; a case is a [models.{model}.<precision>] table")
                continue
            if not isinstance(case, dict):
                wrong_type(case, "a table of bounds", case_where, report)
                continue
            cases[(model, precision)] = check_table(case, CASE_FIELDS, case_where, report)
    return cases


TABLE: Kind = _table
CASES: Kind = _cases
NUMBER_BY_PRECISION: Kind = _precision_table(number)


def greater_than(low: float, unit: str = "") -> Rule:
    return Rule(lambda value: value > low, f"must be > {low:g}{unit}")


def at_least(low: float, unit: str = "") -> Rule:
    return Rule(lambda value: value >= low, f"must be >= {low:g}{unit}")


def between(low: float, high: float, unit: str = "") -> Rule:
    return Rule(lambda value: low <= value <= high, f"must be between {low:g} and {high:g}{unit}")


def one_of(choices: Sequence[Any]) -> Rule:
    return Rule(lambda value: value in choices, "must be one of " + ", ".join(toml_repr(c) for c in choices))


NOT_EMPTY = Rule(lambda text: text.strip() != "", "must not be empty")
SOURCE_DOC = "where the numbers came from: a measurement (who, which node, when) or a cited publication"
SOURCE_FIELD = Field(key="source", kind=STRING, required=True, rule=NOT_EMPTY, doc=SOURCE_DOC)
"""Every table of bounds says where its numbers came from."""
# 96 % written as 96 is the mistake this catches; a bound above 1 could never pass.
_EFFICIENCY = Rule(lambda value: 0 < value <= 1, "an efficiency is a fraction in (0, 1]; use 0.96, not 96")
_KNOWN_MODEL = Rule(lambda name: name in MODELS, "unknown model; known models: " + ", ".join(MODELS))
_KNOWN_PRECISION = Rule(lambda name: name in PRECISIONS,
                        "unknown precision; known precisions: " + ", ".join(PRECISIONS))


HARDWARE_MATCH_FIELDS = (
    Field(key="gpu_name_contains", kind=STRING, rule=NOT_EMPTY,
          doc="case-insensitive fragment of the GPU name as NVML reports it, e.g. \"H200\""),
    Field(key="min_memory_gib", kind=NUMBER, rule=greater_than(0, " GiB"),
          doc="smallest GPU memory accepted, GiB (1024^3 bytes)"),
    Field(key="max_memory_gib", kind=NUMBER, rule=greater_than(0, " GiB"),
          doc="largest GPU memory accepted, GiB (1024^3 bytes)"),
    Field(key="node_gpus", kind=INTEGER, rule=at_least(1, " (GPUs)"),
          doc="only nodes that show exactly this many GPUs: the node size the profile's bounds were fitted on"),
)

HARDWARE_FIELDS = (
    Field(key="name", kind=STRING, required=True, rule=NOT_EMPTY,
          doc="the profile name, equal to the file name without .toml"),
    Field(key="description", kind=STRING, required=True, rule=NOT_EMPTY, doc="the hardware in words, for the report"),
    Field(key="device", kind=STRING, required=True, rule=one_of(("cuda", "cpu")), doc="\"cuda\" or \"cpu\""),
    Field(key="match", kind=TABLE, fields=HARDWARE_MATCH_FIELDS, doc="how the harness recognises this hardware"),
    Field(key="peak_tflops", kind=NUMBER_BY_PRECISION, rule=greater_than(0, " TFLOP/s"),
          doc="precision -> dense peak TFLOP/s per GPU, for MFU"),
    Field(key="peak_tflops_source", kind=STRING, rule=NOT_EMPTY, doc="where the peak_tflops figures come from"),
    Field(key="bf16_needs_native", kind=BOOLEAN,
          doc="cpu: the bf16 cases run only where the CPU has native bf16 (harness/node/cpu_features.py)"),
)

RUN_FIELDS = (
    # > 0, not >= 0: warmup is what steadies the clocks and caches before a window is timed; the
    # launcher refuses a zero warmup (harness/launch/spec.py), so 0 here would fail every case.
    Field(key="warmup_seconds", kind=NUMBER, rule=greater_than(0, " s"), doc="untimed warmup per launch, seconds"),
    Field(key="measure_seconds", kind=NUMBER, rule=greater_than(0, " s"), doc="timed window per launch, seconds"),
    Field(key="timeout_seconds", kind=NUMBER, rule=greater_than(0, " s"), doc="wall-clock limit per launch, seconds"),
    Field(key="ci_target", kind=NUMBER,
          rule=Rule(lambda v: 0 <= v < 1, "must be a fraction in [0, 1): 0.01 for ±1 %, not 1; 0 for a fixed window"),
          doc="adaptive window: stop at this relative 95 % CI half-width of throughput (0.01 = ±1 %); "
              "0 = fixed window"),
    Field(key="max_measure_seconds", kind=NUMBER, rule=greater_than(0, " s"),
          doc="adaptive window: the longest measured window, seconds"),
)

CASE_FIELDS = (  # a table by GPU count holds a bound per shape measured: GPUs at once, or GPUs together
    Field(key="batch_size_per_gpu", kind=INTEGER, required=True, rule=at_least(1, " (samples per GPU per step)"),
          doc="samples per GPU per step of the weak-scaling runs"),
    Field(key="min_samples_per_sec_per_gpu", kind=BOUND_BY_GPUS_AT_ONCE, rule=greater_than(0, " (samples/s per GPU)"),
          formerly=("min_throughput_per_gpu",),
          doc="GPUs at once -> lowest throughput of each GPU in the 1-GPU case run on that many GPUs at once, "
              "samples/s"),
    Field(key="min_weak_efficiency", kind=FRACTION_BY_GPU_COUNT, rule=_EFFICIENCY, inherit=True,
          doc="GPU count -> lowest weak-scaling efficiency, a fraction"),
    Field(key="strong_global_batch_size", kind=INTEGER, rule=at_least(1, " (samples per step, all GPUs)"),
          doc="global batch of the strong-scaling runs"),
    Field(key="min_strong_efficiency", kind=FRACTION_BY_GPU_COUNT, rule=_EFFICIENCY,
          doc="GPU count -> lowest strong-scaling efficiency, a fraction"),
    Field(key="min_gpu_utilization_pct", kind=BOUND_BY_GPUS_AT_ONCE, rule=between(0, 100, " (percent)"), inherit=True,
          doc="GPUs at once -> lowest mean GPU utilization, percent"),
    Field(key="min_power_fraction_of_limit", kind=BOUND_BY_GPUS_AT_ONCE,
          rule=Rule(lambda v: 0 < v <= 1, "must be a fraction in (0, 1] of the power limit; use 0.5, not 50"),
          inherit=True, doc="GPUs at once -> lowest mean power / power limit, a fraction"),
    Field(key="max_temperature_c", kind=NUMBER,
          rule=Rule(lambda v: 0 < v <= 150, "must be between 0 and 150 (degrees Celsius)"),
          inherit=True, doc="highest GPU temperature, degrees Celsius"),
    Field(key="max_straggler_ratio", kind=BOUND_BY_GPUS_TOGETHER, rule=at_least(1, " (slowest rank / fastest rank)"),
          inherit=True, doc="GPU count -> highest slowest/fastest rank step-time ratio"),
    Field(key="max_step_time_cv", kind=BOUND_BY_GPUS_AT_ONCE,
          rule=Rule(lambda v: 0 < v <= 1, "must be a fraction in (0, 1]; use 0.05 for 5 %, not 5"),
          inherit=True, doc="GPUs at once -> highest step-time coefficient of variation, a fraction"),
    Field(key="min_gpu_uniformity", kind=BOUND_BY_GPUS_TOGETHER,
          rule=Rule(lambda v: 0 < v <= 1, "must be a fraction in (0, 1] of the node's median GPU; use 0.97, not 97"),
          inherit=True, doc="GPUs at once -> lowest rate of any GPU / the node's median GPU in the independent "
                            "1-GPU run, a fraction"),
    SOURCE_FIELD,
)

DEFAULTS_FIELDS = (
    Field(key="gpu_counts", kind=GPU_COUNT_ARRAY, required=True, rule=at_least(1, " (GPUs)"),
          doc="GPU counts of the default matrix, e.g. [1, 2, 4, 8]"),
    Field(key="models", kind=STRING_ARRAY, required=True, rule=_KNOWN_MODEL, doc="models of the default matrix"),
    Field(key="precisions", kind=STRING_ARRAY, required=True, rule=_KNOWN_PRECISION,
          doc="precisions of the default matrix"),
    *(spec for spec in CASE_FIELDS if spec.inherit),
    SOURCE_FIELD,
)

STACK_FIELDS = (
    Field(key="torch", kind=STRING, rule=NOT_EMPTY, doc="torch.__version__ the bounds were measured on"),
    Field(key="cuda", kind=STRING, rule=NOT_EMPTY, doc="CUDA version torch was built with (torch.version.cuda)"),
    Field(key="nccl", kind=STRING, rule=NOT_EMPTY, doc="NCCL version torch reported"),
    Field(key="driver", kind=STRING, rule=NOT_EMPTY, doc="NVIDIA driver version"),
    SOURCE_FIELD,
)

NODE_FIELDS = (
    Field(key="gpus_per_node", kind=GPU_COUNT_ARRAY, required=True, rule=at_least(1, " (GPUs)"),
          doc="the GPU counts a node of this kind has, e.g. [8] for an HGX board; several shapes where cloud "
              "VMs hold part of one, e.g. [1, 2, 4, 8]"),
    Field(key="source", kind=STRING, required=True, rule=NOT_EMPTY,
          doc="where the shapes come from: a published figure (docs/references.md), not a measurement"),
)

DEFINITION_FIELDS = tuple(
    Field(key=family, kind=STRING, rule=NOT_EMPTY,
          doc=f"the definition the {family} bounds were measured under (harness/definitions.py: {what})")
    for family, what in FAMILIES.items())

_PROFILE_TABLES = (
    Field(key="schema_version", kind=INTEGER, required=True, rule=one_of((SCHEMA_VERSION,)),
          doc=f"the file format version, {SCHEMA_VERSION}"),
    Field(key="hardware", kind=TABLE, required=True, fields=HARDWARE_FIELDS, doc="[hardware]: what the profile is for"),
    Field(key="run", kind=TABLE, fields=RUN_FIELDS, doc="[run]: launch durations"),
    Field(key="defaults", kind=TABLE, required=True, fields=DEFAULTS_FIELDS,
          doc="[defaults]: the default matrix and bounds shared by every case"),
    Field(key="models", kind=CASES, required=True, doc="[models.<model>.<precision>] tables, one per case"),
    Field(key="stack", kind=TABLE, fields=STACK_FIELDS, doc="[stack]: the software the bounds were measured on"),
    Field(key="node", kind=TABLE, fields=NODE_FIELDS, doc="[node]: the GPUs a node of this kind has"),
)
_PROFILE_TABLES_LAST = (
    Field(key="definitions", kind=TABLE, fields=DEFINITION_FIELDS,
          doc="[definitions]: how each family of bounds was measured; a family measured another way today is "
              "not judged"),
    Field(key=SITE_TABLES, kind=_site_tables,
          doc="[site.<table>]: a site's own kind's bounds, each table checked against the fields its Job declares"),
)
TOP_LEVEL_FIELDS = (*_PROFILE_TABLES, *_PROFILE_TABLES_LAST)
"""The profile's own top level, without any kind's table (``top_level_fields``)."""


def top_level_fields(tables: Sequence[BoundsTable]) -> tuple[Field, ...]:
    """The top level of a profile whose kinds of job declare ``tables``: the profile's own tables, each shipped
    kind's at the top level after them (a site's are under ``[site]``)."""
    kinds = tuple(Field(key=table.name, kind=TABLE, fields=table.fields, doc=f"{table.heading}: {table.doc}")
                  for table in tables if table.shipped)
    return (*_PROFILE_TABLES, *kinds, *_PROFILE_TABLES_LAST)


def sections_of(tables: Sequence[BoundsTable]) -> dict[str, tuple[Field, ...]]:
    """Every table of a profile whose kinds of job declare ``tables``, by how the messages name it: the schema's
    own (``SECTIONS``), then the kinds'."""
    return {**SECTIONS, "the top level": top_level_fields(tables), **{table.heading: table.fields for table in tables}}


SECTIONS: dict[str, tuple[Field, ...]] = {
    "the top level": TOP_LEVEL_FIELDS,
    "[hardware]": HARDWARE_FIELDS,
    "hardware.match": HARDWARE_MATCH_FIELDS,
    "[run]": RUN_FIELDS,
    "[defaults]": DEFAULTS_FIELDS,
    "[models.<model>.<precision>]": CASE_FIELDS,
    "[stack]": STACK_FIELDS,
    "[node]": NODE_FIELDS,
    "[definitions]": DEFINITION_FIELDS,
}
"""Every table of the profile's own schema, by how the README and error messages name it; a kind's tables are its
own (``sections_of``)."""

def _unknown(key: str, allowed: Iterable[str], *, noun: str = "key", fields: Sequence[Field] = (),
             sections: Mapping[str, Sequence[Field]] = {}) -> str:
    """'unknown key; allowed keys here: ...', plus the likeliest intended key or where it belongs."""
    allowed = list(allowed)
    listing = f"allowed {noun}s here" if noun == "key" else f"known {noun}s"
    text = f"unknown {noun}; {listing}: {', '.join(allowed)}"
    intended = next((spec.key for spec in fields if key in spec.formerly), None)
    if intended not in allowed:
        close = difflib.get_close_matches(key, allowed, n=1)
        intended = close[0] if close else None
    if intended is not None:
        return f"{text}; did you mean {intended}?"
    homes = [section for section, specs in {**SECTIONS, **sections}.items()
             if specs is not fields and any(spec.key == key for spec in specs)]
    if homes and fields:
        return f"{text}; {key} belongs in {' or '.join(homes)}"
    return text


def check_table(table: Mapping[str, Any], fields: Sequence[Field], where: KeyPath,
                report: ProblemReport) -> dict[str, Any]:
    """Type- and range-check every key of ``table`` against ``fields``; the valid values, converted."""
    spec_by_key = {spec.key: spec for spec in fields}
    checked: dict[str, Any] = {}
    for key, value in table.items():
        spec = spec_by_key.get(key)
        if spec is None:
            report.add((*where, key), _unknown(key, spec_by_key, fields=fields, sections=report.sections))
            continue
        converted = spec.kind(value, (*where, key), report, spec)
        if converted is not INVALID:
            checked[key] = converted
    for spec in fields:
        if spec.required and spec.key not in table:
            what = "table" if spec.kind in (TABLE, CASES) else "key"
            report.add((*where, spec.key), f"required {what} is missing: {spec.doc}")
    return checked

