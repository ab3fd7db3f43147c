"""Which sources and keys derive: fact/dimension roles (`not_unique` proofs, join_role, through_facts), key
types refused (float, collated, binary), and the warning naming a large unproven source."""

from __future__ import annotations

import random
from datetime import date, timedelta

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from optimizer.joins import JoinDeriver
from optimizer.table import open_table
from querylog.predicates.attribute import JoinKey
from tests.catalog.join_tables import _batched, _date_dim, _refusals, _write

pytestmark = pytest.mark.spark


def test_a_fact_side_source_is_never_evaluated(spark, tmp_path):
    """A source joined on a column that repeats its keys is read on its fact side (a dimension's keys
    through its fact): refused unless asked for, whatever its size; the configuration's role wins over
    the log's proof, and a column the statistics cannot prove repeating stays a dimension."""
    ids = range(400)
    _write(
        tmp_path / "fact",
        {
            "k": pa.array([i % 40 for i in ids], pa.int64()),  # 400 values over 0..39: provably repeated
            "s": [f"c{i % 40}" for i in ids],  # repeated too, but strings prove nothing
            "x": pa.array([i % 7 for i in ids], pa.int32()),
        },
    )
    sparse = [i if i < 30 else None for i in ids]  # 370 NULLs and 30 unique keys: not repeated
    _write(tmp_path / "sparse", {"k": pa.array(sparse, pa.int64()), "x": pa.array([i % 7 for i in ids], pa.int32())})
    locations = {"fact": str(tmp_path / "fact"), "sparse": str(tmp_path / "sparse")}
    key = JoinKey("d_k", "fact", "k", ("x = 3",))
    refusing = JoinDeriver(spark, locations, max_in=5)
    assert not refusing.accepts(key) and refusing(key) == ()
    assert refusing.passes["fact"] == 0 and refusing.refused["fact"] == 1
    one_by_one = JoinDeriver(spark, locations, max_in=5, through_facts=True)(key)  # `_evaluate`
    assert {d.filter for d in one_by_one} == {"d_k >= 0", "d_k <= 39"}  # every k has some row with x = 3
    through = JoinDeriver(spark, locations, max_in=5, through_facts=True, batch_rows=10)
    with through.batch():
        through(key)
    assert through(key) == one_by_one and through.passes["fact"] == 1 and not through.refused
    by_string = JoinKey("d_s", "fact", "s", ("x = 3",))
    assert refusing.accepts(by_string) and refusing(by_string)  # not provable: a dimension, as before
    configured = JoinDeriver(spark, locations, roles={"fact": "fact"})
    assert not configured.accepts(by_string) and configured(by_string) == ()
    assert configured.refused["fact"] == 1 and configured.passes["fact"] == 0
    forced = JoinDeriver(spark, locations, max_in=5, roles={"fact": "dimension"})
    assert forced.accepts(key) and forced(key) == one_by_one
    null_heavy = JoinKey("d_k", "sparse", "k", ("x = 3",))
    in_sparse = sorted(i for i in range(30) if i % 7 == 3)
    assert refusing.accepts(null_heavy)
    assert [d.filter for d in refusing(null_heavy)] == [f"d_k IN ({', '.join(map(str, in_sparse))})"]


