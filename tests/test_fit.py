"""Bounds fitted across hosts from acceptance sessions (issue 27 item 3): harness/tools/calibrate/fit.py."""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import shutil
import statistics
from pathlib import Path

import pytest

from harness.cases import remeasure_label, remeasure_of
from harness.definitions import current_id
from harness.exitcodes import EXIT_USAGE_ERROR
from harness.kinds.shipped import load_shipped_profile
from harness.records import write_record
from harness.tools.calibrate import CalibrationError
from harness.tools.calibrate.fit import (FACTOR, POWER_FLOOR, apply, check_hosts, cli_fit, fit, held_out_sessions,
                                         report)
from harness.tools.calibrate.sessions import Figure, Session, read_session
from harness.kinds.components.bounds import COMPONENTS_BOUNDS
from harness.kinds.interconnect.bounds import INTERCONNECT_BOUNDS

from test_records import full_record

REPO = Path(__file__).resolve().parent.parent
HAND_SET = REPO / "tests" / "data" / "h200-hand-set" / "h200.toml"
"""A profile of hand-set bounds for 1-8 GPUs (the h200 profile before its fit) that the made-up sessions fit into,
named "toy"."""
DATA = REPO / "docs" / "data" / "2026-11-27-h100x4-calibration"


def session(root: Path, name: str, host: str, reference: float, two_gpu: float) -> Path:
    """A session directory of one host: the 1-GPU case on 2 GPUs at once and the 2-GPU case."""
    run_dir = root / name
    (run_dir / "runs").mkdir(parents=True)
    one = full_record(run_id=f"{name}-1", world_size=1, independent=True, throughput_per_gpu=reference,
                      throughput_total=reference, global_batch_size=256,
                      per_rank=tuple(dataclasses.replace(r, throughput=reference) for r in full_record().per_rank))
    two = full_record(run_id=f"{name}-2", throughput_per_gpu=two_gpu, throughput_total=2 * two_gpu,
                      per_rank=tuple(dataclasses.replace(r, throughput=two_gpu) for r in full_record().per_rank))
    write_record(run_dir / "runs" / "resnet50-bf16-weak-1gpu.json", one)
    write_record(run_dir / "runs" / "resnet50-bf16-weak-2gpu.json", two)
    summary = {"hardware": {"gpus": [{"uuid": f"GPU-{host}-{i}"} for i in range(2)], "gpu_count": 2},
               "profile": {"name": "toy"}, "results": {},
               "definitions": {"training": {"harness": current_id("training")}}}
    (run_dir / "session.json").write_text(json.dumps(summary))
    return run_dir


@pytest.fixture
def three_hosts(tmp_path):
    # Efficiency per host: 0.96 / 0.97 / 0.98 (and a second, slower session on host a: 0.95).
    return [session(tmp_path, "a1", "a", 1000.0, 960.0), session(tmp_path, "a2", "a", 1000.0, 950.0),
            session(tmp_path, "b1", "b", 1000.0, 970.0), session(tmp_path, "c1", "c", 1000.0, 980.0)]


def _remeasure(run_dir: Path, label: str, world_size: int, per_gpu: float, stop: str = "CI target") -> None:
    """A re-measure's record, labelled as the session's launch labels it (harness/cases.py remeasure_label)."""
    record = full_record(run_id=f"{run_dir.name}-{label}", world_size=world_size, independent=world_size == 1,
                         throughput_per_gpu=per_gpu, throughput_total=world_size * per_gpu,
                         global_batch_size=256 * world_size, settings={"measure_stop_reason": stop},
                         per_rank=tuple(dataclasses.replace(r, throughput=per_gpu) for r in full_record().per_rank))
    write_record(run_dir / "runs" / f"{label}.json", record)


def _unsettle(run_dir: Path, name: str) -> None:
    path = run_dir / "runs" / name
    data = json.loads(path.read_text())
    data.setdefault("settings", {})["measure_stop_reason"] = "max time"
    path.write_text(json.dumps(data))


def test_a_fit_takes_each_case_s_first_settled_window_with_the_reference_measured_beside_it(tmp_path):
    """A window that never settled is re-measured in a calibration session (harness/checks/confirm.py WINDOW); the
    fit takes the first attempt whose window and reference's settled, paired with that attempt's reference, and a
    case no attempt of which settled as it came, counted in the report."""
    run_dir = session(tmp_path, "s", "a", 1000.0, 900.0)
    _unsettle(run_dir, "resnet50-bf16-weak-2gpu.json")
    _remeasure(run_dir, remeasure_label("resnet50-bf16-weak-1gpu", 1, reference_for_gpus=2), 1, 1010.0)
    _remeasure(run_dir, remeasure_label("resnet50-bf16-weak-2gpu", 1), 2, 930.0, stop="max time")
    _remeasure(run_dir, remeasure_label("resnet50-bf16-weak-1gpu", 2, reference_for_gpus=2), 1, 1000.0)
    _remeasure(run_dir, remeasure_label("resnet50-bf16-weak-2gpu", 2), 2, 970.0)
    read = read_session(run_dir)
    figures = {(f.key, f.gpus): f.value for f in read.figures}
    assert figures[("min_weak_efficiency", 2)] == pytest.approx(0.97)  # confirm2 over its own reference
    rates = sorted(f.value for f in read.figures if f.key == "min_samples_per_sec_per_gpu")
    assert rates == pytest.approx([1000.0])  # the 1-GPU case's first, settled
    assert (read.remeasured, read.unsettled) == (1, 0)
    assert "Windows: 1 case's figures come from a re-measure" in report(fit([read], min_hosts=1), [read])

    never = session(tmp_path, "n", "a", 1000.0, 900.0)
    _unsettle(never, "resnet50-bf16-weak-1gpu.json")
    _remeasure(never, remeasure_label("resnet50-bf16-weak-1gpu", 1), 1, 1100.0, stop="max time")
    read = read_session(never)
    rates = sorted(f.value for f in read.figures if f.key == "min_samples_per_sec_per_gpu")
    assert rates == pytest.approx([1000.0])  # none settled: the first stands, not the re-measure's 1100
    assert (read.remeasured, read.unsettled) == (0, 2)  # the 1-GPU case and the 2-GPU case judged on it
    assert "Windows: 0 cases' figures come from a re-measure whose window settled (the first never did); 2 from a " \
           "window that never settled" in report(fit([read], min_hosts=1), [read])


def test_a_bound_is_the_median_host_and_twice_the_worst_shortfall(three_hosts):
    fitted = {(f.key, f.gpus): f for f in fit([read_session(d) for d in three_hosts])}
    efficiency = fitted[("min_weak_efficiency", 2)]
    # host medians 0.955 / 0.97 / 0.98: ref 0.97; worst session 0.95 is 2.06 % short, the hosts spread 2.6 %
    assert efficiency.ref == pytest.approx(0.97)
    assert efficiency.tol == pytest.approx(2 * (0.98 - 0.955) / 0.97)
    assert (efficiency.hosts, efficiency.runs, efficiency.worst) == (3, 4, pytest.approx(0.95))
    # Without host a the others (0.97, 0.98) allow down to 0.955: a's slower session (0.95) would fail there,
    # which the report says (three hosts are the least that can show it).
    assert efficiency.held_out_failures == ("a2",)
    assert fitted[("min_samples_per_sec_per_gpu", 2)].tol == 0.05  # the floor of a GPU's own rate


def test_a_host_outside_what_the_others_show_fails_leave_one_host_out(tmp_path):
    dirs = [session(tmp_path, "a", "a", 1000.0, 970.0), session(tmp_path, "b", "b", 1000.0, 971.0),
            session(tmp_path, "c", "c", 1000.0, 900.0)]
    efficiency = next(f for f in fit([read_session(d) for d in dirs]) if f.key == "min_weak_efficiency")
    assert efficiency.held_out_failures == ("c",)


