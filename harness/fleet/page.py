"""The fleet view written out: fleet.html (self-contained, jinja2 autoescape), fleet.json (the same
data) and fleet.csv (one row per value of every figure), each written atomically."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from harness.files import refuse_special_output_dir
from harness.files import write_text_atomic

OUTPUT_NAMES = ("fleet.html", "fleet.json", "fleet.csv")
FIGURE_COLUMNS = ("profile", "case_key", "level", "key", "name", "unit", "direction")
ROW_COLUMNS = ("node", "gpu", "uuid", "value", "deviation", "robust_z", "outlier", "worse", "bound", "passed")
CSV_HEADER = ("profile", "case", "level", "figure_key", "figure", "unit", "better", "node", "gpu", "gpu_uuid",
              "value", "fleet_median", "deviation_from_median", "robust_z", "outlier", "worse_side", "bound",
              "check_passed", "node_verdict")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _environment() -> Environment:
    return Environment(loader=PackageLoader("harness.fleet", "templates"),
                       autoescape=select_autoescape(["html", "j2"], default_for_string=True, default=True),
                       undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def render_template(name: str, **data: Any) -> str:
    return _environment().get_template(name).render(**data)


def render_html(view: dict) -> str:
    return render_template("fleet.html.j2", fleet=view)


def _plain(value: Any) -> Any:
    """JSON-safe: no charts (markup); a float that is not finite (none is expected: the robust z is
    finite since the scale has a floor) is written as null, never as the non-JSON Infinity or NaN."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "chart"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def render_json(view: dict) -> str:
    return json.dumps(_plain(view), indent=1, allow_nan=False)


def _cell(value: Any) -> Any:
    """A text cell that a spreadsheet would run as a formula (a host named ``=cmd|...``) is quoted."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    if isinstance(value, float) and not math.isfinite(value):
        return ""
    return "" if value is None else value


def render_csv(view: dict) -> str:
    verdicts = {node["node"]: node["verdict"] for node in view["nodes"]}
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    for figure in view["figures"]:
        for row in figure["rows"]:
            values = [figure[c] for c in FIGURE_COLUMNS] + [row["node"], row["gpu"], row["uuid"], row["value"],
                                                             figure["median"], *(row[c] for c in ROW_COLUMNS[4:]),
                                                             verdicts.get(row["node"], "")]
            writer.writerow([_cell(v) for v in values])
    return out.getvalue()


def check_output_dir(output_dir: Path) -> None:
    """OutputPathError (an OSError) when ``output_dir`` or a file the page would replace in it is not a regular
    file or directory (a device, a FIFO, a link): before any input is read."""
    refuse_special_output_dir(output_dir, OUTPUT_NAMES, "--output")


def write_outputs(view: dict, output_dir: Path) -> dict[str, Path]:
    """fleet.html, fleet.json and fleet.csv in ``output_dir`` (made if missing), with the mode the umask
    gives (they name GPU serials: ``umask 077`` keeps them private). Raises OSError."""
    output_dir = Path(output_dir)
    check_output_dir(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, text in (("fleet.html", render_html(view)), ("fleet.json", render_json(view)),
                       ("fleet.csv", render_csv(view))):
        write_text_atomic(output_dir / name, text)
        written[name] = output_dir / name
    return written
