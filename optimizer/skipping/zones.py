"""Which predicates and expressions mean something else in another session time zone.

SOP bits and expression ranges are computed by Spark in the rewrite's session zone (recorded with the
statistics, `ExtendedStats.zone`); a query is read in its own zone. A node whose value depends on the
zone may use those statistics only when both zones are known and equal. A node depends on the zone
when it reads a TIMESTAMP column (an instant; not TIMESTAMP_NTZ, not DATE) other than as a bare
instant (``IS NULL``, or compared with constants that carry an offset), casts to TIMESTAMP anything but
such a constant, or calls a function that reads or writes wall-clock time in the session zone. A column
whose type is not known counts as a TIMESTAMP: anything unknown means the file is read.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from sqlglot import exp

from optimizer.skipping.values import family
from querylog.predicates.normalize import FLIPPED
from querylog.predicates.tree import column_path

# sqlglot classes (their `key`) and Spark names of functions that read or make wall-clock time in the
# session zone, or make instants that such functions around them would then read
ZONE_FUNCTIONS = frozenset(
    {
        "unixtostr",
        "unixtotime",
        "strtounix",
        "strtotime",
        "strtodate",
        "timestrtotime",
        "timetostr",
        "currentdate",
        "currenttimestamp",
        "timestampfromparts",
        "fromtimezone",
        "attimezone",
        "timestamp_seconds",
        "timestamp_millis",
        "timestamp_micros",
        "try_to_timestamp",
        "to_timestamp_ltz",
        "make_timestamp",
        "make_timestamp_ltz",
        "now",
        "localtimestamp",
        "current_timezone",
    }
)


def zone_dependent(node: exp.Expr, family_of: Callable[[str], str | None]) -> bool:
    """Whether `node`'s value may differ between session zones; `family_of` gives a dotted column
    path's type family (None: unknown)."""
    columns, other = _structure(node)
    return other or any(family_of(path) in ("timestamp", None) for path in columns)


def _structure(node: exp.Expr) -> tuple[tuple[str, ...], bool]:
    """(dotted paths of the columns read other than as bare instants, whether the node depends on the
    zone whatever its columns' types). Cached on the node: it depends on the query only."""
    if "deltaopt.zone_structure" not in node.meta:
        columns: list[str] = []
        other = False
        for sub in node.walk():
            if isinstance(sub, exp.Column):
                path = column_path(sub)
                if path is None:
                    other = True
                elif not _bare_instant(sub):
                    columns.append(".".join(path).lower())
            elif isinstance(sub, exp.Cast | exp.TryCast):
                other = other or (family(sub.to.sql(dialect="spark").lower()) == "timestamp" and not _has_offset(sub))
            elif isinstance(sub, exp.Func):
                other = other or _zone_function(sub)
        node.meta["deltaopt.zone_structure"] = (tuple(columns), other)
    return node.meta["deltaopt.zone_structure"]


def _zone_function(func: exp.Func) -> bool:
    """A function reading or making wall-clock time in the session zone. sqlglot reads DATE-typed
    arguments through ``TsOrDsToDate`` (``MONTH(d)``): that cast is zone-free (Spark parses only the
    date of a string), its TO_DATE(s, format) form parses a timestamp in the zone."""
    if isinstance(func, exp.TsOrDsToDate):
        return func.args.get("format") is not None
    return (func.name.lower() if isinstance(func, exp.Anonymous) else func.key) in ZONE_FUNCTIONS


def _bare_instant(column: exp.Column) -> bool:
    """The column is tested as itself: for NULL, or against constants that carry an offset."""
    parent = column.parent
    while isinstance(parent, exp.Paren):
        parent = parent.parent
    if isinstance(parent, exp.Is):
        return isinstance(parent.expression, exp.Null)
    if parent is not None and type(parent) in FLIPPED:
        other = parent.expression if parent.this.unnest() is column else parent.this
        return _has_offset(other)
    if isinstance(parent, exp.In) and parent.this.unnest() is column and not parent.args.get("query"):
        return bool(parent.expressions) and all(_has_offset(v) for v in parent.expressions)
    return False


def _has_offset(node: exp.Expr) -> bool:
    """A NULL, or a string literal (possibly cast) naming an instant with its offset."""
    node = node.unnest()
    if isinstance(node, exp.Cast | exp.TryCast):
        node = node.this.unnest()
    if isinstance(node, exp.Null):
        return True
    if not (isinstance(node, exp.Literal) and node.is_string):
        return False
    try:
        return dt.datetime.fromisoformat(node.this.strip()).tzinfo is not None
    except ValueError:
        return False


def same_zone(query_zone: str | None, stats_zone: str | None) -> bool:
    """Both known and equal (an unknown zone on either side differs)."""
    return query_zone is not None and stats_zone is not None and query_zone == stats_zone
