"""Commands around the sign-off: calibrate, find-max-bs, compare."""
