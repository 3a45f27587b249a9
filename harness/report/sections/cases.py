"""Per test: every check measured against its bound, the run's measurements, its ranks, and why it failed."""

from __future__ import annotations

import statistics

from harness.report.format import anchor, device_word, fmt_duration, fmt_number, fmt_pct, fmt_rate
from harness.results.reading import as_dict, as_int, as_list, as_number, as_text
from harness.report.outcomes import SessionTest
from harness.report.sections.telemetry import telemetry_charts
from harness.workloads.compilecache import summary as compile_cache_summary

_COMPARISONS = {">=": "≥", "<=": "≤", "==": ""}


def case_anchor(test: SessionTest) -> str:
    return "case-" + anchor(test.nodeid)


def check_rows(harness: dict) -> list[dict]:
    """The checks of a result as table rows: measured and bound with units, PASS, FAIL or NOT EVALUATED."""
    shown = []
    for check in (as_dict(c) for c in as_list(harness.get("checks"))):
        passed = check.get("passed")
        unit = as_text(check.get("unit"))
        measured, bound = as_number(check.get("measured")), as_number(check.get("bound"))
        comparison = as_text(check.get("comparison"))
        fmt = fmt_rate if unit.endswith("/s") else fmt_number
        suffix = f" {unit}" if unit else ""
        shown.append({
            "key": as_text(check.get("key")), "name": as_text(check.get("name"), "(unnamed check)"),
            "kind": as_text(check.get("kind")),
            "measured": fmt(measured) + suffix if measured is not None else "—",
            "bound": f"{_COMPARISONS.get(comparison, '')} {fmt(bound)}{suffix}" if bound is not None else "—",
            "state": "pass" if passed is True else "fail" if passed is False else "none",
            "result": "PASS" if passed is True else "FAIL" if passed is False else "NOT EVALUATED",
            "note": as_text(check.get("note")),
        })
    return shown


def _rank_where(host: object, gpu: object, device: str) -> str:
    parts = []
    if as_text(host):
        parts.append(f"host {as_text(host)}")
    if as_int(gpu) is not None:
        parts.append(f"GPU {as_int(gpu)}")
    elif device == "cpu":
        parts.append("CPU")
    return ", ".join(parts)


def _throughput_facts(record: dict, unit: str, device: str) -> list[tuple[str, str]]:
    facts = []
    per_gpu, total = as_number(record.get("throughput_per_gpu")), as_number(record.get("throughput_total"))
    if per_gpu is not None:
        ci = as_number(record.get("throughput_ci95_rel"))
        # What the CI covers matters to whoever signs: on 4 x H200 figures moved between runs by more
        # than their CIs (docs/measurements.md), so the line says it is within-window noise.
        ci_text = (f" (95 % CI ±{ci * 100:.2f} % from {as_text(record.get('ci_blocks'), '?')} batch means: "
                   "the noise within this window, not between runs)" if ci is not None else "")
        runs = len(as_list(record.get("per_rank")))
        median = (f", the median of {runs} {device_word(device, runs)} each training alone at once"
                  if record.get("independent") is True and runs > 1 else "")
        facts.append((f"Throughput per {device_word(device)}", f"{fmt_rate(per_gpu)} {unit}/s{median}{ci_text}"))
    if total is not None and record.get("independent") is not True:
        world = as_int(record.get("world_size")) or 0
        facts.append(("Throughput total", f"{fmt_rate(total)} {unit}/s over {as_text(record.get('world_size'))} "
                                          f"{device_word(device, world)}, global batch "
                                          f"{as_text(record.get('global_batch_size'))}"))
    mfu, tflops = as_number(record.get("mfu")), as_number(record.get("tflops_per_gpu"))
    if mfu is not None:
        facts.append(("MFU", f"{fmt_pct(mfu)} ({fmt_number(tflops)} of {fmt_number(record.get('peak_tflops'))} "
                             "dense TFLOP/s per GPU)"))
    elif tflops is not None:
        facts.append((f"Model TFLOP/s per {device_word(device)}",
                      f"{fmt_number(tflops)} (no peak in the profile, so no MFU)"))
    return facts


