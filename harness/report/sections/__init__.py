"""The report's sections, top to bottom: verdict, signoff, matrix, scaling charts, telemetry, the kinds'
own (kind.py: handed in, e.g. harness/kinds/interconnect/report.py), cases (per test), thresholds. Each turns
the loaded inputs into its part of the view."""
