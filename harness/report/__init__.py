"""The self-contained HTML sign-off report, rebuilt from a run directory's saved JSON.

Pipeline: ``inputs`` (read, clean, type) → ``outcomes`` (each test as recorded) → ``sections/*``
(one view part each) → ``view`` (the whole view) → ``render`` (jinja2, autoescape; write, CLI).
``charts`` draws the inline SVG, ``format`` writes numbers, ``browser`` drives headless Chromium.
"""