def test_the_report_states_the_false_fail_rate_measured_leave_one_host_out(three_hosts):
    sessions = [read_session(d) for d in three_hosts]
    fitted = fit(sessions)
    efficiency = next(f for f in fitted if (f.key, f.gpus) == ("min_weak_efficiency", 2))
    assert len(efficiency.held_out_judged) == 4  # every session's host has others beside it
    missed, tried = held_out_sessions(fitted)
    assert tried == 4 and missed == len({s for f in fitted for s in f.held_out_failures}) >= 1
    said = report(fitted, sessions)
    assert f"{missed} of 4 sessions miss at least one bound fitted without their host" in said
    assert "| 1 of 4 |" in said  # the efficiency's own row: a2 of four sessions


def test_a_least_tolerance_widens_every_bound(three_hosts):
    fitted = fit([read_session(d) for d in three_hosts], min_tol=0.6)
    assert {f.tol for f in fitted if not f.key.startswith("max_")} == {0.6}


def _cv_sessions(cvs_by_case: dict[str, dict[str, list[float]]]) -> list[Session]:
    """Sessions with only step-time CV figures at 2 GPUs: {case table: {host: [one CV per session]}}."""
    sessions: dict[tuple[str, int], Session] = {}
    for table, by_host in cvs_by_case.items():
        for host, values in by_host.items():
            for i, value in enumerate(values):
                held = sessions.setdefault((host, i), Session(path=Path(f"{host}{i}"), host=host, profile="toy"))
                held.figures.append(Figure(table=table, key="max_step_time_cv", gpus=2, value=value, host=host,
                                           session=f"{host}{i}"))
    return list(sessions.values())


def test_a_tail_figure_that_wandered_little_on_few_hosts_takes_the_wander_of_its_gpu_counts_cases():
    """The step-time CV has no CI: a case whose 3 hosts agreed within 9 % (vit_b_16 fp16 at 2 GPUs, then +58 % on
    a fourth host) takes the median wander of every case of its GPU count, in CV units (a hiccup adds to any
    case's CV alike: vit_b_16 bf16, ref 0.0027, then 0.0265 and 0.0291 on a fifth host), doubled; a case that
    wandered more keeps its own."""
    fitted = {f.table: f for f in fit(_cv_sessions({
        "models.quiet.fp16": {"a": [0.0040], "b": [0.0041], "c": [0.0044]},   # wander 10 %
        "models.noisy.fp16": {"a": [0.010], "b": [0.020], "c": [0.030]},      # wander 100 %
        "models.middle.fp16": {"a": [0.010], "b": [0.012], "c": [0.016]},     # wander 50 %
    }))}
    # wanders in CV units: quiet 0.0041 x 9.8 % = 0.0004, noisy 0.02 x 100 % = 0.02, middle 0.012 x 50 % = 0.006
    assert fitted["models.quiet.fp16"].limit == pytest.approx(0.0041 + 2 * 0.006)  # the median excess, doubled
    assert fitted["models.noisy.fp16"].tol == pytest.approx(2 * 1.0)  # its own
    assert fitted["models.middle.fp16"].tol == pytest.approx(2 * 0.5)
    # leave-one-host-out pools without the held host too: c's quiet 0.0044 passes what a and b allow
    assert fitted["models.quiet.fp16"].held_out_failures == ()


def test_efficiencies_of_nodes_of_different_sizes_are_not_fitted_together(three_hosts, tmp_path):
    """A 4-GPU node ran its 1-GPU reference on 4 GPUs at once, the others on 2: another shape of efficiency."""
    wide = session(tmp_path, "d1", "d", 1000.0, 960.0)
    record_file = wide / "runs" / "resnet50-bf16-weak-1gpu.json"
    data = json.loads(record_file.read_text())
    data["per_rank"] = data["per_rank"] + [dict(data["per_rank"][0], rank=r, local_rank=r) for r in (2, 3)]
    record_file.write_text(json.dumps(data))
    with pytest.raises(CalibrationError, match=r"min_weak_efficiency for 2 GPUs: the sessions ran its 1-GPU reference "
                                               r"on 2 and 4 GPUs at once .* a profile of their own"):
        fit([read_session(d) for d in [*three_hosts, wide]])


def test_fewer_hosts_than_asked_is_refused_naming_the_way_out(three_hosts):
    sessions = [read_session(d) for d in three_hosts[:3]]  # hosts a and b
    with pytest.raises(CalibrationError, match="3 sessions from 2 hosts; a fitted bound needs sessions on >= 3 "
                                               "hosts .* or pass --min-hosts 2"):
        check_hosts(sessions, 3)


def test_a_session_of_another_definition_is_refused(tmp_path):
    run_dir = session(tmp_path, "old", "a", 1000.0, 960.0)
    summary = json.loads((run_dir / "session.json").read_text())
    summary["definitions"]["training"]["harness"] = "2026-11-21"
    (run_dir / "session.json").write_text(json.dumps(summary))
    with pytest.raises(CalibrationError, match="measured as training definition 2026-11-21"):
        read_session(run_dir)
    with pytest.raises(CalibrationError, match="not an acceptance run directory|not a readable session file"):
        read_session(tmp_path / "nothing-here")


def test_a_damaged_file_of_a_session_is_refused_naming_it_never_a_traceback(tmp_path):
    run_dir = session(tmp_path, "a1", "a", 1000.0, 960.0)
    record = run_dir / "runs" / "resnet50-bf16-weak-2gpu.json"
    record.write_text(record.read_text()[:40])  # cut short
    with pytest.raises(CalibrationError, match=f"{record}: is not valid JSON at line .*leave the session out"):
        read_session(run_dir)
    record.write_text(json.dumps({"schema_version": 99}))
    with pytest.raises(CalibrationError, match=f"{record}: not a readable run record: .*schema_version 99"):
        read_session(run_dir)
    (run_dir / "session.json").unlink()
    (run_dir / "session.json").symlink_to("/dev/zero")
    with pytest.raises(CalibrationError, match="session.json: not a readable session file: is a symbolic link"):
        read_session(run_dir)


def test_the_fit_goes_into_the_profile_as_references_of_todays_definition(three_hosts, tmp_path):
    profile = tmp_path / "toy.toml"
    profile.write_text(HAND_SET.read_text().replace('name = "h200"', 'name = "toy"'))
    ns = argparse.Namespace(sessions=[str(d) for d in three_hosts], profile=str(profile), output=None,
                            report=str(tmp_path / "fit.md"), min_hosts=3, min_tol=0.0,
                            assume_training_definition=None, leave_out="", source="")
    assert cli_fit(ns) == 0
    loaded = load_shipped_profile(profile)
    bounds = loaded.bounds("resnet50", "bf16")
    assert bounds.min_weak_efficiency[2] == pytest.approx(0.97 * (1 - 2 * (0.98 - 0.955) / 0.97), rel=1e-4)
    assert bounds.references["min_weak_efficiency"][2].hosts == 3
    # the 1-GPU reference ran on the nodes' 2 GPUs at once: the efficiency holds for 2-GPU nodes
    assert bounds.references["min_weak_efficiency"][2].node_gpus == 2
    assert bounds.references["min_samples_per_sec_per_gpu"][2].node_gpus is None
    assert loaded.definitions["training"] == current_id("training")
    assert "| models.resnet50.bf16 | min_weak_efficiency | 2 |" in (tmp_path / "fit.md").read_text()


