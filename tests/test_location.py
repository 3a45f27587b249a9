"""Where a check failed, as data (harness/results/location.py): its text, and its round trip through JSON."""

import json

import pytest

from harness.results.check import Check
from harness.results.location import Location, gpu_location, locations_of


@pytest.mark.parametrize("location, text", [
    (Location(gpu_index=2, gpu_uuid="GPU-aa", pid=4242, detail="python3"),
     "pid 4242 (python3) on GPU 2 (UUID GPU-aa)"),
    (Location(gpu_index=1, xid=79, detail="GPU has fallen off the bus"),
     "XID 79 (GPU has fallen off the bus) on GPU 1"),
    (Location(gpu_index=2, link=3), "link 3 on GPU 2"),
    (Location(node="gpu02", gpu_index=2, gpu_uuid="GPU-bb"), "GPU 2 of node gpu02 (UUID GPU-bb)"),
    (Location(gpu_index=3, gpu_uuid="GPU-cc", detail="slowest"), "GPU 3 (UUID GPU-cc), slowest"),
    (Location(rank=1), "rank 1"),
    (Location(node="gpu02", detail="not read"), "node gpu02, not read"),
    (Location(gpu_uuid="GPU-dd"), "GPU ? (UUID GPU-dd)"),
])
def test_a_location_reads_as_an_operator_looks_for_it(location, text):
    assert location.text() == text


def test_a_check_s_locations_survive_its_json():
    placed = (Location(gpu_index=0, gpu_uuid="GPU-aa", pid=7, detail="stress"),
              Location(gpu_index=1, rank=1, detail="fastest", blamed=False))
    check = Check(key="foreign_processes", name="x", kind="health", measured=None, bound=None, unit="",
                  comparison="==", passed=False, locations=placed)
    stored = json.loads(json.dumps(check.to_dict()))
    assert stored["locations"][0] == {"gpu_index": 0, "gpu_uuid": "GPU-aa", "pid": 7, "detail": "stress"}
    assert locations_of(stored) == placed


def test_damaged_or_old_locations_are_skipped_not_guessed():
    assert locations_of({"key": "clocks", "note": "GPU 3 (GPU-ee) low"}) == ()  # written before locations
    assert locations_of({"locations": [{"gpu_index": "3"}, {"pid": -1}, "GPU 3", {"gpu_index": 3}]}) == (
        Location(gpu_index=3),)
    assert gpu_location(None, None) is None and gpu_location(True, "") is None


def test_a_location_names_something_and_its_numbers_are_whole():
    with pytest.raises(ValueError, match="names at least one"):
        Location(detail="somewhere")
    with pytest.raises(ValueError, match="gpu_index"):
        Location(gpu_index=-1)
    assert Location(gpu_index=2, pid=9).gpu() == Location(gpu_index=2) and Location(rank=0).gpu() is None
