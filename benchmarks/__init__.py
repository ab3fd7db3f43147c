"""Benchmarks: ``python -m benchmarks NAME`` prints figures and writes ``benchmarks/reports/NAME.md``."""
