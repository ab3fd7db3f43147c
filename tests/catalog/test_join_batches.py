"""Batched derivation: one Arrow or aggregated pass per source deriving what one key at a time does, pinning,
nested and threaded batches, failures split down to their filter set, and the counters."""

from __future__ import annotations

import random
from datetime import date, timedelta
from decimal import Decimal

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from optimizer.joins import JoinDeriver, key_filters
from optimizer.table import open_table
from querylog.capture import SqlContext, capture_sql
from querylog.predicates.attribute import JoinKey
from querylog.predicates.bounds import MAX_IN_ITEMS
from querylog.records import DerivedFilter
from querylog.store import QueryLogTable
from tests.catalog.join_tables import TS, _batched, _date_dim, _refusals, _snowflake, _write

pytestmark = pytest.mark.spark


def test_one_aggregation_per_filter_and_table_version(spark, tmp_path):
    _date_dim(tmp_path / "date_dim", random.Random(2))
    deriver = JoinDeriver(spark, {"date_dim": str(tmp_path / "date_dim")})
    key = JoinKey("ss_sold_date_sk", "date_dim", "d_date_sk", ("d_year = 2003",))
    first = deriver(key)
    assert deriver(key) == first and deriver.evaluated == 1
    write_deltalake(
        str(tmp_path / "date_dim"),
        pa.table({"d_date_sk": pa.array([999], pa.int64()), "d_year": pa.array([2003], pa.int32()), "d_moy": [1]}),
        mode="append",
    )
    assert deriver(key) != first and deriver.evaluated == 2  # a new version is evaluated again


def _days_and_promotions(path, rng):  # type: ignore[no-untyped-def]
    """days: 240 dates from 2001-01-01 (shuffled) keyed by the date; promo: 30 promotions keyed both by an
    integer and by a decimal code."""
    days = [date(2001, 1, 1) + timedelta(n) for n in range(240)]
    rng.shuffle(days)
    _write(
        path / "days",
        {
            "d_day": pa.array(days, pa.date32()),
            "d_month": pa.array([d.month for d in days], pa.int32()),
            "d_wd": pa.array([d.weekday() for d in days], pa.int32()),
        },
    )
    ids = list(range(1, 31))
    _write(
        path / "promo",
        {
            "p_id": pa.array(ids, pa.int64()),
            "p_code": pa.array([Decimal(i * 125).scaleb(-2) for i in ids], pa.decimal128(8, 2)),
            "p_kind": [" ABC"[i % 3 + 1] for i in ids],
        },
    )


