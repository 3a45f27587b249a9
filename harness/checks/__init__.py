"""Judging: run records x profile bounds -> checks (pure; never touches a GPU)."""
