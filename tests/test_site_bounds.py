"""A kind of job brings its own bounds table (issue 29: one folder, one TOML section, one acceptance test):
``Job.bounds`` declares it (harness/profile/tables.py ``BoundsTable``), the session hands every job's to the loader,
which checks it as it loads the profiles, and the kind reads ``profile.table(TABLE)``. A shipped kind's table sits
at the top level (``[interconnect]``); a site's under ``[site.<name>]``, read also as ``profile.site[name]``, and
``harness thresholds check`` checks a site's table's shape alone. A session of a site's kind:
tests/test_components_plugin.py."""

from pathlib import Path

import pytest

from harness.jobs.job import BoundsTable, Job
from harness.jobs.registry import with_site_jobs
from harness.kinds.interconnect.bounds import INTERCONNECT_BOUNDS, InterconnectBounds
from harness.kinds.shipped import BOUNDS_TABLES, JOBS, load_shipped_profile
from harness.profile.kinds import NUMBER, STRING, Field
from harness.profile.load import ThresholdError, cli_check, load_profile
from support.profiles import cpu_test_profile

SCRATCH = (Field(key="min_write_gbps", kind=NUMBER, required=True, doc="the scratch write bound, GB/s"),
           Field(key="source", kind=STRING, doc="where the bound came from"))
TABLE = '[site.scratch]\nmin_write_gbps = 4.5\nsource = "fio on 3 nodes"'
SCRATCH_TABLE = BoundsTable(name="scratch", fields=SCRATCH)
SESSION_TABLES = (*BOUNDS_TABLES, SCRATCH_TABLE)
"""What a session of the shipped kinds and a site's scratch kind hands the loader."""
ALLREDUCE = '[interconnect]\nmin_allreduce_busbw_gbps = { 2 = 300.0 }\nsource = "3 hosts"'


def _write(tmp_path: Path, sections: str) -> Path:
    path = tmp_path / "cpu-test.toml"
    path.write_text(cpu_test_profile(sections=sections))
    return path


def test_a_declared_site_table_is_checked_and_read_by_its_kind(tmp_path):
    profile = load_profile(_write(tmp_path, TABLE), SESSION_TABLES, sites_declared=True)
    assert profile.site == {"scratch": {"min_write_gbps": 4.5, "source": "fio on 3 nodes"}}
    assert profile.table(SCRATCH_TABLE) == profile.site["scratch"]


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
        load_profile(_write(tmp_path, table), SESSION_TABLES, sites_declared=True)
    for text in says:
        assert text in str(raised.value), str(raised.value)


def test_without_a_session_only_the_shape_is_checked(tmp_path, capsys):
    """``harness thresholds check`` knows no site's kinds: a [site.<name>] table passes as a table, and the
    profile it builds holds no site values (nothing unchecked reaches a kind)."""
    path = _write(tmp_path, TABLE)
    assert load_shipped_profile(path).site == {}
    assert cli_check([str(path)], BOUNDS_TABLES) == 0
    bad = tmp_path / "bad" / "cpu-test.toml"
    bad.parent.mkdir()
    bad.write_text(cpu_test_profile(sections="[site]\nscratch = 3"))
    assert cli_check([str(bad)], BOUNDS_TABLES) == 1
    assert "site.scratch = 3: expected a table" in capsys.readouterr().err


def test_two_jobs_cannot_declare_one_table_and_a_table_name_is_a_plain_name():
    one = Job(name="scratch a", tests=("test_a",), level="quick", required=lambda need: [],
              bounds=BoundsTable(name="scratch", fields=SCRATCH))
    two = Job(name="scratch b", tests=("test_b",), level="quick", required=lambda need: [],
              bounds=BoundsTable(name="scratch", fields=SCRATCH))
    with pytest.raises(ValueError, match=r"job 'scratch b' declares \[site.scratch\], which job 'scratch a'"):
        with_site_jobs([one, two], JOBS)
    with pytest.raises(ValueError, match="is not a plain name"):
        BoundsTable(name="scratch.disk", fields=SCRATCH)


def test_a_shipped_kinds_table_is_checked_and_built_as_its_kind_declares(tmp_path):
    """[interconnect] is the all-reduce kind's (harness/kinds/interconnect/bounds.py): the loader knows it only as
    it is handed, builds the kind's own dataclass, and a misspelt key in it is refused naming file and key."""
    profile = load_profile(_write(tmp_path, ALLREDUCE), BOUNDS_TABLES, sites_declared=False)
    assert profile.table(INTERCONNECT_BOUNDS) == InterconnectBounds(min_allreduce_busbw_gbps={2: 300.0},
                                                                    source="3 hosts")
    misspelt = _write(tmp_path, ALLREDUCE.replace("min_allreduce_busbw_gbps", "min_allreduce_busbw_gbs"))
    with pytest.raises(ThresholdError) as raised:
        load_profile(misspelt, BOUNDS_TABLES, sites_declared=False)
    assert "interconnect.min_allreduce_busbw_gbs: unknown key" in str(raised.value)
    assert "did you mean min_allreduce_busbw_gbps?" in str(raised.value)


def test_a_kinds_table_is_unknown_to_a_loader_not_handed_it(tmp_path):
    """No part below the kinds knows [interconnect]: handed no kind's table, the loader refuses it as any unknown
    table (a session always hands its kinds' tables: harness/plugin/session.py)."""
    with pytest.raises(ThresholdError, match="interconnect: unknown key"):
        load_profile(_write(tmp_path, ALLREDUCE), (), sites_declared=False)


def test_a_kinds_key_in_the_wrong_table_is_pointed_to_its_kinds_table(tmp_path):
    path = _write(tmp_path, "")
    text = path.read_text().replace("[defaults]\n", "[defaults]\nmin_allreduce_busbw_gbps = { 2 = 300.0 }\n", 1)
    path.write_text(text)
    with pytest.raises(ThresholdError, match=r"min_allreduce_busbw_gbps belongs in \[interconnect\]"):
        load_shipped_profile(path)


def test_a_kinds_table_cannot_take_a_name_of_the_profiles_own():
    """Refused as the session gathers its jobs (a usage error there, harness/plugin/levels.py), and by the loader."""
    node = BoundsTable(name="node", fields=SCRATCH, shipped=True)
    with pytest.raises(ValueError, match=r"\[node\] takes a name of the profile's own top level"):
        load_profile(Path("unread.toml"), (node,), sites_declared=False)
    job = Job(name="node table", tests=("test_n",), level="quick", required=lambda need: [], bounds=node)
    with pytest.raises(ValueError, match=r"\[node\] takes a name of the profile's own top level"):
        with_site_jobs([job], JOBS)


def test_a_kind_that_refuses_its_checked_values_is_one_problem_line(tmp_path):
    """A site's ``build`` may relate two keys (its own rule): a ValueError it raises refuses the profile naming the
    table, as any other problem of the file, never a traceback."""
    def positive_margin(values):
        if values["min_write_gbps"] > 4:
            raise ValueError("min_write_gbps above 4 GB/s was never measured on this scratch system")
        return values

    strict = BoundsTable(name="scratch", fields=SCRATCH, build=positive_margin)
    with pytest.raises(ThresholdError) as raised:
        load_profile(_write(tmp_path, TABLE), (*BOUNDS_TABLES, strict), sites_declared=True)
    assert str(raised.value).endswith("cpu-test.toml: site.scratch: its kind refuses these bounds: min_write_gbps "
                                      "above 4 GB/s was never measured on this scratch system")
