"""A bound and its figure share one definition (issue 27 item 1): the code that measures each family is
fingerprinted, and a shipped profile says which definition its bounds were measured under."""

from __future__ import annotations

import pytest

from harness import definitions
from harness.definitions import DEFINITIONS, current_id, fingerprint, mismatch
from harness.profile.kinds import Reference
from harness.kinds.shipped import load_shipped_profile
from harness.tools.calibrate.sessions import CHECK_TO_BOUND

from test_thresholds import REPO_THRESHOLDS_DIR

SHIPPED = sorted(REPO_THRESHOLDS_DIR.glob("*.toml"))


@pytest.mark.parametrize("family", sorted(DEFINITIONS))
def test_the_measuring_code_is_what_the_definition_was_confirmed_on(family):
    """Changed the code that measures a family? Then decide: if its figures move, give the definition a new id
    in harness/definitions.py (the shipped bounds of the old one are then shown, not judged, until
    `harness calibrate-fit` re-derives them); if they do not, record the new fingerprint."""
    definition = DEFINITIONS[family]
    assert fingerprint(definition.sources) == definition.fingerprint, (
        f"the code of the {family} measurement changed ({', '.join(definition.sources)}): a new definition id and "
        f"re-derived bounds, or the fingerprint {fingerprint(definition.sources)} if the figure did not move")


def test_rewording_a_docstring_leaves_the_fingerprint_alone(tmp_path):
    (tmp_path / "a.py").write_text('def f():\n    """One."""\n    return 1  # a comment\n')
    before = fingerprint(("a.py",), root=tmp_path)
    (tmp_path / "a.py").write_text('def f():\n    """Another word."""\n    return 1\n')
    assert fingerprint(("a.py",), root=tmp_path) == before
    (tmp_path / "a.py").write_text('def f():\n    """One."""\n    return 2\n')
    assert fingerprint(("a.py",), root=tmp_path) != before


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_shipped_profile_says_how_its_bounds_were_measured(path):
    profile = load_shipped_profile(path)
    assert "training" in profile.definitions


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_a_profile_of_todays_training_definition_has_only_fitted_case_bounds(path):
    """Every bound a session judges under today's definition came out of harness calibrate-fit (a reference
    and a tolerance with its hosts and runs), never a hand edit or a number carried over from an older one."""
    profile = load_shipped_profile(path)
    if profile.definitions.get("training") != current_id("training"):
        pytest.skip(f"{path.name}: training bounds of {profile.definitions.get('training')}, not judged today")
    handmade = []
    for (model, precision), bounds in profile.cases.items():
        for key in set(CHECK_TO_BOUND.values()) - {"min_h2d_concurrent_gbps", "min_d2h_concurrent_gbps",
                                                   "min_allreduce_busbw_gbps"}:  # [components], [interconnect]
            table = getattr(bounds, key)
            fitted = bounds.references.get(key, {})
            handmade += [f"{model}.{precision}.{key}.{count}" for count in table if not isinstance(
                fitted.get(count), Reference)]
    assert handmade == []


def test_a_profile_of_another_definition_is_named_as_such():
    assert mismatch("training", {"training": current_id("training")}) is None
    why = mismatch("training", {"training": "2026-11-21"})
    assert why is not None and "measured under definition 2026-11-21" in why and "re-derive" in why
    assert "does not say how" in (mismatch("training", {}) or "")
    compared = definitions.compare({"training": "2026-11-21"})
    assert compared["training"]["mismatch"] == why and compared["components"]["profile"] is None