def test_a_bound_left_out_is_not_written_and_the_profile_says_so(three_hosts, tmp_path, capsys):
    profile = tmp_path / "toy.toml"
    profile.write_text(HAND_SET.read_text().replace('name = "h200"', 'name = "toy"'))
    before = load_shipped_profile(profile).bounds("resnet50", "bf16")
    ns = argparse.Namespace(sessions=[str(d) for d in three_hosts], profile=str(profile), output=None,
                            report=str(tmp_path / "fit.md"), min_hosts=3, min_tol=0.0,
                            assume_training_definition=None, leave_out="max_step_time_cv, min_weak_efficency",
                            source="")
    assert cli_fit(ns) == EXIT_USAGE_ERROR
    err = capsys.readouterr().err
    assert "--leave-out min_weak_efficency: not a bound calibrate-fit fits" in err and "min_weak_efficiency" in err
    ns.leave_out = "max_step_time_cv"
    assert cli_fit(ns) == 0
    after = load_shipped_profile(profile).bounds("resnet50", "bf16")
    assert "not fitted, as asked: max_step_time_cv" in profile.read_text()
    assert after.max_step_time_cv == before.max_step_time_cv and "max_step_time_cv" not in after.references
    assert after.min_weak_efficiency != before.min_weak_efficiency
    assert "| max_step_time_cv |" not in (tmp_path / "fit.md").read_text()


def test_a_refit_replaces_the_earlier_note_and_names_its_source_in_each_case_table(three_hosts, tmp_path, capsys):
    profile = tmp_path / "toy.toml"
    profile.write_text(HAND_SET.read_text().replace('name = "h200"', 'name = "toy"'))
    components_source = load_shipped_profile(profile).table(COMPONENTS_BOUNDS).source
    ns = argparse.Namespace(sessions=[str(d) for d in three_hosts], profile=str(profile), output=None,
                            report=str(tmp_path / "fit.md"), min_hosts=3, min_tol=0.0,
                            assume_training_definition=None, leave_out="", source="")
    assert cli_fit(ns) == 0
    ns.source = "docs/data/toy-sessions"
    capsys.readouterr()
    assert cli_fit(ns) == 0
    said = capsys.readouterr().out
    assert "wrote" in said and "bounds from 4 sessions on 3 hosts" in said
    rows = [line.split("|") for line in (tmp_path / "fit.md").read_text().splitlines()
            if line.startswith(("| models", "| components"))]
    held_out = sum(1 for cells in rows if cells[11].strip() != "none")  # the held-out failures column
    assert (f"; {held_out} of them fail leave-one-host-out" in said) == (held_out > 0)
    text = profile.read_text()
    assert text.count("# Bounds written as { ref, tol, hosts, runs, spread } were fitted") == 1
    loaded = load_shipped_profile(profile)
    assert loaded.bounds("resnet50", "bf16").source.startswith(
        "fitted by harness calibrate-fit from 4 sessions on 3 hosts (docs/data/toy-sessions); "
        "each bound { ref, tol, hosts, runs, spread }")
    assert loaded.table(COMPONENTS_BOUNDS).source == components_source  # it also holds bounds measured otherwise


def test_a_refit_replaces_a_note_an_author_extended_over_several_lines_and_keeps_what_follows_it(three_hosts,
                                                                                                   tmp_path):
    """h100-80gb.toml's note runs over three comment lines (two fits in one profile): a refit left the second and
    third under its own note (2026-11-27)."""
    profile = tmp_path / "toy.toml"
    text = HAND_SET.read_text().replace('name = "h200"', 'name = "toy"').rstrip()
    profile.write_text(text + "\n# Bounds written as { ref, tol, hosts, runs, spread } were fitted by hand: the\n"
                              "# training bounds from two fits,\n# the all-reduce from a third.\n")
    ns = argparse.Namespace(sessions=[str(d) for d in three_hosts], profile=str(profile), output=None,
                            report=str(tmp_path / "fit.md"), min_hosts=1, min_tol=0.0,
                            assume_training_definition=None, leave_out="", source="")
    assert cli_fit(ns) == 0
    after = profile.read_text()
    assert "training bounds from two fits" not in after and "from a third" not in after
    last = after.rstrip().splitlines()[-1]
    assert last.startswith("# Bounds written as { ref, tol, hosts, runs, spread } were fitted by `harness "
                           "calibrate-fit` from 4 sessions on 3 hosts")
    assert after.startswith(text.split("\n[")[0])  # the header comment above the tables is kept


def test_a_session_of_an_unhealthy_host_is_refused_naming_what_failed(three_hosts, capsys):
    """A GPU in sw thermal slowdown lowered the first H100 fit: a health check's failure keeps a session out,
    but not a failed bound this tool fits (a refit may be what widens it)."""
    summary_path = three_hosts[2] / "session.json"
    summary = json.loads(summary_path.read_text())
    summary["results"] = {"acceptance/test_gpu_state.py::test_gpu_state[gpu0]": {"checks": [
        {"key": "step_time_cv", "kind": "health", "passed": False}]}}
    summary_path.write_text(json.dumps(summary))
    assert read_session(three_hosts[2]).figures  # a fitted bound that failed: still a calibration session
    summary["results"]["acceptance/test_components.py::test_gemm[gpu0]"] = {"checks": [
        {"key": "throttling", "kind": "health", "passed": False}]}
    summary_path.write_text(json.dumps(summary))
    with pytest.raises(CalibrationError, match=r"not healthy in this session \(throttling in test_gemm\[gpu0\] "
                                               r"failed\): bounds are fitted from healthy hosts only"):
        read_session(three_hosts[2])


def test_a_fit_that_would_not_validate_replaces_nothing(three_hosts, tmp_path, capsys):
    profile = tmp_path / "toy.toml"
    original = "schema_version = 1\n[hardware]\nname = \"toy\"\n"  # no [models.resnet50.bf16] to write into
    profile.write_text(original)
    ns = argparse.Namespace(sessions=[str(d) for d in three_hosts], profile=str(profile), output=None, report=None,
                            min_hosts=3, min_tol=0.0, assume_training_definition=None, leave_out="", source="")
    assert cli_fit(ns) == EXIT_USAGE_ERROR
    assert "has no [models.resnet50.bf16] table" in capsys.readouterr().err
    assert profile.read_text() == original


def with_allreduce(run_dir: Path, busbw: float, definition: str | None = None) -> Path:
    """``run_dir``'s session with a 2-GPU all-reduce test measured at ``busbw`` GB/s (of ``definition``)."""
    summary = json.loads((run_dir / "session.json").read_text())
    summary["results"]["acceptance/test_interconnect.py::test_allreduce_bus_bandwidth[2gpu]"] = {
        "interconnect": {"gpus": 2}, "checks": [{"key": "allreduce_busbw", "kind": "performance", "measured": busbw,
                                                   "bound": None, "passed": None}]}
    summary["definitions"]["allreduce"] = {"harness": definition or current_id("allreduce")}
    (run_dir / "session.json").write_text(json.dumps(summary))
    return run_dir


