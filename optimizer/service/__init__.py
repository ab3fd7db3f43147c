"""The long-running service: per-table ticks, state, decisions, and where jobs run."""
