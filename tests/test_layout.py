"""The package keeps the shape docs/architecture.md draws: small modules, short functions, no import
cycles, and a launcher side that never imports torch (it must start fast and run where the
workers' CUDA stack is broken, to say so)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "harness"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
# The launcher side and everything that judges or reports: importing them must not import torch.
LIGHT = ("harness/cli.py", "harness/cases.py", "harness/catalog.py", "harness/records.py", "harness/timeline.py",
         "harness/run_directory.py", "harness/profile/", "harness/plugin/", "harness/launch/", "harness/checks/",
         "harness/report/", "harness/fleet/", "harness/kinds/")


def _modules() -> dict[str, Path]:
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    return modules


MODULES = _modules()


def _top_level_imports(path: Path, module: str, *, type_only_too: bool = False) -> set[str]:
    """harness modules imported at module level (not inside functions; not under TYPE_CHECKING unless
    ``type_only_too``)."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test) and not type_only_too:
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue  # imports inside functions run late; class bodies hold none here
        for child in ast.walk(node):
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                found.add(base)
                found.update(f"{base}.{alias.name}" for alias in child.names)
    return {name for name in found if name in MODULES or name.split(".")[0] == "torch"}


def test_no_module_is_over_the_size_a_reader_takes_in():
    lengths = {name: len(path.read_text().splitlines()) for name, path in MODULES.items()}
    too_long = {name: n for name, n in lengths.items() if n > MAX_MODULE_LINES}
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines: {too_long}"


def test_no_function_is_over_the_length_a_reader_takes_in():
    too_long = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{name}.{node.name}: {length} lines")
    assert not too_long, f"functions over {MAX_FUNCTION_LINES} lines: {too_long}"


@pytest.mark.parametrize("type_only_too", [False, True], ids=["run-time", "with-type-only"])
def test_module_level_imports_form_no_cycle(type_only_too):
    """No import cycle between modules; none either when the imports made for type checkers only count (issue 29:
    profile/kinds <-> profile/schema was one, resolved by Field living with its kinds)."""
    graph = {name: {i for i in _top_level_imports(path, name, type_only_too=type_only_too)
                    if i in MODULES and i != name} for name, path in MODULES.items()}
    # A package's __init__ is imported on the way to its submodules; that is not a cycle of ours.
    graph = {name: {i for i in deps if not name.startswith(i + ".")} for name, deps in graph.items()}
    cycles = []

    def visit(node: str, stack: list[str], done: set[str]) -> None:
        if node in stack:
            cycles.append(" -> ".join(stack[stack.index(node):] + [node]))
            return
        if node in done:
            return
        done.add(node)
        for dep in sorted(graph[node]):
            visit(dep, stack + [node], done)

    done: set[str] = set()
    for name in sorted(graph):
        visit(name, [], done)
    assert not cycles, "import cycles: " + "; ".join(cycles)


LIGHT_MODULES = sorted(name for name, path in MODULES.items()
                       if any(str(path.relative_to(PACKAGE.parent)).startswith(light) for light in LIGHT))