def test_all_reduce_bounds_are_fitted_into_an_interconnect_table_the_profile_did_not_have(three_hosts, tmp_path):
    """A kind's first all-reduce bounds (its sessions ran with --harness-calibration): the table is made, the
    bound is a reference judged with its note, [definitions] allreduce is today's; a session whose all-reduce
    was measured another way adds no figure."""
    for run_dir, busbw in zip(three_hosts, (346.0, 345.0, 350.0, 348.0), strict=True):
        with_allreduce(run_dir, busbw)
    old = with_allreduce(session(tmp_path, "d1", "d", 1000.0, 960.0), 100.0, definition="2026-01-01")
    profile = tmp_path / "toy.toml"
    text = (REPO / "thresholds" / "h100-80gb.toml").read_text().replace('name = "h100-80gb"', 'name = "toy"')
    start = text.index("\n# All-reduce bus bandwidth")
    profile.write_text(text[:start] + text[text.index("\n[soak]"):].replace('allreduce = "2026-11-21"',
                                                                           'allreduce = "2026-01-01"'))
    assert load_shipped_profile(profile).table(INTERCONNECT_BOUNDS) is None
    ns = argparse.Namespace(sessions=[str(d) for d in [*three_hosts, old]], profile=str(profile), output=None,
                            report=None, min_hosts=3, min_tol=0.0, assume_training_definition=None, leave_out="",
                            source="docs/data/toy", drop_unfitted=True)  # toy nodes of 2 into a profile of nodes of 4
    assert cli_fit(ns) == 0
    loaded = load_shipped_profile(profile)
    reference = loaded.table(INTERCONNECT_BOUNDS).references["min_allreduce_busbw_gbps"][2]
    # host medians 345.5 / 350 / 348 -> ref 348; worst 345 is 0.86 % short, the hosts' spread 1.29 %: tol twice that,
    # over the all-reduce's 2 % floor
    assert (reference.ref, reference.tol, reference.hosts, reference.runs) == (348.0, 0.02586, 3, 4)
    assert loaded.table(INTERCONNECT_BOUNDS).min_allreduce_busbw_gbps[2] == pytest.approx(348.0 * (1 - 0.02586))
    assert "docs/data/toy" in loaded.table(INTERCONNECT_BOUNDS).source
    assert loaded.definitions["allreduce"] == current_id("allreduce")

    from harness.kinds.interconnect.checks import _busbw_check
    from harness.kinds.interconnect.launch import AllReduceRun
    def judged(busbw: float):
        return _busbw_check(AllReduceRun(gpus=2, run_id="r", status="ok", rows=[
            {"size_bytes": 8 << 30, "busbw_gbps": busbw, "correct": True}]), loaded.table(INTERCONNECT_BOUNDS))

    assert judged(340.0).passed and judged(340.0).note == "2.3% under this kind's reference 348 (3 hosts, 4 runs)"
    assert judged(337.56).passed is False


HOST_D = REPO / "docs" / "data" / "2026-11-27-h100x4-host-d" / "sessions"
HOST_E = REPO / "docs" / "data" / "2026-11-27-h100x4-host-e" / "sessions"
HOST_F = REPO / "docs" / "data" / "2026-11-27-h100x4-host-f" / "sessions"
HOST_H = REPO / "docs" / "data" / "2026-11-27-h100x4-host-h" / "sessions"
HEALTHY = (DATA / "sessions" / "20261127-062238-vm-h100-80gb-881",
           DATA / "sessions" / "20261127-062638-vm-h100-80gb-1344",
           REPO / "docs" / "data" / "2026-11-27-h100x4-verify" / "default",
           HOST_D / "20261127-123417-vm-h100-80gb-2181",
           HOST_D / "20261127-123834-vm-h100-80gb-2581",
           HOST_E / "20261127-124457-vm-h100-80gb-900",
           HOST_F / "20261127-151521-vm-h100-80gb-916",
           HOST_F / "20261127-151855-vm-h100-80gb-1317",
           HOST_H / "20261127-202939-vm-h100-80gb-1059")
"""Host B's two sessions, host C's, host D's two, host E's, host F's two and host H's (first attempts of a session
cut while re-measuring): every healthy 4 x H100 host measured up to 2026-11-27 20:30, the shipped h100-80gb bounds
(docs/data/2026-11-28-h100x4-refit)."""
HOST_A = (DATA / "sessions" / "20261127-060938-vm-h100-80gb-884",
          DATA / "sessions" / "20261127-061431-vm-h100-80gb-1369")
"""Host A's, whose GPU 0 was in sw thermal slowdown."""


def unpacked(folder: Path, tmp_path: Path) -> Path:
    target = tmp_path / f"{folder.parent.name}-{folder.name}"
    (target / "runs").mkdir(parents=True)
    for packed in folder.rglob("*.gz"):
        out = target / packed.relative_to(folder).with_suffix("")
        with gzip.open(packed) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
    return target


def shipped_reference(profile, figure):
    """The shipped bound of a figure's table, key and GPU count, as a reference (None: the profile has none)."""
    if figure.table == "interconnect":
        references = profile.table(INTERCONNECT_BOUNDS).references
    elif figure.table == "components":
        references = profile.table(COMPONENTS_BOUNDS).references
    else:
        _, model, precision = figure.table.split(".")
        references = profile.bounds(model, precision).references
    return references.get(figure.key, {}).get(figure.gpus)


def test_the_shipped_h100_training_bounds_come_out_of_their_healthy_sessions():
    """thresholds/h100-80gb.toml's fitted bounds, re-fitted from the archived sessions they were fitted from (read
    packed, as docs/data keeps them)."""
    sessions = [read_session(folder, assume_training="2026-11-27") for folder in HEALTHY]
    shipped = load_shipped_profile(REPO / "thresholds" / "h100-80gb.toml")
    for fitted in fit(sessions):
        reference = shipped_reference(shipped, fitted)
        assert reference is not None, fitted
        assert (reference.ref, reference.tol) == (pytest.approx(fitted.ref, rel=1e-5),
                                                  pytest.approx(fitted.tol, rel=1e-3)), fitted


def test_the_unhealthy_host_is_refused_and_fails_the_healthy_hosts_bounds(tmp_path):
    """Both sides on recorded hardware: host A's throttling GPU keeps its sessions out of a fit (its sessions FAILed
    on the throttle itself), and its first session's figures miss the bounds the healthy hosts gave: the 2-GPU
    ResNet-152 fp16 efficiency and utilization. Its power fractions (0.8177-0.8416, 1-3 % under the limits of a 5 %
    least tolerance) no longer miss since fit.POWER_FLOOR: a healthy chip draws up to 6.85 % under its kind's median,
    so power alone cannot tell this GPU from an efficient one; its clocks' event reasons do."""
    dirs = [unpacked(folder, tmp_path) for folder in HOST_A]
    for run_dir in dirs:
        with pytest.raises(CalibrationError, match=r"throttling in test_gemm\[gpu0\]"):
            read_session(run_dir, assume_training="2026-11-27")
    limits = {(f.table, f.key, f.gpus): f for f in fit(
        [read_session(folder, assume_training="2026-11-27") for folder in HEALTHY])}
    for run_dir in dirs:  # as the fit reads a session, its health gate aside
        summary = json.loads((run_dir / "session.json").read_text())
        summary["results"] = {}
        (run_dir / "session.json").write_text(json.dumps(summary))
    missed = {(s.path.name.split("-", 1)[1], f.table, f.key, f.gpus) for s in
              (read_session(d, assume_training="2026-11-27") for d in dirs) for f in s.figures
              if (key := (f.table, f.key, f.gpus)) in limits
              and (f.value > limits[key].limit if f.key.startswith("max_") else f.value < limits[key].limit)}
    assert missed == {("20261127-060938-vm-h100-80gb-884", "models.resnet152.fp16", "min_weak_efficiency", 2),
                      ("20261127-060938-vm-h100-80gb-884", "models.resnet152.fp16", "min_gpu_utilization_pct", 2)}


HOST_J = REPO / "docs" / "data" / "2026-11-27-h100x4-host-j" / "sessions"
HOST_K = REPO / "docs" / "data" / "2026-11-27-h100x4-host-k" / "sessions"
HOST_L = REPO / "docs" / "data" / "2026-11-28-h100x4-host-l" / "sessions"
HOST_M = REPO / "docs" / "data" / "2026-11-28-h100x4-host-m" / "sessions"
WRITTEN = (HOST_J / "20261127-232851-vm-h100-80gb-896", HOST_M / "20261128-015501-vm-h100-80gb-909",
           HOST_M / "20261128-015851-vm-h100-80gb-1300")