def _timing_facts(record: dict, device: str) -> list[tuple[str, str]]:
    facts = []
    steps = as_dict(record.get("step_time_ms"))
    if steps:
        facts.append(("Step time", f"mean {fmt_number(steps.get('mean_ms'))} ms, median "
                                   f"{fmt_number(steps.get('median_ms'))}, p95 {fmt_number(steps.get('p95_ms'))}, p99 "
                                   f"{fmt_number(steps.get('p99_ms'))} ms; CV {fmt_pct(steps.get('cv'), 2)} over "
                                   f"{as_text(steps.get('steps'))} steps (all ranks)"))
    straggler = as_dict(record.get("straggler"))
    if straggler and (as_int(record.get("world_size")) or 0) > 1:
        slow = _rank_where(straggler.get("slowest_host"), straggler.get("slowest_gpu_index"), device)
        fast = _rank_where(straggler.get("fastest_host"), straggler.get("fastest_gpu_index"), device)
        facts.append(("Straggler", f"{fmt_number(straggler.get('ratio'))}: slowest rank "
                                   f"{as_text(straggler.get('slowest_rank'))} ({slow}), fastest rank "
                                   f"{as_text(straggler.get('fastest_rank'))} ({fast}); "
                                   "compute step time, gradient sync off"))
    memory = as_number(record.get("peak_memory_gib"))
    if memory is not None:
        facts.append(("Peak memory", f"{fmt_number(memory)} GiB per rank (max)"))
    return facts


def _window_facts(record: dict, unit: str, device: str) -> list[tuple[str, str]]:
    facts = []
    settings = as_dict(record.get("settings"))
    if as_number(record.get("measure_s")) is not None:
        target = as_number(settings.get("ci_target"))
        stop = as_text(settings.get("measure_stop_reason"))
        how = (f"; adaptive: stopped on {stop} (target ±{target * 100:g} %)" if target and stop
               else "; fixed window" if stop == "fixed window" else "")
        facts.append(("Window", f"{as_text(record.get('measured_steps'))} steps in "
                                f"{fmt_number(record.get('measure_s'))} s "
                                f"after {as_text(record.get('warmup_steps'))} warmup steps "
                                f"({fmt_number(record.get('warmup_s'))} s){how}"))
    repeats = as_dict(settings.get("repeats"))
    if repeats:
        runs = [as_dict(run) for run in as_list(repeats.get("runs"))]
        values = ", ".join(fmt_rate(run["throughput_per_gpu"]) if as_number(run.get("throughput_per_gpu")) is not None
                           else as_text(run.get("status")) for run in runs)
        spread = as_number(repeats.get("spread_rel"))
        facts.append(("Repeats", f"{as_text(repeats.get('rule'))}: {values} {unit}/s per {device_word(device)}"
                                 + (f"; spread {fmt_pct(spread, 2)}" if spread is not None else "")))
    return facts


def _run_facts(record: dict, device: str) -> list[tuple[str, str]]:
    facts = []
    final_loss = as_number(record.get("final_loss"))
    if record.get("loss_finite") is not None:
        facts.append(("Loss", ("finite" if record.get("loss_finite") else "NOT finite")
                      + (f", last {fmt_number(final_loss)}" if final_loss is not None else "")))
    launch = as_number(as_dict(record.get("phases_s")).get("launch_total"))
    shared = as_dict(as_dict(record.get("settings")).get("launch"))
    if launch is not None:
        cases = as_int(shared.get("cases")) or 1
        facts.append(("Launch wall time", f"{fmt_number(launch)} s" + (
            f" (case {(as_int(shared.get('index')) or 0) + 1} of {cases} sharing one launch: start-up is charged to "
            "the first)" if cases > 1 else "")))
    batch = as_text(record.get("batch_size_per_gpu"))
    if batch:
        facts.append(("Batch", f"{batch} per {device_word(device)}, {as_text(record.get('precision'))}"
                               f"{', torch.compile' if record.get('compile') else ''}"))
    cache = compile_cache_summary(as_dict(record.get("compile_cache")))
    if cache:
        facts.append(("Compile caches", cache))
    return facts


