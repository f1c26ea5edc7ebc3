"""Reports: HTML (self-contained), summary.json and JUnit XML per run and per nightly matrix,
and the trend over nights."""