"""Host J's first default session and host M's two (both PASSed, 2026-11-28): sessions that wrote their records."""
NOT_IN_THE_FIT = (*WRITTEN, HOST_K / "20261127-235506-vm-h100-80gb-1133")
"""Those, and host K's (cut while re-measuring: its first attempts, in the cut launch's case directories): hosts
measured after the fit's, none of which gave a bound, whose first attempts meet every one."""
X2 = REPO / "docs" / "data" / "2026-11-27-h100x2" / "sessions"
X11_FITTED = [REPO / "docs" / "data" / "2026-11-28-h100x2-host-x11" / "sessions" / name
              for name in ("20261128-043113-vm-h100-80gb-x2-1178", "20261128-043357-vm-h100-80gb-x2-1415")]


@pytest.mark.parametrize("run_dir", WRITTEN, ids=lambda path: f"{path.parent.parent.name}-{path.name}")
def test_a_host_the_bounds_were_not_fitted_on_meets_every_shipped_bound(run_dir):
    """Hosts J and M (docs/data/2026-11-27-h100x4-host-j, docs/data/2026-11-28-h100x4-host-m): each figure their
    sessions measured, as the fit reads it, meets the shipped h100-80gb bound of its table, key and GPU count, and
    every fitted bound was met."""
    judged = assert_meets_every_shipped_bound(load_shipped_profile(REPO / "thresholds" / "h100-80gb.toml"), run_dir)
    assert len(judged) == 98 + 1  # and the all-reduce at 4 GPUs, the one a node of 4 runs


def assert_meets_every_shipped_bound(shipped, run_dir: Path) -> set[tuple[str, str, int]]:
    """Asserts each figure of the session at ``run_dir``, as the fit reads it, meets the ``shipped`` profile's bound
    of its table, key and GPU count; returns the (table, key, GPUs) it judged."""
    judged = set()
    for figure in read_session(run_dir).figures:
        reference = shipped_reference(shipped, figure)
        if reference is None:
            continue
        judged.add((figure.table, figure.key, figure.gpus))
        higher_is_worse = figure.key.startswith("max_")
        limit = reference.limit(lower_is_worse=not higher_is_worse)
        assert figure.value <= limit if higher_is_worse else figure.value >= limit, (figure, reference)
    return judged


def assert_reproduced(shipped, fitted, hosts: int) -> None:
    """Asserts every fitted bound is the ``shipped`` profile's, fitted from ``hosts`` hosts."""
    for bound in fitted:
        reference = shipped_reference(shipped, bound)
        assert reference is not None, bound
        assert (reference.ref, reference.tol, reference.hosts) == (
            pytest.approx(bound.ref, rel=1e-5), pytest.approx(bound.tol, rel=1e-3), hosts), bound


def _first_attempts_judged(run_dir: Path) -> tuple[int, int, list[tuple[str, str, float]]]:
    """(cases, efficiencies judged, misses) of a session's first attempts -- the records it wrote and those a cut
    launch left in its case directories -- judged by today's checks against the shipped h100-80gb profile; each
    miss (case, check, measured)."""
    from harness.kinds.ddp_scaling.checks import weak_scaling_checks
    from harness.run_directory import read_run_directory, run_record
    from harness.tools.calibrate.sessions import first_attempts, reference_of, references_of

    shipped = load_shipped_profile(REPO / "thresholds" / "h100-80gb.toml")
    directory = read_run_directory(run_dir, launch_records=True)
    records = first_attempts([run_record(found.data) for found in (*directory.records, *directory.launch_records)])
    references = references_of(records)
    judged, missed = 0, []
    for record in records:
        checks = {c.key: c for c in weak_scaling_checks(record, reference_of(record, references),
                                                        shipped.bounds(record.model, record.precision),
                                                        telemetry_note="n/a")}
        assert checks["throttling"].passed is True and checks["foreign_processes"].passed is True, record.run_id
        missed += [(f"{record.model}-{record.precision}-{record.world_size}gpu", c.key, round(c.measured, 4))
                   for c in checks.values() if c.passed is False]
        judged += record.world_size > 1 and checks["weak_efficiency"].passed is not None
    return len(records), judged, missed


@pytest.mark.parametrize("run_dir", NOT_IN_THE_FIT, ids=lambda path: f"{path.parent.parent.name}-{path.name}")
def test_records_of_hosts_outside_the_fit_rejudged_by_todays_checks_pass_every_shipped_bound(run_dir):
    """The checks as they stand (telemetry read through its type, efficiencies tied to the node size they were
    fitted on), run over hosts J's, K's and M's recorded 4 x H100 first attempts against the shipped profile: every
    training case passes, each efficiency is judged (its reference ran on the 4 GPUs the bounds were fitted with),
    and the GPU telemetry checks read the real records' samples (judged, not "not evaluated")."""
    assert _first_attempts_judged(run_dir) == (24, 16, [])


def test_shipped_fitted_bounds_come_out_of_the_sessions_they_name():
    """A shipped fit is reproducible from docs/data: every bound of h100-80gb-x2 (nodes of 2 GPUs) from its 8
    sessions on 5 hosts: X1-X5's 6 and X11's 2 (h100-80gb's: the test above)."""
    shipped = load_shipped_profile(REPO / "thresholds" / "h100-80gb-x2.toml")
    fitted = fit([read_session(folder) for folder in [*sorted(X2.iterdir()), *X11_FITTED]])
    assert_reproduced(shipped, fitted, hosts=5)
    assert len(fitted) == 59


def test_a_healthy_pair_whose_gpus_differ_by_a_percent_fails_no_straggler_bound_once_its_host_is_in_the_fit():
    """X11 (2 x H100, 2026-11-28): GPU 0 0.8-1.3 % slower than GPU 1 in the transformer cases; its second session
    FAILed vit_b_16 bf16 straggler ratio 1.013 against a limit of 1.012 that four hosts had set at the 1 % floor. The
    refit from five hosts (X11 in it) judges both sessions' first attempts without a straggler miss, and still sets
    every 2-GPU straggler limit below 1.05: the foreign load of `harness selftest` read 2.17 on that host."""
    profile = load_shipped_profile(REPO / "thresholds" / "h100-80gb-x2.toml")
    limits = [profile.bounds(model, precision).at("max_straggler_ratio", 2)
              for model in profile.models for precision in profile.precisions]
    assert limits and all(1.01 < limit < 1.05 for limit in limits)
    vit = profile.bounds("vit_b_16", "bf16")
    assert vit.at("max_straggler_ratio", 2) > 1.0134  # the worst of X11's first attempts


def test_a_node_of_2_gpus_is_judged_by_its_own_shape_where_the_4_gpu_fit_judged_nothing():
    """The x2 sessions' efficiencies: not evaluated against h100-80gb (its 1-GPU reference ran on 4 GPUs at once),
    judged against h100-80gb-x2 (node_gpus = 2)."""
    from harness.kinds.ddp_scaling.checks import weak_scaling_checks
    from harness.run_directory import read_run_directory, run_record

    records = [run_record(r.data) for r in read_run_directory(X2 / "20261127-153202-vm-h100-80gb-634").records]
    references = {(r.model, r.precision): r for r in records if r.world_size == 1}
    outcomes = {}
    for name in ("h100-80gb", "h100-80gb-x2"):
        profile = load_shipped_profile(REPO / "thresholds" / f"{name}.toml")
        outcomes[name] = [c.passed for r in records if r.world_size == 2
                          for c in weak_scaling_checks(r, references[(r.model, r.precision)],
                                                       profile.bounds(r.model, r.precision), telemetry_note="n/a")
                          if c.key == "weak_efficiency"]
    assert outcomes == {"h100-80gb": [None] * 8, "h100-80gb-x2": [True] * 8}


