"""Fleet sign-off: many nodes' sessions side by side, a history per node and per GPU.

``facts`` is the one shape of a session every part reads; ``collect`` reads it from a report
directory, ``store`` keeps it in the SQLite history, ``outliers`` (pure) finds the nodes and
GPUs far from the fleet median, ``view``/``page`` build the fleet page, ``history`` the trends,
``prometheus`` the node_exporter textfile, ``textfile`` the one atomic write of every output,
``session_end`` the plugin's one call at session end, ``cli`` the two commands.
"""
