"""The predicate model: parse, attribute to tables, normalise, classify, check evaluability.

Read best as passes (sqlglot style): `attribute.scan_filters` turns a query into per-table scans with
filter conjuncts; `normalize.normalize_conjuncts` gives each conjunct one canonical SQL text;
`classify.classify` says whether it is Z-order shaped; `allowlist.check_evaluable` says whether it
may be evaluated on data at all.
"""
