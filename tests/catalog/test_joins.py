"""Join-derived filters: the key range, list or set one key derives, sound for pruning, through snowflake
chains and self-joins, and captured through SqlContext into the log."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from optimizer.joins import JoinDeriver
from optimizer.skipping.scan import plan_scan
from optimizer.table import open_table
from querylog.capture import SqlContext, capture_sql
from querylog.predicates.attribute import JoinKey
from querylog.records import DerivedFilter, ScanRecord, scans_to_arrow
from querylog.store import QueryLogTable
from tests.catalog.join_tables import TS, _date_dim, _snowflake, _write

pytestmark = pytest.mark.spark


def test_a_range_when_many_keys_join_a_list_when_few(spark, tmp_path):
    rows = _date_dim(tmp_path / "date_dim", random.Random(1))
    deriver = JoinDeriver(spark, {"date_dim": str(tmp_path / "date_dim")}, max_in=5)
    in_2001 = sorted(k for k, year, _ in rows if year == 2001)
    wide = deriver(JoinKey("ss_sold_date_sk", "date_dim", "d_date_sk", ("d_year = 2001",)))
    key_range = {f"ss_sold_date_sk <= {in_2001[-1]}", f"ss_sold_date_sk >= {in_2001[0]}"}
    key_set = f"ss_sold_date_sk IN ({', '.join(map(str, in_2001))})"  # 12 keys scattered over 1..240
    assert {d.filter for d in wide} == {*key_range, key_set}
    assert {d.via for d in wide} == {"date_dim.d_date_sk WHERE d_year = 2001"}
    narrow_keys = sorted(k for k, year, month in rows if year == 2001 and month <= 3)
    narrow = deriver(JoinKey("ss_sold_date_sk", "date_dim", "d_date_sk", ("d_moy <= 3", "d_year = 2001")))
    assert [d.filter for d in narrow] == [f"ss_sold_date_sk IN ({', '.join(map(str, narrow_keys))})"]
    assert deriver(JoinKey("k", "date_dim", "d_date_sk", ("d_year = 1900",))) == ()  # nothing joins
    assert deriver(JoinKey("k", "unknown_dim", "x", ("x = 1",))) == ()  # not found: nothing derived


def test_keys_are_listed_beyond_the_short_list_only_when_scattered_and_few(spark, tmp_path):
    """A join-induced key set is what lets SOP gather a category's fact rows; contiguous keys (dates
    assigned in order) are served by the range, and too many keys by the range alone."""
    _date_dim(tmp_path / "ordered", random.Random(4), shuffled=False)
    ordered = JoinDeriver(spark, {"date_dim": str(tmp_path / "ordered")}, max_in=5)
    contiguous = ordered(JoinKey("k", "date_dim", "d_date_sk", ("d_year = 2001",)))
    assert {d.filter for d in contiguous} == {"k >= 13", "k <= 24"}
    rows = _date_dim(tmp_path / "shuffled", random.Random(4))
    march = sorted(k for k, _, month in rows if month == 3)  # 20 keys, one per year, scattered
    key = JoinKey("k", "date_dim", "d_date_sk", ("d_moy = 3",))
    listed = JoinDeriver(spark, {"date_dim": str(tmp_path / "shuffled")}, max_in=5)(key)
    assert f"k IN ({', '.join(map(str, march))})" in {d.filter for d in listed}
    capped = JoinDeriver(spark, {"date_dim": str(tmp_path / "shuffled")}, max_in=5, max_keys=19)(key)
    assert {d.filter for d in capped} == {f"k >= {march[0]}", f"k <= {march[-1]}"}


def test_the_analyser_takes_a_key_set_as_a_whole_predicate_not_comparison_points():
    from optimizer.analysis.workload import MAX_Z_IN_ITEMS, sop_candidates, summarize

    key_set = f"k IN ({', '.join(str(7 * i) for i in range(MAX_Z_IN_ITEMS + 1))})"
    short = "k IN (1, 2)"
    records = [ScanRecord(f"q{i}", TS, "s", (text,), ("k",), "t") for i, text in enumerate([key_set, short, key_set])]
    workload = summarize(records, TS, 3600.0)
    assert workload.z["k"].points == {"1", "2"} and workload.z["k"].scans == 1
    assert set(sop_candidates(workload, {"k"})) == {key_set}


@pytest.mark.parametrize("seed", range(6))
def test_a_derived_filter_never_drops_a_fact_file_with_a_joining_row(spark, tmp_path, seed):
    """Fact files pruned by the derived filter: every file holding a row whose key joins a dimension
    row satisfying the dimension filter is kept."""
    rng = random.Random(seed)
    rows = _date_dim(tmp_path / "date_dim", rng)
    fact = tmp_path / "store_sales"
    for _ in range(8):
        low = rng.randint(-10, 250)
        keys = [rng.choice([None, rng.randint(low, low + rng.randint(0, 40))]) for _ in range(30)]
        write_deltalake(str(fact), pa.table({"ss_sold_date_sk": pa.array(keys, pa.int64())}), mode="append")
    year, month = rng.randint(1999, 2020), rng.randint(1, 12)
    dimension_filter = rng.choice([(f"d_year = {year}",), (f"d_moy >= {month}", f"d_year = {year}"), ("d_moy = 2",)])
    deriver = JoinDeriver(spark, {"date_dim": str(tmp_path / "date_dim")}, max_in=rng.choice([3, 50]))
    derived = deriver(JoinKey("ss_sold_date_sk", "date_dim", "d_date_sk", dimension_filter))
    joining = {k for k, y, m in rows if _holds(dimension_filter, y, m)}
    table = open_table(str(fact))
    kept = {f.path for f in plan_scan(table, " AND ".join(d.filter for d in derived) or None).files}
    for data_file in table.snapshot().files:
        content = set(table_keys(spark, table, data_file))
        if content & joining:
            assert data_file.path in kept, f"{dimension_filter}: a file with joining keys was skipped"


def table_keys(spark, table, data_file):  # type: ignore[no-untyped-def]
    frame = table.read_files(spark, [data_file], table.snapshot())
    return [r[0] for r in frame.collect() if r[0] is not None]


def _holds(filters: tuple[str, ...], year: int, month: int) -> bool:
    env = {"d_year": year, "d_moy": month}
    for text in filters:
        column, op, value = text.split()
        left, right = env[column], int(value)
        if not {"=": left == right, ">=": left >= right}[op]:
            return False
    return True


def test_the_log_records_derived_filters_and_reads_logs_without_them(spark, tmp_path):
    _date_dim(tmp_path / "date_dim", random.Random(3))
    schema = {
        "store_sales": {"ss_sold_date_sk": "bigint", "ss_net_paid": "decimal(7,2)"},
        "date_dim": {"d_date_sk": "bigint", "d_year": "int", "d_moy": "int"},
    }
    context = SqlContext(
        schema=schema, watched={"store_sales"}, derive=JoinDeriver(spark, {"date_dim": str(tmp_path / "date_dim")})
    )
    sql = "SELECT SUM(ss_net_paid) FROM store_sales JOIN date_dim ON ss_sold_date_sk = d_date_sk WHERE d_year = 2002"
    log = QueryLogTable(str(tmp_path / "log"))
    plain = capture_sql("SELECT * FROM store_sales WHERE ss_net_paid > 1", TS, "t", context).scans
    write_deltalake(log.uri, scans_to_arrow(plain).drop_columns(["derived"]))  # a log from before the column
    (scan,) = capture_sql(sql, TS, "t", context).scans
    assert set(scan.filters) == {d.filter for d in scan.derived}
    assert scan.derived[0].filter.startswith("ss_sold_date_sk IN (")
    assert all(d.via == "date_dim.d_date_sk WHERE d_year = 2002" for d in scan.derived)
    log.append([scan])
    stored = sorted(log.read("store_sales"), key=lambda r: len(r.derived))
    assert [r.derived for r in stored] == [(), scan.derived]
    assert isinstance(stored[1].derived[0], DerivedFilter)


def test_the_analysis_says_which_features_stand_for_dimension_filters():
    from optimizer.analysis.join_sources import join_sources

    via_year = "date_dim.d_date_sk WHERE d_year = 2001"
    via_month = "d.k WHERE m = 2"
    records = [
        ScanRecord("q1", TS, "s", ("k <= 9", "k >= 1"), ("k",), "t", derived=(DerivedFilter("k <= 9", via_year),)),
        ScanRecord("q2", TS, "s", ("k IN (3, 4)",), ("k",), "t", derived=(DerivedFilter("k IN (3, 4)", via_month),)),
        ScanRecord("q3", TS, "s", ("k >= 2", "x = 1"), ("k",), "t"),
    ]
    found = join_sources(records, ["k", "x", "k IN (3, 4)"])
    assert found == {
        "k": {"scans": 2, "via": [via_year, "d.k WHERE m = 2"]},
        "k IN (3, 4)": {"scans": 1, "via": ["d.k WHERE m = 2"]},
    }


def test_a_snowflake_chain_derives_through_its_unfiltered_middle_table(spark, tmp_path):
    """lineitem -> supplier -> nation: the nation filter becomes a filter on supplier's nation key,
    whose suppliers become the fact's key filter; a middle table scanned twice derives nothing."""
    _, suppliers = _snowflake(tmp_path)
    schema = {
        "lineitem": {"l_suppkey": "bigint", "l_price": "double"},
        "supplier": {"s_suppkey": "bigint", "s_nationkey": "bigint"},
        "nation": {"n_nationkey": "bigint", "n_name": "string"},
    }
    locations = {name: str(tmp_path / name) for name in ("nation", "supplier")}
    deriver = JoinDeriver(spark, locations)
    context = SqlContext(schema=schema, watched={"lineitem"}, targets={"lineitem"}, derive=deriver)
    chain = (
        "SELECT SUM(l_price) FROM lineitem JOIN supplier ON l_suppkey = s_suppkey "
        "JOIN nation ON s_nationkey = n_nationkey WHERE n_name = 'GERMANY'"
    )
    (scan,) = capture_sql(chain, TS, "t", context).scans
    german = sorted(s for s, n in suppliers.items() if n == 1)
    assert f"l_suppkey IN ({', '.join(map(str, german))})" in {d.filter for d in scan.derived}
    assert {d.via for d in scan.derived} == {"supplier.s_suppkey WHERE s_nationkey = 1"}
    assert set(deriver.passes) == {"nation", "supplier"} and not deriver.refused  # unique keys: dimensions
    twice = chain.replace("WHERE", "JOIN supplier s2 ON s2.s_suppkey = l_suppkey WHERE")
    assert capture_sql(twice, TS, "t", context).scans[0].derived == ()
    outer = chain.replace("JOIN nation", "LEFT JOIN nation").replace("WHERE n_name = 'GERMANY'", "")
    assert capture_sql(outer, TS, "t", context).scans[0].derived == ()


