"""The Bloom-filter benchmark's counts are sound: no reader's row groups fall below the lower bound (a
Bloom filter never excludes a row group that holds a probed key), and clustering by a dimension
attribute lets the probes skip where date order does not."""

from __future__ import annotations

import pytest

from benchmarks.bloom_bench import run


@pytest.mark.slow
def test_bloom_counts_never_fall_below_the_rows_that_match(tmp_path):
    result = run(0.01, 5000, 2, work=tmp_path)
    for layout, per in result["layouts"].items():
        for family, f in per.items():
            assert f["holding a match"] <= f["bloom filter"] <= f["row groups"], (layout, family)
            assert f["holding a match"] <= f["min/max"] <= f["row groups"], (layout, family)
    clustered = result["layouts"]["clustered by supplier nation"]["supplier nation"]
    assert clustered["bloom filter"] < result["layouts"]["date-ordered"]["supplier nation"]["bloom filter"]
