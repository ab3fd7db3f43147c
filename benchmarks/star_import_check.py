"""The star-import benchmark's independent evaluation: DuckDB over the same Delta tables.

For each dimension a sampled statement filters, DuckDB (its Delta extension, `benchmarks.standard_reader`)
computes the distinct join keys under the benchmark's own description of the condition (`Joined`),
and the fact scan's derived filters in the log are judged against them:

- equal: the log's derived filters through that dimension are what `optimizer.joins.key_filters` makes
  of DuckDB's keys with the deriver's limits (what the deriver should have written);
- sound: DuckDB finds no key that fails one of the derived conjuncts (each conjunct evaluated by DuckDB,
  transpiled from Spark SQL by sqlglot);
- missing: DuckDB finds keys but the log derived nothing through that dimension;
- unexpected: a filter derived through a dimension the statement does not filter.

Every query is built as a sqlglot expression and rendered for DuckDB: no text is spliced into SQL.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import sqlglot
from sqlglot import exp

from benchmarks.standard_reader import DuckDBReader
from benchmarks.star_import_data import Drawn, Joined
from optimizer.joins import key_filters
from querylog.records import ScanRecord

COUNTS = ("compared", "equal", "sound", "missing", "unexpected", "no keys")


def _spark(text: str) -> exp.Expr:
    return sqlglot.parse_one(text, read="spark")


class DuckDBKeys:
    """A DuckDB connection with one view per dimension (``delta_scan`` of its location)."""

    def __init__(self, locations: Mapping[str, str]) -> None:
        self.reader = DuckDBReader()
        self._keys: dict[Joined, list[Any]] = {}
        for name, location in locations.items():
            scan = exp.Table(this=exp.Anonymous(this="delta_scan", expressions=[exp.Literal.string(location)]))
            view = exp.Create(
                kind="VIEW", this=exp.to_table(name), expression=exp.select("*").from_(scan), replace=True
            )
            self.reader.connection.execute(view.sql("duckdb"))

    def _matching(self, joined: Joined, alias: str) -> exp.Select:
        """The distinct non-NULL keys of the dimension rows that satisfy `joined`'s condition, named `alias`."""
        key = exp.column(joined.key)
        conditions: list[exp.Expr] = [exp.Not(this=exp.Is(this=key.copy(), expression=exp.null()))]
        if joined.where is not None:
            conditions.append(_spark(joined.where))
        return exp.select(key.as_(alias)).distinct().from_(joined.dimension).where(exp.and_(*conditions))

    def keys(self, joined: Joined) -> list[Any]:
        """The keys a fact row must carry to join a row of the dimension satisfying the condition, sorted."""
        if joined not in self._keys:
            query = self._matching(joined, "k").order_by("k")
            self._keys[joined] = [row[0] for row in self.reader.connection.execute(query.sql("duckdb")).fetchall()]
        return self._keys[joined]

    def failing(self, joined: Joined, conjunct: str) -> int:
        """How many of the keys fail `conjunct` (a derived filter on the fact's column), as DuckDB
        evaluates it: 0 for a sound filter."""
        keys = self._matching(joined, joined.fact_column).subquery("keys")
        holds = exp.func("COALESCE", _spark(conjunct), exp.false())
        query = exp.select(exp.func("COUNT", exp.Star())).from_(keys).where(exp.Not(this=exp.paren(holds)))
        return int(self.reader.connection.execute(query.sql("duckdb")).fetchone()[0])

    def close(self) -> None:
        self.reader.close()


def expected(duck: DuckDBKeys, joined: Joined, *, max_in: int, max_keys: int) -> list[str]:
    """The conjuncts the deriver should derive through `joined` from DuckDB's keys, with its limits
    (past ``max(max_in, max_keys)`` keys only their count and bounds matter, as in the deriver)."""
    keys = duck.keys(joined)
    if not keys:
        return []
    listed = keys[: max(max_in, max_keys) + 1]
    return key_filters(joined.fact_column, listed, keys[0], keys[-1], max_in=max_in, max_keys=max_keys)


def _through(scan: ScanRecord) -> dict[str, set[str]]:
    """The scan's derived filters by the dimension they were derived through."""
    found: dict[str, set[str]] = {}
    for derived in scan.derived:
        source = derived.source()
        found.setdefault(source[0] if source else derived.via, set()).add(derived.filter)
    return found


def judge(duck: DuckDBKeys, statement: Drawn, scan: ScanRecord, *, max_in: int, max_keys: int) -> Counter[str]:
    """One statement's fact scan against DuckDB: the counts of `COUNTS` over the dimensions it filters."""
    counts: Counter[str] = Counter()
    derived = _through(scan)
    direct = set(scan.filters) - {d.filter for d in scan.derived}
    filtered = {j.dimension for j in statement.joined if j.where is not None}
    counts["unexpected"] += sum(len(texts) for dimension, texts in derived.items() if dimension not in filtered)
    for joined in statement.joined:
        if joined.where is None:
            continue
        logged = derived.get(joined.dimension, set())
        want = set(expected(duck, joined, max_in=max_in, max_keys=max_keys)) - direct
        counts["compared"] += 1
        counts["no keys"] += not duck.keys(joined)
        counts["equal"] += logged == want
        counts["sound"] += all(duck.failing(joined, text) == 0 for text in logged)
        counts["missing"] += bool(duck.keys(joined)) and not logged
    return counts


def compare(
    duck: DuckDBKeys,
    sample: Iterable[tuple[Drawn, ScanRecord]],
    *,
    max_in: int,
    max_keys: int,
) -> dict[str, dict[str, int]]:
    """Per family, the counts of `COUNTS` over the sampled (statement, fact scan) pairs."""
    families: dict[str, Counter[str]] = {}
    for statement, scan in sample:
        counted = judge(duck, statement, scan, max_in=max_in, max_keys=max_keys)
        families.setdefault(statement.family, Counter()).update(counted)
    return {family: {name: counts[name] for name in COUNTS} for family, counts in families.items()}


def disagreements(families: Mapping[str, Mapping[str, int]]) -> list[str]:
    """One line per family whose derived filters are not all equal and sound, or miss or add some."""
    lines = []
    for family, counts in families.items():
        if counts["equal"] < counts["compared"] or counts["sound"] < counts["compared"]:
            lines.append(f"{family}: {counts['equal']} equal, {counts['sound']} sound of {counts['compared']}")
        if counts["missing"] or counts["unexpected"]:
            lines.append(f"{family}: {counts['missing']} missing, {counts['unexpected']} unexpected")
    return lines


def derived_counts(drawn: Sequence[Drawn], scans: Mapping[str, ScanRecord]) -> dict[str, int]:
    """Per family, the derived filters on the fact's scans of the whole stream (query ids ``q<i>``)."""
    counts: Counter[str] = Counter({statement.family: 0 for statement in drawn})
    for i, statement in enumerate(drawn):
        scan = scans.get(f"q{i}")
        counts[statement.family] += len(scan.derived) if scan else 0
    return dict(counts)


def key_sets(scans: Iterable[ScanRecord], column: str, more_than: int) -> int:
    """The scans' derived key lists on `column` with more than `more_than` keys (join-induced key sets)."""
    prefix = f"{column} IN ("
    return sum(
        1 for scan in scans for d in scan.derived if d.filter.startswith(prefix) and d.filter.count(",") >= more_than
    )