def test_a_dimension_named_by_its_path_derives_under_its_catalog_name(spark, tmp_path):
    """A plan's scan of an unnamed table gives its path; the deriver finds it among the locations and
    `via` names the table as the catalog does (joined features look dimensions up by that name)."""
    _date_dim(tmp_path / "date_dim", random.Random(4))
    deriver = JoinDeriver(spark, {"date_dim": str(tmp_path / "date_dim")})
    by_path = deriver(JoinKey("k", f"file:{tmp_path}/date_dim/", "d_date_sk", ("d_year = 2003",)))
    assert by_path and {d.via for d in by_path} == {"date_dim.d_date_sk WHERE d_year = 2003"}
    qualified = deriver(JoinKey("k", "spark_catalog.default.date_dim", "d_date_sk", ("d_year = 2003",)))
    assert {d.filter for d in qualified} == {d.filter for d in by_path}
    assert deriver(JoinKey("k", f"{tmp_path}/DATE_DIM", "d_date_sk", ("d_year = 2003",))) == ()


def test_a_self_join_under_a_qualified_name_costs_no_pass_over_the_target(spark, tmp_path):
    """``lineorder a JOIN default.lineorder b`` (or ``spark_catalog.default.lineorder``): the deriver reads
    both names as one table, so the target's scan derives nothing from itself and no pass runs."""
    _write(tmp_path / "lineorder", {"lo_orderkey": pa.array(range(50)), "lo_partkey": pa.array(range(50))})
    deriver = JoinDeriver(spark, {"lineorder": str(tmp_path / "lineorder")})
    context = SqlContext(targets={"lineorder"}, derive=deriver)
    for spelling in ("default.lineorder", "spark_catalog.default.lineorder"):
        sql = f"SELECT 1 FROM lineorder a JOIN {spelling} b ON a.lo_orderkey = b.lo_partkey WHERE b.lo_partkey < 3"
        assert [s.derived for s in capture_sql(sql, TS, "t", context).scans] == [(), ()]
    assert deriver.evaluated == 0 and not deriver.passes