@pytest.mark.parametrize(("batch_rows", "max_keys"), [(2_000_000, MAX_IN_ITEMS), (10, MAX_IN_ITEMS), (10, 5)])
def test_a_batch_derives_what_one_key_at_a_time_does_in_one_pass_per_dimension(spark, tmp_path, batch_rows, max_keys):
    """Every filter waiting on a dimension in one Spark pass (the import's and the recorder's way), rows
    to the driver (small dimensions) or key sets aggregated on the executors (`batch_rows`): the same
    derived filters and ``via`` as the key-by-key path, for lists, ranges, key sets, truncated key lists
    (`max_keys`), nothing joining, NULL filters, date and decimal keys, a filter the dimension cannot
    evaluate (found before the pass: still one pass), and a snowflake chain (a second round)."""
    from querylog.capture import prefetch_derived

    rows = _date_dim(tmp_path / "date_dim", random.Random(7))
    nations, _ = _snowflake(tmp_path)
    _days_and_promotions(tmp_path, random.Random(8))
    schema = {
        "sales": {
            "s_date": "bigint",
            "s_supp": "bigint",
            "s_day": "date",
            "s_code": "decimal(8,2)",
            "s_promo": "bigint",
            "price": "double",
        },
        "date_dim": {"d_date_sk": "bigint", "d_year": "int", "d_moy": "int"},
        "supplier": {"s_suppkey": "bigint", "s_nationkey": "bigint"},
        "nation": {"n_nationkey": "bigint", "n_name": "string"},
        "days": {"d_day": "date", "d_month": "int", "d_wd": "int"},
        "promo": {"p_id": "bigint", "p_code": "decimal(8,2)", "p_kind": "string"},
    }
    locations = {name: str(tmp_path / name) for name in ("date_dim", "nation", "supplier", "days", "promo")}
    where = [
        "d_year = 2001",
        "d_year = 2001 AND d_moy <= 3",
        "d_moy = 3",
        "d_year = 1900",
        "d_year > 2010",
        "d_year = 2003 OR d_moy IS NULL",
    ]
    statements = [f"SELECT SUM(price) FROM sales JOIN date_dim ON s_date = d_date_sk WHERE {w}" for w in where]
    statements += [
        f"SELECT SUM(price) FROM sales JOIN supplier ON s_supp = s_suppkey JOIN nation ON s_nationkey = n_nationkey "
        f"WHERE n_name = '{name}'"
        for name in nations.values()
    ]
    statements += [
        f"SELECT SUM(price) FROM sales JOIN days ON s_day = d_day WHERE {w}"
        for w in ("d_month = 1 AND d_wd = 2", "d_wd = 2", "d_month = 3")
    ]
    statements += [
        "SELECT SUM(price) FROM sales JOIN promo ON s_code = p_code WHERE p_kind = 'B'",
        "SELECT SUM(price) FROM sales JOIN promo ON s_promo = p_id WHERE p_kind = 'C'",
    ]

    def derived(batched: bool, statements: list[str] = statements) -> list[tuple[tuple[str, str], ...]]:
        deriver = JoinDeriver(spark, locations, max_in=5, max_keys=max_keys, batch_rows=batch_rows)
        context = SqlContext(schema=schema, watched={"sales"}, derive=deriver)
        before = 0
        if batched:
            prefetch_derived(statements, context)
            before = deriver.evaluated
        found = [
            tuple(sorted((d.filter, d.via) for s in capture_sql(q, TS, "t", context).scans for d in s.derived))
            for q in statements
        ]
        if batched:
            assert deriver.evaluated == before  # every capture found its filters cached
            passes.append(dict(deriver.passes))
        return found

    passes: list[dict[str, int]] = []
    one_by_one = derived(batched=False)
    assert derived(batched=True) == one_by_one
    # one pass per dimension: date_dim, days, promo, nation, then (the chain's second round) supplier
    assert passes == [{name: 1 for name in locations}]
    assert one_by_one[3] == () and one_by_one[8] and len(rows) == 240  # nothing joins 1900; Peru's suppliers
    assert all(one_by_one[9:])  # the date and the decimal keys derive
    if max_keys == 5:  # the Wednesdays are more than listed: their range alone, bounded by all of them
        wednesdays = [
            date(2001, 1, 1) + timedelta(n) for n in range(240) if (date(2001, 1, 1) + timedelta(n)).weekday() == 2
        ]
        expected = key_filters("s_day", wednesdays, wednesdays[0], wednesdays[-1], max_in=5, max_keys=5)
        assert len(wednesdays) > 6 and len(expected) == 2
        assert [f for f, _ in one_by_one[10]] == sorted(expected)
    unevaluable = [*statements[:2], statements[0].replace("d_year = 2001", "no_such_column = 1")]
    assert derived(batched=True, statements=unevaluable) == derived(batched=False, statements=unevaluable)
    assert passes[-1] == {"date_dim": 1}  # the filter it cannot evaluate was found before the pass


def test_a_pass_spark_fails_costs_only_the_failing_filter_set_its_derivation(spark, tmp_path, monkeypatch):
    """A filter that errs at run time fails the whole pass it shares: the executors retry what the driver's
    Arrow path failed, then the filter sets are split in halves until the failing one is alone, and only
    its keys derive nothing (as the one-key path gives for it); the others derive as one key at a time."""
    import optimizer.joins

    _date_dim(tmp_path / "date_dim", random.Random(6))
    locations = {"date_dim": str(tmp_path / "date_dim")}
    years = [2001, 2002, 2003, 2005]
    keys = [JoinKey("k", "date_dim", "d_date_sk", (f"d_year = {y}",)) for y in years]

    def failing(run):  # type: ignore[no-untyped-def]
        def run_or_fail(frame, waiting, limits):  # type: ignore[no-untyped-def]
            if any(key.other_filters == ("d_year = 2005",) for key in waiting):
                raise RuntimeError("a filter that errs on some row")
            return run(frame, waiting, limits)

        return run_or_fail

    monkeypatch.setattr(optimizer.joins, "arrow_pass", failing(optimizer.joins.arrow_pass))
    monkeypatch.setattr(optimizer.joins, "aggregated_pass", failing(optimizer.joins.aggregated_pass))
    deriver = JoinDeriver(spark, locations, max_in=5)
    with deriver.batch():
        for key in keys:
            deriver(key)
    one_by_one = JoinDeriver(spark, locations, max_in=5)
    assert [deriver(key) for key in keys[:3]] == [one_by_one(key) for key in keys[:3]]
    assert all(deriver(key) for key in keys[:3]) and deriver(keys[3]) == ()
    # Arrow, then all four sets on the executors, then {2001, 2002} and {2003, 2005}, then 2003 and 2005
    assert deriver.passes["date_dim"] == 6