def test_one_nccl_channel_fails_the_h100_all_reduce_bound_that_a_healthy_host_meets():
    """The partial interconnect degradation the all-reduce bound exists for (issue 27), on host E."""
    interconnect = load_shipped_profile(REPO / "thresholds" / "h100-80gb.toml").table(INTERCONNECT_BOUNDS)
    bound = interconnect.min_allreduce_busbw_gbps
    figures = {}
    for name in ("20261127-124457-vm-h100-80gb-900", "20261127-124908-vm-h100-80gb-1310"):
        with gzip.open(HOST_E / name / "session.json.gz") as packed:
            results = json.load(packed)["results"]
        figures[name] = {int(test.split("[")[1].split("gpu")[0]): check["measured"] for test, result in results.items()
                         if "test_allreduce_bus_bandwidth" in test
                         for check in result["checks"] if check["key"] == "allreduce_busbw"}
    healthy, one_channel = figures.values()
    assert sorted(healthy) == sorted(one_channel) == [2, 4]
    assert all(healthy[n] >= bound[n] > 10 * one_channel[n] for n in (2, 4)), (healthy, one_channel, bound)


def test_apply_inserts_a_missing_key_before_source():
    text = '[models.resnet50.bf16]\nbatch_size_per_gpu = 256\nsource = "x"\n'
    from harness.tools.calibrate.fit import Fitted

    fitted = [Fitted(table="models.resnet50.bf16", key="max_step_time_cv", gpus=2, ref=0.01, tol=1.0, hosts=3, runs=3,
                     spread=0.1, worst=0.015, held_out_failures=())]
    out = apply(text, fitted, "")
    assert out.splitlines()[2].startswith("max_step_time_cv = { 2 = { ref = 0.01, tol = 1, hosts = 3")
    assert out.splitlines()[3] == 'source = "x"'
    assert f'training = "{current_id("training")}"' in out


def test_a_fit_of_one_node_shape_refuses_to_drop_another_shapes_bounds_unless_asked(tmp_path, capsys):
    """A key's line is written whole: fitting 1-GPU nodes into h100-80gb (its 4-GPU node's 1-GPU rate is keyed 4)
    would have dropped every { 4 = ... } the 4 x H100 hosts gave, silently. Where those are of today's definition
    it is refused, naming what; with --drop-unfitted they go; a fit that covers every count the line holds is
    written as before (and bounds of an older definition, judged nowhere, go as they did: the toy fits above)."""
    from harness.tools.calibrate.fit import Fitted

    text = ('[models.resnet50.bf16]\nbatch_size_per_gpu = 256\n'
            'min_samples_per_sec_per_gpu = { 4 = { ref = 3982.75, tol = 0.05, hosts = 6, runs = 9, spread = 0.006 } }\n'
            f'source = "x"\n[definitions]\ntraining = "{current_id("training")}"\n')
    one_gpu = [Fitted(table="models.resnet50.bf16", key="min_samples_per_sec_per_gpu", gpus=1, ref=4100.0, tol=0.05,
                      hosts=3, runs=3, spread=0.01, worst=4050.0, held_out_failures=())]
    with pytest.raises(CalibrationError, match=r"\[models.resnet50.bf16\] min_samples_per_sec_per_gpu has bounds for "
                                               r"4 GPUs that these sessions did not measure.*--drop-unfitted"):
        apply(text, one_gpu, "")
    assert "{ 1 = { ref = 4100" in apply(text, one_gpu, "", drop_unfitted=True)
    assert "4 = " not in apply(text, one_gpu, "", drop_unfitted=True).splitlines()[2]
    both = [*one_gpu, Fitted(table="models.resnet50.bf16", key="min_samples_per_sec_per_gpu", gpus=4, ref=3990.0,
                             tol=0.05, hosts=3, runs=3, spread=0.01, worst=3950.0, held_out_failures=())]
    assert apply(text, both, "").splitlines()[2].startswith("min_samples_per_sec_per_gpu = { 1 = { ref = 4100")

    profile = tmp_path / "h100-80gb.toml"
    profile.write_text((REPO / "thresholds" / "h100-80gb.toml").read_text())
    before = profile.read_text()
    ns = argparse.Namespace(sessions=[str(d) for d in sorted(X2.iterdir())], profile=str(profile), output=None,
                            report=None, min_hosts=3, min_tol=0.0, assume_training_definition=None, leave_out="",
                            source="")
    assert cli_fit(ns) == EXIT_USAGE_ERROR  # nodes of 2 GPUs into the profile of nodes of 4
    assert f"{profile}: [components] min_d2h_concurrent_gbps has bounds for 4 GPUs that these sessions did not " \
        "measure" in capsys.readouterr().err  # the first key the fit reaches
    assert profile.read_text() == before


def test_a_strong_scaling_baseline_judged_against_itself_is_no_figure_of_the_strong_efficiency():
    """The CPU sessions (docs/data/2026-11-27-cpu-calibration): each has one 2-rank strong case per model and
    precision, so each strong efficiency is fitted from 3 figures. Its 1-rank baseline, run through the same
    judge, gave a speedup of ~1 against itself, which was pooled into the 2-rank table (6 figures, ref 0.736
    where the cases' own median is 0.576), and the shipped cpu bounds are the cases' own."""
    folders = sorted((REPO / "docs" / "data" / "2026-11-27-cpu-calibration" / "sessions").iterdir())
    strong = [f for f in fit([read_session(d) for d in folders], min_hosts=1) if f.key == "min_strong_efficiency"]
    assert strong and all(f.runs == 3 for f in strong)
    shipped = load_shipped_profile(REPO / "thresholds" / "cpu.toml")
    for fitted in strong:
        assert shipped_reference(shipped, fitted).ref == pytest.approx(fitted.ref, rel=1e-5)


def _misses(run_dir: Path, profile: str = "h100-80gb") -> list[tuple[str, str, int, float]]:
    """(table, key, GPU count, figure) of every figure of a session, as the fit reads it, that misses its shipped
    bound in thresholds/<profile>.toml."""
    shipped = load_shipped_profile(REPO / "thresholds" / f"{profile}.toml")
    missed = []
    for figure in read_session(run_dir).figures:
        reference = shipped_reference(shipped, figure)
        if reference is None:
            continue
        higher_is_worse = figure.key.startswith("max_")
        limit = reference.limit(lower_is_worse=not higher_is_worse)
        if figure.value > limit if higher_is_worse else figure.value < limit:
            missed.append((figure.table, figure.key, figure.gpus, round(figure.value, 4)))
    return missed


def test_hosts_outside_the_fit_miss_only_figures_a_session_confirms_before_it_fails():
    """Hosts J and L (docs/data/2026-11-27-h100x4-host-j, docs/data/2026-11-28-h100x4-host-l), fitted on by nothing.
    Their first attempts miss only tail figures and a figure within its noise, each of which a session re-measures
    before it fails (harness/checks/confirm.py): J's second session the straggler ratio of bert_large bf16 at 4 GPUs
    whose slowest GPU was GPU 1 (the GPU whose host link also dipped in that session); L's first session one
    straggler ratio; L's second the GPU uniformity of resnet152 fp16 (0.955 against 0.9589, a 0.4 % miss), which
    its session re-measured and PASSed. Both sides, as recorded."""
    assert _misses(HOST_J / "20261127-233335-vm-h100-80gb-1317") == [
        ("models.bert_large.bf16", "max_straggler_ratio", 4, 1.0639)]
    assert _first_attempts_judged(HOST_L / "20261128-014228-vm-h100-80gb-906") == (24, 16, [
        ("bert_large-fp16-4gpu", "straggler_ratio", 1.0538), ("resnet50-fp16-2gpu", "step_time_cv", 0.1504)])
    # (read from the cut launch's case directories)
    assert _first_attempts_judged(HOST_L / "20261128-014705-vm-h100-80gb-1319") == (24, 16, [
        ("resnet152-fp16-1gpu", "gpu_uniformity", 0.955)])