@pytest.mark.parametrize("path", ["one key", "arrow", "aggregated"])
def test_float_keys_derive_nothing_on_every_path_and_cost_no_pass(spark, tmp_path, caplog, path):
    """A NaN key makes Spark's max NaN (``k <= NULL``: never true), ``inf`` renders as a column name, and
    Spark joins NaN to NaN though no IN list holds it: a float or double key column derives nothing, is
    refused from the schema before any pass, and is reported once per (source, column)."""
    values = [1.0, 2.5, float("nan"), float("inf"), float("-inf"), 7.0]
    _write(
        tmp_path / "dim",
        {"f": pa.array(values, pa.float64()), "r": pa.array(values, pa.float32()), "g": pa.array([1, 1, 1, 2, 2, 2])},
    )
    deriver = JoinDeriver(spark, {"dim": str(tmp_path / "dim")}, max_in=2, batch_rows=1 if path == "aggregated" else 10)
    keys = [JoinKey("k", "dim", column, (f"g = {g}",)) for column in ("f", "r") for g in (1, 2)]
    with caplog.at_level("WARNING"):
        found = [deriver(key) for key in keys] if path == "one key" else _batched(deriver, keys)
    assert found == [(), (), (), ()]
    assert deriver.evaluated == 0 and not deriver.passes
    refusals = _refusals(caplog)
    assert len(refusals) == 2 and all("float" in r or "double" in r for r in refusals), refusals


def test_a_collated_string_key_derives_nothing(spark, tmp_path, caplog):
    """Under ``UTF8_LCASE`` the fact's 'A' joins the source's 'a': the key sets Spark and the driver compute
    (``IN ('a', 'b')`` or ``IN ('A', 'a', 'b')``) both miss joining fact rows, so such a key is refused."""
    import pyspark

    from optimizer.joins_batch import resolvable

    if int(pyspark.__version__.split(".")[0]) < 4:
        pytest.skip("collations arrive with Spark 4")
    frame = spark.sql(
        "SELECT s COLLATE UTF8_LCASE AS s, s AS b, g FROM VALUES ('a', 1), ('A', 1), ('b', 1), ('B', 2) AS t(s, g)"
    )
    collated = JoinKey("k", "dim", "s", ("g = 1",))
    binary = JoinKey("k", "dim", "b", ("g = 1",))
    with caplog.at_level("WARNING"):
        assert resolvable(frame, [collated, binary]) == [binary]
    assert len(_refusals(caplog)) == 1 and "UTF8_LCASE" in _refusals(caplog)[0]


def test_a_bad_key_type_costs_its_own_keys_only_in_one_pass_with_one_warning(spark, tmp_path, caplog):
    """A binary key among integer keys sharing its filter sets: refused from the schema, so the pass runs
    once and the integer keys derive exactly as one key at a time does."""
    ids = list(range(40))
    _write(
        tmp_path / "dim",
        {
            "id": pa.array(ids, pa.int64()),
            "b": pa.array([bytes([i]) for i in ids], pa.binary()),
            "g": pa.array([i % 8 for i in ids], pa.int32()),
        },
    )
    locations = {"dim": str(tmp_path / "dim")}
    ints = [JoinKey("k", "dim", "id", (f"g = {g}",)) for g in range(8)]
    binaries = [JoinKey("kb", "dim", "b", (f"g = {g}",)) for g in range(8)]
    for batch_rows in (10, 1_000):
        deriver = JoinDeriver(spark, locations, max_in=3, batch_rows=batch_rows)
        with caplog.at_level("WARNING"):
            caplog.clear()
            found = _batched(deriver, [*ints, *binaries])
        one_by_one = JoinDeriver(spark, locations, max_in=3)
        assert found[:8] == [one_by_one(key) for key in ints] and all(found[:8])
        assert found[8:] == [()] * 8
        assert deriver.passes == {"dim": 1} and len(_refusals(caplog)) == 1


