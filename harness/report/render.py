"""The sign-off report: one self-contained HTML page, rebuilt from a run directory's saved JSON.

Inputs are the files an acceptance session leaves in ``reports/<run-id>/``: ``report.json``
(pytest-json-report, each test's record and checks attached), ``session.json`` (the harness's
own summary, written even when pytest-json-report is not), and ``runs/*.json`` (run records).
When the session was killed, report.json may be missing or cut short: the page is then built
from what is left and says INCOMPLETE.

The shape is a thin I/O edge (``load_inputs``) around pure functions that turn the loaded JSON
into one view dict (``build_view``), rendered once by ``templates/report.html.j2`` with
autoescape on. Every string read from any input is also cleaned at the edge (control characters
replaced, each field and log line cut to a size), because they end up in a page people open in a
browser: a hostname or a log line is data, never markup.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable

from harness.report import charts as svg
from harness.workloads.compilecache import summary as compile_cache_summary
from harness.workloads.busbw import size_label

FIELD_CHARS = 4000
"""Longest single string kept from any input (a profile description, a failure message)."""
LOG_TAIL_LINES = 40
"""Last lines of each rank's log shown for a failed run."""
LOG_LINE_CHARS = 300
"""Longest log line shown; torch stack dumps and progress bars can make one line megabytes."""
KEY_CHARS = 200

PRECISION_COLORS = {"bf16": "#2f6fdf", "fp16": "#d9480f", "fp32": "#7048e8"}
OTHER_COLORS = ("#0b7285", "#5c940d", "#a61e4d", "#495057")
GPU_COLORS = ("#2f6fdf", "#d9480f", "#2b8a3e", "#7048e8", "#0b7285", "#c2255c", "#e67700", "#495057")

# The case bounds [defaults] may set for every case: harness.profile.schema.CASE_FIELDS with
# inherit=True (tests/test_report.py keeps the two in step; importing thresholds here would import
# torch, and the report must build from JSON alone).
INHERITED_BOUNDS = ("min_weak_efficiency", "min_gpu_utilization_pct", "min_power_fraction_of_limit",
                    "max_temperature_c", "max_straggler_ratio", "max_step_time_cv")

CONTAINER_ENV_VARS = ("HARNESS_CONTAINER_IMAGE", "APPTAINER_NAME", "SINGULARITY_NAME", "APPTAINER_CONTAINER",
                      "SINGULARITY_CONTAINER")

# Case ids: resnet50-bf16-4gpu, or resnet50-bf16-2x4gpu for 2 nodes of 4 GPUs (Slurm).
_NODE_PARAMS = re.compile(
    r"\[(?P<model>[^\[\]]+)-(?P<precision>[A-Za-z0-9]+)-(?:(?P<nodes>[0-9]{1,4})x)?(?P<gpus>[0-9]{1,5})gpu\]$")
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
# C0 controls except tab and newline, DEL, C1 controls, bidi overrides (they reorder what a
# reader sees), lone surrogates (unencodable) and non-characters.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]")


class ReportError(Exception):
    """The report cannot be built: ``str(err)`` is the one line to show (what, where, what to do)."""


# --- cleaning every input string -------------------------------------------------------------


def clean_text(value: Any, limit: int = FIELD_CHARS, *, one_line: bool = False) -> str:
    """``value`` as text that is safe to show: no control characters, at most ``limit`` characters."""
    text = value if isinstance(value, str) else str(value)
    original = len(text)
    text = text[: limit * 2]  # cleaning only shortens, so never look at more than this
    text = _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    if one_line:
        text = text.replace("\n", " ").replace("\t", " ")
    text = _CONTROL.sub("\ufffd", text)
    if len(text) > limit or original > limit * 2:
        cut = original - limit if original > limit * 2 else len(text) - limit
        text = f"{text[:limit]} … [{cut:,} more characters cut]"
    return text


def clean_log_tail(value: Any, lines: int = LOG_TAIL_LINES, line_chars: int = LOG_LINE_CHARS) -> str:
    """The last ``lines`` lines of a log, each cut to ``line_chars``: the end is what explains a crash."""
    text = value if isinstance(value, str) else str(value)
    window = lines * line_chars * 4  # enough for the last lines unless they are very long
    cut_earlier = len(text) > window
    text = _ANSI.sub("", text[-window:]).replace("\r\n", "\n").replace("\r", "\n")
    all_lines = text.split("\n")
    while all_lines and not all_lines[-1].strip():
        all_lines.pop()
    shown = [clean_text(line, line_chars, one_line=True) for line in all_lines[-lines:]]
    if cut_earlier:
        shown.insert(0, "… (earlier lines not shown)")
    elif len(all_lines) > lines:
        shown.insert(0, f"… ({len(all_lines) - lines} earlier lines not shown)")
    return "\n".join(shown)


def sanitize(data: Any) -> Any:
    """A copy of parsed JSON with every string cleaned (log tails keep their end, not their start)."""
    if isinstance(data, str):
        return clean_text(data)
    if isinstance(data, dict):
        cleaned = {}
        for key, value in data.items():
            key = clean_text(key, KEY_CHARS, one_line=True)
            if key == "log_tails" and isinstance(value, dict):
                cleaned[key] = {clean_text(k, KEY_CHARS, one_line=True): clean_log_tail(v) for k, v in value.items()}
            else:
                cleaned[key] = sanitize(value)
        return cleaned
    if isinstance(data, (list, tuple)):
        return [sanitize(item) for item in data]
    if isinstance(data, float) and not math.isfinite(data):
        return None  # Python's json reads NaN/Infinity; a bound or measurement that is not a number is absent
    return data


# --- the I/O edge ----------------------------------------------------------------------------


@dataclass(kw_only=True)
class RunInputs:
    """What a run directory holds, parsed and cleaned; a file that cannot be used has a problem line."""

    run_dir: Path
    report: dict | None = None
    report_problem: str | None = None
    session: dict | None = None
    session_problem: str | None = None
    records: dict[str, dict] = field(default_factory=dict)
    """runs/<label>.json, keyed by label."""
    record_problems: list[str] = field(default_factory=list)


def _read_json(path: Path) -> tuple[Any, str | None]:
    if not path.exists():
        return None, "missing"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})"
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        where = f" at line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else ""
        return None, f"is not valid JSON{where} (cut short? the session may have been killed while writing it)"
    if not isinstance(data, dict):
        return None, f"is not a JSON object (found {type(data).__name__})"
    return sanitize(data), None


