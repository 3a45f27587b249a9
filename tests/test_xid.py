"""The XID watcher (harness/node/xid.py) on the fake NVML's event set, and the ``xid_events`` check."""

from __future__ import annotations

import time

import pynvml

from harness.checks.gpu_state import GpuStateInput
from harness.kinds.gpu_state.checks import xid_events_check
from harness.node.hardware import GpuInfo
from harness.node.xid import XID_MEANINGS, XidWatcher, xid_meaning
from harness.kinds.gpu_state.bounds import GpuStateBounds
from support.fake_nvml import UUIDS, FakeNvml, fake_nvml

BOUNDS = GpuStateBounds(require_ecc=True, source="test")


def gpus(count: int) -> list[GpuInfo]:
    return [GpuInfo(index=i, name="NVIDIA H200", uuid=UUIDS[i], memory_total_gib=140.4, pci_bus_id=f"0:{i}")
            for i in range(count)]


def test_an_xid_is_received_with_its_gpu_time_and_meaning():
    nvml = fake_nvml(2)
    watcher = XidWatcher(gpus(2), nvml, clock=lambda: 1_700_000_000.0, wait_ms=1)
    assert watcher.open() and watcher.status == {UUIDS[0]: "ok", UUIDS[1]: "ok"}
    assert watcher.poll() is None  # NVML_ERROR_TIMEOUT: nothing happened
    nvml.xid_queue.append((1, 79))
    event = watcher.poll()
    assert event is not None and (event.gpu_index, event.gpu_uuid, event.xid) == (1, UUIDS[1], 79)
    assert event.meaning == "GPU has fallen off the bus"
    assert f"XID 79 (GPU has fallen off the bus) on GPU 1 ({UUIDS[1]}) at " in event.describe()
    watcher.stop()
    assert nvml.lifecycle == ["nvmlInit", "nvmlShutdown"] and "nvmlEventSetFree" in nvml.calls


def test_the_thread_watches_from_start_to_stop():
    nvml = fake_nvml(1)
    watcher = XidWatcher(gpus(1), nvml, wait_ms=5).start()
    nvml.xid_queue.append((0, 48))
    deadline = time.time() + 5.0
    while not watcher.events and time.time() < deadline:
        time.sleep(0.01)
    events = watcher.stop()
    assert [e.xid for e in events] == [48]
    assert watcher.events_between(events[0].time + 1, None) == []
    assert watcher.to_dict()["events"][0]["meaning"] == "double-bit ECC error (uncorrectable)"


def test_a_gpu_that_cannot_report_xids_says_so_and_no_nvml_is_a_failure():
    nvml = fake_nvml(2)
    nvml.gpus[1].unsupported.add("nvmlDeviceRegisterEvents")
    watcher = XidWatcher(gpus(2), nvml)
    assert watcher.open()
    assert watcher.status[UUIDS[0]] == "ok" and watcher.status[UUIDS[1]].startswith("unsupported: ")
    watcher.stop()
    broken = XidWatcher(gpus(1), FakeNvml([], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)).start()
    assert broken.failure is not None and "NVML is not available" in broken.failure
    assert broken.stop() == []


def test_the_common_xids_have_meanings_and_the_rest_point_to_the_catalog():
    assert {13, 31, 43, 45, 48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120} <= set(XID_MEANINGS)
    assert "docs/references.md#xid-catalog" in xid_meaning(9999)


def _input(**changes) -> GpuStateInput:
    return GpuStateInput(index=2, uuid=UUIDS[2], start=None, end=None, **changes)


def test_any_xid_fails_naming_the_xid_its_meaning_the_gpu_and_the_time():
    event = {"time": 1_700_000_000.0, "xid": 94, "meaning": XID_MEANINGS[94], "gpu_index": 2, "gpu_uuid": UUIDS[2]}
    check = xid_events_check(_input(xid_events=[event]), BOUNDS)
    clock = time.strftime("%H:%M:%S", time.localtime(1_700_000_000.0))
    assert check.passed is False and check.key == "xid_events"
    assert check.note == f"GPU 2 ({UUIDS[2]}): XID 94 (contained ECC error) at {clock}"
    assert xid_events_check(_input(), BOUNDS).passed is True


def test_an_unwatched_gpu_is_not_a_pass():
    unsupported = xid_events_check(_input(xid_watch="unsupported: Not Supported"), BOUNDS)
    assert unsupported.passed is False and "XID events" in unsupported.note
    allowed = GpuStateBounds(require_ecc=True, allow_unsupported=("xid_events",), source="test")
    assert xid_events_check(_input(xid_watch="unsupported: Not Supported"), allowed).passed is None
    assert xid_events_check(_input(xid_watch="error: Unknown Error"), allowed).passed is False
