"""Typed results on the ground floor: shapes every stage shares, importing nothing else of the harness."""