def load_inputs(run_dir: Path) -> RunInputs:
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise ReportError(f"run directory {run_dir} does not exist; pass the reports/<run-id>/ directory an "
                          "acceptance session wrote (e.g. reports/latest)")
    if not run_dir.is_dir():
        raise ReportError(f"{run_dir} is not a directory; pass the reports/<run-id>/ directory an acceptance "
                          "session wrote (e.g. reports/latest)")
    inputs = RunInputs(run_dir=run_dir)
    inputs.report, inputs.report_problem = _read_json(run_dir / "report.json")
    inputs.session, inputs.session_problem = _read_json(run_dir / "session.json")
    runs = run_dir / "runs"
    if runs.is_dir():
        for path in sorted(runs.glob("*.json")):
            record, problem = _read_json(path)
            if record is None:
                inputs.record_problems.append(clean_text(f"runs/{path.name} {problem}", one_line=True))
            else:
                inputs.records[clean_text(path.stem, KEY_CHARS, one_line=True)] = record
    if inputs.report is None and inputs.session is None and not inputs.records:
        raise ReportError(
            f"no usable run data in {run_dir}: report.json {inputs.report_problem}, session.json "
            f"{inputs.session_problem}, no readable runs/*.json; pass the reports/<run-id>/ directory an "
            "acceptance session wrote, or rerun `make acceptance`")
    return inputs


# --- small helpers for the view --------------------------------------------------------------


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond any float, e.g. 10**400 in a hand-edited file
        return None
    return number if math.isfinite(number) else None


def _int(value: Any) -> int | None:
    number = _num(value)
    return int(number) if number is not None and number == int(number) else None


def _str(value: Any, default: str = "") -> str:
    if value is None or isinstance(value, (dict, list)):
        return default
    return clean_text(value)


def fmt_number(value: Any) -> str:
    """Like verdict.Check.describe, with significant digits kept for small fractions (a CV of 0.0015)."""
    number = _num(value)
    if number is None:
        return "—"
    if abs(number) >= 10 and number == int(number):
        return f"{number:,.0f}"
    if abs(number) >= 100:
        return f"{number:,.1f}"
    if abs(number) >= 0.1 or number == 0:
        return f"{number:.3f}"
    return f"{number:.3g}"


def fmt_rate(value: Any) -> str:
    """A throughput: one decimal whatever its size (56.6 img/s on a CPU, 4,647.6 on an H200)."""
    number = _num(value)
    return "—" if number is None else f"{number:,.1f}"


def fmt_pct(value: Any, digits: int = 1) -> str:
    number = _num(value)
    return "—" if number is None else f"{number * 100:.{digits}f} %"


def fmt_duration(seconds: float | None) -> str:
    if seconds is None or seconds < 0:
        return "unknown"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min {secs:02d} s"
    if minutes:
        return f"{minutes} min {secs:02d} s"
    return f"{secs} s"


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def fmt_time(value: Any) -> str:
    moment = _parse_time(value)
    if moment is None:
        return _str(value, "unknown") or "unknown"
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    offset = moment.utcoffset()
    if offset is None:
        return f"{text} (local time)"
    return f"{text} UTC" if not offset else f"{text} UTC{moment.strftime('%z')}"


def short_unit(unit: str) -> str:
    return unit.replace("images/s", "img/s").replace("sequences/s", "seq/s")


def _slug(*parts: Any) -> str:
    return "-".join(re.sub(r"[^A-Za-z0-9_.-]+", "_", str(p)) for p in parts)[:160]


def _gpu_word(device: str, count: int) -> str:
    if device == "cpu":
        return "rank" if count == 1 else "ranks"
    return "GPU" if count == 1 else "GPUs"


# --- tests: what was run, and how it ended ---------------------------------------------------

OUTCOMES = ("passed", "failed", "skipped", "error", "xfailed", "xpassed")


_SKIP_TUPLE = re.compile(r"""^\(.*?, \d+, (['"])(?P<reason>.*)\1\)$""", re.S)


def _skip_reason(longrepr: Any) -> str:
    # pytest-json-report stores a skip as the repr of (path, line, "Skipped: reason").
    if isinstance(longrepr, list) and longrepr:
        longrepr = longrepr[-1]
    text = _str(longrepr).strip()
    match = _SKIP_TUPLE.match(text)
    if match:
        text = match["reason"]
    return text.removeprefix("Skipped: ")


def _case_of(nodeid: str, harness: dict) -> dict | None:
    record = _dict(harness.get("record"))
    if record.get("model") and record.get("precision") and _int(record.get("world_size")):
        return {"scaling": _str(harness.get("scaling") or record.get("scaling") or "weak"),
                "model": _str(record["model"]), "precision": _str(record["precision"]),
                "gpus": _int(record["world_size"])}
    match = _NODE_PARAMS.search(nodeid)
    if not match:
        return None
    function = nodeid.split("::")[-1].split("[")[0]
    return {"scaling": "strong" if "strong" in function else "weak", "model": match["model"],
            "precision": match["precision"], "gpus": int(match["gpus"]) * int(match["nodes"] or 1)}


def _derived_outcome(harness: dict) -> str:
    return "failed" if any(_dict(c).get("passed") is False for c in _list(harness.get("checks"))) else "passed"


def collect_tests(inputs: RunInputs) -> list[dict]:
    """Every test of the session, from report.json; results only session.json knows are added."""
    tests: list[dict] = []
    seen: set[str] = set()
    for raw in _list(_dict(inputs.report).get("tests")):
        raw = _dict(raw)
        nodeid = _str(raw.get("nodeid"), "(no test id)")
        harness = _dict(_dict(raw.get("metadata")).get("harness"))
        outcome = raw.get("outcome") if raw.get("outcome") in OUTCOMES else None
        message, skip_reason = "", ""
        for phase in ("setup", "call", "teardown"):
            stage = _dict(raw.get(phase))
            if stage.get("outcome") in ("failed", "error") and not message:
                message = _str(stage.get("longrepr"))
            if stage.get("outcome") == "skipped" and not skip_reason:
                skip_reason = _skip_reason(stage.get("longrepr"))
        duration = sum(_num(_dict(raw.get(p)).get("duration")) or 0.0 for p in ("setup", "call", "teardown"))
        tests.append({"nodeid": nodeid, "outcome": outcome, "outcome_derived": False, "harness": harness,
                      "message": message, "skip_reason": skip_reason, "duration_s": duration,
                      "case": _case_of(nodeid, harness)})
        seen.add(nodeid)
    for nodeid, harness in _dict(_dict(inputs.session).get("results")).items():
        if nodeid in seen:
            continue
        harness = _dict(harness)
        tests.append({"nodeid": nodeid, "outcome": None, "outcome_derived": True, "harness": harness,
                      "derived": _derived_outcome(harness), "message": "", "skip_reason": "",
                      "duration_s": None, "case": _case_of(nodeid, harness)})
    return tests


def _shown_outcome(test: dict) -> str:
    if test["outcome"]:
        return test["outcome"]
    return test.get("derived") or "unknown"


# --- verdict ---------------------------------------------------------------------------------


