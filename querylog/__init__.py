"""deltaopt's query log: the log table, recording, importers and the predicate model."""
