"""Per-file statistics and sound pruning shared by real scans, virtual files and benchmarks."""
