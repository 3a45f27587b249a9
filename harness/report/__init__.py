"""The self-contained HTML sign-off report."""
