"""A site's kind brings its own bounds table (issue 29: one folder, one TOML section, one acceptance test):
``Job.bounds`` declares ``[site.<name>]``'s fields, the session checks the table as it loads the profiles and the
kind reads ``profile.site[name]``; ``harness thresholds check`` checks the table's shape alone. A session of such
a kind: tests/test_components_plugin.py."""

from pathlib import Path

import pytest

from harness.jobs.job import BoundsTable, Job
from harness.jobs.registry import with_site_jobs
from harness.kinds.shipped import JOBS
from harness.profile.kinds import NUMBER, STRING, Field
from harness.profile.load import ThresholdError, cli_check, load_profile
from support.profiles import cpu_test_profile

SCRATCH = (Field(key="min_write_gbps", kind=NUMBER, required=True, doc="the scratch write bound, GB/s"),
           Field(key="source", kind=STRING, doc="where the bound came from"))
TABLE = '[site.scratch]\nmin_write_gbps = 4.5\nsource = "fio on 3 nodes"'


def _write(tmp_path: Path, sections: str) -> Path:
    path = tmp_path / "cpu-test.toml"
    path.write_text(cpu_test_profile(sections=sections))
    return path


def test_a_declared_site_table_is_checked_and_read_by_its_kind(tmp_path):
    profile = load_profile(_write(tmp_path, TABLE), {"scratch": SCRATCH})
    assert profile.site == {"scratch": {"min_write_gbps": 4.5, "source": "fio on 3 nodes"}}


@pytest.mark.parametrize("table, says", [
    ('[site.scratch]\nmin_write_gpbs = 4.5', ["site.scratch.min_write_gpbs: unknown key",
                                             "site.scratch.min_write_gbps: required key is missing"]),
    ('[site.scratch]\nmin_write_gbps = "fast"', ['site.scratch.min_write_gbps = "fast": expected a number']),
    ('[site.scrath]\nmin_write_gbps = 4.5', ["site.scrath: no kind of job of this session declares this table "
                                            "(declared: [site.scratch])"]),
    ('[site]\nscratch = 3', ["site.scratch = 3: expected a table, got integer"]),
])
def test_a_bad_site_table_refuses_the_profile_naming_the_key(tmp_path, table, says):
    with pytest.raises(ThresholdError) as raised:
        load_profile(_write(tmp_path, table), {"scratch": SCRATCH})
    for text in says:
        assert text in str(raised.value), str(raised.value)


def test_without_a_session_only_the_shape_is_checked(tmp_path, capsys):
    """``harness thresholds check`` knows no site's kinds: a [site.<name>] table passes as a table, and the
    profile it builds holds no site values (nothing unchecked reaches a kind)."""
    path = _write(tmp_path, TABLE)
    assert load_profile(path).site == {}
    assert cli_check([str(path)]) == 0
    bad = tmp_path / "bad" / "cpu-test.toml"
    bad.parent.mkdir()
    bad.write_text(cpu_test_profile(sections="[site]\nscratch = 3"))
    assert cli_check([str(bad)]) == 1
    assert "site.scratch = 3: expected a table" in capsys.readouterr().err


def test_two_jobs_cannot_declare_one_table_and_a_table_name_is_a_plain_name():
    one = Job(name="scratch a", tests=("test_a",), level="quick", required=lambda need: [],
              bounds=BoundsTable(name="scratch", fields=SCRATCH))
    two = Job(name="scratch b", tests=("test_b",), level="quick", required=lambda need: [],
              bounds=BoundsTable(name="scratch", fields=SCRATCH))
    with pytest.raises(ValueError, match=r"job 'scratch b' declares \[site.scratch\], which job 'scratch a'"):
        with_site_jobs([one, two], JOBS)
    with pytest.raises(ValueError, match="is not a plain name"):
        Job(name="x", tests=("test_x",), level="quick", required=lambda need: [],
            bounds=BoundsTable(name="scratch.disk", fields=SCRATCH))