@pytest.mark.parametrize("module", LIGHT_MODULES)
def test_the_launcher_side_imports_no_torch(module):
    seen, todo = set(), [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        imports = _top_level_imports(MODULES[name], name) if name in MODULES else set()
        torch = sorted(i for i in imports if i.split(".")[0] == "torch")
        assert not torch, f"{module} imports {torch[0]} at module level (through {name})"
        todo.extend(i for i in imports if i in MODULES)


BELOW_THE_PLUGIN = ("harness/report/", "harness/fleet/")
"""What the plugin's outputs call (report/render.py, fleet/session_end.py) and ``harness report`` runs alone."""


def test_the_report_and_the_fleet_import_nothing_of_the_pytest_plugin():
    """Not even inside a function: importing any harness.plugin module runs the package's __init__, which loads
    the whole plugin (pytest, plugin/outputs.py, and through it report/render.py again): a cycle at import time
    that the check above, which follows modules and not packages, cannot see."""
    offenders = []
    for name, path in MODULES.items():
        if not str(path.relative_to(PACKAGE.parent)).startswith(BELOW_THE_PLUGIN):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            offenders += [f"{name}:{node.lineno}: {imported}" for imported in names
                          if imported == "harness.plugin" or imported.startswith("harness.plugin.")]
    assert not offenders, offenders


GROUND_FLOOR = "harness.results"
"""Typed results every stage shares (issue 29): they import nothing else of the harness."""


def test_the_ground_floor_imports_nothing_else_of_the_harness():
    found = {name: sorted(i for i in _top_level_imports(path, name) if not i.startswith(GROUND_FLOOR))
             for name, path in MODULES.items() if name.startswith(GROUND_FLOOR)}
    late = {name: sorted(node.module or "" for node in ast.walk(ast.parse(path.read_text()))
                         if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("harness")
                         and not (node.module or "").startswith(GROUND_FLOOR))
            for name, path in MODULES.items() if name.startswith(GROUND_FLOOR)}
    assert found and not any(found.values()) and not any(late.values()), (found, late)


JUDGING = ("harness/checks/", "harness/report/")
LOCATION_WORDS = ("GPU", "pid", "XID", "link", "rank", "node")


def test_no_judge_or_report_reads_a_location_out_of_prose():
    """Where a check failed is its ``locations``: no regular expression in checks/ or report/ may look for a
    GPU, a pid, an XID, a link, a rank or a node in a note (the wrong-GPU headline of issue 27 came from one)."""
    offenders = []
    for name, path in MODULES.items():
        if not str(path.relative_to(PACKAGE.parent)).startswith(JUDGING):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "re" and node.args
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
                    and any(word in node.args[0].value for word in LOCATION_WORDS)):
                offenders.append(f"{name}:{node.lineno}: re.{node.func.attr}({node.args[0].value!r})")
    assert not offenders, offenders


TELEMETRY_WRITER = ("harness/telemetry.py", "harness/results/telemetry_summary.py")
"""The sampler that writes a window's telemetry summary and the type every other stage reads it through."""
GPU_TELEMETRY_KEYS = ("reduced", "clock_events")
"""Keys of a GPU's entry in the summary's JSON: only the sampler and the type may spell them."""
TELEMETRY_KEYS = ("window", "metrics", "gpus")
"""Keys of the summary itself: spelled elsewhere for other things, so flagged where the expression reads a
``telemetry``."""


def test_the_telemetry_summary_is_read_through_its_type():
    """Issue 29: the telemetry summary was a dict read by string keys in four packages; it is read once, by
    harness/results/telemetry_summary.py, and by attribute everywhere else (``gpu.reduced``, ``summary.window_s``)."""
    offenders = []
    for name, path in MODULES.items():
        if str(path.relative_to(PACKAGE.parent)) in TELEMETRY_WRITER:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            key = None
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
                key = node.slice.value
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                  and node.args and isinstance(node.args[0], ast.Constant)):
                key = node.args[0].value
            if key in GPU_TELEMETRY_KEYS or (key in TELEMETRY_KEYS and "telemetry" in ast.unparse(node).lower()):
                offenders.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    assert not offenders, offenders


JOB_RESULT_MODULE = "harness/results/job.py"
JOB_RESULT_NAMES = ("JobResult", "Failure", "Status")


def test_every_kind_of_job_ends_in_one_result_shape():
    """Issue 29: two result shapes (``RunRecord``; ``launch/supervise.JobResult`` with ``failure: str``) became
    one: the ground floor's ``Status`` and ``Failure`` in every job's result, the jobs that write their own
    result subclassing its ``JobResult``, and no other module defining a shape of that name."""
    import typing

    from harness.kinds.interconnect.launch import AllReduceRun
    from harness.kinds.components.launch import ComponentsRun
    from harness.kinds.soak.launch import SoakRun
    from harness.records import RunRecord
    from harness.results.job import Failure, JobResult, Status

    assert all(issubclass(kind, JobResult) for kind in (AllReduceRun, ComponentsRun, SoakRun))
    record = typing.get_type_hints(RunRecord)
    result = typing.get_type_hints(JobResult)
    assert record["failure"] == result["failure"] == Failure | None
    assert record["status"] == result["status"] == Status
    elsewhere = [f"{name}: {node.targets[0].id if isinstance(node, ast.Assign) else node.name}"
                 for name, path in MODULES.items() if str(path.relative_to(PACKAGE.parent)) != JOB_RESULT_MODULE
                 for node in ast.parse(path.read_text()).body
                 if (isinstance(node, ast.ClassDef) and node.name in JOB_RESULT_NAMES)
                 or (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                     and node.targets[0].id in JOB_RESULT_NAMES)]
    assert not elsewhere, elsewhere


