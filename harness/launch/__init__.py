"""Running a job: the spec, the torchrun command and environment, supervision, cleanup, failure records."""
