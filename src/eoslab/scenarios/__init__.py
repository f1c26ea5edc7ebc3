"""Scenarios: the schema of a scenario file, the catalogue, and the run executor."""