def test_sources_are_pinned_for_an_import(spark, tmp_path, monkeypatch):
    """Within `pinned` (an import, a spill) a source's log is read once: a commit to it between the
    prefetch and the captures adds no pass, and what the captures derive is the pinned version's."""
    import optimizer.joins

    rows = _date_dim(tmp_path / "date_dim", random.Random(5))
    uri = str(tmp_path / "date_dim")
    opened: list[str] = []
    real_open = optimizer.joins.open_table
    monkeypatch.setattr(optimizer.joins, "open_table", lambda u: opened.append(u) or real_open(u))
    deriver = JoinDeriver(spark, {"date_dim": uri}, max_in=50)
    prefetched = JoinKey("k", "date_dim", "d_date_sk", ("d_year = 2003",))
    later = JoinKey("k", "date_dim", "d_date_sk", ("d_year = 2004",))
    appended = {"d_date_sk": pa.array([998, 999], pa.int64()), "d_year": pa.array([2003, 2004], pa.int32())}
    with deriver.pinned():
        with deriver.batch():
            assert deriver(prefetched) == ()  # noted, evaluated on leaving
        first = deriver(prefetched)
        assert deriver.passes["date_dim"] == 1
        write_deltalake(uri, pa.table({**appended, "d_moy": pa.array([1, 1], pa.int32())}), mode="append")
        assert deriver(prefetched) == first and deriver.passes["date_dim"] == 1  # no pass: still pinned
        pinned_2004 = deriver(later)  # evaluated now, on the pinned version
    in_2004 = sorted(k for k, year, _ in rows if year == 2004)
    assert [d.filter for d in pinned_2004] == [f"k IN ({', '.join(map(str, in_2004))})"]
    assert opened == [uri]  # one log read for the whole block
    assert "999" in deriver(later)[0].filter and len(opened) == 2  # after it, the latest version


def test_the_recorder_does_not_wait_for_a_slow_derivation(tmp_path):
    """A full queue is spilled (and its joins derived) behind the application's back."""
    import threading
    import time

    from querylog.recorder import Recorder

    release = threading.Event()

    def slow(key: JoinKey) -> tuple[DerivedFilter, ...]:
        release.wait(30)
        return (DerivedFilter("k >= 1", "dim.k WHERE x = 1"),)

    context = SqlContext(derive=slow)
    recorder = Recorder(QueryLogTable(str(tmp_path / "log")), tmp_path / "spill", capacity=2, context=context)
    started = time.perf_counter()
    for i in range(5):
        recorder.record("t", [f"x > {i}"], ["x"], ts=TS, joins=[JoinKey("k", "dim", "k", ("x = 1",))])
    assert time.perf_counter() - started < 5  # the derivation is still blocked
    release.set()
    recorder.close()
    rows = QueryLogTable(str(tmp_path / "log")).read()
    assert len(rows) == 5 and all(r.derived for r in rows)


class _CountedAnalyses:
    """A source frame that counts the selects made of it: each is one analysis (one round trip to Spark)."""

    def __init__(self, frame):  # type: ignore[no-untyped-def]
        self.frame = frame
        self.analyses = 0

    def select(self, *columns):  # type: ignore[no-untyped-def]
        self.analyses += 1
        return self.frame.select(*columns)


