"""deltaopt's optimizer: table access, workload analysis, clustering, skipping, the service and the CLI."""

__version__ = "0.1.0"