def build_verdict(inputs: RunInputs, header: dict, tests: list[dict]) -> dict:
    counts = {name: 0 for name in ("passed", "failed", "skipped", "error")}
    missing = 0
    for test in tests:
        outcome = test["outcome"]
        if outcome is None:
            missing += 1
            continue
        key = {"xpassed": "passed", "xfailed": "skipped"}.get(outcome, outcome)
        counts[key] += 1
    incomplete: list[str] = []
    if inputs.report is None:
        incomplete.append(f"report.json {inputs.report_problem}: pytest did not finish its report, so the "
                          "test outcomes below come from session.json and runs/ (the session was probably killed)")
    session = _dict(inputs.session)
    exitstatus = _int(session.get("exitstatus"))
    if exitstatus is None:
        exitstatus = _int(_dict(inputs.report).get("exitcode"))
    if session.get("interrupted") is True or exitstatus == 2:
        status = exitstatus if exitstatus is not None else "unknown"
        incomplete.append(f"the session was interrupted (exit status {status}): cases after the interruption never ran")
    elif exitstatus in (3, 4):
        incomplete.append(f"pytest ended with exit status {exitstatus} "
                          f"({'internal error' if exitstatus == 3 else 'usage error'})")
    if missing:
        incomplete.append(f"{missing} test{'s have' if missing > 1 else ' has'} no recorded outcome")
    if tests and not counts["passed"] and not counts["failed"] and not counts["error"] and not missing:
        incomplete.append("no test ran: every test was skipped")
    if not tests:
        incomplete.append("no test results were recorded")
    notes = []
    if inputs.session is None:
        notes.append(f"session.json {inputs.session_problem}")
    notes += inputs.record_problems
    derived_failures = sum(1 for t in tests if t["outcome"] is None and t.get("derived") == "failed")
    if counts["failed"] or counts["error"] or derived_failures:
        state = "fail"
    elif incomplete:
        state = "incomplete"
    else:
        state = "pass"
    started, finished = _parse_time(header.get("started_at")), _parse_time(header.get("finished_at"))
    wall = None
    if started and finished and (started.tzinfo is None) == (finished.tzinfo is None):
        wall = (finished - started).total_seconds()
    elif _num(_dict(inputs.report).get("duration")) is not None:
        wall = _num(inputs.report["duration"])
    return {"state": state, "title": {"pass": "PASS", "fail": "FAIL", "incomplete": "INCOMPLETE"}[state],
            "counts": counts, "missing": missing, "derived_failures": derived_failures, "total": len(tests),
            "incomplete": incomplete, "notes": notes, "exitstatus": exitstatus,
            "run_id": _str(header.get("run_id")) or clean_text(inputs.run_dir.name, KEY_CHARS, one_line=True),
            "started": fmt_time(header.get("started_at")) if header.get("started_at") else "unknown",
            "finished": fmt_time(header.get("finished_at")) if header.get("finished_at") else "not recorded",
            "wall": fmt_duration(wall)}


# --- sign-off record -------------------------------------------------------------------------


def _all_records(tests: list[dict], inputs: RunInputs) -> list[dict]:
    records = [_dict(t["harness"].get("record")) for t in tests if t["harness"].get("record")]
    return records + list(inputs.records.values())


def _container(header: dict, environment: dict) -> str:
    if "container" in header:
        value = header["container"]
        if not value:
            return "not in a container"
        if isinstance(value, dict):
            return ", ".join(f"{k}: {_str(v)}" for k, v in value.items() if v not in (None, "")) or "not in a container"
        return _str(value)
    for source in (_dict(header.get("environment")), environment):
        for name in CONTAINER_ENV_VARS:
            if source.get(name):
                return f"{_str(source[name])} ({name})"
    return "not recorded (this harness version does not record the container image)"


def build_signoff(inputs: RunInputs, header: dict, tests: list[dict]) -> dict:
    hardware = _dict(header.get("hardware"))
    records = _all_records(tests, inputs)
    hosts = [_str(hardware.get("hostname"))] if hardware.get("hostname") else []
    for record in records:
        hosts += [_str(h) for h in _list(record.get("hosts"))]
    hosts = list(dict.fromkeys(h for h in hosts if h))
    versions = next((_dict(r.get("versions")) for r in records if r.get("versions")), {})
    device = _str(hardware.get("device")) or next(
        (_str(r.get("device_kind")) for r in records if r.get("device_kind")), "")
    gpus = [_dict(g) for g in _list(hardware.get("gpus"))]
    by_name: dict[str, list[dict]] = {}
    for gpu in gpus:
        by_name.setdefault(_str(gpu.get("name"), "unknown GPU"), []).append(gpu)
    if by_name:
        gpu_text = "; ".join(
            f"{len(group)} × {name}" + (f" ({fmt_number(group[0].get('memory_total_gib'))} GiB each)"
                                        if _num(group[0].get("memory_total_gib")) else "")
            for name, group in by_name.items())
    elif device == "cpu":
        reason = _str(hardware.get("nvml_unavailable_reason"))
        gpu_text = "none: a CPU run (ranks are CPU processes, gloo)" + (f"; NVML: {reason}" if reason else "")
    else:
        gpu_text = "not recorded"
    profile = _dict(header.get("profile"))
    command = header.get("command_line")
    if isinstance(command, list):
        command_text = clean_text(shlex.join(_str(part) for part in command))
    else:
        command_text = _str(command, "not recorded") or "not recorded"
    cuda_driver, cuda_runtime = _str(hardware.get("cuda_driver_version")), _str(hardware.get("cuda_runtime_version"))
    cuda_runtime = cuda_runtime or _str(versions.get("cuda"))
    nccl = _str(hardware.get("nccl_version")) or _str(versions.get("nccl"))
    if device == "cpu":
        cuda = "not used (CPU run)" + (f"; PyTorch is built for CUDA {cuda_runtime}" if cuda_runtime else "")
        nccl = "not used (CPU run, gloo)" + (f"; PyTorch bundles NCCL {nccl}" if nccl else "")
    elif cuda_driver or cuda_runtime:
        cuda = f"driver API {cuda_driver or 'unknown'}, runtime {cuda_runtime or 'unknown'}"
    else:
        cuda = "not recorded"
    commit = next((_str(header.get(key)) for key in ("git_commit", "harness_git_commit") if header.get(key)), "")
    environment = _dict(_dict(inputs.report).get("environment"))
    rows = [
        ("Host" if len(hosts) <= 1 else "Hosts", ", ".join(hosts) or "not recorded"),
        ("GPUs", gpu_text),
        ("Driver", _str(hardware.get("driver_version")) or _str(versions.get("driver")) or
         ("none (CPU run)" if device == "cpu" else "not recorded")),
        ("CUDA", cuda),
        ("NCCL", nccl or "not recorded"),
        ("PyTorch", _str(hardware.get("torch_version")) or _str(versions.get("torch")) or "not recorded"),
        ("Python", _str(versions.get("python")) or _str(environment.get("Python")) or "not recorded"),
        ("Harness", f"{_str(header.get('harness_version')) or _str(versions.get('harness')) or 'unknown'}"
                    f" (git commit {commit or 'unknown'})"),
        ("Threshold profile", (f"{_str(profile.get('name'))} ({_str(profile.get('path'))})" if profile.get("name")
                               else "not recorded")),
        ("Profile sha256", _str(profile.get("sha256")) or "not recorded"),
        ("Profile describes", _str(profile.get("description")) or "not recorded"),
        ("Command line", command_text),
        ("Container", _container(header, environment)),
        ("CUDA_VISIBLE_DEVICES", _str(hardware.get("cuda_visible_devices")) or "not set"),
    ]
    gpu_rows = [{"index": _str(g.get("index")), "name": _str(g.get("name")),
                 "memory": fmt_number(g.get("memory_total_gib")) + " GiB" if _num(g.get("memory_total_gib")) else "—",
                 "pci": _str(g.get("pci_bus_id")) or "—", "uuid": _str(g.get("uuid")) or "—"} for g in gpus]
    sources = []
    if inputs.report is not None:
        sources.append("report.json")
    if inputs.session is not None:
        sources.append("session.json")
    if inputs.records:
        sources.append(f"{len(inputs.records)} run record{'s' if len(inputs.records) != 1 else ''} in runs/")
    return {"rows": rows, "gpus": gpu_rows, "device": device, "run_dir": _str(header.get("run_dir")),
            "built_from": ", ".join(sources)}


