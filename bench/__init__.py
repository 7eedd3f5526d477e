"""Benchmarks (not part of the installed package). Each compares against a baseline in the same run."""
