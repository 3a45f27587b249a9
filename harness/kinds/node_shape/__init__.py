"""The node-shape kind: is the whole node here? One quick test, first of every session (job: the declaration;
runner: the session's side, judging the GPUs detection found against the count settled at session start and, in a
multi-node session, the other nodes' GPUs as their GPU-state probes showed them; checks: the judging)."""