STAGES: tuple[tuple[str, ...], ...] = (
    ("results", "cases", "catalog", "definitions", "exitcodes", "durations", "files", "timeline", "records"),
    ("node",), ("run_directory",), ("profile",), ("jobs",), ("rank",), ("telemetry",), ("workloads",),
    ("launch",), ("checks",), ("report",), ("fleet",), ("plugin",), ("kinds",), ("selftest",), ("tools",),
    ("cli", "__main__"))
"""The top-level parts of the harness, bottom floor first (docs/architecture.md draws them): the ground floor's
types, tables and the run record, what the node is, the one reader of a run directory, the profile, what a kind
of job declares, the rank side and its workers, the launcher, the judges, the pages, the pytest plugin, the
kinds of job in folders of their own (issue 29 item 2) and the commands. A part imports only from its own floor
or below."""


def _part(module: str) -> str:
    """``checks`` of ``harness.checks.session``; ``cli`` of ``harness.cli``."""
    return module.split(".")[1] if "." in module else module


def _part_imports() -> dict[str, dict[str, list[str]]]:
    """part -> imported part -> the module-level imports that tie them (``harness.x -> harness.y``)."""
    found: dict[str, dict[str, list[str]]] = {}
    for name, path in MODULES.items():
        for imported in _top_level_imports(path, name):
            if imported == "harness" or imported.startswith("torch"):
                continue  # `from harness import telemetry` names harness.telemetry as well
            if _part(imported) != _part(name):
                found.setdefault(_part(name), {}).setdefault(_part(imported), []).append(f"{name} -> {imported}")
    return found


def _floor(part: str) -> int:
    return next(index for index, floor in enumerate(STAGES) if part in floor)


def test_every_top_level_part_has_its_floor():
    parts = {_part(name) for name in MODULES if name != "harness"}
    placed = {part for floor in STAGES for part in floor}
    assert parts - placed == set(), "place the new part in STAGES (and in docs/architecture.md)"


def test_no_import_runs_back_up_the_stages():
    """The stage order is the code's: a part imports only from its floor or below (issue 29)."""
    upward = {f"{part} -> {other}": ties for part, others in _part_imports().items() for other, ties in others.items()
              if _floor(other) > _floor(part)}
    assert upward == {}


def test_no_folder_level_import_cycle():
    """Module cycles are caught above; this one sees two parts tied both ways through different modules."""
    edges = {part: set(others) for part, others in _part_imports().items()}
    seen: dict[str, int] = {}  # 1: on the path being walked, 2: done

    def walk(part: str, path: list[str]) -> list[str] | None:
        seen[part] = 1
        for other in sorted(edges.get(part, ())):
            if seen.get(other) == 1:
                return path + [part, other]
            if other not in seen and (cycle := walk(other, path + [part])):
                return cycle
        seen[part] = 2
        return None

    cycles = [cycle for part in sorted(edges) if part not in seen and (cycle := walk(part, []))]
    assert cycles == []


KIND_RUNNERS = ("harness.kinds.interconnect.runner", "harness.kinds.soak.runner", "harness.kinds.components.runner",
                "harness.kinds.node_shape.runner", "harness.kinds.ddp_scaling.runner", "harness.kinds.gpu_state.runner")
"""The runners of the kinds of job with one (attached to their Job entries above the plugin, in harness/kinds/)."""


def test_the_session_reaches_a_kind_only_through_its_job():
    """Issue 29: the session builds each kind's runner from its Job declaration and reaches it through KindRunner;
    only the modules that attach the runners (harness/kinds/) import a kind's runner (an acceptance test reaches
    it as ``harness.runner(section)``), and nothing below the plugin does."""
    importers = {name for name, path in MODULES.items()
                 if set(KIND_RUNNERS) & _top_level_imports(path, name, type_only_too=True)}
    assert importers <= {"harness.kinds.shipped", "harness.kinds.interconnect.job", "harness.kinds.soak.job",
                         "harness.kinds.components.job", "harness.kinds.node_shape.job",
                         "harness.kinds.ddp_scaling.job", "harness.kinds.gpu_state.job", *KIND_RUNNERS}, importers
    assert "harness.plugin.session" not in importers


KINDS = "harness.kinds"
"""The kinds of job in folders of their own (issue 29 item 2): one floor above the plugin and the report."""