H200X2 = REPO / "docs" / "data" / "2026-11-28-h200x2-calibration" / "sessions"
H200X2_HELD_OUT = REPO / "docs" / "data" / "2026-11-28-h200x2-held-out" / "sessions" / "20261128-080543-vm-h200-x2-646"


def test_the_shipped_h200_x2_bounds_come_out_of_their_calibration_sessions_and_a_fourth_host_meets_them():
    """thresholds/h200-x2.toml (nodes of 2 H200s) from its 4 calibration sessions on 3 hosts (2026-11-28), every
    bound reproduced; the default session of a fourth host, which PASSed on the GPUs, meets every one of them."""
    shipped = load_shipped_profile(REPO / "thresholds" / "h200-x2.toml")
    fitted = fit([read_session(folder) for folder in sorted(H200X2.iterdir())])
    assert_reproduced(shipped, fitted, hosts=3)
    assert len(fitted) == 59
    assert len(assert_meets_every_shipped_bound(shipped, H200X2_HELD_OUT)) == 59  # every fitted bound judged


H200X2_HOST_P = REPO / "docs" / "data" / "2026-11-28-h200x2-host-p" / "sessions"


@pytest.mark.parametrize("name", ["20261128-103951-vm-h200-x2-654", "20261128-104305-vm-h200-x2-915"])
def test_a_fifth_2_x_h200_host_meets_every_h200_x2_bound_in_both_its_sessions(name):
    """Host P (GPU 0 GPU-8d748f7e, 2026-11-28): two default sessions, each PASS on the GPUs; each first settled
    window meets every fitted bound."""
    shipped = load_shipped_profile(REPO / "thresholds" / "h200-x2.toml")
    assert len(assert_meets_every_shipped_bound(shipped, H200X2_HOST_P / name)) == 59


H200X1 = REPO / "docs" / "data" / "2026-11-28-h200x1-calibration" / "sessions"
H200X1_HELD_OUT = REPO / "docs" / "data" / "2026-11-28-h200x1-held-out" / "sessions"


def test_the_shipped_h200_x1_bounds_come_out_of_their_calibration_sessions_and_a_fourth_host_meets_them():
    """thresholds/h200-x1.toml (nodes of 1 H200) from its 5 calibration sessions on 3 hosts (2026-11-28), every bound
    reproduced; host E's two default sessions (GPU-ee61212f), each PASS on the GPU, meet every one of them."""
    shipped = load_shipped_profile(REPO / "thresholds" / "h200-x1.toml")
    fitted = fit([read_session(folder) for folder in sorted(H200X1.iterdir())])
    assert_reproduced(shipped, fitted, hosts=3)
    assert len(fitted) == 34
    for name in ("20261128-110118-vm-h200-x1-516", "20261128-110300-vm-h200-x1-658"):
        assert len(assert_meets_every_shipped_bound(shipped, H200X1_HELD_OUT / name)) == 34


def test_the_host_d_session_that_failed_misses_one_step_time_cv_and_its_host_link_meets_the_host_side_floor():
    """Host D (GPU-34b6dace): its second default session FAILed, 2 minutes after a PASS, on the concurrent host link
    (46.8 GB/s against 52.54, confirmed 2 of 3; the link alone missed 49.7 once in 3) and ResNet-152 fp16's step-time
    CV (0.0281 against 0.0278, confirmed 2 of 3) (docs/data/2026-11-28-h200x1-held-out). The host link's least
    tolerance is now a host-side one (fit.HOST_LINK_FLOOR, 29 %: limit 39.3): of the first attempts, as the fit reads
    them, only the CV misses, a tail figure; the session would still FAIL on it, as it did."""
    shipped = load_shipped_profile(REPO / "thresholds" / "h200-x1.toml")
    missed = []
    for figure in read_session(H200X1_HELD_OUT / "20261128-105732-vm-h200-x1-659").figures:
        reference = shipped_reference(shipped, figure)
        higher_is_worse = figure.key.startswith("max_")
        limit = reference.limit(lower_is_worse=not higher_is_worse)
        if figure.value > limit if higher_is_worse else figure.value < limit:
            missed.append((figure.table, figure.key, round(figure.value, 4)))
        if figure.key == "min_h2d_concurrent_gbps":
            assert (round(figure.value, 2), round(limit, 2)) == (46.82, 39.27)
    assert missed == [("models.resnet152.fp16", "max_step_time_cv", 0.0281)]


H200X4_FIT = tuple(folder for name in ("2026-11-27-h200x4", "2026-11-28-h200x4-calibration", "2026-11-28-h200x4-fit")
                   for folder in sorted((REPO / "docs" / "data" / name / "sessions").iterdir()))
"""thresholds/h200.toml's sessions: three 4 x H200 hosts (GPU 0 GPU-4e881a54, GPU-f2f9152a, GPU-71ec2f6e)."""
H200X4_HELD_OUT = REPO / "docs" / "data" / "2026-11-28-h200x4-held-out" / "sessions"


def test_the_shipped_h200_bounds_come_out_of_six_sessions_on_three_4_x_h200_hosts():
    """thresholds/h200.toml (nodes of 4 H200s), every bound reproduced from its sessions, 2026-11-27 and -28; no
    8-GPU bound (no 8 x H200 node was measured)."""
    shipped = load_shipped_profile(REPO / "thresholds" / "h200.toml")
    fitted = fit([read_session(folder) for folder in H200X4_FIT])
    assert_reproduced(shipped, fitted, hosts=3)
    assert len(fitted) == 99
    assert {bound.gpus for bound in fitted} == {2, 4}


def test_a_4_x_h200_host_outside_the_fit_meets_every_h200_bound():
    """Host GPU-ef705d6a (2026-11-28), in no fit: its default session PASSed in 178.53 s with nothing re-measured,
    and each first settled window meets every one of the 99 fitted bounds."""
    shipped = load_shipped_profile(REPO / "thresholds" / "h200.toml")
    assert len(assert_meets_every_shipped_bound(shipped, H200X4_HELD_OUT / "20261128-162426-vm-h200-958")) == 99


def test_a_second_4_x_h200_host_outside_the_fit_misses_only_a_tail_figure_its_session_re_measured_and_passed():
    """Host GPU-6f1a7d95 (2026-11-28), in no fit: both default sessions PASS after re-measures ("passed on re-measure,
    1 of 3 missed"). Read as the fit reads a session (each case's first settled window), the first meets every bound
    (its ResNet-152 fp16 4-GPU window, straggler 1.064 and CV 0.187, never settled); the second misses one tail
    figure, ResNet-50 fp16's step-time CV at 4 GPUs (0.047 against 0.0446), which its session re-measured and passed
    (0.0234). Its ResNet-152 fp16 2-GPU window (efficiency 0.821 at 84 % utilization: the GPUs waited on their
    host) never settled either."""
    assert _misses(H200X4_HELD_OUT / "20261128-162941-vm-h200-963", "h200") == []
    assert _misses(H200X4_HELD_OUT / "20261128-163345-vm-h200-1363", "h200") == [
        ("models.resnet50.fp16", "max_step_time_cv", 4, 0.047)]


