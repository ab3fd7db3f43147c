"""Canonical predicate and expression text -> Spark Columns, for allow-listed expressions only.

The text is parsed by sqlglot, every node checked against `querylog.predicates.allowlist`, and the
tree rendered back to Spark SQL by sqlglot with every identifier quoted; only that rendering reaches
``F.expr``. A SOP bit is ``coalesce(predicate, false)``: a row whose predicate is NULL does not
satisfy it (a filter keeps only TRUE rows).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from optimizer.errors import FeatureError
from querylog.errors import PredicateError, QueryLogError
from querylog.predicates.allowlist import check_evaluable
from querylog.predicates.normalize import parse_canonical
from querylog.predicates.parse import DIALECT

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def safe_sql(text: str) -> str:
    """Spark SQL for canonical `text`, re-rendered with quoted identifiers.
    Raises `UnsafeExpressionError` (not allowed) or `PredicateError` (unparseable)."""
    expression = parse_canonical(text)
    check_evaluable(expression)
    return expression.sql(dialect=DIALECT, identify=True)


def expression_column(text: str) -> Column:
    from pyspark.sql import functions as F

    return F.expr(safe_sql(text))


def predicate_bit(text: str) -> Column:
    """1 where the predicate is TRUE, 0 where it is FALSE or NULL."""
    from pyspark.sql import functions as F

    return F.coalesce(F.expr(safe_sql(text)).cast("boolean"), F.lit(False)).cast("int")


def typed_feature(frame: DataFrame, text: str, as_predicate: bool) -> tuple[Column, str]:
    """A feature's Column (a SOP bit for a predicate) and its Spark type name on `frame`'s schema, as
    Spark's analysis sees it. Raises `FeatureError` saying in one line why it cannot be evaluated."""
    try:
        column = predicate_bit(text) if as_predicate else expression_column(text)
        return column, frame.select(column.alias("v")).schema["v"].dataType.simpleString()
    except QueryLogError as err:
        raise FeatureError(str(err)) from err
    except Exception as err:  # Spark's AnalysisException/ParseException and friends
        raise FeatureError(analysis_error(err)) from err


def analysis_error(error: Exception) -> str:
    """One line describing why Spark or sqlglot refused an expression."""
    if isinstance(error, PredicateError):
        return str(error)
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return text[:300]