def _every_import(path: Path, module: str) -> list[tuple[int, str]]:
    """Every harness module ``path`` imports, wherever (module level, a function, TYPE_CHECKING), with its line."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            found += [(node.lineno, base)] + [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return [(line, name) for line, name in found if name.startswith("harness")]


def test_nothing_below_the_kinds_imports_a_kind_folder():
    """Not even inside a function or for a type checker: the core reaches a kind through its Job (harness/jobs/
    job.py: runner factory, report section), which the pytest_harness_jobs hook hands in; the first try at a kind
    folder (2026-11-27) was imported by plugin/session.py and report/view.py, a folder-level circle."""
    floor = _floor("kinds")
    offenders = [f"{name}:{line}: {imported}" for name, path in MODULES.items()
                 if name != "harness" and _floor(_part(name)) < floor
                 for line, imported in _every_import(path, name)
                 if imported == KINDS or imported.startswith(KINDS + ".")]
    assert offenders == []


def test_the_plugin_registers_the_shipped_kinds_by_name_and_they_hand_in_every_kind():
    """The one name the plugin knows above itself is the module that lists the shipped kinds; that module's hook
    returns them all, and each kind folder's jobs are in it (a folder left out would be refused at collection)."""
    from harness.jobs.job import Job
    from harness.kinds import shipped
    from harness.plugin.levels import SHIPPED_KINDS

    assert SHIPPED_KINDS == shipped.__name__ and shipped.pytest_harness_jobs(config=None) == list(shipped.JOBS)
    folders = {name.split(".")[2] for name in MODULES if name.count(".") >= 3 and name.startswith(KINDS + ".")}
    assert folders
    for folder in sorted(folders):
        declared = [value for value in vars(importlib.import_module(f"{KINDS}.{folder}.job")).values()
                    if isinstance(value, Job)]
        assert declared and all(job in shipped.JOBS for job in declared), folder


def test_a_kind_folder_imports_no_other_kind_folder():
    """A kind is one folder: it may use any stage below, never another kind (shipped.py lists them all)."""
    offenders = []
    for name, path in MODULES.items():
        parts = name.split(".")
        if len(parts) < 4 or not name.startswith(KINDS + "."):
            continue
        own = ".".join(parts[:3])
        offenders += [f"{name}:{line}: {imported}" for line, imported in _every_import(path, name)
                      if imported.startswith(KINDS + ".") and not (imported == own or imported.startswith(own + "."))]
    assert offenders == []


SHARED_SPECS_AND_PLANS = {"LaunchSettings", "LaunchedSpec", "BenchmarkSpec", "BenchmarkPlan", "CasePlan", "ModelSpec"}
"""What launch/ and workloads/ may define of specs and plans: what every kind's launch shares, and the DDP
benchmark's own (its worker is workloads/ddp.py; ModelSpec, the models every training worker builds)."""


def test_a_kinds_spec_and_plan_live_in_its_folder():
    """Issue 29 item 2: launch/ and workloads/ hold only the launch machinery every kind shares; a kind's spec,
    plan and arithmetic are in its folder (kinds/<kind>/spec.py, plan.py), and the launcher asks a spec only what
    ``LaunchedSpec`` offers, so nothing in launch/ or workloads/ names a kind's spec or plan."""
    defined = {f"{name}.{node.name}" for name, path in MODULES.items()
               if str(path.relative_to(PACKAGE.parent)).startswith(("harness/launch/", "harness/workloads/"))
               for node in ast.parse(path.read_text()).body
               if isinstance(node, ast.ClassDef) and node.name.endswith(("Spec", "Plan", "Settings"))}
    assert {name.rpartition(".")[2] for name in defined} <= SHARED_SPECS_AND_PLANS, defined
    from harness.kinds import shipped  # noqa: F401 - every kind's spec imported
    from harness.launch.spec import LaunchedSpec

    def subclasses(kind: type) -> list[type]:  # a slotted dataclass leaves its first class behind: by name
        return [sub for direct in kind.__subclasses__() for sub in (direct, *subclasses(direct))]

    elsewhere = {f"{spec.__module__}.{spec.__name__}" for spec in subclasses(LaunchedSpec)
                 if not spec.__module__.startswith(KINDS + ".")}
    assert elsewhere == {"harness.launch.spec.BenchmarkSpec"}


