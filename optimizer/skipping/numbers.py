"""Numbers as Spark compares them, for pruning that must hold in every session a reader may run.

A number constant in a query is typed by its spelling (``1`` an INT, ``0.5`` a DECIMAL(1,1), ``1E-1``
and ``0.1D`` DOUBLEs, ``0.1F`` a FLOAT, casts as they say), and Spark widens the column and the
constants to one type before comparing them. Pruning compares the file's bounds with the constants'
values; that is sound only where it compares what Spark compares:

* a DOUBLE or FLOAT column meets a number in double (the constant rounded to the nearest double);
* an integer or decimal column meets a DOUBLE constant in double (the bounds cast as Spark casts the
  column), and other constants exactly, unless Spark 4 rounds one side: it widens decimals keeping
  integral digits first (SPARK-45905), so where integral digits and scale together pass 38 the scale
  is cut and values rounded half up (DECIMAL(38,0) holding 1 equals 0.5);
* a FLOAT column meets integer constants only in float32 without ANSI and in double with it: the two
  agree only where every integer is a float32;
* a FLOAT constant is compared in float32, which pruning does not emulate.

Where Spark's comparison is not one of these, the file is kept (`as_compared` gives None).

What deltaopt computes in its own session (SOP bits, expression ranges) is computed without ANSI, as
`runtime.REQUIRED_CONF` sets; `agreement` says where a reader in either mode agrees with it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any

from sqlglot import exp

from optimizer.skipping.filestats import Bounds
from optimizer.skipping.values import INTEGER_RANGES

MAX_PRECISION = 38  # Spark's widest decimal
SINGLE_EXACT = 2**24  # every integer up to this is a float32
_INTEGER_TYPES = (
    exp.DataType.Type.TINYINT,
    exp.DataType.Type.SMALLINT,
    exp.DataType.Type.INT,
    exp.DataType.Type.BIGINT,
)
_LONG = 2**63
# (integral digits, scale) of Spark's integer types as decimals (`DecimalType.forType`)
_INTEGER_SHAPES = {"tinyint": (3, 0), "smallint": (5, 0), "int": (10, 0), "bigint": (20, 0)}


def as_compared(
    bounds: Bounds, keys: frozenset[Any] | None, values: list[Any], constants: Sequence[exp.Expr]
) -> tuple[Bounds, frozenset[Any] | None, list[Any]] | None:
    """The column's bounds and key set and the number `values` of `constants` as Spark compares them
    (the module's rules); None where pruning cannot compare as Spark does, and the file is kept."""
    if not any(isinstance(v, Decimal) for v in values):
        return bounds, keys, values
    # cached on the first constant (its list belongs to one node): pruning asks again for every file
    cache: dict[Any, Any] = constants[0].meta.setdefault("deltaopt.numbers", {}) if constants else {}
    if "kinds" not in cache:
        cache["kinds"] = frozenset(literal_type(c) for c in constants) - {"other"}
    kinds = cache["kinds"]
    if "float" in kinds:
        return None
    floating = _floating(bounds, keys)
    if floating and bounds.type_name == "float" and "integer" in kinds and not all(map(_is_single, values)):
        return None  # an integer that is no float32 compares in float32 without ANSI: the modes differ
    doubled = [float(v) if isinstance(v, Decimal) else v for v in values]
    if floating:
        return bounds, keys, doubled
    if "double" in kinds:
        return replace(bounds, low=_as_double(bounds.low), high=_as_double(bounds.high)), None, doubled
    if bounds.type_name not in cache:
        cache[bounds.type_name] = rounds_when_widened(bounds.type_name, constants)
    return None if cache[bounds.type_name] else (bounds, keys, values)


def literal_type(node: exp.Expr) -> str:
    """How Spark types a number constant: "double", "float", "integer" (a literal in the long range,
    or one cast to an integer type), "decimal"; "other" for what is not a number literal (NULL)."""
    node = node.unnest()
    if isinstance(node, exp.Neg):
        return literal_type(node.this)
    if isinstance(node, exp.Cast | exp.TryCast):
        for kind, types in (("float", (exp.DataType.Type.FLOAT,)), ("double", (exp.DataType.Type.DOUBLE,))):
            if node.to.is_type(*types):
                return kind
        if node.to.is_type(*_INTEGER_TYPES):
            return "integer"
        return "decimal" if node.to.is_type(*exp.DataType.REAL_TYPES) else literal_type(node.this)
    if not isinstance(node, exp.Literal) or node.is_string:
        return "other"
    text = str(node.this).lower()
    if "e" in text:
        return "double"
    return "decimal" if "." in text or abs(int(text)) >= _LONG else "integer"


def exact_everywhere(node: exp.Expr) -> bool:
    """Whether a number constant is the same value in every type Spark may compare it in, whatever the
    column and the session: an integer literal (no cast, no suffix) within `SINGLE_EXACT`. Only these
    take part in reasoning that compares constants with each other (`implication`): Spark rounds other
    constants, each by the type of its own comparison, and two that differ may round to one value."""
    node = node.unnest()
    if isinstance(node, exp.Neg):
        return exact_everywhere(node.this)
    if not isinstance(node, exp.Literal) or node.is_string or not str(node.this).isdigit():
        return False
    return int(str(node.this)) <= SINGLE_EXACT


def rounds_when_widened(column_type: str | None, constants: Sequence[exp.Expr]) -> bool:
    """Whether Spark 4, widening the column and the exact constants to one decimal type, may round
    either: its integral digits and scale together pass `MAX_PRECISION` (an unknown shape: may)."""
    named = [c for c in constants if not isinstance(c.unnest(), exp.Null)]
    shapes = [decimal_shape(column_type), *(_constant_shape(c) for c in named)]
    known = [s for s in shapes if s is not None]
    if len(known) < len(shapes):
        return True
    return max(i for i, _ in known) + max(s for _, s in known) > MAX_PRECISION


def decimal_shape(type_name: str | None) -> tuple[int, int] | None:
    """(integral digits, scale) of an integer or decimal type as Spark widens it; None for others."""
    name = (type_name or "").lower().replace(" ", "")
    if name in _INTEGER_SHAPES:
        return _INTEGER_SHAPES[name]
    if name.startswith("decimal(") and name.endswith(")"):
        precision, _, scale = name[len("decimal(") : -1].partition(",")
        if precision.isdigit() and scale.isdigit():
            return int(precision) - int(scale), int(scale)
    return None


def _constant_shape(node: exp.Expr) -> tuple[int, int] | None:
    """(integral digits, scale) of an exact number constant as Spark types it; None when unknown."""
    node = node.unnest()
    if isinstance(node, exp.Neg):
        return _constant_shape(node.this)
    if isinstance(node, exp.Cast | exp.TryCast):
        return decimal_shape(node.to.sql(dialect="spark"))
    if not isinstance(node, exp.Literal) or node.is_string:
        return None
    text = str(node.this)
    if "." not in text:
        number = abs(int(text))
        fits = [_INTEGER_SHAPES[n] for n in ("int", "bigint") if number <= INTEGER_RANGES[n][1]]
        return fits[0] if fits else (len(str(number)), 0)
    whole, _, fraction = text.lstrip("+-").partition(".")
    return len(whole.lstrip("0")), len(fraction)


def _is_single(value: Any) -> bool:
    """Whether the number `value` is exactly a float32 (a non-integer counts: only integers are asked)."""
    if not isinstance(value, Decimal) or value != value.to_integral_value():
        return True
    try:
        single: float = struct.unpack("f", struct.pack("f", float(value)))[0]
    except OverflowError:  # beyond float32's range
        return False
    return Decimal(single) == value


def _as_double(value: Any) -> Any:
    """An integer or decimal bound as the double Spark casts it to (rounding keeps it a bound)."""
    return float(value) if isinstance(value, int | Decimal) and not isinstance(value, bool) else value


def _floating(bounds: Bounds, keys: frozenset[Any] | None) -> bool:
    """Whether the column holds floating-point values (its type, else its bounds or key set are floats):
    Spark compares it with a number literal in double. Compared exactly, the double 0.1 a file holds is
    not the decimal 0.1 a query names, and ``x = 0.1`` skipped the file."""
    if bounds.type_name in ("float", "double"):
        return True
    found = (bounds.low, bounds.high, next(iter(keys), None) if keys else None)
    return any(isinstance(v, float) for v in found)
