"""The star flow's setup, shared by the benchmark that runs it (`star_flow`) and the report that reads
its results (`star_flow_report`): the fact table, the watched copies and how many queries are held out.
Kept apart so the report imports only this, never the benchmark (no import circle)."""

from __future__ import annotations

FACT = "lineitem"
HELD_OUT = 60
DIMENSIONS = ("part", "supplier")
FILES_PER_INCREMENT = 12  # target file size: this fraction of one append
# the watched copies: (label, table name in the warehouse, readers its layouts are priced for)
SERVICES = (("service (standard readers)", FACT, None), ("service (deltaopt readers)", f"{FACT}_deltaopt", "deltaopt"))
