"""Where every reader evaluates a predicate as deltaopt's session did: the grammar SOP bits and expression
ranges are used in.

deltaopt computes SOP bits and expression ranges in its own Spark session, on a feature's canonical text,
with ANSI off (`runtime.REQUIRED_CONF`). A reader runs its query as written, with ANSI on or off. A bit
or a range computed that way stands for the reader's result only where both agree on every row the
reader's query does not fail on. Reviews kept finding ways they do not (a FLOAT compared in float32 in one
mode and double in the other; a string meeting a number cast to INT or to BIGINT; a date meeting a list of
strings compared as text; ``b = s LIKE 't%'``, which Spark and sqlglot bind apart), so agreement is not
argued case by case: a node agrees only if it is built from this module's grammar, and anything outside
it (an unknown function, a type, a shape) means the bit and range are not used and the file is read.

The grammar, over operands of one kind each (number, string, date for dates and timestamps, boolean):
* values: a column or struct field of a known type other than FLOAT and CHAR, a literal, a cast of a
  literal (a date or timestamp spelled as one, never ``'now'`` or ``'today'``) or of a value of the
  cast's own kind, arithmetic on numbers, ``||`` and CONCAT on strings, a date plus or minus an
  interval literal, and the typed functions in `_FUNCTIONS`; CASE, IF and COALESCE whose branches
  share one kind;
* predicates: comparisons, BETWEEN and IN between values of one kind (a date or timestamp may meet a
  string literal spelling one in a comparison, which both modes cast to the date; never in a list,
  which Spark compares as text without ANSI), LIKE, ILIKE, RLIKE and STARTSWITH on strings with literal
  patterns, IS NULL, a boolean column, TRUE and FALSE, joined by AND, OR and NOT.
Within it, the two modes differ only where ANSI fails the query (an overflow, a division by zero, a bad
cast), and a failed query reads nothing. A predicate is never an operand of a value, so no shape whose
parse differs between Spark and sqlglot (``b = s LIKE 't%'``, ``'900' || i + 1``) is in it.
`tests/skipping/test_agreement_in_spark.py` checks the grammar against Spark in both modes.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from optimizer.skipping.filestats import is_padded
from optimizer.skipping.values import Unknown, family, parse_date, parse_timestamp
from querylog.predicates.tree import column_path

Kinds = Mapping[str, str]  # {lower-cased column path or expression: Spark type}

# operand kinds of type families (`values.family`): a timestamp meets strings and numbers as a date does
_KINDS = {k: k for k in ("string", "number", "boolean", "date")} | {"timestamp": "date", "timestamp_ntz": "date"}
_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.NullSafeEQ)
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)
_PATTERNS = (exp.Like, exp.ILike, exp.RegexpLike, exp.StartsWith)
_DATE_PARTS = (exp.Year, exp.Month, exp.Day, exp.DayOfMonth, exp.DayOfWeek, exp.DayOfYear, exp.WeekOfYear)
# function -> ({argument: kind}, result kind): every argument that is an expression must be listed
_FUNCTIONS: dict[type[exp.Expr], tuple[dict[str, str], str]] = {
    **dict.fromkeys((exp.Lower, exp.Upper), ({"this": "string"}, "string")),
    exp.Trim: ({"this": "string", "expression": "string"}, "string"),
    exp.Substring: ({"this": "string", "start": "number", "length": "number"}, "string"),
    exp.Length: ({"this": "string"}, "number"),
    **dict.fromkeys((*_DATE_PARTS, exp.Quarter, exp.Hour, exp.Minute, exp.Second), ({"this": "date"}, "number")),
    exp.TsOrDsToDate: ({"this": "date"}, "date"),
    exp.TsOrDsAdd: ({"this": "date", "expression": "number"}, "date"),  # DATE_ADD, DATE_SUB
    exp.AddMonths: ({"this": "date", "expression": "number"}, "date"),
    exp.DateDiff: ({"this": "date", "expression": "date"}, "number"),
    **dict.fromkeys((exp.TimestampTrunc, exp.DateTrunc), ({"this": "date"}, "date")),
    **dict.fromkeys((exp.Abs, exp.Sign), ({"this": "number"}, "number")),
    **dict.fromkeys((exp.Floor, exp.Ceil), ({"this": "number", "decimals": "number"}, "number")),
    exp.Round: ({"this": "number", "decimals": "number"}, "number"),
    **{kind: ({"this": "number", "expression": "number"}, "number") for kind in _ARITHMETIC},
    exp.Neg: ({"this": "number"}, "number"),
    exp.DPipe: ({"this": "string", "expression": "string"}, "string"),
    exp.Concat: ({"expressions": "string"}, "string"),
}
# arguments that are flags of how sqlglot spells a node, not operands (Div's ``safe``: NULL on zero)
_FLAGS = frozenset({"safe", "typed", "coalesce", "position"})
# the units a date function may name: a day or longer keeps a date a date (or a timestamp at its
# midnight); an hour of a date is a timestamp in the session zone, and a count of hours across a
# daylight-saving day differs between zones
_DAYS_OR_LONGER = frozenset({"DAY", "DD", "WEEK", "MONTH", "MM", "MON", "QUARTER", "YEAR", "YYYY", "YY"})
_UNITS: dict[type[exp.Expr], frozenset[str]] = {
    exp.TsOrDsAdd: frozenset({"DAY"}),
    exp.TimestampTrunc: _DAYS_OR_LONGER,
    exp.DateTrunc: _DAYS_OR_LONGER,
}


def predicate_agrees(node: exp.Expr, types: Kinds, strings: frozenset[str] = frozenset()) -> bool:
    """Whether a reader in either ANSI mode finds `node` TRUE only on rows where deltaopt's session,
    evaluating its canonical text without ANSI, does too: `node` is a predicate in the module's grammar.
    `types`: {lower-cased column path or expression: Spark type}; `strings`: what holds strings."""
    node = node.unnest()
    if isinstance(node, exp.And | exp.Or):
        return all(predicate_agrees(part, types, strings) for part in (node.this, node.expression))
    if isinstance(node, exp.Not):
        return predicate_agrees(node.this, types, strings)
    if isinstance(node, exp.Boolean):
        return True
    if isinstance(node, exp.Column | exp.Dot):
        return value_kind(node, types, strings) == "boolean"
    if isinstance(node, _COMPARISONS):
        return _comparable(node.this, node.expression, types, strings)
    if isinstance(node, exp.Between):
        return all(_comparable(node.this, node.args[k], types, strings) for k in ("low", "high"))
    if isinstance(node, exp.In):
        return _listed(node, types, strings)
    if isinstance(node, _PATTERNS):
        pattern = node.expression.unnest()
        known = _only(node, ("this", "expression"))
        return known and value_kind(node.this, types, strings) == "string" and _is_string_literal(pattern)
    if isinstance(node, exp.Is):
        tested = value_kind(node.this, types, strings)
        truth = isinstance(node.expression, exp.Boolean) and tested == "boolean"
        null = isinstance(node.expression, exp.Null) and tested is not None
        return _only(node, ("this", "expression")) and (null or truth)
    return False


def value_kind(node: exp.Expr, types: Kinds, strings: frozenset[str] = frozenset()) -> str | None:
    """The kind of a value in the grammar ("number", "string", "date", "boolean"; "null" for NULL), the
    same in both modes; None for a node outside it."""
    node = node.unnest()
    if isinstance(node, exp.Null):
        return "null"
    if isinstance(node, exp.Literal):
        return "string" if node.is_string else "number"
    if isinstance(node, exp.Boolean):
        return "boolean"
    if isinstance(node, exp.Column | exp.Dot):
        return _column_kind(node, types, strings)
    if isinstance(node, exp.Cast | exp.TryCast):
        return _cast_kind(node, types, strings)
    if isinstance(node, exp.Case | exp.If | exp.Coalesce):
        return _branching_kind(node, types, strings)
    if isinstance(node, exp.Add | exp.Sub) and isinstance(node.expression.unnest(), exp.Interval):
        return _interval_kind(node, types, strings)
    spec = _FUNCTIONS.get(type(node))
    if spec is None:
        return None
    arguments, result = spec
    return result if _arguments_agree(node, arguments, types, strings) else None


def _interval_kind(node: exp.Add | exp.Sub, types: Kinds, strings: frozenset[str]) -> str | None:
    """A date or timestamp plus or minus an interval literal of days, months or years
    (``d + INTERVAL '30' DAY``): a date."""
    interval = node.expression.unnest()
    unit = interval.args.get("unit")
    literal = isinstance(interval.this, exp.Literal) and isinstance(unit, exp.Var)
    if not literal or unit.name.upper() not in ("DAY", "MONTH", "YEAR") or not _only(interval, ("this", "unit")):
        return None
    return "date" if value_kind(node.this, types, strings) == "date" else None


def _unit_allowed(node: exp.Expr, unit: object) -> bool:
    """A date function's unit keyword on the function's list (`_UNITS`)."""
    allowed = _UNITS.get(type(node), frozenset())
    return isinstance(unit, exp.Var | exp.Literal) and str(unit.name).upper() in allowed


def _column_kind(node: exp.Expr, types: Kinds, strings: frozenset[str]) -> str | None:
    """A column's or struct field's kind from its type; None for FLOAT (compared with integers in
    float32 without ANSI, in double with it), nested and unknown types."""
    path = column_path(node)
    if path is None:
        return None
    name = ".".join(path)
    type_name = types.get(name)
    if type_name is None:
        return "string" if name in strings else None
    if type_name.lower() == "float" or is_padded(type_name):
        return None  # a CHAR column compares padded to its length: text reasoning about it may not hold
    return _KINDS.get(family(type_name))


def _cast_kind(node: exp.Cast, types: Kinds, strings: frozenset[str]) -> str | None:
    """A cast to a known type other than FLOAT, of a literal (a typed constant) or of a value of the
    target's own kind (``CAST(i AS BIGINT)``, ``CAST(t AS DATE)``)."""
    if node.to.is_type(exp.DataType.Type.FLOAT) or not _only(node, ("this", "to")):
        return None
    target = _KINDS.get(family(node.to.sql(dialect="spark")))
    operand = node.this.unnest()
    if target is None:
        return None
    if isinstance(operand, exp.Literal) or (isinstance(operand, exp.Neg) and isinstance(operand.this, exp.Literal)):
        return target if target != "date" or _fixed_moment(operand) else None
    return target if value_kind(operand, types, strings) in (target, "null") else None


