"""Evaluation: workloads cut from real code, speed benchmarks and quality measurements."""
