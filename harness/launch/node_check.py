"""The drain reason slurm/node-check.sh gives a node: the verdict and its causes, read from the
session's own verdict (session.json ``session_verdict``), and the report's path.

``gpu-acceptance: FAIL foreign_processes on pid 812 (python) on GPU 2; report /var/lib/…/report.html``

Every reason starts with ``DRAIN_PREFIX``: that is how the script tells a node the harness drained
(and may resume after a passing re-check) from one someone else drained (never touched).

``python -m harness.launch.node_check RUN_DIR`` prints it; it never fails (a damaged session.json
gives a reason that says so), because a node that failed its check must be drained either way.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Sequence

DRAIN_PREFIX = "gpu-acceptance:"
MAX_REASON_CHARS = 250
"""Slurm keeps a reason of any length, but sinfo and scontrol show the first screen of it."""


def _cause_text(cause: Any) -> str:
    if not isinstance(cause, dict):
        return ""
    key = str(cause.get("key") or "unnamed_check")
    where = [str(w).rsplit(" ×", 1)[0] for w in cause.get("where") or [] if isinstance(w, str)]
    return f"{key} {', '.join(where)}".strip() if where else key


def drain_reason(run_dir: Path) -> str:
    """``gpu-acceptance: FAIL <causes>; report <run_dir>/report.html``, at most MAX_REASON_CHARS."""
    report = f"report {run_dir / 'report.html'}"
    try:
        verdict = json.loads((run_dir / "session.json").read_text()).get("session_verdict")
    except (OSError, ValueError, AttributeError) as exc:
        what = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        return _fit(f"{DRAIN_PREFIX} FAIL (session.json not readable: {what})", report)
    if not isinstance(verdict, dict) or verdict.get("verdict") not in ("PASS", "FAIL", "INCOMPLETE"):
        return _fit(f"{DRAIN_PREFIX} FAIL (no session verdict recorded)", report)
    causes = [text for text in (_cause_text(c) for c in verdict.get("causes") or []) if text]
    shown = "; ".join(causes[:3]) + (f"; +{len(causes) - 3} more" if len(causes) > 3 else "")
    return _fit(f"{DRAIN_PREFIX} {verdict['verdict']} {shown}".rstrip(), report)


def _fit(head: str, report: str) -> str:
    """The head cut (never the report's path) so that the whole reason fits."""
    room = MAX_REASON_CHARS - len(report) - 2
    if len(head) > room:
        head = head[:max(room - 1, len(DRAIN_PREFIX))] + "…"
    return f"{head}; {report}"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m harness.launch.node_check RUN_DIR", file=sys.stderr)
        return 4
    print(drain_reason(Path(args[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
