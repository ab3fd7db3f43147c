"""Which filter conjuncts of a query reach which table scan (what Spark would push down).

Passes, in order:

1. parse the statement, keep its query (`parse.parse_query`), cut its AND chains to bounds
   (`truncate`: soundly, dropping conjuncts; a statement past the size limits is refused);
2. inline non-recursive CTEs, so each reference is its own scan (Spark inlines them too);
3. sqlglot ``qualify`` (resolve aliases, qualify columns with the schema when one is given) and
   ``pushdown_predicates`` (move conjuncts into derived tables and join conditions);
4. per SELECT scope, attribute every conjunct of WHERE and of the join conditions to the single base
   table whose columns it reads, following outer-join semantics: a conjunct in a LEFT JOIN's ON clause
   filters only the joined (right) table; a WHERE conjunct on the null-supplying side of an outer join
   is pushed only if it is null-intolerant; nothing in a FULL JOIN's ON clause is a scan filter;
5. from a conjunct over several tables that is an OR of ANDs, derive each table's implied filter
   (``(n1.a = 1 AND n2.a = 2) OR (n1.a = 2 AND n2.a = 1)`` gives ``a IN (1, 2)`` on n1 and on n2),
   as Spark's PushExtraPredicateThroughJoin does;
6. normalise each table's conjuncts (`normalize.normalize_conjuncts`).

Conjuncts over several tables are join predicates; conjuncts with subqueries are not scan filters.

Real logs reference tables the service does not watch, whose schemas are unknown. Every table whose
schema is not given gets an **open schema** (`open_schemas`): the column
names the statement uses that no known table has, narrowed by qualified references (``p.p_size`` is
``part``'s) and, for unqualified names, by scope as SQL resolves them (the tables of the column's
own SELECT, then of the enclosing ones). A name left to several unknown tables is ambiguous: no
conjunct using it is a scan filter. So a column absent from a known schema never belongs to that
table, a comparison of two tables' columns (also inside a correlated subquery) is a join condition,
and a statement is not quarantined because a table it joins is unknown.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError
from sqlglot.optimizer.pushdown_predicates import pushdown_predicates
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, traverse_scope

from querylog.errors import PredicateError
from querylog.predicates.ctes import inline_ctes
from querylog.predicates.normalize import canonical_conjuncts, split_conjuncts
from querylog.predicates.parse import DIALECT, parse_query
from querylog.predicates.truncate import bound_conditions, check_statement_size

Schema = Mapping[str, Mapping[str, str]]
Identity = Callable[[exp.Table], str]
NULL_TOLERANT = (exp.Is, exp.Coalesce, exp.NullSafeEQ, exp.NullSafeNEQ, exp.If, exp.Case, exp.Nullif)


@dataclass(frozen=True)
class JoinKey:
    """An inner equi-join of a scan's `column` with `other_column` of table `other`, whose scan is
    filtered by `other_filters`: every row of the scan that reaches the join's output has a key among
    `other`'s keys satisfying those filters (what a join-derived filter states)."""

    column: str
    other: str
    other_column: str
    other_filters: tuple[str, ...]


@dataclass(frozen=True)
class TableScan:
    """One scan of a base table with the canonical conjuncts pushed to it."""

    table: str
    alias: str
    filters: tuple[str, ...]
    columns: tuple[str, ...]  # columns read; ("*",) when a star could not be expanded
    joins: tuple[JoinKey, ...] = ()  # inner equi-joins with a filtered table


@dataclass(frozen=True)
class QueryScans:
    scans: tuple[TableScan, ...]
    join_predicates: int
    unattributed: tuple[str, ...]  # conjuncts whose table could not be decided (no schema)
    unresolved: tuple[str, ...] = ()  # tables whose schema was not given (an open schema stood in)
    dropped: int = 0  # conjuncts cut to bound the work (`truncate`): the filters kept are weaker, still sound


def table_identity(table: exp.Table) -> str:
    """``delta.`/path``` is the path; otherwise the lower-cased dotted name as written."""
    if table.db and table.db.lower() == "delta" and not table.catalog:
        return table.name
    return ".".join(p.lower() for p in (table.catalog, table.db, table.name) if p)


