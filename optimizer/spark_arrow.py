"""A Spark DataFrame brought to the driver as one Arrow table, on every supported PySpark.

``DataFrame.toArrow()`` exists only from PySpark 4.0. Classic sessions of 3.5 and 4.x both have the
method it is built on, ``_collect_as_arrow()``, and ``to_arrow_schema``: collecting through them gives
the table ``toArrow()`` gives on 4.0 (the same types: UTC microsecond timestamps, decimals, maps,
lists, structs), also for a frame with no rows (its batches are then ``[]``, so the schema comes from
the frame's own). A Spark Connect frame of 4.x has ``toArrow()`` itself; one of 3.5 has neither, and
that gap is an error naming it, never a per-column "not evaluable".
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from optimizer.errors import SparkRuntimeError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame


def to_arrow(frame: DataFrame) -> pa.Table:
    """All rows of `frame` as an Arrow table (the table PySpark 4.0's ``toArrow()`` returns).

    Raises `SparkRuntimeError` when this PySpark can collect the frame as Arrow neither way (a Spark
    Connect session of 3.5)."""
    collect = getattr(frame, "_collect_as_arrow", None)
    if collect is None:
        native = getattr(frame, "toArrow", None)
        if native is None:
            raise SparkRuntimeError(
                f"this PySpark ({_pyspark_version()}) cannot collect a {type(frame).__module__} DataFrame as Arrow: "
                "it has neither toArrow() (PySpark 4.0+) nor _collect_as_arrow() (classic sessions)"
            )
        return native()
    schema = arrow_schema(frame)
    batches = collect()
    if not batches:  # no rows: Spark sends no batch, so not even the schema
        return schema.empty_table()
    import pyarrow as pa

    return pa.Table.from_batches(batches).cast(schema)


def arrow_schema(frame: DataFrame) -> pa.Schema:
    """The Arrow schema PySpark gives `frame`'s columns; on 4.x with the options its ``toArrow()`` sets
    (3.5's ``to_arrow_schema`` takes the schema alone; 4.2's needs the zone of timestamps, UTC)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    parameters = inspect.signature(to_arrow_schema).parameters
    options: dict[str, Any] = {}
    if "error_on_duplicated_field_names_in_struct" in parameters:
        options["error_on_duplicated_field_names_in_struct"] = True
    if "timezone" in parameters:  # 4.2 requires it for timestamps; its toArrow() gives UTC instants, as 4.0's
        options["timezone"] = "UTC"
    if "prefers_large_types" in parameters:
        options["prefers_large_types"] = bool(frame.sparkSession._jconf.arrowUseLargeVarTypes())
    return to_arrow_schema(frame.schema, **options)


def _pyspark_version() -> str:
    import pyspark

    return str(pyspark.__version__)
