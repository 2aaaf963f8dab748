"""Benchmarks: ratios measured side by side in one process (see docs/performance.md)."""