def scan_filters(
    sql: str, schema: Schema | None = None, identity: Identity = table_identity, dialect: str = DIALECT
) -> QueryScans:
    """Per-table scans of `sql` with their canonical filter conjuncts. Raises `PredicateError`."""
    check_statement_size(sql)
    query = parse_query(sql, dialect)
    dropped = bound_conditions(query)
    try:
        query = inline_ctes(query)
        resolved = open_schemas(query, schema or {})
        qualify_schema: dict[str, object] = dict(resolved.schema)
        query = qualify(
            query,
            schema=qualify_schema or None,
            dialect=dialect,
            validate_qualify_columns=False,
            quote_identifiers=False,
            identify=False,
        )
        query = pushdown_predicates(query, dialect=dialect)
        scopes = list(traverse_scope(query))
    except (OptimizeError, SqlglotError, RecursionError) as err:
        raise PredicateError(f"cannot resolve the query's tables and columns: {err}") from err
    scans: list[TableScan] = []
    joins = 0
    unattributed: list[str] = []
    for scope in scopes:
        found, scope_joins, lost = _scope_scans(scope, identity, resolved)
        scans += found
        joins += scope_joins
        unattributed += lost
    return QueryScans(tuple(scans), joins, tuple(unattributed), tuple(sorted(resolved.opened)), dropped)


@dataclass(frozen=True)
class OpenSchemas:
    """The schema `qualify` resolves with: the known one plus open schemas of unknown tables."""

    schema: dict[str, dict[str, str]]
    opened: frozenset[str]  # tables whose schema was made up from the statement's own column names
    ambiguous: frozenset[str]  # column names that could belong to several unknown tables
    star: bool  # the statement reads ``*``: an open schema does not list what that is


def open_schemas(query: exp.Expr, schema: Schema) -> OpenSchemas:
    """`schema` plus an open schema for each table of `query` it does not know."""
    known = {name.lower(): {c.lower(): t for c, t in columns.items()} for name, columns in schema.items()}
    tables = list(query.find_all(exp.Table))
    star = query.find(exp.Star) is not None
    unknown = {t.name.lower() for t in tables if t.name and t.name.lower() not in known}
    if not unknown:
        return OpenSchemas(known, frozenset(), frozenset(), star)
    aliases = {t.alias_or_name.lower(): t.name.lower() for t in tables}
    known_columns = {c for name in {t.name.lower() for t in tables} & known.keys() for c in known[name]}
    projected = {a.alias.lower() for a in query.find_all(exp.Alias)}
    opened: dict[str, dict[str, str]] = {name: {} for name in unknown}
    loose: list[tuple[str, Scope | None]] = []
    scopes = _innermost_scopes(query)
    for column in query.find_all(exp.Column):
        parts = [part.name.lower() for part in column.parts]
        if len(parts) >= 2 and parts[0] in aliases:  # alias.column, or alias.struct.field
            if aliases[parts[0]] in opened:
                opened[aliases[parts[0]]][parts[1]] = "unknown"
        elif parts and parts[0] not in known_columns and parts[0] not in projected:
            loose.append((parts[0], scopes.get(id(column))))  # unqualified, or a struct path rooted at one
    ambiguous: set[str] = set()
    for name, scope in loose:
        owners = _owners(name, scope, known, opened)
        if len(owners) > 1:
            ambiguous.add(name)
        for owner in owners:
            opened[owner][name] = "unknown"
    return OpenSchemas({**known, **opened}, frozenset(opened), frozenset(ambiguous), star)


def _innermost_scopes(query: exp.Expr) -> dict[int, Scope]:
    """The scope each column is written in. `traverse_scope` yields inner scopes first, and a scope's
    columns include its subqueries' correlated references, so the first scope seen is the column's own."""
    try:
        scopes = traverse_scope(query)
    except (OptimizeError, SqlglotError):
        return {}  # `qualify` reports what is wrong; ownership then falls back to the statement's tables
    own: dict[int, Scope] = {}
    for scope in scopes:
        for column in scope.columns:
            own.setdefault(id(column), scope)
    return own


