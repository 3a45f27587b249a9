"""Loading threshold profiles: read a file safely, validate all of it, build the frozen Profile.

``load_profile`` reads one ``thresholds/<name>.toml``; ``load_profiles`` a directory of them;
``cli_check`` is ``harness thresholds check``. Every problem of a file is raised at once, as one
``ThresholdError`` whose message has a line per problem.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

from harness.profile import rules
from harness.profile.bounds import CaseBounds, HardwareMatch, MeasuredStack, NodeShape, Profile, RunSettings
from harness.profile.problems import ABSENT, ProblemReport
from harness.profile.schema import (CASE_FIELDS, SCHEMA_VERSION, TOP_LEVEL_FIELDS, check_table, sections_of,
                                    top_level_fields)
from harness.profile.tables import SITE_TABLES, BoundsTable, split_references


class ThresholdError(Exception):
    """One or more threshold files cannot be used. ``str(err)`` is the whole user-facing message,
    one line per problem, each line starting with the file it is about."""

    def __init__(self, path: str | os.PathLike[str], problems: Sequence[str]):
        super().__init__("\n".join(problems))
        self.path = Path(path)
        """The file, or the directory for ``load_profiles``."""
        self.problems = list(problems)

    def __reduce__(self):
        # The default pickling replays ``args`` (the joined text) into __init__, which wants two.
        return (type(self), (self.path, self.problems))


# ---------------------------------------------------------------------------------------------
# Building the dataclasses from checked values


def _case_bounds(model: str, precision: str, case: Mapping[str, Any], defaults: Mapping[str, Any]) -> CaseBounds:
    inherited = {spec.key: defaults[spec.key] for spec in CASE_FIELDS
                 if spec.inherit and spec.key in defaults and spec.key not in case}
    source = case["source"]
    if inherited:
        source = f"{source}; {', '.join(inherited)} from [defaults]: {defaults['source']}"
    own = {key: value for key, value in case.items() if key != "source"}
    values, references = split_references({**inherited, **own})
    return CaseBounds(model=model, precision=precision, source=source, inherited=tuple(sorted(inherited)),
                      references=references, **values)


def _build_profile(path: Path, data: bytes, raw: dict, checked: Mapping[str, Any], kinds: Mapping[str, Any],
                   site: Mapping[str, Any]) -> Profile:
    hardware = checked["hardware"]
    defaults = checked["defaults"]
    cases = {(model, precision): _case_bounds(model, precision, case, defaults)
             for (model, precision), case in checked["models"].items()}
    return Profile(
        name=hardware["name"],
        path=path,
        sha256=hashlib.sha256(data).hexdigest(),
        description=hardware["description"],
        hardware=HardwareMatch(device=hardware["device"], **hardware.get("match", {})),
        peak_tflops=hardware.get("peak_tflops", {}),
        peak_tflops_source=hardware.get("peak_tflops_source"),
        bf16_needs_native=hardware.get("bf16_needs_native", False),
        gpu_counts=tuple(sorted(defaults["gpu_counts"])),
        models=defaults["models"],
        precisions=defaults["precisions"],
        run=RunSettings(**checked.get("run", {})),
        cases=cases,
        raw=raw,
        stack=MeasuredStack(**checked["stack"]) if "stack" in checked else None,
        node=_node_shape(checked["node"]) if "node" in checked else None,
        definitions=dict(checked.get("definitions", {})),
        tables=dict(kinds),
        site=dict(site),
    )


def _node_shape(node: Mapping[str, Any]) -> NodeShape:
    return NodeShape(gpus_per_node=tuple(sorted(node["gpus_per_node"])), source=node["source"])


# ---------------------------------------------------------------------------------------------
# I/O edge


MAX_PROFILE_BYTES = 1024 * 1024
"""A profile is a few KB; 1 MiB leaves room for any real one and keeps /dev/zero or a log file named
*.toml from being read into memory."""
MAX_NESTING = 32
"""Tables and arrays inside each other; a profile nests 5 deep ([models.<m>.<p>] min_weak_efficiency)."""


def _read_profile_bytes(path: Path, report: ProblemReport) -> bytes | None:
    """The file's bytes, or None with the reason reported: only a regular file, at most MAX_PROFILE_BYTES."""
    try:
        # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, for ever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        report.add((), "no such file")
        return None
    except IsADirectoryError:
        report.add((), "is a directory, not a threshold file; use load_profiles for a directory")
        return None
    except OSError as err:
        report.add((), f"cannot read the file: {err.strerror or err}")
        return None
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            report.add((), "is a directory, not a threshold file; use load_profiles for a directory")
            return None
        if not stat.S_ISREG(mode):
            report.add((), "is not a regular file (a pipe, device or socket); a threshold profile is a .toml file")
            return None
        try:
            data = handle.read(MAX_PROFILE_BYTES + 1)
        except OSError as err:
            report.add((), f"cannot read the file: {err.strerror or err}")
            return None
    if len(data) > MAX_PROFILE_BYTES:
        report.add((), f"is larger than {MAX_PROFILE_BYTES // 1024} KiB; a threshold profile is a few KB of TOML "
                   "(is this the right file?)")
        return None
    return data