# --- thresholds ------------------------------------------------------------------------------


def case_bounds(raw_profile: dict, model: str, precision: str) -> dict | None:
    """The profile's bounds for one case merged with [defaults], as harness.profile.schema does."""
    case = _dict(_dict(_dict(raw_profile.get("models")).get(model)).get(precision))
    if not case:
        return None
    defaults = _dict(raw_profile.get("defaults"))
    merged = {key: defaults[key] for key in INHERITED_BOUNDS if key in defaults and key not in case}
    merged.update(case)
    merged["_inherited"] = sorted(k for k in INHERITED_BOUNDS if k in defaults and k not in case)
    return merged


def _by_count(table: Any) -> dict[int, float]:
    counts = {}
    for key, value in _dict(table).items():
        key = str(key)
        count = int(key) if key.isascii() and key.isdigit() and len(key) < 6 else None
        number = _num(value)
        if count is not None and number is not None:
            counts[count] = number
    return dict(sorted(counts.items()))


def _with_unit(value: Any, unit: str) -> str:
    return f"{fmt_number(value)} {unit}" if _num(value) is not None else "—"


def _count_table(table: Any) -> str:
    counts = _by_count(table)
    return " · ".join(f"{n}: {fmt_number(v)}" for n, v in counts.items()) if counts else "—"


def build_thresholds(header: dict, cases_used: list[tuple[str, str]], units: dict[tuple[str, str], str]) -> dict:
    profile = _dict(header.get("profile"))
    raw = _dict(profile.get("raw"))
    hardware = _dict(raw.get("hardware"))
    defaults = _dict(raw.get("defaults"))
    run = _dict(raw.get("run"))
    sources: list[str] = []

    def cite(text: Any) -> str:
        text = _str(text)
        if not text:
            return ""
        if text not in sources:
            sources.append(text)
        return str(sources.index(text) + 1)

    facts = [
        ("Name", _str(hardware.get("name") or profile.get("name")) or "not recorded"),
        ("Description", _str(hardware.get("description") or profile.get("description")) or "not recorded"),
        ("File", _str(profile.get("path")) or "not recorded"),
        ("sha256", _str(profile.get("sha256")) or "not recorded"),
        ("Schema version", _str(raw.get("schema_version")) or "—"),
        ("Device", _str(hardware.get("device")) or "—"),
    ]
    match = _dict(hardware.get("match"))
    if match:
        facts.append(("Matches", ", ".join(f"{k} = {_str(v)}" for k, v in match.items())))
    peaks = _dict(hardware.get("peak_tflops"))
    if peaks:
        ref = cite(hardware.get("peak_tflops_source"))
        facts.append(("Dense peak TFLOP/s (for MFU)",
                      ", ".join(f"{k} {fmt_number(v)}" for k, v in peaks.items()) + (f"  [{ref}]" if ref else "")))
    if run:
        facts.append(("Run settings",
                      ", ".join(f"{k.replace('_seconds', '')} {fmt_number(v)} s" for k, v in run.items())))
    if defaults:
        facts.append(("Default matrix", f"{', '.join(_str(m) for m in _list(defaults.get('models')))} × "
                                        f"{', '.join(_str(p) for p in _list(defaults.get('precisions')))} × "
                                        f"{', '.join(_str(g) for g in _list(defaults.get('gpu_counts')))} GPUs"))
    rows = []
    for model, precision in cases_used:
        bounds = case_bounds(raw, model, precision)
        if bounds is None:
            rows.append({"model": model, "precision": precision, "missing": True})
            continue
        inherited = set(bounds["_inherited"])
        ref = cite(bounds.get("source"))
        default_ref = cite(defaults.get("source")) if inherited else ""

        def shown(key: str, text: str) -> dict:
            return {"text": text, "inherited": key in inherited and text != "—"}

        unit = short_unit(units.get((model, precision), "samples/s"))
        rows.append({
            "model": model, "precision": precision, "missing": False,
            "batch": _str(bounds.get("batch_size_per_gpu")) or "—",
            "throughput": _with_unit(bounds.get("min_samples_per_sec_per_gpu"), unit),
            "weak": shown("min_weak_efficiency", _count_table(bounds.get("min_weak_efficiency"))),
            "strong": (f"{_count_table(bounds.get('min_strong_efficiency'))} (global batch "
                       f"{_str(bounds.get('strong_global_batch_size'))})"
                       if bounds.get("min_strong_efficiency") else "—"),
            "straggler": shown("max_straggler_ratio", fmt_number(bounds.get("max_straggler_ratio"))),
            "cv": shown("max_step_time_cv", fmt_number(bounds.get("max_step_time_cv"))),
            "util": shown("min_gpu_utilization_pct", _with_unit(bounds.get("min_gpu_utilization_pct"), "%")),
            "other": "; ".join(f"{k} {fmt_number(bounds[k])}" for k in ("min_power_fraction_of_limit",
                                                                        "max_temperature_c") if k in bounds),
            "sources": [s for s in (ref, default_ref) if s],
        })
    unused = sum(len(_dict(precisions)) for precisions in _dict(raw.get("models")).values()) - len(
        [r for r in rows if not r["missing"]])
    extra_sections = []
    for name in ("interconnect", "topology", "soak"):
        section = _dict(raw.get(name))
        if section:
            ref = cite(section.get("source"))
            items = ", ".join(f"{k} = {_count_table(v) if isinstance(v, dict) else _str(v)}"
                              for k, v in section.items() if k != "source")
            extra_sections.append((f"[{name}]", items + (f"  [{ref}]" if ref else "")))
    return {"facts": facts, "rows": rows, "unused": max(unused, 0), "sources": sources,
            "has_other": any(r.get("other") for r in rows),
            "extra": extra_sections, "recorded": bool(raw)}


# --- cases: matrix cells and per-test sections -----------------------------------------------