def _branching_kind(node: exp.Expr, types: Kinds, strings: frozenset[str]) -> str | None:
    """CASE, IF, COALESCE: every condition a predicate in the grammar, every branch one kind."""
    if isinstance(node, exp.Case):
        if node.this is not None:
            return None  # CASE x WHEN v: an equality Spark types itself
        ifs = node.args.get("ifs") or []
        conditions = [i.this for i in ifs]
        branches = [i.args.get("true") for i in ifs] + [node.args.get("default")]
    elif isinstance(node, exp.If):
        conditions, branches = [node.this], [node.args.get("true"), node.args.get("false")]
    else:
        if not _only(node, ("this", "expressions")):
            return None
        conditions, branches = [], [node.this, *node.expressions]
    if not all(predicate_agrees(c, types, strings) for c in conditions):
        return None
    kinds = {value_kind(b, types, strings) for b in branches if b is not None}
    if None in kinds:
        return None
    named = kinds - {"null"}
    return named.pop() if len(named) == 1 else ("null" if not named else None)


def _arguments_agree(node: exp.Expr, arguments: Mapping[str, str], types: Kinds, strings: frozenset[str]) -> bool:
    """Every argument of a function is of the kind `arguments` names (NULL too); none is unlisted."""
    for key, value in node.args.items():
        if value is None or value is False or value == []:
            continue
        if key not in arguments:
            if (key in _FLAGS and not isinstance(value, exp.Expr)) or (key == "unit" and _unit_allowed(node, value)):
                continue
            return False
        for operand in value if isinstance(value, list) else [value]:
            if value_kind(operand, types, strings) not in (arguments[key], "null"):
                return False
    return True