def _nesting_depth(value: Any) -> int:
    """How deep tables and arrays nest in ``value``, counted without recursion (a hostile file may
    nest thousands deep)."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_NESTING:
            break
        pending.extend((child, depth + 1) for child in children)
    return deepest


def _parse(path: Path, report: ProblemReport) -> tuple[bytes, dict] | None:
    data = _read_profile_bytes(path, report)
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        report.add((), f"not UTF-8 text (bad byte at offset {err.start}); TOML files must be UTF-8")
        return None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        # tomllib's message ends "(at line L, column C)", which is what the user needs.
        report.add((), f"invalid TOML: {err}; fix the syntax there (TOML reference: https://toml.io/en/v1.0.0)")
        return None
    except (RecursionError, ValueError) as err:  # tomllib recurses per nested array or inline table
        report.add((), f"cannot be parsed as TOML ({type(err).__name__}: {err}); a threshold profile nests "
                   f"tables and arrays at most a few levels deep")
        return None
    if _nesting_depth(raw) > MAX_NESTING:
        report.add((), f"nests tables and arrays more than {MAX_NESTING} deep; a threshold profile nests at most "
                   "5 (thresholds/README.md shows the format)")
        return None
    return data, raw


def _site_bounds(checked: Mapping[str, Any], declared: Mapping[str, BoundsTable],
                 report: ProblemReport) -> dict[str, dict]:
    """Each ``[site.<table>]`` checked against the fields its kind declares (``declared``, by name); a table no kind
    of the session declares is a problem (a misspelt name would otherwise leave the kind without its bounds)."""
    found: dict[str, dict[str, Any]] = {}
    for name, table in checked.get(SITE_TABLES, {}).items():
        if name not in declared:
            listed = ", ".join(table.heading for table in declared.values()) or "none"
            report.add((SITE_TABLES, name), f"no kind of job of this session declares this table (declared: "
                       f"{listed}); declare it on the site's Job (bounds=...) or remove it")
            continue
        found[name] = check_table(table, declared[name].fields, (SITE_TABLES, name), report)
    return found


def _built(table: BoundsTable, values: Mapping[str, Any], report: ProblemReport) -> Any:
    """What the kind's ``build`` makes of its checked table; a build that refuses the values (a site's own rule
    relating two keys) is one problem line naming the table, not a traceback."""
    try:
        return table.build(values)
    except (TypeError, ValueError) as err:
        report.add(tuple(table.heading.strip("[]").split(".")), f"its kind refuses these bounds: {err}")
        return None


def refuse_clashes(tables: Sequence[BoundsTable]) -> None:
    """A kind's table may take neither a name of the profile's own top level nor one another kind took: its keys
    would be checked against the wrong fields. A programming error of the kind's declaration, raised as such."""
    own = {spec.key for spec in TOP_LEVEL_FIELDS}
    seen: set[str] = set()
    for table in tables:
        if table.shipped and table.name in own:
            raise ValueError(f"bounds table {table.heading} takes a name of the profile's own top level; rename it")
        if table.heading in seen:
            raise ValueError(f"bounds table {table.heading} is declared twice")
        seen.add(table.heading)