def _checks(harness: dict) -> list[dict]:
    shown = []
    for check in _list(harness.get("checks")):
        check = _dict(check)
        passed = check.get("passed")
        unit = _str(check.get("unit"))
        measured, bound = _num(check.get("measured")), _num(check.get("bound"))
        comparison = _str(check.get("comparison")) if check.get("comparison") in (">=", "<=", "==") else ""
        fmt = fmt_rate if unit.endswith("/s") else fmt_number
        shown.append({
            "name": _str(check.get("name"), "(unnamed check)"), "kind": _str(check.get("kind")),
            "measured": (fmt(measured) + (f" {unit}" if unit else "")) if measured is not None else "—",
            "bound": (f"{'≥' if comparison == '>=' else '≤' if comparison == '<=' else ''} {fmt(bound)}"
                      + (f" {unit}" if unit else "")) if bound is not None else "—",
            "state": "pass" if passed is True else "fail" if passed is False else "none",
            "result": "PASS" if passed is True else "FAIL" if passed is False else "NOT EVALUATED",
            "note": _str(check.get("note")),
        })
    return shown


def _check_value(harness: dict, fragment: str, what: str = "measured") -> tuple[float | None, bool | None]:
    for check in _list(harness.get("checks")):
        check = _dict(check)
        if fragment in _str(check.get("name")):
            return _num(check.get(what)), check.get("passed") if isinstance(check.get("passed"), bool) else None
    return None, None


def _rank_where(host: Any, gpu: Any, device: str) -> str:
    parts = []
    if _str(host):
        parts.append(f"host {_str(host)}")
    if _int(gpu) is not None:
        parts.append(f"GPU {_int(gpu)}")
    elif device == "cpu":
        parts.append("CPU")
    return ", ".join(parts)


def record_facts(record: dict) -> list[tuple[str, str]]:
    """The measurements of one run record, as label/value lines."""
    if not record:
        return []
    unit = _str(record.get("sample_unit"), "samples")
    device = _str(record.get("device_kind"))
    facts = []
    per_gpu, total = _num(record.get("throughput_per_gpu")), _num(record.get("throughput_total"))
    if per_gpu is not None:
        ci = _num(record.get("throughput_ci95_rel"))
        # What the CI covers matters to whoever signs: on 4 x H200 figures moved between runs by more
        # than their CIs (docs/measurements.md), so the line says it is within-window noise.
        ci_text = (f" (95 % CI ±{ci * 100:.2f} % from {_str(record.get('ci_blocks'), '?')} batch means: "
                   "the noise within this window, not between runs)" if ci is not None else "")
        facts.append(("Throughput per " + ("GPU" if device != "cpu" else "rank"),
                      f"{fmt_rate(per_gpu)} {unit}/s{ci_text}"))
    if total is not None:
        facts.append(("Throughput total", f"{fmt_rate(total)} {unit}/s over {_str(record.get('world_size'))} "
                                          f"{_gpu_word(device, _int(record.get('world_size')) or 0)}, global batch "
                                          f"{_str(record.get('global_batch_size'))}"))
    mfu, tflops, peak = _num(record.get("mfu")), _num(record.get("tflops_per_gpu")), _num(record.get("peak_tflops"))
    if mfu is not None:
        facts.append(("MFU", f"{fmt_pct(mfu)} ({fmt_number(tflops)} of {fmt_number(peak)} dense TFLOP/s per GPU)"))
    elif tflops is not None:
        facts.append(("Model TFLOP/s per " + ("GPU" if device != "cpu" else "rank"),
                      f"{fmt_number(tflops)} (no peak in the profile, so no MFU)"))
    steps = _dict(record.get("step_time_ms"))
    if steps:
        facts.append(("Step time", f"mean {fmt_number(steps.get('mean_ms'))} ms, median "
                                   f"{fmt_number(steps.get('median_ms'))}, p95 {fmt_number(steps.get('p95_ms'))}, p99 "
                                   f"{fmt_number(steps.get('p99_ms'))} ms; CV {fmt_pct(steps.get('cv'), 2)} over "
                                   f"{_str(steps.get('steps'))} steps (all ranks)"))
    straggler = _dict(record.get("straggler"))
    if straggler and (_int(record.get("world_size")) or 0) > 1:
        slow = _rank_where(straggler.get("slowest_host"), straggler.get("slowest_gpu_index"), device)
        fast = _rank_where(straggler.get("fastest_host"), straggler.get("fastest_gpu_index"), device)
        facts.append(("Straggler", f"{fmt_number(straggler.get('ratio'))}: slowest rank "
                                   f"{_str(straggler.get('slowest_rank'))} ({slow}), fastest rank "
                                   f"{_str(straggler.get('fastest_rank'))} ({fast}); "
                                   "compute step time, gradient sync off"))
    memory = _num(record.get("peak_memory_gib"))
    if memory is not None:
        facts.append(("Peak memory", f"{fmt_number(memory)} GiB per rank (max)"))
    settings = _dict(record.get("settings"))
    if _num(record.get("measure_s")) is not None:
        target = _num(settings.get("ci_target"))
        stop = _str(settings.get("measure_stop_reason"))
        how = (f"; adaptive: stopped on {stop} (target ±{target * 100:g} %)" if target and stop
               else "; fixed window" if stop == "fixed window" else "")
        facts.append(("Window", f"{_str(record.get('measured_steps'))} steps in "
                                f"{fmt_number(record.get('measure_s'))} s "
                                f"after {_str(record.get('warmup_steps'))} warmup steps "
                                f"({fmt_number(record.get('warmup_s'))} s){how}"))
    repeats = _dict(settings.get("repeats"))
    if repeats:
        runs = [_dict(run) for run in _list(repeats.get("runs"))]
        values = ", ".join(fmt_rate(run["throughput_per_gpu"]) if _num(run.get("throughput_per_gpu")) is not None
                           else _str(run.get("status")) for run in runs)
        spread = _num(repeats.get("spread_rel"))
        facts.append(("Repeats", f"{_str(repeats.get('rule'))}: {values} {unit}/s per "
                                 f"{'GPU' if device != 'cpu' else 'rank'}"
                                 + (f"; spread {fmt_pct(spread, 2)}" if spread is not None else "")))
    final_loss = _num(record.get("final_loss"))
    if record.get("loss_finite") is not None:
        facts.append(("Loss", ("finite" if record.get("loss_finite") else "NOT finite")
                      + (f", last {fmt_number(final_loss)}" if final_loss is not None else "")))
    launch = _num(_dict(record.get("phases_s")).get("launch_total"))
    shared = _dict(settings.get("launch"))
    if launch is not None:
        cases = _int(shared.get("cases")) or 1
        facts.append(("Launch wall time", f"{fmt_number(launch)} s" + (
            f" (case {(_int(shared.get('index')) or 0) + 1} of {cases} sharing one launch: start-up is charged to "
            "the first)" if cases > 1 else "")))
    batch = _str(record.get("batch_size_per_gpu"))
    if batch:
        facts.append(("Batch", f"{batch} per {'GPU' if device != 'cpu' else 'rank'}, {_str(record.get('precision'))}"
                               f"{', torch.compile' if record.get('compile') else ''}"))
    cache = compile_cache_summary(_dict(record.get("compile_cache")))
    if cache:
        facts.append(("Compile caches", cache))
    return facts