def test_the_profile_package_names_no_kinds_table_or_key():
    """Each kind declares its own bounds table (harness/kinds/<kind>/bounds.py, ``Job.bounds``) and the loader is
    handed them: nothing in harness/profile/ spells a shipped kind's table or one of its keys (issue 29 item 2)."""
    from harness.kinds.shipped import BOUNDS_TABLES
    from harness.profile.schema import TOP_LEVEL_FIELDS

    own = {spec.key for spec in TOP_LEVEL_FIELDS} | {"source"}
    keys = {spec.key for table in BOUNDS_TABLES for spec in table.fields}
    spelt = ({table.name for table in BOUNDS_TABLES} | keys) - own
    assert {"interconnect", "components", "min_allreduce_busbw_gbps", "require_ecc"} <= spelt
    offenders = [f"{name}:{node.lineno}: {node.value!r}" for name, path in MODULES.items()
                 if name.startswith("harness.profile") for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.Constant) and isinstance(node.value, str)
                 and any(word in spelt for word in node.value.replace(".", " ").split())]
    assert offenders == []


def test_launch_and_workloads_read_no_field_of_a_kinds_plan():
    """The heartbeat tells a launch's steps from plan.json's ``steps``, which each kind's plan says of itself
    (``planned_steps``): nothing in launch/ or workloads/ spells a field only a kind's plan has (the soak's
    ``duration_seconds``, the sweep's ``target_seconds``)."""
    from dataclasses import fields

    from harness.kinds.interconnect.plan import AllReducePlan
    from harness.kinds.soak.plan import SoakPlan
    from harness.workloads.plan import CasePlan

    kinds_only = {field.name for plan in (AllReducePlan, SoakPlan) for field in fields(plan)} - {
        field.name for field in fields(CasePlan)}
    assert {"duration_seconds", "target_seconds"} <= kinds_only
    offenders = [f"{name}:{node.lineno}: {node.value!r}" for name, path in MODULES.items()
                 if name.startswith(("harness.launch", "harness.workloads"))
                 for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.Constant) and node.value in kinds_only]
    assert offenders == []


def test_the_plugin_declares_no_kinds_own_option():
    """A kind's own option (``Job.options``: the soak's ``--soak``) is declared and parsed through its Job: the
    plugin spells none of them (issue 29)."""
    from harness.kinds import shipped

    spellings = {spelling for job in shipped.JOBS for option in job.options
                 for spelling in (option.name, option.short, f"--harness-{option.name}", f"harness_{option.name}")}
    assert spellings
    offenders = [f"{name}:{node.lineno}: {node.value!r}" for name, path in MODULES.items()
                 if name.startswith("harness.plugin") for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.Constant) and node.value in spellings]
    assert offenders == []


WORKER_MUST_NOT_LOAD = ("harness.plugin", "harness.report", "harness.checks", "harness.fleet", "harness.kinds.shipped",
                        "pytest")
"""What a kind's torchrun worker must not load: it runs inside torchrun on every rank, where the launcher's side,
the judges and the pages have no business (and would slow every rank's start)."""


def test_a_kinds_worker_loads_no_plugin_report_or_judge():
    """``python -m harness.kinds.<kind>.worker`` imports the packages on its way (harness.kinds and the kind's
    own __init__) and what the worker imports at module level, and the kind's own modules also what they import
    when they run (the soak's worker starts its loop so); none of it may reach the plugin, the report, the
    judges or the shipped list (a kind's __init__ stays empty for that)."""
    workers = sorted(name for name in MODULES if name.startswith(KINDS + ".") and name.endswith(".worker"))
    assert workers, "no kind's worker found"
    for worker in workers:
        parts = worker.split(".")
        own = ".".join(parts[:3])
        seen: set[str] = set()
        todo = [".".join(parts[:n]) for n in range(1, len(parts) + 1)]
        while todo:
            name = todo.pop()
            if name in seen or name not in MODULES:
                continue
            seen.add(name)
            imports = _top_level_imports(MODULES[name], name)
            if name.startswith(own + "."):
                imports |= {imported for _, imported in _every_import(MODULES[name], name)}
            assert not [i for i in imports if i.startswith(WORKER_MUST_NOT_LOAD)], (worker, name, imports)
            text = MODULES[name].read_text()
            assert "import pytest" not in text, (worker, name)
            todo.extend(i for i in imports if i in MODULES)
            todo.extend(".".join(i.split(".")[:n]) for i in imports for n in range(2, i.count(".") + 1))
