"""Report helpers shared by the benchmarks."""

from __future__ import annotations

from benchmarks.common import short_key_lists


def test_long_key_lists_shrink_to_their_size_and_short_lists_stay():
    long = ", ".join(str(k) for k in range(400))
    text = f'{{"sop": ["l_suppkey IN ({long})", "l_shipmode IN (\'AIR\', \'MAIL\')"]}}'
    assert short_key_lists(text) == '{"sop": ["l_suppkey IN (<400 keys>)", "l_shipmode IN (\'AIR\', \'MAIL\')"]}'
