"""The node-shape kind's declaration: one quick test, required of every GPU node; its runner judges the node (no
section of session.json: the test's result carries what it saw)."""

from __future__ import annotations

from harness.jobs.job import Job, Requirement
from harness.jobs.registry import NOT_COLLECTED
from harness.kinds.node_shape.runner import NodeShapeRuns

SECTION = "node_shape"


def _node_shape(need: Requirement) -> list[str]:
    return ["test_node_shape"] if need.on_gpus else []


NODE_SHAPE = Job(name="node shape", tests=("test_node_shape",), level="quick", required=_node_shape,
                 missing_hint=NOT_COLLECTED.format(test="test_node_shape"), section=SECTION, runner=NodeShapeRuns,
                 order="first")
