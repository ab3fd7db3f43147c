"""CHAR(n) columns on a real Delta table: Spark compares their values and the literals they meet padded
with spaces to n, while the log's statistics hold the values as written (``"ab"`` for ``'ab   '``), so
pruning by them skipped files Spark reads rows from (review 66, finding 2). A CHAR column bounds no file,
keeps no key set, and takes no part in SOP reasoning; a VARCHAR column still prunes."""

from __future__ import annotations

import pytest

from optimizer.skipping.scan import plan_scan
from optimizer.table import open_table

pytestmark = pytest.mark.spark

QUERIES = ["c = 'ab'", "c = 'ab '", "c = 'ab   '", "c IN ('ab ', 'zz')", "c >= 'ab '", "c LIKE 'ab %'", "c > 'ab'"]
QUERIES += ["st.c = 'ab   '", "st.c >= 'ab '", "st.c <> 'ab'"]  # review 66b: a CHAR field of a struct


@pytest.fixture(scope="module")
def char_table(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("char")
    columns = "c CHAR(5), v VARCHAR(5), k INT, st STRUCT<c: CHAR(5), n: INT>"
    spark.sql(f"CREATE TABLE char_t ({columns}) USING delta LOCATION '{root}'")
    spark.sql("INSERT INTO char_t VALUES ('ab', 'ab', 1, named_struct('c', 'ab', 'n', 1))")
    spark.sql("INSERT INTO char_t VALUES ('zz', 'zz', 2, named_struct('c', 'zz', 'n', 2))")
    yield str(root)
    spark.sql("DROP TABLE char_t")


@pytest.mark.parametrize("query", QUERIES)
def test_a_file_spark_reads_a_char_row_from_is_kept(spark, char_table, query):
    table = open_table(char_table)
    kept = {f.path for f in plan_scan(table, query).files}
    for ansi in ("false", "true"):
        spark.conf.set("spark.sql.ansi.enabled", ansi)
        try:
            matched = {r[0] for r in spark.sql(f"SELECT input_file_name() FROM char_t WHERE {query}").collect()}
        finally:
            spark.conf.set("spark.sql.ansi.enabled", "false")
        assert {path.rsplit("/", 1)[-1] for path in matched} <= {p.rsplit("/", 1)[-1] for p in kept}, (ansi, query)


def test_a_varchar_column_still_prunes(char_table):
    for query in ("v = 'ab'", "st.n = 1"):
        plan = plan_scan(open_table(char_table), query)
        assert plan.total_files == 2 and len(plan.files) == 1, query
