"""Thresholds applied: the profile's header facts, the bounds each case was judged against, the sources.

The per-case bounds are the ones the session resolved and recorded with each result (``bounds``,
``bounds_inherited``); the report does not merge the profile's tables again. The profile's own
header facts, optional sections and source strings are shown as the recorded profile holds them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.report.format import MISSING, fmt_bound, fmt_count_table, fmt_number, short_unit
from harness.results.reading import as_dict, as_list, as_text
from harness.report.outcomes import SessionTest, cases_not_recorded, first_with_bounds

OPTIONAL_SECTIONS = ("interconnect", "topology", "soak")


@dataclass
class _Sources:
    """Source strings, numbered in the order they are first cited."""

    texts: list[str] = field(default_factory=list)

    def cite(self, value: object) -> str:
        """The footnote number of ``value`` ("" for no source)."""
        text = as_text(value)
        if not text:
            return ""
        if text not in self.texts:
            self.texts.append(text)
        return str(self.texts.index(text) + 1)


def _facts(profile: dict, sources: _Sources) -> list[tuple[str, str]]:
    raw = as_dict(profile.get("raw"))
    hardware, defaults, run = as_dict(raw.get("hardware")), as_dict(raw.get("defaults")), as_dict(raw.get("run"))
    facts = [
        ("Name", as_text(hardware.get("name") or profile.get("name")) or "not recorded"),
        ("Description", as_text(hardware.get("description") or profile.get("description")) or "not recorded"),
        ("File", as_text(profile.get("path")) or "not recorded"),
        ("sha256", as_text(profile.get("sha256")) or "not recorded"),
        ("Schema version", as_text(raw.get("schema_version")) or MISSING),
        ("Device", as_text(hardware.get("device")) or MISSING),
    ]
    match = as_dict(hardware.get("match"))
    if match:
        facts.append(("Matches", ", ".join(f"{k} = {as_text(v)}" for k, v in match.items())))
    peaks = as_dict(hardware.get("peak_tflops"))
    if peaks:
        ref = sources.cite(hardware.get("peak_tflops_source"))
        facts.append(("Dense peak TFLOP/s (for MFU)",
                      ", ".join(f"{k} {fmt_number(v)}" for k, v in peaks.items()) + (f"  [{ref}]" if ref else "")))
    if run:
        facts.append(("Run settings",
                      ", ".join(f"{k.replace('_seconds', '')} {fmt_number(v)} s" for k, v in run.items())))
    if defaults:
        facts.append(("Default matrix", f"{', '.join(as_text(m) for m in as_list(defaults.get('models')))} × "
                                        f"{', '.join(as_text(p) for p in as_list(defaults.get('precisions')))} × "
                                        f"{', '.join(as_text(g) for g in as_list(defaults.get('gpu_counts')))} GPUs"))
    return facts


OTHER_BOUNDS = ("min_power_fraction_of_limit", "max_temperature_c", "min_gpu_uniformity")


def _bounds_row(model: str, precision: str, holder: SessionTest | None, unit: str, sources: _Sources) -> dict:
    """One case's row: its recorded bounds ("d" marks those from [defaults]), or why there are none."""
    if holder is None:
        return {"model": model, "precision": precision, "missing": "not recorded with this run's results"}
    bounds, inherited = holder.bounds, holder.bounds_inherited
    if not bounds:
        return {"model": model, "precision": precision,
                "missing": f"no [models.{model}.{precision}] table in the profile"}

    def shown(key: str, text: str) -> dict:
        return {"text": text, "inherited": key in inherited and text != MISSING}

    return {
        "model": model, "precision": precision, "missing": "",
        "batch": as_text(bounds.get("batch_size_per_gpu")) or MISSING,
        "throughput": fmt_bound(bounds.get("min_samples_per_sec_per_gpu"), unit),
        "weak": shown("min_weak_efficiency", fmt_count_table(bounds.get("min_weak_efficiency"))),
        "strong": (f"{fmt_count_table(bounds.get('min_strong_efficiency'))} (global batch "
                   f"{as_text(bounds.get('strong_global_batch_size'))})"
                   if bounds.get("min_strong_efficiency") else MISSING),
        "straggler": shown("max_straggler_ratio", fmt_bound(bounds.get("max_straggler_ratio"))),
        "cv": shown("max_step_time_cv", fmt_bound(bounds.get("max_step_time_cv"))),
        "util": shown("min_gpu_utilization_pct", fmt_bound(bounds.get("min_gpu_utilization_pct"), "%")),
        "other": "; ".join(f"{k} {fmt_bound(bounds[k])}" for k in OTHER_BOUNDS if bounds.get(k) not in (None, {})),
        "sources": [s for s in (sources.cite(bounds.get("source")),) if s],
    }


def _optional_sections(raw: dict, sources: _Sources) -> list[tuple[str, str]]:
    """The profile's [interconnect], [topology] and [soak] tables as recorded, each with its source."""
    shown = []
    for name in OPTIONAL_SECTIONS:
        section = as_dict(raw.get(name))
        if section:
            ref = sources.cite(section.get("source"))
            items = ", ".join(f"{k} = {fmt_count_table(v) if isinstance(v, dict) else as_text(v)}"
                              for k, v in section.items() if k != "source")
            shown.append((f"[{name}]", items + (f"  [{ref}]" if ref else "")))
    return shown


def build_thresholds(header: dict, tests: list[SessionTest], cases_used: list[tuple[str, str]],
                     units: dict[tuple[str, str], str]) -> dict:
    profile = as_dict(header.get("profile"))
    raw = as_dict(profile.get("raw"))
    sources = _Sources()
    facts = _facts(profile, sources)
    rows = [_bounds_row(model, precision, first_with_bounds(tests, model, precision),
                        short_unit(units.get((model, precision), "samples/s")), sources)
            for model, precision in cases_used]
    # Tables of the recorded profile that no case of this run used (a narrowed run, or GPUs missing).
    unused = sum(1 for model, precisions in as_dict(raw.get("models")).items() for precision in as_dict(precisions)
                 if (model, precision) not in cases_used)
    return {"facts": facts, "rows": rows, "unused": unused, "sources": sources.texts,
            "has_other": any(r.get("other") for r in rows),
            "extra": _optional_sections(raw, sources), "recorded": bool(raw),
            "cases_not_recorded": cases_not_recorded(tests)}