def test_a_batch_resolves_its_filter_sets_in_one_analysis_and_finds_the_bad_ones_by_halving(spark, tmp_path, caplog):
    """An import's batch resolves hundreds of filter sets on a source before its pass: one analysis for all
    of them (not one each: about 26 ms apiece through py4j), and when some do not resolve, the list is
    halved until each bad one stands alone (k bad among n: O(k log n) analyses). The same keys derive,
    and each bad key is reported with the error it gives analysed alone."""
    import math

    from optimizer.joins_batch import condition, key_column, resolvable

    _date_dim(tmp_path / "date_dim", random.Random(9))
    table = open_table(str(tmp_path / "date_dim"))
    snapshot = table.snapshot()
    frame = table.read_files(spark, snapshot.files, snapshot)
    good = [
        JoinKey("k", "date_dim", "d_date_sk", (f"d_year = {y}", f"d_moy <= {m}"))
        for y in range(2000, 2020)
        for m in range(1, 6)
    ]
    bad_set = JoinKey("k", "date_dim", "d_date_sk", ("no_such_column = 1",))
    bad_function = JoinKey("k", "date_dim", "d_date_sk", ("d_year = 2001", "no_such_function(d_moy) = 1"))
    bad_column = JoinKey("k", "date_dim", "no_such_key", good[0].other_filters)
    keys = [*good[:40], bad_set, *good[40:70], bad_function, *good[70:], bad_column]

    counted = _CountedAnalyses(frame)
    assert resolvable(counted, good) == good
    assert counted.analyses == 1  # 100 filter sets and their key column: one analysis

    counted = _CountedAnalyses(frame)
    with caplog.at_level("WARNING", logger="optimizer.joins_batch"):
        assert resolvable(counted, keys) == good
    items = len({k.other_column for k in keys}) + len({k.other_filters for k in keys})
    assert items == 104 and counted.analyses <= 1 + 2 * 3 * math.ceil(math.log2(items))

    def alone(make, argument) -> str:  # type: ignore[no-untyped-def]
        with pytest.raises(Exception) as raised:
            frame.select(make(argument)).schema  # noqa: B018
        return str(raised.value).splitlines()[0]

    reasons = [
        alone(condition, bad_set.other_filters),
        alone(condition, bad_function.other_filters),
        alone(key_column, bad_column.other_column),
    ]
    # only the batch's own records: pyspark's listener logs the failed analyses too, when it gets to them
    said = [r.getMessage() for r in caplog.records if r.name == "optimizer.joins_batch"]
    assert said == [f"cannot derive from date_dim: {r}" for r in reasons]


def test_a_filter_sets_condition_is_one_spark_expression_true_exactly_where_every_filter_is(spark, monkeypatch):
    """A batch builds each waiting filter set's condition twice (analysis, pass): one expression handed to
    Spark per set (not one call per filter and operator), TRUE where every filter is TRUE and FALSE where
    one is FALSE or NULL, ORs and NOTs kept whole."""
    from pyspark.sql import functions as F

    import optimizer.joins_batch
    from optimizer.spark_expr import expression_column

    rows = [(y, m, t) for y in (2001, 2003, None) for m in (1, 4, None) for t in ("ECONOMY TIN", "x'y", None)]
    frame = spark.createDataFrame(rows, "d_year int, d_moy int, p_type string")
    sets = [
        ("d_year = 2003 OR d_moy IS NULL", "d_moy <= 3"),
        ("NOT STARTSWITH(p_type, 'ECONOMY')",),
        ("d_moy <= 3", "d_year = 2001", "p_type IN ('SMALL', 'x\\'y')"),
        (),
    ]
    built: list[str] = []
    real_expr = F.expr
    monkeypatch.setattr(F, "expr", lambda text: built.append(text) or real_expr(text))
    conditions = [optimizer.joins_batch.condition(s).alias(f"c{i}") for i, s in enumerate(sets)]
    assert len(built) == len(sets)
    monkeypatch.setattr(F, "expr", real_expr)

    def by_operators(texts: tuple[str, ...]):  # type: ignore[no-untyped-def]
        satisfied = F.lit(True)
        for text in texts:
            satisfied = satisfied & expression_column(text)
        return F.coalesce(satisfied, F.lit(False))

    expected = [by_operators(s).alias(f"c{i}") for i, s in enumerate(sets)]
    found = [tuple(r) for r in frame.select(*conditions).collect()]
    assert found == [tuple(r) for r in frame.select(*expected).collect()]
    assert all(v in (True, False) for row in found for v in row) and {row[0] for row in found} == {True, False}
    assert [row[2] for row in found].count(True) == 1  # 2001, month 1, "x'y": the quote kept


