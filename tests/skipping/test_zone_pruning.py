"""SOP bits, implication and expression ranges are computed in the rewrite's session zone; a query read
in another zone must not be pruned by them where its meaning depends on the zone, and timestamp literals
are never compared as text.

The review's cases: ``ts >= '2024-01-01'`` in Asia/Tokyo against a file whose bit for that exact text
(computed in UTC) is 0, although a row at 2023-12-31T20:00Z is 2024-01-01 05:00 in Tokyo; ``hour(ts) = 12``
in Tokyo against ``HOUR(ts)`` bounds [0, 5] computed in UTC (a row at 03:00Z is 12:00 in Tokyo);
``ts >= '2024-01-05 00:00:00'`` taken to imply ``ts > '2024-01-05'`` (the text sorts after, the instant
is the same), and ``ts > '2024-1-5'`` to imply ``ts > '2024-01-10'``.
"""

from __future__ import annotations

import datetime as dt

from optimizer.skipping.collect import StatsSpec
from optimizer.skipping.extended import ExtendedStats, from_json, to_json
from optimizer.skipping.filestats import FileStats, column_bounds, file_stats
from optimizer.skipping.implication import implies
from optimizer.skipping.pruning import might_match, prepare
from optimizer.table.access import DataFile
from querylog.predicates.normalize import parse_canonical

TS_ROW = dt.datetime(2023, 12, 31, 20, tzinfo=dt.UTC)  # 2024-01-01 05:00 in Tokyo


def _ts_file(sop: dict[str, bool] | None = None, expressions: dict | None = None, zone: str | None = None) -> FileStats:
    """A file of one timestamp row at `TS_ROW` (Delta's bounds), with extended statistics."""
    columns = {"ts": column_bounds("timestamp", TS_ROW, TS_ROW, 0, nan_aware=True)}
    extra = {} if zone is None else {"zone": zone}
    return FileStats("f", 1, columns, expressions or {}, sop or {}, **extra)


def test_a_utc_sop_bit_does_not_skip_the_same_text_read_in_tokyo():
    stats = _ts_file(sop={"ts >= '2024-01-01'": False})  # no row is >= 2024-01-01 in UTC
    assert might_match(prepare("ts >= '2024-01-01'", "Asia/Tokyo"), stats), "the row matches in Tokyo"


def test_utc_expression_bounds_do_not_skip_a_tokyo_query():
    hours = {"HOUR(ts)": column_bounds("int", 0, 5, 0, nan_aware=True)}  # UTC hours of the file's rows
    stats = _ts_file(expressions=hours)
    assert might_match(prepare("hour(ts) = 12", "Asia/Tokyo"), stats), "03:00Z is 12:00 in Tokyo"


def test_an_unknown_query_zone_does_not_trust_zone_dependent_bits():
    stats = _ts_file(sop={"HOUR(ts) = 12": False}, zone="UTC")
    assert might_match(prepare("hour(ts) = 12"), stats)


def test_statistics_of_the_query_zone_still_skip():
    stats = _ts_file(sop={"ts >= '2024-01-01'": False}, zone="Asia/Tokyo")
    assert not might_match(prepare("ts >= '2024-01-01'", "Asia/Tokyo"), stats)
    hours = {"HOUR(ts)": column_bounds("int", 0, 5, 0, nan_aware=True)}
    assert not might_match(prepare("hour(ts) = 12", "Asia/Tokyo"), _ts_file(expressions=hours, zone="Asia/Tokyo"))


def test_zone_free_predicates_skip_whatever_the_zones():
    stats = FileStats("f", 1, {"i": column_bounds("int", 1, 1, 0, True)}, sop={"i > 5": False})
    assert not might_match(prepare("i > 10", "Asia/Tokyo"), stats), "i > 10 implies i > 5, bit 0"
    offset = _ts_file(sop={"ts >= '2024-01-01'": False}, zone="UTC")
    # an instant with an offset means the same in every zone, and Delta's bounds are instants
    assert not might_match(prepare("ts >= '2024-01-02T00:00:00+00:00'", "Asia/Tokyo"), offset)


def test_timestamp_literals_are_not_compared_as_text():
    assert not implies(parse_canonical("ts >= '2024-01-05 00:00:00'"), parse_canonical("ts > '2024-01-05'"))
    assert not implies(parse_canonical("ts > '2024-1-5'"), parse_canonical("ts > '2024-01-10'"))


def test_text_implication_skips_nothing_on_a_timestamp_column_in_the_writers_zone():
    between = dt.datetime(2024, 1, 7, tzinfo=dt.UTC)
    columns = {"ts": column_bounds("timestamp", between, between, 0, nan_aware=True)}
    stats = FileStats("f", 1, columns, sop={"ts > '2024-01-10'": False}, zone="UTC")
    assert might_match(prepare("ts > '2024-1-5'", "UTC"), stats), "2024-01-07 > 2024-01-05"


def test_string_columns_keep_their_implications():
    stats = FileStats("f", 1, {"s": column_bounds("string", "a", "a", 0, True)}, sop={"s > 'a'": False})
    assert not might_match(prepare("s > 'b'", "Asia/Tokyo"), stats), "s > 'b' implies s > 'a', bit 0"
    assert implies(parse_canonical("s > 'b'"), parse_canonical("s > 'a'"), frozenset({"s"}))


def test_the_index_records_the_zone_its_statistics_were_computed_in():
    spec = StatsSpec((), ("i > 5",), (), zone="Asia/Tokyo")
    extended = spec.extended({"__sop_0": False}, "run")
    assert extended.zone == "Asia/Tokyo"
    assert from_json(to_json(extended)).zone == "Asia/Tokyo"
    assert from_json(to_json(ExtendedStats("old"))).zone is None, "an index without a zone: unknown"
    assert file_stats(DataFile("f", 1, 0, 1), {"i": "int"}, extended).zone == "Asia/Tokyo"