def _per_rank(record: dict) -> list[dict]:
    slowest = _int(_dict(record.get("straggler")).get("slowest_rank"))
    rows = []
    for rank in _list(record.get("per_rank")):
        rank = _dict(rank)
        steps = _dict(rank.get("step_time"))
        rows.append({"rank": _str(rank.get("rank")), "host": _str(rank.get("host")) or "—",
                     "gpu": _str(rank.get("gpu_index")) if rank.get("gpu_index") is not None else "—",
                     "uuid": _str(rank.get("gpu_uuid")) or "—", "device": _str(rank.get("device_name")) or "—",
                     "mean": fmt_number(steps.get("mean_ms")), "p99": fmt_number(steps.get("p99_ms")),
                     "cv": fmt_pct(steps.get("cv"), 2), "compute": fmt_number(rank.get("compute_step_ms")),
                     "memory": fmt_number(rank.get("peak_memory_gib")),
                     "slowest": slowest is not None and _int(rank.get("rank")) == slowest})
    return rows


def _failure(record: dict) -> dict | None:
    failure = _dict(record.get("failure"))
    if not failure:
        return None
    tails = [(name, text) for name, text in _dict(failure.get("log_tails")).items() if isinstance(text, str)]
    return {"reason": _str(failure.get("reason"), "no reason recorded"), "phase": _str(failure.get("phase")),
            "rank": _str(failure.get("rank")), "tails": tails}


def _case_title(case: dict | None, device: str, nodeid: str) -> str:
    if not case:
        return nodeid
    return f"{case['model']} · {case['precision']} · {case['gpus']} {_gpu_word(device, case['gpus'])}"


def build_case(test: dict, device: str) -> dict:
    harness = test["harness"]
    record = _dict(harness.get("record"))
    outcome = _shown_outcome(test)
    case = test["case"]
    return {
        "anchor": "case-" + _slug(test["nodeid"]),
        "nodeid": test["nodeid"], "title": _case_title(case, device, test["nodeid"]),
        "scaling": case["scaling"] if case else "", "outcome": outcome, "state": _state(outcome),
        "label": _label(test), "derived": test["outcome_derived"],
        "context": _str(harness.get("context")), "status": _str(record.get("status")),
        "facts": record_facts(record), "checks": _checks(harness), "per_rank": _per_rank(record),
        "failure": _failure(record), "message": test["message"],
        "baseline": _str(harness.get("baseline_run_id")), "run_id": _str(record.get("run_id")),
        "duration": fmt_duration(test["duration_s"]) if test["duration_s"] else "",
        "telemetry": telemetry_charts(record),
    }


def _state(outcome: str) -> str:
    return {"passed": "pass", "xpassed": "pass", "failed": "fail", "error": "fail", "skipped": "skip",
            "xfailed": "skip"}.get(outcome, "none")


def _label(test: dict) -> str:
    outcome = _shown_outcome(test)
    label = {"passed": "PASS", "xpassed": "PASS", "failed": "FAIL", "error": "ERROR", "skipped": "SKIP",
             "xfailed": "XFAIL"}.get(outcome, "UNKNOWN")
    return label + ("?" if test["outcome_derived"] else "")


def _matrix_cell(test: dict, device: str) -> dict:
    harness = test["harness"]
    record = _dict(harness.get("record"))
    unit = short_unit(_str(record.get("sample_unit"), "samples") + "/s")
    per_gpu = _num(record.get("throughput_per_gpu"))
    efficiency, _ = _check_value(harness, "efficiency")
    failed = [c["name"] for c in _checks(harness) if c["state"] == "fail"]
    note = ""
    if _shown_outcome(test) == "skipped":
        note = test["skip_reason"]
    elif record.get("failure"):
        note = _str(_dict(record["failure"]).get("reason"))
    elif failed:
        note = "failed: " + ", ".join(failed)
    elif test["outcome"] in ("failed", "error") and test["message"]:
        note = test["message"].splitlines()[0] if test["message"].strip() else ""
    return {"state": _state(_shown_outcome(test)), "label": _label(test),
            "throughput": f"{fmt_rate(per_gpu)} {unit}" if per_gpu is not None else "",
            "efficiency": fmt_number(efficiency) if efficiency is not None else "",
            "note": clean_text(note, 160, one_line=True), "anchor": "case-" + _slug(test["nodeid"]),
            "linked": bool(harness) or test["outcome"] in ("failed", "error")}


def build_matrices(tests: list[dict], device: str) -> list[dict]:
    matrices = []
    for scaling in ("weak", "strong"):
        cased = [t for t in tests if t["case"] and t["case"]["scaling"] == scaling]
        if not cased:
            continue
        pairs = list(dict.fromkeys((t["case"]["model"], t["case"]["precision"]) for t in cased))
        models = list(dict.fromkeys(m for m, _ in pairs))
        rows = sorted(pairs, key=lambda pair: (models.index(pair[0]), pairs.index(pair)))
        columns = sorted({t["case"]["gpus"] for t in cased})
        cells = {}
        for test in cased:
            key = (test["case"]["model"], test["case"]["precision"], test["case"]["gpus"])
            cells[key] = _matrix_cell(test, device)
        matrices.append({
            "scaling": scaling,
            "title": ("Weak scaling (per-GPU batch fixed)" if scaling == "weak"
                      else "Strong scaling (global batch fixed)"),
            "columns": [{"count": n, "label": f"{n} {_gpu_word(device, n)}"} for n in columns],
            "rows": [{"model": m, "precision": p, "cells": [cells.get((m, p, n)) for n in columns],
                      "model_rows": sum(1 for other, _ in rows if other == m) if i == 0 or rows[i - 1][0] != m else 0}
                     for i, (m, p) in enumerate(rows)],
        })
    return matrices


# --- charts ----------------------------------------------------------------------------------


def _color(precision: str, index: int) -> str:
    return PRECISION_COLORS.get(precision, OTHER_COLORS[index % len(OTHER_COLORS)])


def _sample_unit(tests: list[dict]) -> str:
    """The unit of the runs that measured something (a failed launch's record only says "samples")."""
    for test in tests:
        record = _dict(test["harness"].get("record"))
        if _num(record.get("throughput_per_gpu")) is not None and record.get("sample_unit"):
            return _str(record["sample_unit"]) + "/s"
    return "samples/s"


def _efficiency_series(model: str, precision: str, runs: list[dict], raw_profile: dict, scaling: str,
                       color: str) -> tuple[list[svg.Series], set[int]]:
    """Measured efficiency by count (1 at one GPU, by definition) and the profile's bound at those counts."""
    points, failed_x, counts = [(0.0, 1.0)], set(), {1}
    for test in runs:
        gpus = test["case"]["gpus"]
        efficiency, passed = _check_value(test["harness"], "efficiency")
        if gpus > 1 and efficiency is not None:
            points.append((math.log2(gpus), efficiency))
            counts.add(gpus)
            if passed is False:
                failed_x.add(math.log2(gpus))
    if len(points) < 2:
        return [], set()
    series = [svg.Series(label=f"{precision} measured", points=tuple(points), color=color,
                         failed_x=frozenset(failed_x))]
    bounds = case_bounds(raw_profile, model, precision) or {}
    table = _by_count(bounds.get("min_weak_efficiency" if scaling == "weak" else "min_strong_efficiency"))
    bound_points = tuple((math.log2(n), v) for n, v in table.items() if n in counts)
    if bound_points:
        series.append(svg.Series(label=f"{precision} bound", points=bound_points, color=color, dashed=True))
    return series, counts