def test_a_source_of_unknown_size_is_aggregated_on_the_executors(spark, tmp_path, monkeypatch):
    """A source whose log states no row count may be of any size: never collected to the driver."""
    from dataclasses import replace

    import optimizer.joins

    rows = _date_dim(tmp_path / "date_dim", random.Random(9))
    real_open = optimizer.joins.open_table

    class Unsized:
        """The table, its log stating no row count (as a writer that records no ``numRecords``)."""

        def __init__(self, table) -> None:  # type: ignore[no-untyped-def]
            self.table = table

        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return getattr(self.table, name)

        def snapshot(self):  # type: ignore[no-untyped-def]
            snapshot = self.table.snapshot()
            return replace(snapshot, files=tuple(replace(f, num_records=None) for f in snapshot.files))

    chosen: list[str] = []
    for name in ("arrow_pass", "aggregated_pass"):
        run = getattr(optimizer.joins, name)
        monkeypatch.setattr(optimizer.joins, name, lambda *a, _run=run, _name=name: chosen.append(_name) or _run(*a))
    monkeypatch.setattr(optimizer.joins, "open_table", lambda uri: Unsized(real_open(uri)))
    deriver = JoinDeriver(spark, {"date_dim": str(tmp_path / "date_dim")}, max_in=50)
    keys = [JoinKey("k", "date_dim", "d_date_sk", (f"d_year = {y}",)) for y in (2001, 2002)]
    with deriver.batch():
        for key in keys:
            deriver(key)
    assert chosen == ["aggregated_pass"]
    in_2002 = sorted(k for k, year, _ in rows if year == 2002)
    assert [d.filter for d in deriver(keys[1])] == [f"k IN ({', '.join(map(str, in_2002))})"]


def test_a_nested_batch_evaluates_its_keys_and_leaves_the_outer_batch_whole(spark, tmp_path):
    """A batch inside a batch (a prefetch inside a caller's batch) evaluates its own keys on leaving; the
    outer batch keeps noting and evaluates the rest when it ends."""
    _date_dim(tmp_path / "date_dim", random.Random(10))
    locations = {"date_dim": str(tmp_path / "date_dim")}
    keys = [JoinKey("k", "date_dim", "d_date_sk", (f"d_year = {y}",)) for y in (2001, 2002, 2003)]
    one_by_one = JoinDeriver(spark, locations, max_in=50)
    expected = [one_by_one(key) for key in keys]
    deriver = JoinDeriver(spark, locations, max_in=50)
    with deriver.pinned():
        with deriver.batch():
            assert deriver(keys[0]) == ()
            with deriver.batch():
                assert deriver(keys[1]) == ()
            assert deriver(keys[1]) == expected[1] and deriver.passes["date_dim"] == 1
            assert deriver(keys[2]) == ()  # still noted: the outer batch goes on
        assert deriver.passes["date_dim"] == 2
    assert [deriver(key) for key in keys] == expected and deriver.passes["date_dim"] == 2


def test_a_deriver_shared_by_two_threads_never_hands_one_a_key_noted_by_the_others_batch(spark, tmp_path):
    """Two recorders sharing one deriver: a key asked from another thread while a batch is open waits for
    it and derives its filters; it is not noted into the other thread's batch (and lost: derived ())."""
    import threading
    import time

    _date_dim(tmp_path / "date_dim", random.Random(11))
    locations = {"date_dim": str(tmp_path / "date_dim")}
    batched, alone = (JoinKey("k", "date_dim", "d_date_sk", (f"d_year = {y}",)) for y in (2001, 2002))
    expected = JoinDeriver(spark, locations, max_in=50)(alone)
    deriver = JoinDeriver(spark, locations, max_in=50)
    asking = threading.Event()
    found: list[tuple[DerivedFilter, ...]] = []

    def other_thread() -> None:
        asking.set()
        found.append(deriver(alone))

    with deriver.batch():
        deriver(batched)
        thread = threading.Thread(target=other_thread)
        thread.start()
        assert asking.wait(30)
        time.sleep(0.5)  # the other thread asks while this batch is still open
    thread.join(60)
    assert found == [expected] and expected


