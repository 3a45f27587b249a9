"""Where a check failed, as data: the node, the GPU (index and UUID), the process, the XID, the link,
the rank. The session verdict groups failures by it and the report puts them in the GPU's row; nothing
reads a location back out of a note's prose.

Imports nothing else of the harness (and no torch): the checks write it, every reader of a results
file reads it back with ``locations_of``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

_INTEGERS = ("gpu_index", "pid", "xid", "link", "rank")
_TEXTS = ("node", "gpu_uuid", "detail")


@dataclass(frozen=True, kw_only=True, slots=True)
class Location:
    """One place a check names. Every field is optional; at least one is given."""

    node: str | None = None
    """The node's host name, in a multi-node session; None: the node the session ran on."""
    gpu_index: int | None = None
    """The GPU's index as nvidia-smi shows it (NVML's, CUDA_VISIBLE_DEVICES not applied)."""
    gpu_uuid: str | None = None
    """``GPU-8d1c...``: cannot be misread when indices are renumbered."""
    pid: int | None = None
    """A process on the GPU: the foreign process that shared it."""
    xid: int | None = None
    """An XID the driver reported for the GPU."""
    link: int | None = None
    """An NVLink link of the GPU."""
    rank: int | None = None
    """The rank of a run (a CPU rank has no GPU)."""
    detail: str | None = None
    """A few words on what is there: the process's name, the XID's meaning, ``slowest`` / ``fastest``."""
    blamed: bool = True
    """False: named for comparison only (the fastest GPU a straggler is measured against), not a place
    the fault is."""

    def __post_init__(self) -> None:
        if all(getattr(self, name) is None for name in (*_INTEGERS, "node", "gpu_uuid")):
            raise ValueError("a Location names at least one of node, gpu_index, gpu_uuid, pid, xid, link, rank")
        for name in _INTEGERS:
            number = getattr(self, name)
            if number is not None and (isinstance(number, bool) or not isinstance(number, int) or number < 0):
                raise ValueError(f"Location.{name} must be a whole number >= 0, got {number!r}")

    @property
    def names_gpu(self) -> bool:
        return self.gpu_index is not None or self.gpu_uuid is not None

    def gpu(self) -> Location | None:
        """The GPU alone (its node, index and UUID); None when no GPU is named."""
        if not self.names_gpu:
            return None
        return Location(node=self.node, gpu_index=self.gpu_index, gpu_uuid=self.gpu_uuid)

    def text(self) -> str:
        """``pid 4242 (python3) on GPU 2 (UUID GPU-…)``, ``XID 79 (…) on GPU 1``, ``link 3 on GPU 2``,
        ``GPU 2 of node gpu02 (UUID GPU-…)``, ``GPU 3 (UUID GPU-…), slowest``, ``rank 1``, ``node gpu02``."""
        cause = ""
        if self.pid is not None:
            cause = f"pid {self.pid}" + (f" ({self.detail})" if self.detail else "")
        elif self.xid is not None:
            cause = f"XID {self.xid}" + (f" ({self.detail})" if self.detail else "")
        elif self.link is not None:
            cause = f"link {self.link}"
        where = self._gpu_text()
        if not where:
            where = f"rank {self.rank}" if self.rank is not None else ""
            if self.node is not None:
                where = f"{where} of node {self.node}" if where else f"node {self.node}"
        if cause:
            return f"{cause} on {where}" if where else cause
        return f"{where}, {self.detail}" if self.detail else where

    def _gpu_text(self) -> str:
        if not self.names_gpu:
            return ""
        text = f"GPU {self.gpu_index}" if self.gpu_index is not None else "GPU ?"
        if self.node is not None:
            text += f" of node {self.node}"
        return text + (f" (UUID {self.gpu_uuid})" if self.gpu_uuid else "")

    def to_dict(self) -> dict[str, Any]:
        """The fields that are set; ``blamed`` only when False."""
        data: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)
                                if f.name != "blamed" and getattr(self, f.name) is not None}
        if not self.blamed:
            data["blamed"] = False
        return data

    @classmethod
    def from_dict(cls, data: Any) -> Location | None:
        """A stored location; None when it is damaged or names nothing (a reader skips it)."""
        if not isinstance(data, Mapping):
            return None
        values: dict[str, Any] = {}
        for name in _INTEGERS:
            number = data.get(name)
            if isinstance(number, int) and not isinstance(number, bool) and number >= 0:
                values[name] = number
        for name in _TEXTS:
            if isinstance(data.get(name), str) and data[name]:
                values[name] = data[name]
        if data.get("blamed") is False:
            values["blamed"] = False
        try:
            return cls(**values)
        except ValueError:
            return None


def gpu_location(index: Any, uuid: Any, *, node: str | None = None, **more: Any) -> Location | None:
    """A GPU as a results file holds it (index and UUID, either may be missing); None when neither is."""
    index = index if isinstance(index, int) and not isinstance(index, bool) and index >= 0 else None
    uuid = uuid if isinstance(uuid, str) and uuid else None
    try:
        return Location(node=node, gpu_index=index, gpu_uuid=uuid, **more)
    except ValueError:  # names nothing
        return None


def locations_of(check: Any) -> tuple[Location, ...]:
    """The locations of a check as ``Check.to_dict()`` wrote it; () for a check written before it had them."""
    stored = check.get("locations") if isinstance(check, Mapping) else None
    if not isinstance(stored, (list, tuple)):
        return ()
    return tuple(location for location in map(Location.from_dict, stored) if location is not None)
