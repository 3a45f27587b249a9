"""The report's sections, top to bottom: verdict, signoff, matrix, scaling charts, telemetry,
interconnect, cases (per test), thresholds. Each turns the loaded inputs into its part of the view."""