def _not_unique(path, columns: dict[str, pa.Array], partition_by: list[str] | None = None, files: int = 1) -> bool:  # type: ignore[no-untyped-def]
    from optimizer.joins_batch import not_unique

    data = pa.table(columns)
    step = max(1, -(-data.num_rows // files))
    for start in range(0, data.num_rows, step):
        write_deltalake(str(path), data.slice(start, step), mode="append", partition_by=partition_by)
    return not_unique(open_table(str(path)).snapshot(), "k")


def test_a_partition_column_key_repeats_when_a_partition_holds_two_rows(tmp_path):
    assert _not_unique(tmp_path / "a", {"k": pa.array([1, 1, 2]), "x": pa.array([0, 1, 2])}, ["k"])
    assert _not_unique(tmp_path / "b", {"k": pa.array([1, 2, 1]), "x": pa.array([0, 1, 2])}, ["k"], files=3)
    assert not _not_unique(tmp_path / "c", {"k": pa.array([1, 2, 3]), "x": pa.array([0, 1, 2])}, ["k"])
    assert not _not_unique(tmp_path / "d", {"k": pa.array([None, None, 3]), "x": pa.array([0, 1, 2])}, ["k"])


def test_a_file_whose_bounds_meet_over_two_rows_proves_a_repeat(tmp_path):
    """Keys 0 and 1000 in one file, 5 twice in another: no pigeonhole (4 keys over 1001 values), but the
    second file's minimum is its maximum over two non-NULL rows. Dates alike; strings may be truncated."""
    repeated = {"k": pa.array([0, 1000, 5, 5, None, 7])}  # files [0, 1000], [5, 5], [NULL, 7]
    assert _not_unique(tmp_path / "a", repeated, files=3)
    days = [date(2000, 1, 1), date(2020, 1, 1), date(2010, 1, 1), date(2010, 1, 1)]
    assert _not_unique(tmp_path / "b", {"k": pa.array(days)}, files=2)
    assert not _not_unique(tmp_path / "c", {"k": pa.array([0, 1000, 5, None])}, files=2)
    assert not _not_unique(tmp_path / "d", {"k": pa.array(["x", "y", "z", "z"])}, files=2)


def test_a_column_of_distinct_values_is_never_called_not_unique(tmp_path_factory):
    """The proofs of a repeat (pigeonhole, a partition of two rows, a file whose bounds meet) on random
    small tables of distinct keys (integers or dates, NULLs among them, over files and partitions)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(
        keys=st.lists(st.integers(-50, 50), min_size=1, max_size=12, unique=True),
        nulls=st.integers(0, 3),
        files=st.integers(1, 4),
        as_dates=st.booleans(),
        partitioned=st.booleans(),
    )
    def distinct(keys: list[int], nulls: int, files: int, as_dates: bool, partitioned: bool) -> None:
        values: list[object] = [date(2000, 1, 1) + timedelta(k) if as_dates else k for k in keys]
        column = pa.array([*values, *[None] * nulls], pa.date32() if as_dates else pa.int64())
        other = pa.array(range(len(column)), pa.int64())
        path = tmp_path_factory.mktemp("distinct")
        assert not _not_unique(path, {"k": column, "x": other}, ["k"] if partitioned else None, files)

    distinct()


def test_a_large_source_that_cannot_be_proven_either_way_is_named_once(spark, tmp_path, monkeypatch, caplog):
    import optimizer.joins

    _date_dim(tmp_path / "date_dim", random.Random(5))
    monkeypatch.setattr(optimizer.joins, "LARGE_SOURCE_ROWS", 100)
    locations = {"date_dim": str(tmp_path / "date_dim")}
    keys = [JoinKey("k", "date_dim", column, ("d_year = 2001",)) for column in ("d_date_sk", "d_moy", "d_year")]
    deriver = JoinDeriver(spark, locations)
    with caplog.at_level("WARNING", logger="optimizer.joins"):
        assert deriver.accepts(keys[0]) and not deriver.accepts(keys[1])  # d_moy: 240 rows over 1..12
        deriver(keys[0])
        deriver.accepts(keys[2])
    warned = [r.getMessage() for r in caplog.records if "join_role" in r.getMessage()]
    assert warned == [
        "date_dim has more than 100 rows and its keys cannot be proven to repeat: treated as a "
        "dimension; set join_role: fact if it is one"
    ]
    caplog.clear()
    configured = JoinDeriver(spark, locations, roles={"date_dim": "dimension"})
    with caplog.at_level("WARNING", logger="optimizer.joins"):
        configured.accepts(keys[0])
    assert not [r for r in caplog.records if "join_role" in r.getMessage()]
