"""Binary sizes, shared by the kinds' launches and workers (the all-reduce sweep's messages,
harness/kinds/interconnect/busbw.py; the component benchmarks' buffers, harness/kinds/components/launch.py)."""

from __future__ import annotations

MIB = 1024**2
GIB = 1024**3