def load_profile(path: str | os.PathLike[str], tables: Sequence[BoundsTable], *, sites_declared: bool) -> Profile:
    """Read and validate one threshold file; raise ThresholdError listing all its problems. ``tables``: the kinds'
    bounds tables (harness/kinds/shipped.py ``BOUNDS_TABLES``, a session's kinds' ``Job.bounds``), each checked and
    built as the kind declares it. ``sites_declared``: ``tables`` hold every ``[site.<table>]`` of the session's
    kinds, so one they lack is refused (a session's load); False: ``[site.*]`` is checked for its shape alone
    (``harness thresholds check``, the tools), and ``Profile.site`` stays empty."""
    refuse_clashes(tables)
    path = Path(path)
    report = ProblemReport(label=str(path), sections=sections_of(tables))
    parsed = _parse(path, report)
    if parsed is None:
        raise ThresholdError(path, report.lines)
    data, raw = parsed
    version = raw.get("schema_version", ABSENT)
    if isinstance(version, int) and not isinstance(version, bool) and version != SCHEMA_VERSION:
        # A file of another version would drown this one fact in unknown-key noise.
        report.add(("schema_version",), f"this harness reads schema_version = {SCHEMA_VERSION} only; use the harness "
                   "version that wrote the file, or convert it (thresholds/README.md)", version)
        raise ThresholdError(path, report.lines)
    checked = check_table(raw, top_level_fields(tables), (), report)
    rules.check_relations(raw, checked, path.stem, report)
    declared = {table.name: table for table in tables if not table.shipped}
    site = _site_bounds(checked, declared, report) if sites_declared else {}
    if report.lines:
        raise ThresholdError(path, report.lines)
    kinds = {table.name: _built(table, checked[table.name], report) for table in tables
             if table.shipped and table.name in checked}
    site = {name: _built(declared[name], values, report) for name, values in site.items()}
    if report.lines:
        raise ThresholdError(path, report.lines)
    return _build_profile(path, data, raw, checked, kinds, site)


def load_profiles(directory: str | os.PathLike[str], tables: Sequence[BoundsTable], *,
                  sites_declared: bool) -> list[Profile]:
    """Every ``*.toml`` in ``directory``, sorted by name; ThresholdError lists every bad file's problems.
    ``tables``, ``sites_declared``: as ``load_profile``'s."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ThresholdError(directory, [f"{directory}: not a directory of threshold files; set "
                                         "HARNESS_THRESHOLDS_DIR or pass an existing directory"])
    profiles: list[Profile] = []
    problems: list[str] = []
    for path in sorted(directory.glob("*.toml")):
        try:
            profiles.append(load_profile(path, tables, sites_declared=sites_declared))
        except ThresholdError as err:
            problems.extend(err.problems)
    if problems:
        raise ThresholdError(directory, problems)
    return sorted(profiles, key=lambda profile: profile.name)


def default_thresholds_dir() -> Path:
    """$HARNESS_THRESHOLDS_DIR, else the thresholds/ next to the package (a source checkout), else ./thresholds."""
    from_env = os.environ.get("HARNESS_THRESHOLDS_DIR")
    if from_env:
        return Path(from_env)
    beside_package = Path(__file__).resolve().parents[2] / "thresholds"
    if beside_package.is_dir():
        return beside_package
    return Path("thresholds")


def _files_to_check(paths: Sequence[str]) -> tuple[list[Path], str]:
    """The files named (directories expand to their *.toml), and where they were looked for."""
    if not paths:
        directory = default_thresholds_dir()
        return sorted(directory.glob("*.toml")), str(directory)
    files: list[Path] = []
    for given in paths:
        path = Path(given)
        files.extend(sorted(path.glob("*.toml")) if path.is_dir() else [path])
    return files, ", ".join(paths)


def cli_check(paths: list[str], tables: Sequence[BoundsTable]) -> int:
    """``harness thresholds check [FILES]``: 0 when every file is valid, 1 when any is not, 2 when none was found.
    ``tables``: the shipped kinds' (a site's ``[site.*]`` tables are checked for their shape alone)."""
    files, searched = _files_to_check(paths)
    if not files:
        print(f"harness thresholds check: no threshold files (*.toml) found in {searched}; pass files or a "
              "directory, or set HARNESS_THRESHOLDS_DIR", file=sys.stderr)
        return 2
    bad_files = 0
    for path in files:
        try:
            profile = load_profile(path, tables, sites_declared=False)
        except ThresholdError as err:
            bad_files += 1
            print(err, file=sys.stderr)
            continue
        case_count = len(profile.cases)
        print(f"ok  {path}  ({case_count} case{'' if case_count == 1 else 's'})")
    if bad_files:
        print(f"problems in {bad_files} of {len(files)} threshold files (format: thresholds/README.md)",
              file=sys.stderr)
        return 1
    return 0

