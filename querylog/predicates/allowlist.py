"""Which expressions from users' queries deltaopt may evaluate on data.

Predicates come from untrusted query text. Before one is evaluated (SOP bit vectors, Z feature values,
correlation samples), every node of its sqlglot tree must be on this allow-list of deterministic,
side-effect-free constructs. Anything else (UDFs, ``reflect``/``java_method``, ``rand()``,
``current_date()``, subqueries, lambdas, ...) raises `UnsafeExpressionError` naming the offender, and
the feature is reported "not evaluable" instead of being run.

The tree is then rendered to Spark SQL by sqlglot itself with quoted identifiers; raw query text is
never spliced into SQL.
"""

from __future__ import annotations

import re

from sqlglot import exp

from querylog.errors import UnsafeExpressionError
from querylog.predicates.bounds import cost_problems

# sqlglot node classes: structure, operators, and functions known to be deterministic in Spark.
ALLOWED_NODES: frozenset[str] = frozenset(
    {
        # structure and values
        "Column",
        "Identifier",
        "Dot",
        "Literal",
        "Null",
        "Boolean",
        "Paren",
        "DataType",
        "Var",
        "Tuple",
        "Bracket",
        "JSONPath",
        "JSONPathKey",
        "JSONPathRoot",
        "JSONPathSubscript",
        "Interval",
        # boolean logic and comparisons
        "And",
        "Or",
        "Not",
        "Xor",
        "EQ",
        "NEQ",
        "GT",
        "GTE",
        "LT",
        "LTE",
        "NullSafeEQ",
        "NullSafeNEQ",
        "Is",
        "In",
        "Between",
        "Like",
        "ILike",
        "RegexpLike",
        "RegexpILike",
        "Glob",
        "SimilarTo",
        # arithmetic and bits
        "Add",
        "Sub",
        "Mul",
        "Div",
        "IntDiv",
        "Mod",
        "Neg",
        "BitwiseAnd",
        "BitwiseOr",
        "BitwiseXor",
        "BitwiseNot",
        "BitwiseLeftShift",
        "BitwiseRightShift",
        "BitwiseCount",
        # conversion and conditionals
        "Cast",
        "TryCast",
        "If",
        "Case",
        "Coalesce",
        "Nullif",
        "IsNan",
        "Nanvl",
        "Greatest",
        "Least",
        # numbers
        "Abs",
        "Round",
        "Floor",
        "Ceil",
        "Sqrt",
        "Pow",
        "Ln",
        "Log",
        "Exp",
        "Sign",
        # strings
        "Lower",
        "Upper",
        "Length",
        "Substring",
        "Trim",
        "Concat",
        "ConcatWs",
        "Pad",
        "Replace",
        "RegexpReplace",
        "RegexpExtract",
        "RegexpSplit",
        "StrPosition",
        "Left",
        "Right",
        "Reverse",
        "Initcap",
        "Translate",
        "Contains",
        "StartsWith",
        "EndsWith",
        "Ascii",
        "SplitPart",
        "MD5",
        "SHA",
        "SHA2",
        "Unhex",
        "Hex",
        "ToBase64",
        "FromBase64",
        # dates and times
        "Month",
        "Year",
        "Day",
        "DayOfMonth",
        "DayOfWeek",
        "DayOfYear",
        "WeekOfYear",
        "Quarter",
        "Hour",
        "Minute",
        "Second",
        "Extract",
        "TimestampTrunc",
        "DateTrunc",
        "TsOrDsAdd",
        "DateAdd",
        "DateSub",
        "DateDiff",
        "TsOrDsToDate",
        "TsOrDsToTimestamp",
        "StrToDate",
        "StrToTime",
        "UnixToStr",
        "UnixToTime",
        "StrToUnix",
        "TimeToStr",
        "TimeStrToTime",
        "TimeToUnix",
        "AddMonths",
        "LastDay",
        "MonthsBetween",
        "Date",
        "Timestamp",
        "DateFromParts",
        # JSON and nested types
        "JSONExtract",
        "JSONExtractScalar",
        "FromJson",
        "ArrayContains",
        "ArraySize",
        "MapKeys",
        "ArrayMax",
        "ArrayMin",
        "Struct",
        "PropertyEQ",
    }
)