def _throughput_group(model: str, precision: str, runs: list[dict], raw_profile: dict, scaling: str,
                      color: str) -> svg.BarGroup:
    bars = []
    threshold = None
    for test in runs:
        record = _dict(test["harness"].get("record"))
        bound, passed = _check_value(test["harness"], "per-GPU throughput", "bound")
        threshold = threshold if threshold is not None else bound
        failed = passed is False or _shown_outcome(test) in ("failed", "error")
        bars.append(svg.Bar(label=str(test["case"]["gpus"]), value=_num(record.get("throughput_per_gpu")),
                            state="fail" if failed else "pass"))
    if threshold is None and scaling == "weak":
        # A case that failed before its throughput check still had this bound to meet.
        threshold = _num((case_bounds(raw_profile, model, precision) or {}).get("min_samples_per_sec_per_gpu"))
    return svg.BarGroup(label=precision, bars=tuple(bars), threshold=threshold, color=color)


def scaling_charts(tests: list[dict], raw_profile: dict, device: str) -> list[dict]:
    """Per model and scaling: efficiency vs GPU count with the bound, and per-GPU throughput bars vs the bound."""
    charts = []
    word = "GPU" if device != "cpu" else "rank"
    for scaling in ("weak", "strong"):
        cased = [t for t in tests if t["case"] and t["case"]["scaling"] == scaling and t["harness"].get("record")]
        for model in dict.fromkeys(t["case"]["model"] for t in cased):
            mine = [t for t in cased if t["case"]["model"] == model]
            unit = short_unit(_sample_unit(mine))
            series, groups, counts = [], [], set()
            for index, precision in enumerate(dict.fromkeys(t["case"]["precision"] for t in mine)):
                runs = sorted((t for t in mine if t["case"]["precision"] == precision), key=lambda t: t["case"]["gpus"])
                color = _color(precision, index)
                more, seen = _efficiency_series(model, precision, runs, raw_profile, scaling, color)
                series += more
                counts |= seen
                groups.append(_throughput_group(model, precision, runs, raw_profile, scaling, color))
            has_bars = any(bar.value is not None for group in groups for bar in group.bars)
            if not series and not has_bars:
                continue
            label = model if scaling == "weak" else f"{model} (strong)"
            entry = {"model": model, "scaling": scaling, "efficiency": None, "throughput": None}
            if has_bars:
                entry["throughput"] = svg.bar_chart(title=f"{label}: {unit} per {word}",
                                                    groups=groups, y_label=unit, width=320)
            if series:
                values = [y for s in series for _, y in s.points]
                low = min(values + [1.0])
                entry["efficiency"] = svg.line_chart(
                    title=f"{label}: {scaling}-scaling efficiency", series=series,
                    x_ticks=[(math.log2(n), str(n)) for n in sorted(counts)], x_label=f"{word}s (log scale)",
                    y_label="efficiency vs 1", width=300,
                    y_range=(max(0.0, low - max(0.02, (1.0 - low) * 0.15)), 1.0 + max(0.01, (1.0 - low) * 0.08)))
            charts.append(entry)
    return charts


def telemetry_charts(record: dict) -> list[Any]:
    """Timelines of ``record["telemetry"]`` when a run recorded it; nothing otherwise (nothing is invented).

    Shape (written by harness/telemetry.py; see docs/report.md and docs/telemetry.md)::

        {"metrics": {"<name>": {"label": "GPU utilization", "unit": "%",
                                "per_gpu": {"<gpu index>": [[t_seconds, value], ...]}}}}
    """
    charts = []
    metrics = _dict(_dict(record.get("telemetry")).get("metrics"))
    for name, metric in metrics.items():
        metric = _dict(metric)
        series = []
        for index, (gpu, points) in enumerate(_dict(metric.get("per_gpu")).items()):
            pairs = tuple((x, y) for x, y in (
                (_num(p[0]), _num(p[1])) for p in _list(points)[:5000] if isinstance(p, list) and len(p) == 2)
                if x is not None and y is not None)
            if pairs:
                series.append(svg.Series(label=f"GPU {gpu}", points=pairs, color=GPU_COLORS[index % len(GPU_COLORS)]))
        if series:
            xs = [x for s in series for x, _ in s.points]
            ticks = [(t, svg.format_tick(t)) for t in svg.nice_ticks(min(xs), max(xs))]
            unit = _str(metric.get("unit"))
            charts.append(svg.line_chart(title=_str(metric.get("label")) or name, series=series, x_ticks=ticks,
                                         x_label="seconds", y_label=unit, width=420))
    return charts


def telemetry_missing(tests: list[dict]) -> str:
    """Why no timeline is drawn: the reasons the runs recorded, or that they predate telemetry."""
    reasons = list(dict.fromkeys(
        _str(telemetry.get("reason")) for telemetry in (
            _dict(_dict(t["harness"].get("record")).get("telemetry")) for t in tests)
        if telemetry and telemetry.get("status") != "ok" and telemetry.get("reason")))
    if not reasons:
        return ("Not recorded: this harness version collects no GPU utilization, power or temperature timelines "
                "(the utilization check of each test says “not evaluated”).")
    return f"Not recorded: {'; '.join(reasons[:5])}. The checks that need telemetry say “not evaluated”."


def interconnect_missing(header: dict) -> str:
    interconnect = header.get("interconnect")
    if not isinstance(interconnect, dict):
        return "Not recorded: this harness version runs no all-reduce bandwidth test."
    failures = [f"{_str(g)} GPUs: {_str(_dict(run).get('failure'))}"
                for g, run in _dict(interconnect.get("runs")).items() if _dict(run).get("failure")]
    return "No all-reduce bandwidth was measured" + (f" ({'; '.join(failures[:4])})." if failures else ".")


