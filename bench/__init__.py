"""Benchmarks for memagent's store: ``python -m bench`` prints the table (see README.md)."""
