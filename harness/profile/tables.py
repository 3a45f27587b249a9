"""A kind of job's own table of bounds in the threshold profile, declared by the kind (``Job.bounds``).

The profile's own tables (``[hardware]``, ``[run]``, ``[defaults]``, ``[models.*]``, ``[node]``, ``[stack]``,
``[definitions]``) are the schema's (harness/profile/schema.py): every session reads them. Every other table
belongs to one kind of job, which declares it here: its fields (what the loader checks) and how its checked
values become the typed bounds the kind judges with. The loader is handed the session's tables
(harness/profile/load.py), so a kind's table is checked before any benchmark runs, yet nothing on this floor
names a kind. A shipped kind's table sits at the top level (``[interconnect]``); a site's kind's under
``[site.<name>]``, so a site's name can never take one the harness ships later.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, Mapping, TypeVar

from harness.profile.kinds import Field, Reference

Bounds = TypeVar("Bounds")

SITE_TABLES = "site"
"""The top-level table holding a site's kinds' own bounds tables (``[site.scratch]``)."""


def _as_checked(values: Mapping[str, Any]) -> Any:
    return dict(values)


@dataclass(frozen=True, kw_only=True)
class BoundsTable(Generic[Bounds]):
    """One kind's bounds table: the session checks it against ``fields`` as it loads the profiles (a misspelt key,
    a wrong type or a missing required key refuses the session, naming the file and key; a ``[site.<name>]`` no
    kind of the session declares too), and the kind reads what ``build`` made of it as ``profile.table(TABLE)``
    (a site's also as ``profile.site[name]``)."""

    name: str
    fields: tuple[Field, ...]
    """Each key: its type (``harness.profile.kinds`` NUMBER, STRING, ...), whether required, what it holds."""
    build: Callable[[Mapping[str, Any]], Bounds] = _as_checked
    """The checked values (a bound written as ``{ ref, tol }`` still a ``Reference``: ``split_references``) -> what
    the kind reads; by default the checked values as a dict."""
    doc: str = ""
    """What the table holds, in a few words, for ``harness thresholds check``'s messages."""
    shipped: bool = False
    """A table of a kind this harness ships: at the top level, ``[name]``; a site's is ``[site.<name>]``."""

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"bounds table name {self.name!r} is not a plain name (letters, digits, _)")

    @property
    def heading(self) -> str:
        """How the file and the messages spell it: ``[interconnect]``, ``[site.scratch]``."""
        return f"[{self.name}]" if self.shipped else f"[{SITE_TABLES}.{self.name}]"


References = dict[str, dict[int, Reference]]
"""bound key -> GPU count -> the reference and tolerance the bound was written as (a fitted bound)."""


def split_references(table: Mapping[str, Any]) -> tuple[dict[str, Any], References]:
    """``table`` with every bound written as a reference turned into its limit (below the reference by its
    tolerance for a ``min_`` bound, above it for a ``max_`` one), and those references, by key and GPU count."""
    values: dict[str, Any] = {}
    references: References = {}
    for key, value in table.items():
        if isinstance(value, dict) and any(isinstance(item, Reference) for item in value.values()):
            lower_is_worse = not key.startswith("max_")
            values[key] = {count: item.limit(lower_is_worse) if isinstance(item, Reference) else item
                           for count, item in value.items()}
            references[key] = {count: item for count, item in value.items() if isinstance(item, Reference)}
        else:
            values[key] = value
    return values, references


def with_references(bounds: Callable[..., Bounds]) -> Callable[[Mapping[str, Any]], Bounds]:
    """A ``build`` for a bounds dataclass with a ``references`` field: each bound written as ``{ ref, tol }`` becomes
    its limit (``split_references``), its reference kept beside it."""
    def build(checked: Mapping[str, Any]) -> Bounds:
        values, references = split_references(checked)
        return bounds(**values, references=references)

    return build