def interconnect_charts(header: dict, raw_profile: dict) -> list[Any]:
    """All-reduce bus bandwidth vs message size per GPU count, with the profile's bound, when measured.

    Shape (``harness["interconnect"]`` in report.json / session.json, written by harness/launch/allreduce.py)::

        {"allreduce": [{"gpus": 4, "size_bytes": 1073741824, "busbw_gbps": 350.2}, ...]}
    """
    rows = [_dict(r) for r in _list(_dict(header.get("interconnect")).get("allreduce"))]
    bounds = _by_count(_dict(raw_profile.get("interconnect")).get("min_allreduce_busbw_gbps"))
    series, sizes = [], set()
    for index, gpus in enumerate(sorted({_int(r.get("gpus")) for r in rows if _int(r.get("gpus"))})):
        points = sorted((math.log2(s), b) for r in rows if _int(r.get("gpus")) == gpus
                        for s, b in [(_num(r.get("size_bytes")), _num(r.get("busbw_gbps")))]
                        if s and s > 0 and b is not None)
        if not points:
            continue
        color = GPU_COLORS[index % len(GPU_COLORS)]
        series.append(svg.Series(label=f"{gpus} GPUs", points=tuple(points), color=color))
        sizes.update(x for x, _ in points)
        if gpus in bounds:
            series.append(svg.Series(label=f"{gpus} GPUs bound", points=((min(p[0] for p in points), bounds[gpus]),
                                                                         (max(p[0] for p in points), bounds[gpus])),
                                     color=color, dashed=True))
    if not series:
        return []
    ticks = [(x, size_label(2 ** x)) for x in sorted(sizes)][:: max(1, len(sizes) // 8)]
    return [svg.line_chart(title="all-reduce bus bandwidth (GB/s)", series=series, x_ticks=ticks,
                           x_label="message size", y_label="GB/s", width=520)]



# --- the whole view --------------------------------------------------------------------------


def build_view(inputs: RunInputs) -> dict:
    """Everything the template shows, from the loaded inputs alone (pure)."""
    session = _dict(inputs.session)
    header = {key: value for key, value in session.items() if key != "results"}
    header.update(_dict(_dict(inputs.report).get("harness")))
    tests = collect_tests(inputs)
    signoff = build_signoff(inputs, header, tests)
    device = signoff["device"]
    raw_profile = _dict(_dict(header.get("profile")).get("raw"))
    verdict = build_verdict(inputs, header, tests)
    cases_used = list(dict.fromkeys((t["case"]["model"], t["case"]["precision"]) for t in tests if t["case"]))
    units = {}
    for test in tests:
        record = _dict(test["harness"].get("record"))
        if test["case"] and record.get("sample_unit"):
            units[(test["case"]["model"], test["case"]["precision"])] = _str(record["sample_unit"]) + "/s"
    order = {key: index for index, key in enumerate(cases_used)}

    def case_order(test: dict) -> tuple:
        case = test["case"] or {}
        failed = _shown_outcome(test) not in ("failed", "error")
        return (failed, case.get("scaling") != "weak", case.get("gpus") or 0,
                order.get((case.get("model"), case.get("precision")), 0), test["nodeid"])

    ran = [t for t in tests if t["harness"] or _shown_outcome(t) not in ("skipped", "xfailed")]
    skipped = [{"nodeid": t["nodeid"], "reason": t["skip_reason"] or "no reason given"}
               for t in tests if t not in ran]
    referenced = {_str(_dict(t["harness"].get("record")).get("run_id")) for t in tests} | {
        _str(t["harness"].get("baseline_run_id")) for t in tests}
    orphans = []
    for label, record in inputs.records.items():
        if _str(record.get("run_id")) not in referenced:
            per_gpu = _num(record.get("throughput_per_gpu"))
            orphans.append({"label": label, "status": _str(record.get("status"), "unknown"),
                            "throughput": (f"{fmt_rate(per_gpu)} {_str(record.get('sample_unit'), 'samples')}/s"
                                           if per_gpu is not None else "—"),
                            "reason": _str(_dict(record.get("failure")).get("reason"))})
    cases = [build_case(t, device) for t in sorted(ran, key=case_order)]
    return {
        "verdict": verdict,
        "signoff": signoff,
        "matrices": build_matrices(tests, device),
        "cases": cases,
        "skipped": skipped,
        "orphans": orphans,
        "charts": scaling_charts(tests, raw_profile, device),
        "telemetry_cases": [c for c in cases if c["telemetry"]],
        "telemetry_missing": telemetry_missing(tests),
        "interconnect": interconnect_charts(header, raw_profile),
        "interconnect_missing": interconnect_missing(header),
        "thresholds": build_thresholds(header, cases_used, units),
        "device_word": "GPU" if device != "cpu" else "rank",
    }


# --- rendering and the public entry points ---------------------------------------------------


def _environment():
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    return Environment(loader=PackageLoader("harness.report", "templates"),
                       autoescape=select_autoescape(["html", "j2"], default_for_string=True, default=True),
                       undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def render(view: dict) -> str:
    return _environment().get_template("report.html.j2").render(report=view)


def build_report(run_dir: Path) -> str:
    """The report of ``run_dir`` as HTML text, from its saved JSON alone. Raises ReportError."""
    return render(build_view(load_inputs(Path(run_dir))))


def write_report(run_dir: Path) -> Path:
    """Build and write ``run_dir/report.html`` (atomically); returns its path. Raises ReportError."""
    run_dir = Path(run_dir)
    html = build_report(run_dir)
    target = run_dir / "report.html"
    fd, tmp = tempfile.mkstemp(prefix=".report.html.", dir=run_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(html)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def cli_report(run_dir: str) -> int:
    """``harness report <run-dir>``: rebuild report.html from the saved JSON, print its path."""
    try:
        path = write_report(Path(run_dir))
    except ReportError as exc:
        print(f"harness report: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"harness report: cannot write {Path(run_dir) / 'report.html'}: {exc.strerror or exc}; "
              "make the run directory writable or copy it somewhere writable", file=sys.stderr)
        return 1
    except Exception as exc:  # a bug here must not bury the run's saved JSON under a traceback
        print(f"harness report: could not build the report of {run_dir}: {type(exc).__name__}: {exc}; the JSON "
              "files are intact; please report this with the run directory", file=sys.stderr)
        return 1
    print(path)
    return 0


# --- headless Chromium (for tests and the docs screenshots) ----------------------------------

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync")


def _chromium(chromium: str, html_path: Path, extra: Iterable[str],
              timeout_s: float) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="harness-chromium-") as profile:
        command = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, Path(html_path).resolve().as_uri()]
        try:
            return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
        except FileNotFoundError:
            raise RuntimeError(f"{chromium}: not found; install Chromium (Debian: apt-get install chromium) "
                               "or pass its path") from None
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"{chromium} did not finish with {html_path} within {timeout_s:.0f} s") from None


def screenshot(html_path: Path, png_path: Path, chromium: str = "chromium", *, height: int = 2400,
               timeout_s: float = 120.0) -> None:
    """A PNG of the page's first ``height`` pixels at 1400 px wide. Raises RuntimeError if none is written."""
    png_path = Path(png_path).resolve()
    png_path.unlink(missing_ok=True)
    result = _chromium(chromium, html_path, [f"--screenshot={png_path}", f"--window-size=1400,{height}"], timeout_s)
    if not png_path.exists() or png_path.stat().st_size == 0:
        raise RuntimeError(f"{chromium} wrote no screenshot of {html_path} (exit {result.returncode}): "
                           f"{result.stderr.strip()[-2000:]}")


def load_in_chromium(html_path: Path, chromium: str = "chromium", *,
                     timeout_s: float = 120.0) -> tuple[str, list[str]]:
    """Load the page headless: (the DOM after load, the page's console lines from Chromium's log).

    Chromium logs every console message of the page, errors and uncaught exceptions included, as
    ``INFO:CONSOLE`` whatever its level; the report writes none, so any such line is a problem.
    """
    result = _chromium(chromium, html_path, ["--enable-logging=stderr", "--v=0", "--dump-dom"], timeout_s)
    errors = [line for line in result.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    if result.returncode != 0:
        errors.append(f"chromium exited with {result.returncode}")
    return result.stdout, errors
