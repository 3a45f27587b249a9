"""The interconnect kind's declarations: the all-reduce sweep (standard level) and the topology reading (quick
level). Both write session.json's ``interconnect`` through one runner (the topology reads its PCIe links under
the component launch's load); the report section is the all-reduce's bandwidth chart."""

from __future__ import annotations

from harness.jobs.job import Job, Requirement, gpu_count_id
from harness.jobs.registry import NOT_COLLECTED
from harness.kinds.interconnect.bounds import INTERCONNECT_BOUNDS, TOPOLOGY_BOUNDS
from harness.kinds.interconnect.params import ALLREDUCE_FIXTURE, allreduce_params, allreduce_widths
from harness.kinds.interconnect.runner import InterconnectRuns
from harness.kinds.interconnect.report import interconnect_section

SECTION = "interconnect"


def _topology(need: Requirement) -> list[str]:
    return ["test_topology"] if need.on_gpus and need.profile.table(TOPOLOGY_BOUNDS) is not None else []


def _allreduce(need: Requirement) -> list[str]:
    if need.profile.table(INTERCONNECT_BOUNDS) is None:
        return []
    return [f"test_allreduce_bus_bandwidth[{gpu_count_id(n)}]"
            for n in allreduce_widths(need.gpu_counts, need.expected_gpus)]


TOPOLOGY = Job(name="topology", tests=("test_topology",), level="quick", required=_topology,
               missing_hint=NOT_COLLECTED.format(test="test_topology"), section=SECTION, runner=InterconnectRuns,
               bounds=TOPOLOGY_BOUNDS)
ALLREDUCE = Job(name="all-reduce", tests=("test_allreduce_bus_bandwidth",), level="standard", required=_allreduce,
                narrowed_by_matrix=True, section=SECTION, runner=InterconnectRuns, report=interconnect_section,
                bounds=INTERCONNECT_BOUNDS, params={ALLREDUCE_FIXTURE: lambda session: allreduce_params(session.ctx)})