def _comparable(left: exp.Expr, right: exp.Expr, types: Kinds, strings: frozenset[str]) -> bool:
    """Two values Spark compares alike in both modes: one kind (or NULL), or a date or timestamp and a
    string literal, which both modes cast to the date's type."""
    kinds = {value_kind(left, types, strings), value_kind(right, types, strings)}
    if None in kinds:
        return False
    if len(kinds - {"null"}) <= 1:
        return True
    literal = next((side.unnest() for side in (left, right) if _is_string_literal(side.unnest())), None)
    return kinds == {"date", "string"} and literal is not None and _fixed_moment(literal)


def _listed(node: exp.In, types: Kinds, strings: frozenset[str]) -> bool:
    """``x IN (constants)`` with every constant of x's kind (NULL too): Spark types a list as one, and
    without ANSI compares a date with a list of strings as text."""
    if not _only(node, ("this", "expressions")) or not node.expressions:
        return False
    kind = value_kind(node.this, types, strings)
    if kind in (None, "null"):
        return False
    return all(value_kind(item, types, strings) in (kind, "null") for item in node.expressions)


def _only(node: exp.Expr, keys: tuple[str, ...]) -> bool:
    """No argument other than `keys` is set (a NOT LIKE's negation, an ESCAPE, a subquery, a format)."""
    return all(key in keys or value in (None, False, []) for key, value in node.args.items())


def _fixed_moment(literal: exp.Expr) -> bool:
    """A string literal that names one date or timestamp, whenever it is read: not ``'now'``,
    ``'today'``, ``'tomorrow'`` or a time of day (``'T12:00'``), which Spark reads by the clock when the
    query runs, long after the bit was computed."""
    if not _is_string_literal(literal):
        return False
    try:
        parse_date(literal.this)
        return True
    except Unknown:
        pass
    try:
        parse_timestamp(literal.this, with_zone=True)
        return True
    except Unknown:
        return False


def _is_string_literal(node: exp.Expr) -> bool:
    return isinstance(node, exp.Literal) and node.is_string
