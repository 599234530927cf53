"""erstwhile benchmarks: ``python -m bench run --size quick|full`` (see bench/README.md)."""
