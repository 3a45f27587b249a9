"""One job-result shape (issue 29): every job's failure is a ``Failure``, written as a run record writes it, and a
page reads the reason of a session written before (a bare line) and after (``{"reason": ...}``) alike."""

from __future__ import annotations

import json

from harness.kinds.interconnect.launch import AllReduceRun
from harness.kinds.interconnect.report import interconnect_missing
from harness.results.job import Failure, failure_reason


def test_a_failed_job_writes_its_failure_as_a_run_record_does():
    run = AllReduceRun(gpus=2, run_id="r-allreduce-2gpu", status="timeout",
                       failure=Failure(reason="rank 1 stopped making progress", phase="measure", rank=1))
    written = json.loads(json.dumps(run.to_dict()))
    assert written["failure"] == {"reason": "rank 1 stopped making progress", "phase": "measure", "rank": 1,
                                  "log_tails": {}}
    assert written["status"] == "timeout" and run.why == "rank 1 stopped making progress" and not run.ok


def test_a_job_that_did_not_fail_has_no_reason():
    run = AllReduceRun(gpus=2, run_id="r", status="ok")
    assert run.why == "" and run.to_dict()["failure"] is None and run.ok


def test_the_page_names_the_reason_of_sessions_written_before_and_after_the_failure_was_typed():
    before = {"interconnect": {"runs": {"2": {"failure": "GPU 1 is busy: pid 42"}}}}
    after = {"interconnect": {"runs": {"4": {"failure": {"reason": "rank 3 was killed by SIGKILL", "phase": None,
                                                         "rank": 3, "log_tails": {}}}}}}
    assert interconnect_missing(before) == "No all-reduce bandwidth was measured (2 GPUs: GPU 1 is busy: pid 42)."
    assert interconnect_missing(after) == "No all-reduce bandwidth was measured (4 GPUs: rank 3 was killed by SIGKILL)."


def test_a_stored_failure_of_no_known_shape_has_no_reason():
    assert failure_reason(None) == failure_reason(7) == failure_reason({"reason": 3}) == ""