# Functions sqlglot leaves as `Anonymous` that are deterministic and side-effect free in Spark.
ALLOWED_ANONYMOUS: frozenset[str] = frozenset(
    {
        "pmod",
        "bround",
        "isnull",
        "isnotnull",
        "crc32",
        "hash",
        "xxhash64",
        "make_date",
        "map_values",
        "cardinality",
        "nvl2",
        "chr",
        "char",
        "base64",
        "unbase64",
        "bin",
        "conv",
        "format_number",
        "soundex",
        "levenshtein",
        "date_part",
        "datepart",
        "unix_date",
        "unix_seconds",
        "unix_millis",
        "unix_micros",
        "timestamp_seconds",
        "timestamp_millis",
        "timestamp_micros",
        "weekday",
        "array_position",
        "array_join",
        "arrays_overlap",
        "array_distinct",
        "sort_array",
        "map_contains_key",
        "try_element_at",
        "octet_length",
        "bit_length",
        "regexp",
        "regexp_count",
        "regexp_substr",
        "substring_index",
        "positive",
        "negative",
        "try_add",
        "try_subtract",
        "try_multiply",
        "try_divide",
        "decode",
        "encode",
        "luhn_check",
        "date_from_unix_date",
    }
)


# Spark's special datetime strings and times of day, which a DATE or TIMESTAMP literal reads by the clock
# when the query runs (``TIMESTAMP 'now'``, ``DATE 'today'``, ``TIMESTAMP 'T12:00'``): not deterministic
_CLOCK_TEXT = re.compile(
    r"\s*((now|today|yesterday|tomorrow)(\s.*)?|T[0-9].*|[0-9]{1,2}:[0-9].*)", re.IGNORECASE | re.DOTALL
)
_MOMENT_TYPES = (
    exp.DataType.Type.DATE,
    exp.DataType.Type.TIMESTAMP,
    exp.DataType.Type.TIMESTAMPTZ,
    exp.DataType.Type.TIMESTAMPNTZ,
)


def unsafe_parts(expression: exp.Expr) -> list[str]:
    """Names of the constructs in `expression` that are not on the allow-list (empty: evaluable)."""
    found: list[str] = []
    for node in expression.walk():
        if _read_by_the_clock(node):
            found.append(f"{node.sql(dialect='spark')} (read by the clock)")
        elif isinstance(node, exp.Anonymous):
            name = node.name.lower()
            if name not in ALLOWED_ANONYMOUS:
                found.append(f"{name}()")
        elif type(node).__name__ not in ALLOWED_NODES:
            found.append(_describe(node))
    return sorted(set(found))


def check_evaluable(expression: exp.Expr) -> None:
    """Raise `UnsafeExpressionError` unless every construct of `expression` is allowed and its cost
    is bounded (`querylog.predicates.bounds`)."""
    bad = unsafe_parts(expression)
    if bad:
        raise UnsafeExpressionError(f"not on the evaluation allow-list: {', '.join(bad)}")
    costly = cost_problems(expression)
    if costly:
        raise UnsafeExpressionError(f"unbounded evaluation cost: {'; '.join(costly)}")


def is_evaluable(expression: exp.Expr) -> bool:
    return not unsafe_parts(expression) and not cost_problems(expression)


def _read_by_the_clock(node: exp.Expr) -> bool:
    """A date or timestamp literal Spark reads by the clock when the query runs."""
    if not isinstance(node, exp.Cast | exp.TryCast) or not node.to.is_type(*_MOMENT_TYPES):
        return False
    operand = node.this.unnest()
    return isinstance(operand, exp.Literal) and operand.is_string and _CLOCK_TEXT.fullmatch(operand.this) is not None


def _describe(node: exp.Expr) -> str:
    if isinstance(node, exp.Func):
        return f"{node.sql_name().lower()}()"
    return type(node).__name__
