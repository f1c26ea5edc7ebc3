"""Benchmarks (`make bench`): each compares against its reference point measured in the same run.

Speed lives here, never in tests: the machines are shared and noisy, so every figure comes with
the ratio to a comparison point measured minutes apart on the same machine.
"""