FITTED_SESSIONS = (*HEALTHY, *sorted(X2.iterdir()), *X11_FITTED, *sorted(H200X2.iterdir()), *sorted(H200X1.iterdir()),
                   *H200X4_FIT)
"""Every healthy session a shipped fit measured."""


def deepest_power_shortfall() -> tuple[float, str, tuple[str, str, str, int]]:
    """(shortfall, GPU, case): the GPU whose median power fraction over a case's first attempts falls furthest below
    the median GPU of its kind for that case, over FITTED_SESSIONS."""
    by_case: dict[tuple[str, str, str, int], dict[str, list[float]]] = {}
    for folder in FITTED_SESSIONS:
        for packed in folder.glob("runs/*.json.gz"):
            if remeasure_of(packed.name.removesuffix(".json.gz")) is not None:
                continue
            record = json.loads(gzip.decompress(packed.read_bytes()))
            case = (record["device_name"], record["model"], record["precision"], record["world_size"])
            for gpu in (record.get("telemetry") or {}).get("gpus") or []:
                reduced = gpu.get("reduced") or {}
                if reduced.get("power_w") and reduced.get("power_limit_w"):
                    by_case.setdefault(case, {}).setdefault(gpu["uuid"], []).append(
                        reduced["power_w"] / reduced["power_limit_w"])
    found = []
    for case, by_gpu in by_case.items():
        medians = {uuid: statistics.median(values) for uuid, values in by_gpu.items()}
        kind = statistics.median(medians.values())
        lowest = min(medians, key=medians.__getitem__)
        found.append((1 - medians[lowest] / kind, lowest, case))
    return max(found)


def test_the_power_floor_is_twice_the_deepest_healthy_chip_below_its_kind():
    """fit.POWER_FLOOR comes from the archived sessions: a healthy GPU's power at the same work is its chip's, 6.85 %
    under its kind's median at worst (an H200, ResNet-50 bf16), so the least tolerance is FACTOR x that, rounded up to
    a hundredth; a change to the sessions or the rule that moves it fails here."""
    shortfall, gpu, case = deepest_power_shortfall()
    assert (round(shortfall, 4), gpu[:12], case) == (0.0685, "GPU-c78f79bd", ("NVIDIA H200", "resnet50", "bf16", 1))
    assert FACTOR * shortfall <= POWER_FLOOR < FACTOR * shortfall + 0.01


H200X1_HOSTS_F_G = REPO / "docs" / "data" / "2026-11-28-h200x1-hosts-f-g" / "sessions"


@pytest.mark.parametrize("name", ["20261128-133849-vm-h200-x1-525", "20261128-134031-vm-h200-x1-666"])
def test_host_f_meets_every_h200_x1_bound_in_both_its_sessions(name):
    """Host F (GPU-5cbd1282, 2026-11-28): two default sessions, each PASS; each first settled window meets every
    fitted bound of h200-x1."""
    shipped = load_shipped_profile(REPO / "thresholds" / "h200-x1.toml")
    assert len(assert_meets_every_shipped_bound(shipped, H200X1_HOSTS_F_G / name)) == 34


def test_host_g_draws_less_power_than_the_fitted_hosts_and_meets_the_chip_wide_power_floor():
    """Host G (GPU-84ef4d21, 2026-11-28) FAILed both default sessions on power fractions under the 5 % floor: ResNet-50
    bf16 0.8446 against 0.848 (its reference 0.8926), ResNet-50 fp16's re-measures 0.934 and 0.9249 against 0.9347, at
    1965-1980 MHz, 99.4 % utilization and the reference's rate. Under POWER_FLOOR every power fraction it measured
    passes; its first session's ResNet-152 fp16 step-time CV and utilization still miss (the host stalled the GPU in
    2 of 3 windows: CV 0.0605, 0.1001, 0.0017; utilization 94.55, 93.0, 99.64), and so that session still FAILs."""
    shipped = load_shipped_profile(REPO / "thresholds" / "h200-x1.toml")
    missed = []
    for name in ("20261128-134240-vm-h200-x1-529", "20261128-134451-vm-h200-x1-684"):
        for figure in read_session(H200X1_HOSTS_F_G / name).figures:
            reference = shipped_reference(shipped, figure)
            higher_is_worse = figure.key.startswith("max_")
            limit = reference.limit(lower_is_worse=not higher_is_worse)
            if (name[-3:], figure.key, figure.table) == ("529", "min_power_fraction_of_limit", "models.resnet50.bf16"):
                assert (round(figure.value, 4), round(reference.ref * 0.95, 3)) == (0.8446, 0.848)
            if figure.value > limit if higher_is_worse else figure.value < limit:
                missed.append((name[-3:], figure.table, figure.key, round(figure.value, 4)))
    assert missed == [("529", "models.resnet152.fp16", "max_step_time_cv", 0.0605),
                      ("529", "models.resnet152.fp16", "min_gpu_utilization_pct", 94.552)]


H200X1_HOSTS_H_I = REPO / "docs" / "data" / "2026-11-28-h200x1-hosts-h-i" / "sessions"


@pytest.mark.parametrize("name", ["20261128-135452-vm-h200-x1-531", "20261128-135627-vm-h200-x1-664",
                                  "20261128-135832-vm-h200-x1-524"])
def test_hosts_h_and_i_meet_every_h200_x1_bound_with_the_chip_wide_power_floor(name):
    """Hosts H (GPU-d9020006, two sessions) and I (GPU-60961fe1), measured after POWER_FLOOR and in no fit: each
    session PASSed and each first window meets every fitted bound. Host H's chip draws ResNet-50 bf16 at 0.8413 and
    0.8422 of its limit, under the 5 % floor's 0.848, which would have FAILed both its sessions."""
    shipped = load_shipped_profile(REPO / "thresholds" / "h200-x1.toml")
    assert len(assert_meets_every_shipped_bound(shipped, H200X1_HOSTS_H_I / name)) == 34
    power = {figure.table: figure.value for figure in read_session(H200X1_HOSTS_H_I / name).figures
             if figure.key == "min_power_fraction_of_limit"}
    if name.endswith(("-531", "-664")):
        assert power["models.resnet50.bf16"] < 0.848


H200X2_SETTLE = REPO / "docs" / "data" / "2026-11-28-h200x2-settle-doubled" / "sessions"


@pytest.mark.parametrize("name", ["20261128-132602-vm-h200-x2-674", "20261128-133153-vm-h200-x2-668"])
def test_hosts_q_and_r_meet_every_h200_x2_bound(name):
    """Hosts Q (GPU-e7110998) and R (GPU-6a9be583), 2026-11-28, in no fit: each default session PASSed on the GPUs
    and each first settled window meets every fitted h200-x2 bound."""
    shipped = load_shipped_profile(REPO / "thresholds" / "h200-x2.toml")
    assert len(assert_meets_every_shipped_bound(shipped, H200X2_SETTLE / name)) == 59


def test_host_j_after_the_kind_moves_misses_only_a_tail_figure_its_session_re_measured():
    """Host J (GPU-90db1289, 2026-11-28, in no fit), code after the node-shape, GPU-state and component moves of
    issue 29: PASS; as the fit reads it only ResNet-152 fp16's step-time CV misses (0.0288 against 0.0278), which
    its session re-measured and passed ("passed on re-measure, 1 of 3 missed")."""
    assert _misses(REPO / "docs" / "data" / "2026-11-28-h200x1-after-moves" / "sessions" /
                   "20261128-165610-vm-h200-x1-539", "h200-x1") == [
        ("models.resnet152.fp16", "max_step_time_cv", 1, 0.0288)]

