"""The workload replay: bytes each logged query would read before and after a layout."""

from __future__ import annotations

import pytest

from costmodel.benefit import Compression
from optimizer.estimate.replay import Query, estimate_benefit, query_bytes, workload_queries
from optimizer.skipping.pruning import prepare
from querylog.records import ScanRecord
from tests.estimate.workloads import NOW, files, records, sizes


def test_a_workload_without_filters_gains_nothing():
    queries = workload_queries(records(count=10), NOW, 3600)
    current = files([(0, 100), (0, 100)])
    virtual = files([(0, 50), (51, 100)])
    result = estimate_benefit(
        queries,
        current,
        sizes(current),
        virtual,
        sizes(virtual),
        expected=100,
        cost_per_mb=0.01,
        sample_rows=1000,
        queries_in_window=10,
    )
    assert result.benefit == 0 and result.p_before == result.p_after == 1.0


def test_a_selective_frequent_filter_on_unclustered_data_gains_a_lot():
    queries = workload_queries(records("x = 7", count=50), NOW, 3600)
    current = files([(0, 100)] * 10)  # every file holds every value
    virtual = files([(i * 10, i * 10 + 9) for i in range(10)])  # clustered: one file holds 7
    result = estimate_benefit(
        queries,
        current,
        sizes(current),
        virtual,
        sizes(virtual),
        expected=1000,
        cost_per_mb=0.01,
        sample_rows=1000,
        queries_in_window=50,
    )
    assert result.p_before == 1.0 and result.p_after == pytest.approx(0.1)
    assert result.saved_mb_per_query == pytest.approx(9.0)  # 9 of 10 files' x column skipped
    assert result.benefit == pytest.approx(1000 * 9.0 * 0.01)


def test_already_clustered_data_gains_little():
    queries = workload_queries(records("x = 7", count=50), NOW, 3600)
    clustered = files([(i * 10, i * 10 + 9) for i in range(10)])
    result = estimate_benefit(
        queries,
        clustered,
        sizes(clustered),
        clustered,
        sizes(clustered),
        expected=1000,
        cost_per_mb=0.01,
        sample_rows=1000,
        queries_in_window=50,
    )
    assert result.saved_mb_per_query == 0 and result.benefit == 0


def test_columns_read_decide_the_bytes():
    query = Query(prepare("x = 7"), frozenset({"x"}), 1.0)
    stats = files([(0, 9), (10, 19)])
    assert query_bytes(query, stats, sizes(stats)) == (1e6, 2e6)
    everything = Query(prepare("x = 7"), None, 1.0)
    assert query_bytes(everything, stats, sizes(stats)) == (5e6, 10e6)


def test_compression_shrinks_the_bytes_every_query_reads():
    """A ratio of 0.5 on column y halves y's bytes after, filtered or not, and is its own term."""
    both = [ScanRecord(f"q{i}", NOW, "t", (), ("x", "y"), "test") for i in range(10)]
    queries = workload_queries(both, NOW, 3600)  # no filter: nothing to skip
    current = files([(0, 100), (0, 100)])
    virtual = files([(0, 50), (51, 100)])
    compression = Compression({"x": 1.0, "y": 0.5}, "SNAPPY", "SNAPPY", 1000, 600)
    result = estimate_benefit(
        queries,
        current,
        sizes(current),
        virtual,
        sizes(virtual),
        expected=100,
        cost_per_mb=0.01,
        sample_rows=1000,
        queries_in_window=10,
        compression=compression,
    )
    assert result.bytes_per_query_before == 10e6
    assert result.bytes_per_query_after_skipping == 10e6
    assert result.bytes_per_query_after == pytest.approx(2e6 + 4e6)
    assert result.benefit_skipping == 0
    assert result.benefit_compression == pytest.approx(100 * 4.0 * 0.01)
    assert result.benefit == pytest.approx(result.benefit_compression)


def test_skipping_and_compression_terms_add_up():
    queries = workload_queries(records("x = 7", count=50), NOW, 3600)
    current = files([(0, 100)] * 10)
    virtual = files([(i * 10, i * 10 + 9) for i in range(10)])
    compression = Compression({"x": 0.8, "y": 0.9}, "SNAPPY", "ZSTD", 1000, 880)
    result = estimate_benefit(
        queries,
        current,
        sizes(current),
        virtual,
        sizes(virtual),
        expected=1000,
        cost_per_mb=0.01,
        sample_rows=1000,
        queries_in_window=50,
        compression=compression,
    )
    assert result.bytes_per_query_after_skipping == pytest.approx(1e6)  # x of 1 file in 10
    assert result.bytes_per_query_after == pytest.approx(0.8e6)
    assert result.benefit == pytest.approx(result.benefit_skipping + result.benefit_compression)