def _owners(name: str, scope: Scope | None, known: Schema, opened: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The unknown tables an unqualified column `name` may belong to, as SQL resolves names: the tables
    of its own scope, then of the enclosing scopes. A known table in scope that has the column owns it;
    unknown tables already given the column by a qualified reference are preferred. Without a scope with
    tables, every unknown table of the statement may own it."""
    while scope is not None:
        here = [s.name.lower() for s in scope.sources.values() if isinstance(s, exp.Table) and s.name]
        if any(name in known.get(t, {}) for t in here):
            return []
        candidates = sorted({t for t in here if t in opened})
        if candidates:
            return [t for t in candidates if name in opened[t]] or candidates
        scope = scope.parent
    return [t for t, columns in opened.items() if name in columns] or list(opened)


def _base_tables(scope: Scope) -> dict[str, exp.Table]:
    return {alias: source for alias, source in scope.sources.items() if isinstance(source, exp.Table)}


def _aliases(expression: exp.Expr) -> set[str] | None:
    """Table aliases a conjunct reads; None when some column is unqualified."""
    aliases = set()
    for column in expression.find_all(exp.Column):
        if not column.table:
            return None
        aliases.add(column.table)
    return aliases


def _has_subquery(expression: exp.Expr) -> bool:
    return any(
        isinstance(n, exp.Subquery | exp.Select | exp.Exists) for n in expression.walk() if n is not expression
    ) or isinstance(expression, exp.Exists)


def _null_tolerant(expression: exp.Expr) -> bool:
    return any(isinstance(n, NULL_TOLERANT) for n in expression.walk()) or any(
        isinstance(n, exp.Anonymous) and n.name.lower() in ("isnull", "nvl2") for n in expression.walk()
    )


def _scope_scans(scope: Scope, identity: Identity, resolved: OpenSchemas) -> tuple[list[TableScan], int, list[str]]:
    """The scans one SELECT scope makes, with the filters that hold on each table's rows; how many
    join conjuncts it has; the conjuncts that could not be attributed to one table."""
    select = scope.expression
    if not isinstance(select, exp.Select):
        return [], 0, []
    tables = _base_tables(scope)
    filters, pool, null_supplying = _join_conjuncts(select, tables)
    joins = 0
    lost: list[str] = []
    equalities: list[tuple[exp.Column, exp.Column]] = []
    for conjunct in pool:
        if _has_subquery(conjunct):
            continue
        if any(c.name.lower() in resolved.ambiguous for c in conjunct.find_all(exp.Column)):
            lost.append(conjunct.sql(DIALECT))  # may read an unknown table's column: not attributable
            continue
        aliases = _aliases(conjunct)
        if aliases is None:
            if len(scope.sources) == 1 and len(tables) == 1 and not scope.is_correlated_subquery:
                filters[next(iter(tables))].append(conjunct)
            else:
                lost.append(conjunct.sql(DIALECT))
        elif len(aliases) == 1:
            alias = next(iter(aliases))
            if alias in tables and not (alias in null_supplying and _null_tolerant(conjunct)):
                filters[alias].append(conjunct)
        elif len(aliases) > 1:
            joins += 1
            pair = _column_equality(conjunct)
            if pair is not None:
                equalities.append(pair)
            for alias in aliases & tables.keys():
                implied = _implied_filter(conjunct, alias)
                if implied is not None and alias not in null_supplying:
                    filters[alias].append(implied)

    columns = _read_columns(scope, tables)
    canonical: dict[str, tuple[str, ...]] = {}
    for alias in tables:
        found: set[str] = set()
        for conjunct in filters.get(alias, []):
            found.update(canonical_conjuncts(conjunct, qualifiers=[alias]))
        canonical[alias] = tuple(sorted(found))
    keys = _join_keys(equalities, tables, canonical, null_supplying, identity)
    scans = []
    for alias, table in tables.items():
        read = ("*",) if resolved.star and table.name.lower() in resolved.opened else columns.get(alias, ())
        scans.append(TableScan(identity(table), alias, canonical[alias], read, tuple(keys.get(alias, ()))))
    return scans, joins, lost


def _column_equality(conjunct: exp.Expr) -> tuple[exp.Column, exp.Column] | None:
    """``a.x = b.y`` between two plain columns of different tables."""
    conjunct = conjunct.unnest()
    if not isinstance(conjunct, exp.EQ):
        return None
    left = conjunct.this.unnest()
    right = conjunct.expression.unnest()
    if isinstance(left, exp.Column) and isinstance(right, exp.Column) and left.table != right.table:
        return left, right
    return None


def _join_keys(
    equalities: list[tuple[exp.Column, exp.Column]],
    tables: Mapping[str, exp.Table],
    filters: Mapping[str, tuple[str, ...]],
    null_supplying: set[str],
    identity: Identity,
) -> dict[str, list[JoinKey]]:
    """Per alias, its inner equi-joins with a base table (with that table's filters, possibly none: a
    snowflake chain's middle table, `querylog.capture`). Neither side may be padded with NULLs by an
    outer join: there, a row survives without a match."""
    keys: dict[str, list[JoinKey]] = {}
    for left, right in equalities:
        for own, other in ((left, right), (right, left)):
            if own.table in tables and other.table in tables and not {own.table, other.table} & null_supplying:
                other_filters = filters.get(other.table, ())
                key = JoinKey(own.name.lower(), identity(tables[other.table]), other.name.lower(), other_filters)
                if key not in keys.setdefault(own.table, []):
                    keys[own.table].append(key)
    return keys


def _join_conjuncts(
    select: exp.Select, tables: Mapping[str, exp.Table]
) -> tuple[dict[str, list[exp.Expr]], list[exp.Expr], set[str]]:
    """Walk the FROM/JOIN chain: outer joins' ON conjuncts that filter one side's rows go straight to
    that side, and the sides an outer join pads with NULLs are noted (a WHERE filter there may be
    NULL-tolerant); WHERE and inner-join ON conjuncts form the pool to attribute."""
    order = [select.args["from"].this.alias_or_name] if select.args.get("from") else []
    null_supplying: set[str] = set()
    filters: dict[str, list[exp.Expr]] = {alias: [] for alias in tables}
    pool: list[exp.Expr] = []
    for join in select.args.get("joins") or []:
        alias = join.this.alias_or_name
        side = (join.side or "").upper()
        on = join.args.get("on")
        conjuncts = split_conjuncts(on) if on is not None else []
        if side == "LEFT":
            null_supplying.add(alias)
            filters.setdefault(alias, []).extend(
                c for c in conjuncts if _aliases(c) == {alias} and not _has_subquery(c)
            )
        elif side == "RIGHT":
            null_supplying.update(order)
            for c in conjuncts:
                if (a := _aliases(c)) and len(a) == 1 and alias not in a:
                    filters.setdefault(next(iter(a)), []).append(c)
        elif side == "FULL":
            null_supplying.update([*order, alias])
        else:
            pool += conjuncts
        order.append(alias)
    where = select.args.get("where")
    if where is not None:
        pool += split_conjuncts(where.this)
    return filters, pool, null_supplying


def _implied_filter(conjunct: exp.Expr, alias: str) -> exp.Expr | None:
    """For an OR of ANDs over several tables, the OR of each branch's conjuncts on `alias` alone."""
    conjunct = conjunct.unnest()
    if not isinstance(conjunct, exp.Or):
        return None
    branches = []
    for branch in conjunct.flatten():
        own = [c for c in split_conjuncts(branch) if _aliases(c) == {alias} and not _has_subquery(c)]
        if not own:
            return None
        branches.append(exp.and_(*[c.copy() for c in own]) if len(own) > 1 else own[0].copy())
    return exp.or_(*branches)


def _read_columns(scope: Scope, tables: Mapping[str, exp.Table]) -> dict[str, tuple[str, ...]]:
    columns: dict[str, set[str]] = {alias: set() for alias in tables}
    for column in scope.columns:
        if column.table in columns:
            columns[column.table].add(column.name.lower())
    for star in scope.expression.find_all(exp.Star):
        parent = star.parent
        qualifier = parent.table if isinstance(parent, exp.Column) else None
        for alias in columns:
            if qualifier in (None, "", alias):
                columns[alias].add("*")
    if len(tables) == 1:
        alias = next(iter(tables))
        columns[alias].update(c.name.lower() for c in scope.columns if not c.table)
    return {alias: tuple(sorted(names)) if "*" not in names else ("*",) for alias, names in columns.items()}
