"""The kinds of job an acceptance session runs (node shape, GPU state, topology, components, DDP
scaling, all-reduce, soak), declared once: the session verdict, the run levels and the plugin's
collection all read ``registry.JOBS`` (issue 29)."""