def record_facts(record: dict) -> list[tuple[str, str]]:
    """The measurements of one run record, as label/value lines."""
    if not record:
        return []
    unit = as_text(record.get("sample_unit"), "samples")
    device = as_text(record.get("device_kind"))
    return (_throughput_facts(record, unit, device) + _timing_facts(record, device)
            + _window_facts(record, unit, device) + _run_facts(record, device))


def _rates(ranks: list[dict]) -> tuple[int | None, float | None]:
    """(the rank with the lowest own rate, the median rate) of an independent run's ranks."""
    rated = sorted((r["throughput"], as_int(r.get("rank"))) for r in ranks
                   if isinstance(r.get("throughput"), (int, float)) and r["throughput"] > 0)
    if not rated:
        return None, None
    return rated[0][1], statistics.median(rate for rate, _ in rated)


def _per_rank(record: dict) -> list[dict]:
    ranks = [as_dict(r) for r in as_list(record.get("per_rank"))]
    slowest = as_int(as_dict(record.get("straggler")).get("slowest_rank"))
    median = None
    if record.get("independent") is True:  # each GPU trained alone: the slowest by its own rate
        slowest, median = _rates(ranks)
    rows = []
    for rank in ranks:
        rate = rank.get("throughput") if isinstance(rank.get("throughput"), (int, float)) else None
        steps = as_dict(rank.get("step_time"))
        rows.append({"rank": as_text(rank.get("rank")), "host": as_text(rank.get("host")) or "—",
                     "gpu": as_text(rank.get("gpu_index")) if rank.get("gpu_index") is not None else "—",
                     "uuid": as_text(rank.get("gpu_uuid")) or "—", "device": as_text(rank.get("device_name")) or "—",
                     "mean": fmt_number(steps.get("mean_ms")), "p99": fmt_number(steps.get("p99_ms")),
                     "cv": fmt_pct(steps.get("cv"), 2), "compute": fmt_number(rank.get("compute_step_ms")),
                     "memory": fmt_number(rank.get("peak_memory_gib")), "rate": fmt_number(rate),
                     "of_median": fmt_number(rate / median) if rate is not None and median else "—",
                     "slowest": slowest is not None and as_int(rank.get("rank")) == slowest})
    return rows


def _failure(record: dict) -> dict | None:
    failure = as_dict(record.get("failure"))
    if not failure:
        return None
    tails = [(name, text) for name, text in as_dict(failure.get("log_tails")).items() if isinstance(text, str)]
    return {"reason": as_text(failure.get("reason"), "no reason recorded"), "phase": as_text(failure.get("phase")),
            "rank": as_text(failure.get("rank")), "tails": tails}


def case_title(test: SessionTest, device: str) -> str:
    """``resnet50 · bf16 · 4 GPUs`` from the recorded case; the test id when none was recorded."""
    case = test.case
    if case is None:
        return test.nodeid
    nodes = f" on {case.nodes} nodes" if case.nodes > 1 else ""
    return f"{case.model} · {case.precision} · {case.world_size} {device_word(device, case.world_size)}{nodes}"


def build_case(test: SessionTest, device: str) -> dict:
    record = test.record
    return {
        "anchor": case_anchor(test), "nodeid": test.nodeid, "title": case_title(test, device),
        "scaling": test.case.scaling if test.case else "", "outcome": test.shown_outcome, "state": test.state,
        "label": test.label, "derived": test.outcome_derived,
        "context": as_text(test.harness.get("context")), "status": as_text(record.get("status")),
        "facts": record_facts(record), "checks": check_rows(test.harness), "per_rank": _per_rank(record),
        "independent": record.get("independent") is True,
        "failure": _failure(record), "message": test.message,
        "baseline": as_text(test.harness.get("baseline_run_id")), "run_id": as_text(record.get("run_id")),
        "duration": fmt_duration(test.duration_s) if test.duration_s else "",
        "telemetry": telemetry_charts(record),
    }
