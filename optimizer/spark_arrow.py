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
    from pyspark.sql.types import StructType


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
    """The Arrow schema PySpark gives `frame`'s columns, with the options its ``toArrow()`` sets on 4.x."""
    large = bool(frame.sparkSession._jconf.arrowUseLargeVarTypes())
    return schema_to_arrow(frame.schema, error_on_duplicated_field_names_in_struct=True, prefers_large_types=large)


def schema_to_arrow(schema: StructType, **options: Any) -> pa.Schema:
    """PySpark's ``to_arrow_schema(schema, **options)`` with the options this PySpark knows (3.5's takes the
    schema alone) and timestamps as UTC instants, the zone 4.2's requires and 3.5-4.1 always use."""
    from pyspark.sql.pandas.types import to_arrow_schema

    parameters = inspect.signature(to_arrow_schema).parameters
    options = {"timezone": "UTC", **options}
    return to_arrow_schema(schema, **{k: v for k, v in options.items() if k in parameters})


def _pyspark_version() -> str:
    import pyspark

    return str(pyspark.__version__)