def test_refusals_count_distinct_keys_and_passes_only_what_spark_ran(spark, tmp_path):
    """`refused` counts keys, not the calls an import makes for each (prefetch rounds, capture); a key
    whose filter the source cannot evaluate is found by analysis and costs no pass."""
    _write(tmp_path / "fact", {"k": pa.array([i % 40 for i in range(400)], pa.int64()), "x": pa.array(range(400))})
    _date_dim(tmp_path / "date_dim", random.Random(12))
    locations = {"fact": str(tmp_path / "fact"), "date_dim": str(tmp_path / "date_dim")}
    deriver = JoinDeriver(spark, locations, roles={"date_dim": "fact"})
    for key in [JoinKey("d_k", "fact", "k", ("x = 3",)), JoinKey("d_k", "fact", "k", ("x = 4",))] * 3:
        assert deriver(key) == ()
    for _ in range(3):
        assert deriver(JoinKey("k", "date_dim", "d_date_sk", ("d_year = 2001",))) == ()
    assert deriver.refused == {"fact": 2, "date_dim": 1}
    dimension = JoinDeriver(spark, locations)
    assert dimension(JoinKey("k", "date_dim", "d_date_sk", ("no_such_column = 1",))) == ()
    assert dimension.evaluated == 0 and dimension.passes["date_dim"] == 0


def test_a_source_that_cannot_be_read_now_is_read_again_later(spark, tmp_path, monkeypatch):
    """A transient failure reading a source derives nothing for now, and is not remembered for the
    version: the next capture (or import) reads it again, one key at a time or batched."""
    import optimizer.joins
    from optimizer.errors import TableAccessError

    rows = _date_dim(tmp_path / "date_dim", random.Random(13))
    failures = [0]
    real_open = optimizer.joins.open_table

    class Flaky:
        def __init__(self, table) -> None:  # type: ignore[no-untyped-def]
            self.table = table

        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return getattr(self.table, name)

        def read_files(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            if failures[0]:
                failures[0] -= 1
                raise TableAccessError("a file is momentarily unreachable")
            return self.table.read_files(*args, **kwargs)

    monkeypatch.setattr(optimizer.joins, "open_table", lambda uri: Flaky(real_open(uri)))
    deriver = JoinDeriver(spark, {"date_dim": str(tmp_path / "date_dim")}, max_in=50)
    in_2001 = sorted(k for k, year, _ in rows if year == 2001)
    key = JoinKey("k", "date_dim", "d_date_sk", ("d_year = 2001",))
    failures[0] = 1
    assert deriver(key) == ()
    assert [d.filter for d in deriver(key)] == [f"k IN ({', '.join(map(str, in_2001))})"]
    batched = JoinKey("k", "date_dim", "d_date_sk", ("d_year = 2002",))
    failures[0] = 1
    with deriver.batch():
        deriver(batched)
    assert deriver(batched), "read again after the batch could not read it"


def test_one_keys_failing_finishing_step_costs_that_key_only(spark, tmp_path, monkeypatch, caplog):
    """The driver's step after a pass's action (the key list or range of each key) fails for one key alone:
    that key derives nothing, the others sharing the pass derive, and the pass is not run again."""
    import optimizer.joins_batch

    _date_dim(tmp_path / "date_dim", random.Random(3))
    real = optimizer.joins_batch.key_filters

    def failing(column, *args, **kwargs):  # type: ignore[no-untyped-def]
        if column == "bad":
            raise TypeError("Cannot convert bytearray")
        return real(column, *args, **kwargs)

    monkeypatch.setattr(optimizer.joins_batch, "key_filters", failing)
    keys = [
        JoinKey(column, "date_dim", "d_date_sk", (f"d_year = {y}",)) for column in ("k", "bad") for y in (2001, 2002)
    ]
    for batch_rows in (10, 1_000):
        deriver = JoinDeriver(spark, {"date_dim": str(tmp_path / "date_dim")}, max_in=50, batch_rows=batch_rows)
        with caplog.at_level("WARNING"):
            caplog.clear()
            found = _batched(deriver, keys)
        assert all(found[:2]) and found[2:] == [(), ()]
        assert deriver.passes == {"date_dim": 1} and len(_refusals(caplog)) == 2


def test_a_filter_the_source_cannot_resolve_is_reported_once_per_call(spark, tmp_path, caplog):
    from optimizer.joins_batch import resolvable

    _date_dim(tmp_path / "date_dim", random.Random(2))
    table = open_table(str(tmp_path / "date_dim"))
    snapshot = table.snapshot()
    frame = table.read_files(spark, snapshot.files, snapshot)
    keys = [JoinKey(column, "date_dim", "d_date_sk", ("no_such_column = 1",)) for column in ("a", "b", "c")]
    with caplog.at_level("WARNING"):
        assert resolvable(frame, keys) == []
    assert len(_refusals(caplog)) == 1
