"""`harness selftest`: prove, on the node itself, that the harness can fail.

Each row runs a short acceptance session with one injected degradation (rows.py: what is injected
and what must fail), reads the session.json it left (runner.py), and judges it (judge.py, pure): did
the expected checks FAIL, and did a note name the injected cause? table.py prints and writes the
table. foreign_load.py is the foreign process of the first row. docs/selftest.md has the rows.
"""
